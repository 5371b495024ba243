"""A local stand-in for the Anthropic Messages API that serves scripted turns.

Testing the Anthropic adapter against a fake client would test the fake; this server puts the
real SDK on the wire instead — its headers, retries, error classes and response parsing — with
no network and no key. It validates requests the way the API does, answers each
``POST /v1/messages`` with the next scripted turn (streamed as server-sent events when the
request asks for ``stream``), emulates prompt caching in ``usage``, and can misbehave on
cue (error statuses, malformed JSON, slow or hung responses).

It uses the standard library only and does not import the SDK, so it checks the adapter
rather than mirroring it. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import copy
import json
import select
import socket
import socketserver
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, TypeAlias
from urllib.parse import urlsplit

from gr_notebook.messages import TextBlock, ToolUseBlock
from gr_notebook.models.base import ModelResponse
from gr_notebook.testing import sse
from gr_notebook.testing.prompt_cache import PromptCache, estimate_tokens, prompt_tokens
from gr_notebook.testing.request_rules import InvalidRequest, validate

__all__ = ["Fault", "MessagesServer", "RecordedRequest", "Turn"]

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

#: Reason phrases the stdlib does not know; an empty one is legal but reads badly in logs.
_REASONS: Mapping[int, str] = {529: "Overloaded"}

#: How often a hung request checks whether its client has gone away.
HANG_POLL_SECONDS = 0.02

FaultKind: TypeAlias = Literal["status", "malformed", "slow", "hang"]


def _error_type_for(code: int) -> str:
    return ERROR_TYPES.get(code, "api_error" if code >= 500 else "invalid_request_error")


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
            error_type=error_type or _error_type_for(code),
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


Turn: TypeAlias = ModelResponse | Fault | Callable[[dict[str, Any]], "Turn"]
"""One scripted answer: a response, a fault, or a callable that picks one from the request body."""


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the server saw it, kept so tests can assert on what the SDK sent."""

    method: str
    path: str
    body: Any
    """The parsed JSON body; None when the body was empty or not JSON."""
    headers: dict[str, str]
    """Header names are lower case."""


