"""A local stand-in for the Anthropic Messages API that serves scripted turns.

Testing the Anthropic adapter against a fake client would test the fake; this server puts the
real SDK on the wire instead — its headers, retries, error classes and response parsing — with
no network and no key. It validates requests the way the API does, answers each
``POST /v1/messages`` with the next scripted turn, emulates prompt caching in ``usage``, and
can misbehave on cue (error statuses, malformed JSON, slow or hung responses).

It uses the standard library only and does not import the SDK, so it checks the adapter
rather than mirroring it. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import json
import math
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

#: The most blocks that may carry ``cache_control`` in one request, as the API enforces.
MAX_CACHE_BREAKPOINTS = 4

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


class _InvalidRequest(Exception):
    """A request the API would refuse with 400 invalid_request_error."""


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

    def __init__(self, turns: Iterable[Turn] = (), *, min_cacheable_tokens: int = 1024) -> None:
        self.min_cacheable_tokens = min_cacheable_tokens
        self._turns: deque[Turn] = deque(turns)
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._disconnects = 0
        self._cache: set[str] = set()
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

    def _dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, _Reply]:
        """Record a request and decide the reply; returns the request number with it."""
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = None
        with self._lock:
            self._requests.append(RecordedRequest(method, path, body, headers))
            number = len(self._requests)

        if path not in ("/v1/messages", "/v1/messages/count_tokens") or method != "POST":
            return number, _error(404, f"local server: no route for {method} {path}", number)
        if not isinstance(body, dict):
            message = "local server: the request body must be a JSON object"
            return number, _error(400, message, number)
        generation = path == "/v1/messages"
        try:
            _validate(body, generation=generation)
        except _InvalidRequest as invalid:
            return number, _error(400, str(invalid), number)

        if not generation:
            total = sum(_tokens(piece) for piece, _ in _prompt_pieces(body))
            return number, _json_reply({"input_tokens": total})

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
                    return _json_reply(self._message(turn, body, turn_number))
                except TypeError as err:
                    return _script_error(f"local server: turn {turn_number}: {err}", number)
            if isinstance(turn, Fault):
                if turn.kind == "status":
                    return _error(
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
                    return _script_error(
                        f"local server: turn {turn_number}: slow has no turn", number
                    )
                turn = turn.then
                continue
            try:  # a callable that returns a non-turn fails here too, on the next pass
                turn = turn(copy.deepcopy(body))
            except Exception as err:
                message = f"local server: turn {turn_number}'s callable raised {err!r}"
                return _script_error(message, number)

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
        usage = self._usage(body, sum(_tokens(block) for block in content))
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

    def _usage(self, body: dict[str, Any], output_tokens: int) -> dict[str, int]:
        """Usage with prompt caching emulated, and the server's cache updated.

        Each cache breakpoint whose prefix reaches ``min_cacheable_tokens`` is written to the
        cache; the longest prefix already there is read. So a request whose last breakpoint
        matches an earlier one reads it all, and one that extends a cached prefix reads the
        shared part and writes the rest, as the API does.
        """
        pieces = _prompt_pieces(body)
        tokens = [_tokens(piece) for piece, _ in pieces]
        stripped = [_strip_cache_control(piece) for piece, _ in pieces]
        prefixes: list[tuple[str, int]] = []
        for i, (_, marked) in enumerate(pieces):
            prefix_tokens = sum(tokens[: i + 1])
            if marked and prefix_tokens >= self.min_cacheable_tokens:
                key_text = json.dumps([body["model"], stripped[: i + 1]], sort_keys=True)
                prefixes.append((hashlib.sha256(key_text.encode()).hexdigest(), prefix_tokens))
        cached = prefixes[-1][1] if prefixes else 0
        with self._lock:
            read = max((n for key, n in prefixes if key in self._cache), default=0)
            self._cache.update(key for key, _ in prefixes)
        return {
            "input_tokens": sum(tokens) - cached,
            "output_tokens": output_tokens,
            "cache_creation_input_tokens": cached - read,
            "cache_read_input_tokens": read,
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


def _script_error(message: str, number: int) -> _Reply:
    """A broken script answers 500, told not to be retried, so the test fails at once."""
    reply = _error(500, message, number)
    return _Reply(reply.status, reply.body, (("x-should-retry", "false"),))


# ── tokens and prompt caching ──────────────────────────────────────────────────────────────


def _strip_cache_control(value: Any) -> Any:
    """The value without its cache markers: they change neither the prompt nor its size."""
    if isinstance(value, dict):
        return {k: _strip_cache_control(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_strip_cache_control(v) for v in value]
    return value


def _tokens(value: Any) -> int:
    """The estimate: a token per four characters of compact JSON, cache markers left out."""
    return math.ceil(len(json.dumps(_strip_cache_control(value), separators=(",", ":"))) / 4)


def _marked(value: Any) -> bool:
    if not isinstance(value, dict):
        return False
    if value.get("cache_control") is not None:
        return True
    nested = value.get("content")
    return isinstance(nested, list) and any(_marked(block) for block in nested)


def _prompt_pieces(body: dict[str, Any]) -> list[tuple[Any, bool]]:
    """The prompt in cache order — tools, system, message blocks — each with whether it
    carries a cache breakpoint. Top-level ``cache_control`` marks the last piece."""
    pieces: list[Any] = list(body.get("tools") or [])
    system = body.get("system")
    if isinstance(system, str):
        pieces.append(system)
    elif isinstance(system, list):
        pieces.extend(system)
    for message in body.get("messages") or []:
        content = message.get("content")
        pieces.extend(content if isinstance(content, list) else [content])
    marked = [(piece, _marked(piece)) for piece in pieces]
    if body.get("cache_control") is not None and marked:
        marked[-1] = (marked[-1][0], True)
    return marked


# ── request validation ─────────────────────────────────────────────────────────────────────


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise _InvalidRequest(message)


def _validate(body: dict[str, Any], *, generation: bool) -> None:
    """Refuse what the API refuses, with messages in its style (field path first)."""
    model = body.get("model")
    _require("model" in body, "model: Field required")
    _require(isinstance(model, str) and model != "", "model: must be a non-empty string")
    if generation:
        max_tokens = body.get("max_tokens")
        _require("max_tokens" in body, "max_tokens: Field required")
        _require(
            isinstance(max_tokens, int) and not isinstance(max_tokens, bool) and max_tokens > 0,
            "max_tokens: must be a positive integer",
        )
        _require(not body.get("stream"), "stream: the local server does not serve streams")
    breakpoints: list[str] = []
    _check_tools(body.get("tools"), breakpoints)
    _check_system(body.get("system"), breakpoints)
    _check_messages(body.get("messages"), breakpoints)
    if body.get("cache_control") is not None:
        _check_cache_control(body, "cache_control", breakpoints)
    found = len(breakpoints)
    _require(
        found <= MAX_CACHE_BREAKPOINTS,
        f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. "
        f"Found {found}.",
    )


def _check_cache_control(block: dict[str, Any], path: str, breakpoints: list[str]) -> None:
    marker = block.get("cache_control")
    if marker is None:
        return
    where = f"{path}.cache_control" if path != "cache_control" else path
    _require(isinstance(marker, dict), f"{where}: must be an object")
    _require(marker.get("type") == "ephemeral", f"{where}.type: Input should be 'ephemeral'")
    _require(marker.get("ttl", "5m") in ("5m", "1h"), f"{where}.ttl: Input should be '5m' or '1h'")
    extra = sorted(set(marker) - {"type", "ttl"})
    _require(not extra, f"{where}.{extra[0] if extra else ''}: Extra inputs are not permitted")
    breakpoints.append(path)


def _check_text(block: dict[str, Any], path: str) -> None:
    text = block.get("text")
    if not isinstance(text, str):
        raise _InvalidRequest(f"{path}.text: Field required")
    _require(text != "", f"{path}: text content blocks must be non-empty")
    _require(text.strip() != "", f"{path}: text content blocks must contain non-whitespace text")


def _check_tools(tools: Any, breakpoints: list[str]) -> None:
    if tools is None:
        return
    _require(isinstance(tools, list), "tools: Input should be a valid list")
    for i, tool in enumerate(tools):
        path = f"tools.{i}"
        _require(isinstance(tool, dict), f"{path}: Input should be an object")
        name = tool.get("name")
        _require(isinstance(name, str) and name != "", f"{path}.name: Field required")
        if tool.get("type") in (None, "custom"):  # server tools (typed) carry no schema
            _require(
                isinstance(tool.get("input_schema"), dict), f"{path}.input_schema: Field required"
            )
        _check_cache_control(tool, path, breakpoints)


def _check_system(system: Any, breakpoints: list[str]) -> None:
    if system is None or isinstance(system, str):
        return
    _require(isinstance(system, list), "system: Input should be a string or a list of text blocks")
    for i, block in enumerate(system):
        path = f"system.{i}"
        _require(
            isinstance(block, dict) and block.get("type") == "text",
            f"{path}.type: Input should be 'text'",
        )
        _check_text(block, path)
        _check_cache_control(block, path, breakpoints)


def _check_messages(messages: Any, breakpoints: list[str]) -> None:
    _require(messages is not None, "messages: Field required")
    _require(isinstance(messages, list), "messages: Input should be a valid list")
    _require(len(messages) > 0, "messages: at least one message is required")
    for i, message in enumerate(messages):
        path = f"messages.{i}"
        _require(isinstance(message, dict), f"{path}: Input should be an object")
        role = message.get("role")
        _require(
            role in ("user", "assistant"), f"{path}.role: Input should be 'user' or 'assistant'"
        )
        _require(i > 0 or role == "user", 'messages: the first message must use the "user" role')
        content = message.get("content")
        final_assistant = i == len(messages) - 1 and role == "assistant"
        _require(
            isinstance(content, str | list), f"{path}.content: Input should be a string or a list"
        )
        _require(
            bool(content) or final_assistant,
            f"{path}: all messages must have non-empty content except for the optional final "
            "assistant message",
        )
        if isinstance(content, list):
            for j, block in enumerate(content):
                _check_block(block, role, f"{path}.content.{j}", breakpoints)
    _check_tool_pairing(messages)


def _check_block(block: Any, role: str, path: str, breakpoints: list[str]) -> None:
    _require(isinstance(block, dict), f"{path}: Input should be an object")
    kind = block.get("type")
    _require(isinstance(kind, str), f"{path}.type: Field required")
    if kind == "text":
        _check_text(block, path)
    elif kind == "tool_use":
        _require(role == "assistant", f"{path}: tool_use blocks may only appear in assistant turns")
        tool_id = block.get("id")
        _require(isinstance(tool_id, str) and tool_id != "", f"{path}.id: Field required")
        _require(isinstance(block.get("name"), str), f"{path}.name: Field required")
        _require(isinstance(block.get("input"), dict), f"{path}.input: Input should be an object")
    elif kind == "tool_result":
        _require(role == "user", f"{path}: tool_result blocks may only appear in user turns")
        _require(isinstance(block.get("tool_use_id"), str), f"{path}.tool_use_id: Field required")
        nested = block.get("content")
        if isinstance(nested, list):
            for k, inner in enumerate(nested):
                _require(isinstance(inner, dict), f"{path}.content.{k}: Input should be an object")
                _check_cache_control(inner, f"{path}.content.{k}", breakpoints)
    _check_cache_control(block, path, breakpoints)


def _ids(message: dict[str, Any], kind: str, field: str) -> list[str]:
    content = message.get("content")
    if not isinstance(content, list):
        return []
    return [block[field] for block in content if block.get("type") == kind]


def _check_tool_pairing(messages: list[dict[str, Any]]) -> None:
    """Every tool_use answered in the next message, every tool_result answering the last one."""
    for i, message in enumerate(messages):
        if message["role"] == "assistant":
            uses = _ids(message, "tool_use", "id")
            if uses and i + 1 < len(messages):
                answered = set(_ids(messages[i + 1], "tool_result", "tool_use_id"))
                missing = [tool_id for tool_id in uses if tool_id not in answered]
                _require(
                    not missing,
                    f"messages.{i}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message.",
                )
        else:
            previous = messages[i - 1] if i > 0 else {}
            asked = (
                set(_ids(previous, "tool_use", "id"))
                if previous.get("role") == "assistant"
                else set()
            )
            content = message.get("content")
            for j, block in enumerate(content if isinstance(content, list) else []):
                if block.get("type") != "tool_result":
                    continue
                _require(
                    block["tool_use_id"] in asked,
                    f"messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` "
                    f"blocks: {block['tool_use_id']}. Each `tool_result` block must have a "
                    "corresponding `tool_use` block in the previous message.",
                )
