"""The network guard: with ``gr.models.ALLOW_NETWORK = False`` (or the environment variable
``GR_NOTEBOOK_ALLOW_NETWORK=0``), a model request to anything but this machine fails at once,
before a socket is opened. The test suite runs with the guard on.

An adapter checks its base URL up front, and hooks :func:`guard_request` into its HTTP
client, so every request the client sends, each hop of a redirect included, is checked too.

The switch is the models package's attribute, which a user sets; the package hands this
module a function that reads it (:func:`follow_switch`), so this module imports no package
above it and no import cycle works only by import order.
"""

from __future__ import annotations

import ipaddress
import os
import urllib.request
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from gr_notebook.errors import NetworkDisabled

__all__ = [
    "allow_network_default",
    "check_network",
    "follow_switch",
    "guard_http_client",
    "guard_request",
    "is_loopback",
    "via_proxy",
]

_LOCAL_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}


def allow_network_default() -> bool:
    return os.environ.get("GR_NOTEBOOK_ALLOW_NETWORK", "1").strip().lower() not in (
        "0",
        "false",
        "no",
        "off",
    )


_network_allowed: Callable[[], bool] = allow_network_default
"""Reads the switch: ``gr.models.ALLOW_NETWORK`` once the package has called
:func:`follow_switch`, which importing this module through it always does first."""


def follow_switch(read: Callable[[], bool]) -> None:
    """Make the guard ask ``read()`` whether requests may leave this machine."""
    global _network_allowed
    _network_allowed = read


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
    if _network_allowed():
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


async def guard_request(request: Any) -> None:
    """An httpx ``request`` event hook: the guard on every request a client sends, redirects
    included, so a 307 from an allowed host cannot carry the request anywhere else."""
    check_network(str(request.url))


def guard_http_client(http_client: Any) -> None:
    """Put :func:`guard_request` on an ``httpx.AsyncClient`` (once; a no-op on anything
    without ``event_hooks``, which has no redirects of its own to follow)."""
    hooks = getattr(http_client, "event_hooks", None)
    if not isinstance(hooks, dict):
        return
    requests = list(hooks.get("request", ()))
    if guard_request not in requests:
        http_client.event_hooks = {**hooks, "request": [*requests, guard_request]}