@dataclass(frozen=True, slots=True)
class _Reply:
    """What the handler thread should do: answer, or hold the request open."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    hang: float | None = None
    """Hold the request open this long instead of answering."""
    drop: bool = False
    """Close the connection without answering (the server is stopping)."""


class MessagesServer:
    """Serves scripted turns over the Messages API on a free loopback port.

    Use it as a context manager; each ``POST /v1/messages`` consumes one turn, in order.
    ``POST /v1/messages/count_tokens`` answers with the server's token estimate and consumes
    nothing. An invalid request is refused with 400 before a turn is consumed, as the API
    would, so a script cannot be knocked out of step by a client bug.
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        min_cacheable_tokens: int = 1024,
        side: Callable[[dict[str, Any]], Turn | None] | None = None,
    ) -> None:
        """``side`` answers the requests a client makes beside its conversation (a title,
        a summary): a request it answers, with a turn, consumes none of the script."""
        self._side = side
        self._cache = PromptCache(min_cacheable_tokens)
        self._turns: deque[Turn] = deque(turns)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._disconnects = 0
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ── lifecycle ──────────────────────────────────────────────────────────────────────────

    def start(self) -> MessagesServer:
        if self._httpd is not None:
            raise RuntimeError("MessagesServer is already running")
        self._stopping.clear()
        self._httpd = _HTTPServer(self)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"MessagesServer:{self._httpd.server_port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving; hung and slow requests are dropped at once, so this is quick."""
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None

    def __enter__(self) -> MessagesServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ── what tests look at ─────────────────────────────────────────────────────────────────

    @property
    def min_cacheable_tokens(self) -> int:
        return self._cache.min_cacheable_tokens

    @property
    def url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("MessagesServer is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._httpd.server_port}"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, valid or not, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """Hung requests whose client went away: evidence that cancellation closes sockets."""
        with self._lock:
            return self._disconnects

    @property
    def remaining(self) -> int:
        """Turns not yet served."""
        with self._lock:
            return len(self._turns)

    def add(self, turn: Turn) -> None:
        """Append a turn to the script, also while requests are being served."""
        with self._lock:
            self._turns.append(turn)

    # ── request handling (on handler threads) ──────────────────────────────────────────────

    def _record(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Any]:
        """Keep the request (its body as JSON, or None when it is not JSON); returns its
        number and the body, for the reply to be decided on."""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self._requests.append(RecordedRequest(method, path, body, headers))
            return len(self._requests), body

    def _dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, _Reply]:
        """Record a request and decide the reply; returns the request number with it."""
        number, body = self._record(method, path, headers, raw)

        if path not in ("/v1/messages", "/v1/messages/count_tokens") or method != "POST":
            return number, _error(404, f"local server: no route for {method} {path}", number)
        if not isinstance(body, dict):
            message = "local server: the request body must be a JSON object"
            return number, _error(400, message, number)
        generation = path == "/v1/messages"
        try:
            validate(body, generation=generation)
        except InvalidRequest as invalid:
            return number, _error(400, str(invalid), number)

        if not generation:
            return number, _json_reply({"input_tokens": prompt_tokens(body)})

        side = self._side(copy.deepcopy(body)) if self._side is not None else None
        if side is not None:
            return number, self._serve(side, body, 0, number)
        with self._lock:
            turn = self._turns.popleft() if self._turns else None
            if turn is not None:
                self._served += 1
            turn_number = self._served
        if turn is None:
            message = f"local server: the script has no turn left for request {number}"
            return number, _error(400, message, number)
        return number, self._serve(turn, body, turn_number, number)

    def _serve(self, turn: Turn, body: dict[str, Any], turn_number: int, number: int) -> _Reply:
        while True:
            if isinstance(turn, ModelResponse):
                try:
                    answer = self._message(turn, body, turn_number)
                except TypeError as err:
                    return self._script_error_reply(
                        f"local server: turn {turn_number}: {err}", number
                    )
                if body.get("stream"):
                    return _Reply(
                        200, sse.stream_body(answer), (("content-type", sse.CONTENT_TYPE),)
                    )
                return _json_reply(answer)
            if isinstance(turn, Fault):
                if turn.kind == "status":
                    return self._error_reply(
                        turn.status_code, turn.message, number, turn.error_type, turn.headers
                    )
                if turn.kind == "malformed":
                    head = f'{{"id": "msg_local_{turn_number}", "type": "message", "content": ['
                    return _Reply(200, head.encode(), (("content-type", "application/json"),))
                if turn.kind == "hang":
                    return _Reply(hang=turn.seconds)
                if self._stopping.wait(turn.seconds):
                    return _Reply(drop=True)
                if turn.then is None:
                    return self._script_error_reply(
                        f"local server: turn {turn_number}: slow has no turn", number
                    )
                turn = turn.then
                continue
            try:  # a callable that returns a non-turn fails here too, on the next pass
                turn = turn(copy.deepcopy(body))
            except Exception as err:
                message = f"local server: turn {turn_number}'s callable raised {err!r}"
                return self._script_error_reply(message, number)

    def _error_reply(
        self,
        status: int,
        message: str,
        number: int,
        error_type: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> _Reply:
        """An error in the API's JSON shape; a server for another API overrides it."""
        return _error(status, message, number, error_type, headers)

    def _script_error_reply(self, message: str, number: int) -> _Reply:
        """A broken script answers 500, told not to be retried, so the test fails at once."""
        reply = self._error_reply(500, message, number)
        return _Reply(reply.status, reply.body, (("x-should-retry", "false"),))

    def _message(
        self, response: ModelResponse, body: dict[str, Any], turn_number: int
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for i, block in enumerate(response.content):
            if isinstance(block, TextBlock):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock):
                tool_id = block.id or f"toolu_local_{turn_number}_{i}"
                input_ = json.loads(_dumps(block.input))
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": block.name, "input": input_}
                )
            else:
                raise TypeError(f"{type(block).__name__} cannot appear in an assistant response")
        usage = self._cache.usage(body, sum(estimate_tokens(block) for block in content))
        if response.usage is not None:
            given = response.usage
            usage = {
                "input_tokens": given.input_tokens,
                "output_tokens": given.output_tokens,
                "cache_creation_input_tokens": given.cache_creation_input_tokens,
                "cache_read_input_tokens": given.cache_read_input_tokens,
            }
        return {
            "id": f"msg_local_{turn_number}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": response.stop_reason,
            "stop_sequence": None,
            "usage": usage,
        }

    def _note_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1


