"""The shared page: one HTML file holding its viewer, its style and its data.

The data is JSON in a ``<script type="application/json">`` block with ``<``, ``>`` and
``&`` written as JSON escapes, so no text of a run can close the block or open a tag; the
viewer puts every text into the page as text. The JSON is strict, as ``JSON.parse`` wants
it: a number that is not finite is ``null``, and a lone surrogate (a file name that is not
UTF-8) is an escape, not a character the file could not be written in. A
Content-Security-Policy lets the page load nothing: no request leaves it, whatever it holds.
"""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any, Final

__all__ = ["CSP", "embedded_json", "page"]

CSP: Final = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "img-src data:; base-uri 'none'; form-action 'none'"
)
_ESCAPES: Final = {
    ord("<"): "\\u003c",
    ord(">"): "\\u003e",
    ord("&"): "\\u0026",
    0x2028: "\\u2028",
    0x2029: "\\u2029",
}
_SURROGATE: Final = re.compile("[\ud800-\udfff]")
"""A lone surrogate: what Python makes of a file name's bytes that are not UTF-8."""


def embedded_json(value: object) -> str:
    """``value`` as JSON that is safe inside a ``<script>`` block (it holds no ``<``) and
    that ``JSON.parse`` reads: no ``NaN`` or ``Infinity``, no character UTF-8 cannot hold."""
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:  # a NaN or an infinity, which JSON has no word for
        text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"))
    return _SURROGATE.sub(_escaped, text.translate(_ESCAPES))


def _finite(value: object) -> object:
    """``value`` with every float that is not finite made None (the viewer's "none")."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _escaped(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def _text(text: str) -> str:
    """A text of the page's markup (its title), escaped, with no lone surrogate."""
    return html.escape(_SURROGATE.sub("\ufffd", text))


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def page(payload: Mapping[str, Any], title: str) -> str:
    """The whole page for ``payload`` (the data :mod:`gr_notebook.share.export` makes)."""
    return "".join(
        [
            "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>",
            f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">",
            "<meta name='viewport' content='width=device-width, initial-scale=1'>",
            f"<meta name='generator' content='gr_notebook {html.escape(payload['version'])}'>",
            f"<title>{_text(title)}</title><style>{_asset('viewer.css')}</style></head>",
            f"<body><header class='top'><h1>{_text(title)}</h1><nav id='nav'></nav>",
            f"<span class='made'>exported {html.escape(payload['made'])}</span></header>",
            "<main id='app'><noscript>This page draws the runs with JavaScript; the data is ",
            "in the gr-data block of its source.</noscript></main>",
            f"<script type='application/json' id='gr-data'>{embedded_json(payload)}</script>",
            f"<script>{_asset('viewer.js')}</script></body></html>\n",
        ]
    )
