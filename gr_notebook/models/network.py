"""The network guard: with ``gr.models.ALLOW_NETWORK = False`` (or the environment variable
``GR_NOTEBOOK_ALLOW_NETWORK=0``), a model request to anything but this machine fails at once,
before a socket is opened. The test suite runs with the guard on."""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from urllib.parse import urlsplit

from gr_notebook.errors import NetworkDisabled

__all__ = ["allow_network_default", "check_network", "is_loopback", "via_proxy"]

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def allow_network_default() -> bool:
    return os.environ.get("GR_NOTEBOOK_ALLOW_NETWORK", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


def is_loopback(url: str) -> bool:
    host = (urlsplit(url).hostname or "").lower()
    if host in _LOCAL_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def via_proxy(url: str) -> str | None:
    """The proxy the environment sends ``url`` through, as the HTTP clients read it."""
    parts = urlsplit(url)
    proxies = urllib.request.getproxies()
    proxy = proxies.get(parts.scheme) or proxies.get("all")
    if not proxy or urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return proxy


def check_network(url: str) -> None:
    """Raise :class:`NetworkDisabled` while the guard is on, for a ``url`` off this machine
    or one the environment would send through a proxy off this machine."""
    import gr_notebook.models as models

    if models.ALLOW_NETWORK:
        return
    proxy = via_proxy(url)
    target = proxy or url
    if is_loopback(target):
        return
    through = f" (through the proxy {urlsplit(proxy).hostname})" if proxy else ""
    raise NetworkDisabled(
        f"network access is off (gr.models.ALLOW_NETWORK is False, or "
        f"GR_NOTEBOOK_ALLOW_NETWORK=0), so the request to {urlsplit(url).hostname}{through} "
        "was not sent; allow it with gr.models.ALLOW_NETWORK = True, or point base_url at a "
        "local server"
    )