# ── HTTP plumbing ──────────────────────────────────────────────────────────────────────────


class _HTTPServer(ThreadingHTTPServer):
    """Tracks open connections so closing the server can end idle keep-alive ones."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, app: MessagesServer) -> None:
        self.app = app
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        super().__init__(("127.0.0.1", 0), _Handler)

    def server_bind(self) -> None:
        # HTTPServer.server_bind looks up the host's FQDN, which can stall offline.
        socketserver.TCPServer.server_bind(self)
        self.server_name = "127.0.0.1"
        self.server_port = self.server_address[1]

    def process_request(self, request: Any, client_address: Any) -> None:
        if isinstance(request, socket.socket):
            with self._connections_lock:
                self._connections.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._connections_lock:
            self._connections.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # A client that goes away mid-answer is routine here (timeouts, cancellation).
        pass


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else a reused connection waits out a delayed ACK (~40 ms)

    def do_GET(self) -> None:
        self._handle()

    def do_POST(self) -> None:
        self._handle()

    def do_PUT(self) -> None:
        self._handle()

    def do_PATCH(self) -> None:
        self._handle()

    def do_DELETE(self) -> None:
        self._handle()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        number, reply = self.server.app._dispatch(
            self.command, urlsplit(self.path).path, headers, raw
        )
        if reply.drop:
            self.close_connection = True
            return
        if reply.hang is not None:
            self._hang(reply.hang)
            return
        try:
            self.send_response(reply.status, _REASONS.get(reply.status))
            self.send_header("request-id", f"req_local_{number}")
            sent = {name.lower() for name, _ in reply.headers}
            if "content-type" not in sent:
                self.send_header("content-type", "application/json")
            for name, value in reply.headers:
                self.send_header(name, value)
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up (a timeout or a cancellation)

    def _hang(self, seconds: float) -> None:
        """Answer nothing; notice when the client closes its end, as a cancelled call should."""
        app = self.server.app
        deadline = time.monotonic() + seconds
        self.close_connection = True
        while not app._stopping.is_set() and time.monotonic() < deadline:
            try:
                readable, _, _ = select.select([self.connection], [], [], HANG_POLL_SECONDS)
                if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                    app._note_disconnect()
                    return
            except (OSError, ValueError):
                app._note_disconnect()
                return
            if readable:  # bytes we did not ask for; wait rather than spin
                time.sleep(HANG_POLL_SECONDS)


def _dumps(value: Any) -> str:
    def plain(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return dict(obj)
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable")

    return json.dumps(value, default=plain)


def _json_reply(payload: dict[str, Any]) -> _Reply:
    return _Reply(200, _dumps(payload).encode())


def _error(
    status: int,
    message: str,
    number: int,
    error_type: str | None = None,
    headers: tuple[tuple[str, str], ...] = (),
) -> _Reply:
    payload = {
        "type": "error",
        "error": {"type": error_type or _error_type_for(status), "message": message},
        "request_id": f"req_local_{number}",
    }
    return _Reply(status, json.dumps(payload).encode(), headers)
