"""What a local server's script can ask for besides a good answer: the ways the API, or the
network to it, misbehaves — error statuses, malformed JSON, slow and hung responses, and,
for a streamed answer, an error event mid-stream, a connection cut mid-stream, a stream
that drips its events slowly (to cancel it halfway), one that never ends, or a raw event
(invalid UTF-8, a delta for a block that never started) put in mid-stream.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from gr_notebook.models.base import ModelResponse

__all__ = ["ERROR_TYPES", "Fault", "FaultKind", "Turn", "error_type_for", "status_for"]

#: The error ``type`` the API reports for each status; other codes fall back by class.
ERROR_TYPES: Mapping[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}

FaultKind: TypeAlias = Literal[
    "status", "malformed", "slow", "hang", "stream_error", "cut", "drip", "endless", "inject"
]


def error_type_for(code: int) -> str:
    return ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")


def status_for(error_type: str) -> int:
    """The status an error of ``error_type`` has outside a stream (``overloaded_error``: 529)."""
    return next((code for code, kind in ERROR_TYPES.items() if kind == error_type), 500)


@dataclass(frozen=True, slots=True)
class Fault:
    """A turn that misbehaves the way the API, or the network to it, sometimes does.

    Build one with the class methods; the fields are what they record.
    """

    kind: FaultKind
    status_code: int = 200
    error_type: str = ""
    message: str = ""
    headers: tuple[tuple[str, str], ...] = ()
    seconds: float = 0.0
    then: Turn | None = None
    after: int = 0
    """For a stream: the events sent before the fault strikes."""
    raw: bytes = b""
    """For ``inject``: the bytes sent as they are."""

    @classmethod
    def status(
        cls,
        code: int,
        *,
        error_type: str | None = None,
        message: str = "local server: scripted error",
        headers: Mapping[str, str] | None = None,
    ) -> Fault:
        """An error status with the API's error JSON (``error_type`` defaults by code)."""
        return cls(
            "status",
            status_code=code,
            error_type=error_type or error_type_for(code),
            message=message,
            headers=tuple((headers or {}).items()),
        )

    @classmethod
    def rate_limited(cls, retry_after: float) -> Fault:
        """A 429 whose ``retry-after`` (seconds, possibly fractional) the SDK honours."""
        return cls.status(
            429,
            message="local server: rate limited",
            headers={"retry-after": f"{retry_after:g}"},
        )

    @classmethod
    def overloaded(cls) -> Fault:
        """A 529, which the API sends when it is overloaded rather than failing."""
        return cls.status(529, message="Overloaded")

    @classmethod
    def malformed(cls) -> Fault:
        """A 200 that claims JSON but carries a truncated object."""
        return cls("malformed")

    @classmethod
    def slow(cls, seconds: float, *, then: Turn) -> Fault:
        """Wait ``seconds`` before serving ``then``: to exercise client timeouts."""
        return cls("slow", seconds=seconds, then=then)

    @classmethod
    def hang(cls, seconds: float = 30.0) -> Fault:
        """Never answer: hold the request open until the client goes away (counted in
        ``MessagesServer.disconnects``), or drop the connection after ``seconds``."""
        return cls("hang", seconds=seconds)

    # -- streamed answers (``"stream": true``) --------------------------------------------------

    @classmethod
    def stream_error(
        cls,
        then: Turn,
        *,
        after: int = 4,
        error_type: str = "overloaded_error",
        message: str = "Overloaded",
    ) -> Fault:
        """Stream ``then`` for ``after`` events, then send the API's ``error`` event and end
        the stream, as the API does under load. Asked without streaming, it is the status
        the error has there (529 for ``overloaded_error``)."""
        return cls("stream_error", error_type=error_type, message=message, then=then, after=after)

    @classmethod
    def cut(cls, then: Turn, *, after: int = 4) -> Fault:
        """Stream ``then`` for ``after`` events, then drop the connection mid-body. Asked
        without streaming, the connection drops with no answer."""
        return cls("cut", then=then, after=after)

    @classmethod
    def drip(cls, seconds: float, *, then: Turn) -> Fault:
        """Stream ``then`` with ``seconds`` between two events (the server notices a client
        that leaves in between). Asked without streaming, ``then`` comes after ``seconds``."""
        return cls("drip", seconds=seconds, then=then)

    @classmethod
    def endless(cls, then: Turn, *, every: float = 0.1, after: int = 3) -> Fault:
        """Stream ``then`` for ``after`` events, then a keep-alive (the API's ``ping``, an
        empty chunk on a chat server) every ``every`` seconds for ever: no read waits long,
        yet the stream never ends. Asked without streaming, a 200 whose body is a blank
        every ``every`` seconds, for ever. Either way it ends when the client leaves."""
        return cls("endless", seconds=every, then=then, after=after)

    @classmethod
    def inject(cls, raw: bytes, then: Turn, *, after: int = 3) -> Fault:
        """Stream ``then`` with ``raw`` (one or more whole events, sent byte for byte,
        invalid UTF-8 and all) put in after ``after`` events, then the rest of the stream.
        Asked without streaming, ``raw`` is the whole body of a 200."""
        return cls("inject", then=then, after=after, raw=raw)


Turn: TypeAlias = ModelResponse | Fault | Callable[[dict[str, Any]], "Turn"]
"""One scripted answer: a response, a fault, or a callable that picks one from the request body."""
