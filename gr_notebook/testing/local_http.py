"""The HTTP side of the local servers: a threaded server on 127.0.0.1 that answers what the
app decides (:class:`Reply`), holds a hung request open, and streams server-sent events in
chunks, noticing when the client goes away (a cancelled call must close its connection).

Standard library only; the app (:class:`~gr_notebook.testing.messages_server.MessagesServer`)
decides, this module only writes.
"""

from __future__ import annotations

import contextlib
import json
import select
import socket
import socketserver
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Self
from urllib.parse import urlsplit

__all__ = [
    "HANG_POLL_SECONDS",
    "HTTPServer",
    "LocalServer",
    "Reply",
    "json_reply",
    "json_text",
]

#: Reason phrases the stdlib does not know; an empty one is legal but reads badly in logs.
_REASONS: Mapping[int, str] = {529: "Overloaded"}

#: How often a held request checks whether its client has gone away.
HANG_POLL_SECONDS = 0.02


@dataclass(frozen=True, slots=True)
class Reply:
    """What the handler thread should do: answer, stream, or hold the request open."""

    status: int = 200
    body: bytes = b""
    headers: tuple[tuple[str, str], ...] = ()
    hang: float | None = None
    """Hold the request open this long instead of answering."""
    drop: bool = False
    """Close the connection without answering (the server is stopping)."""
    stream: tuple[bytes, ...] | None = None
    """Server-sent events, each written as one chunk of a chunked body."""
    chunk_delay: float = 0.0
    """Seconds between two events of ``stream``."""
    cut: bool = False
    """End ``stream`` by dropping the connection, without the body's last chunk."""
    keepalive: bytes | None = None
    """After ``stream``, send this every ``keepalive_s`` seconds until the client leaves:
    a body that never ends, though no read waits long."""
    keepalive_s: float = 0.1


def json_text(value: Any) -> str:
    """JSON of ``value``, whose mappings may be read-only views (a frozen tool input)."""

    def plain(obj: Any) -> Any:
        if isinstance(obj, Mapping):
            return dict(obj)
        raise TypeError(f"{type(obj).__name__} is not JSON serialisable")

    return json.dumps(value, default=plain)


def json_reply(payload: dict[str, Any]) -> Reply:
    """A 200 whose body is ``payload`` as JSON."""
    return Reply(200, json_text(payload).encode())


class HTTPServer(ThreadingHTTPServer):
    """Tracks open connections so closing the server can end idle keep-alive ones."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, app: LocalServer) -> None:
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


class LocalServer:
    """The lifecycle every local server here shares: ``with Server(...) as server:`` serves
    it on a free loopback port, from a daemon thread (or :meth:`start` and :meth:`close`); a
    subclass writes ``dispatch``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._serving: tuple[HTTPServer, threading.Thread] | None = None

    def start(self) -> Self:
        if self._serving is not None:
            raise RuntimeError(f"{type(self).__name__} is already running")
        self._stopping.clear()
        httpd = HTTPServer(self)
        thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.01},
            name=f"{type(self).__name__}:{httpd.server_port}",
            daemon=True,
        )
        thread.start()
        self._serving = (httpd, thread)
        return self

    def close(self) -> None:
        """Stop serving; hung and slow requests are dropped at once (``stopping``, set
        first, ends them), so this is quick."""
        serving, self._serving = self._serving, None
        if serving is None:
            return
        httpd, thread = serving
        self._stopping.set()
        httpd.shutdown()
        httpd.close_connections()
        httpd.server_close()
        thread.join(timeout=2.0)

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def url(self) -> str:
        if self._serving is None:
            name = type(self).__name__
            raise RuntimeError(f"{name} is not running; use it as a context manager")
        return f"http://127.0.0.1:{self._serving[0].server_port}"

    @property
    def stopping(self) -> threading.Event:
        """Set while the server shuts down: held and streamed requests end at once."""
        return self._stopping

    def dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Reply]:
        """Record a request and decide the reply (on a handler thread); returns the request
        number with it."""
        raise NotImplementedError

    def note_disconnect(self) -> None:
        """Count a client that went away before its reply ended (here: nothing to count)."""


class _Handler(BaseHTTPRequestHandler):
    server: HTTPServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # else a reused connection waits out a delayed ACK

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _handle(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length > 0 else b""
        headers = {name.lower(): value for name, value in self.headers.items()}
        number, reply = self.server.app.dispatch(
            self.command, urlsplit(self.path).path, headers, raw
        )
        if reply.drop:
            self.close_connection = True
            return
        if reply.hang is not None:
            self.close_connection = True
            if self._client_left_within(reply.hang):
                self.server.app.note_disconnect()
            return
        try:
            self._head(reply, number)
            if reply.stream is not None:
                self._stream(reply)
                return
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True  # the client gave up (a timeout or a cancellation)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _handle

    def _head(self, reply: Reply, number: int) -> None:
        self.send_response(reply.status, _REASONS.get(reply.status))
        self.send_header("request-id", f"req_local_{number}")
        sent = {name.lower() for name, _ in reply.headers}
        if "content-type" not in sent:
            self.send_header("content-type", "application/json")
        for name, value in reply.headers:
            self.send_header(name, value)

    def _stream(self, reply: Reply) -> None:
        """Each event a chunk, ``chunk_delay`` apart; a client that leaves is noticed at once,
        also between two events, and counted."""
        self.send_header("transfer-encoding", "chunked")
        self.send_header("cache-control", "no-cache")
        self.end_headers()
        self.wfile.flush()
        try:
            for i, event in enumerate(reply.stream or ()):
                if i and reply.chunk_delay > 0 and self._client_left_within(reply.chunk_delay):
                    self.close_connection = True
                    self.server.app.note_disconnect()
                    return
                if self.server.app.stopping.is_set():
                    self.close_connection = True
                    return
                self._chunk(event)
            if reply.keepalive is not None:
                self._keep_alive(reply.keepalive, max(HANG_POLL_SECONDS, reply.keepalive_s))
                return
            if reply.cut:
                self.close_connection = True
                return
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True
            self.server.app.note_disconnect()

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _keep_alive(self, data: bytes, every: float) -> None:
        """Send ``data`` every ``every`` seconds, for as long as the client stays."""
        self.close_connection = True
        while not self._client_left_within(every):
            if self.server.app.stopping.is_set():
                return
            self._chunk(data)
        self.server.app.note_disconnect()

    def _client_left_within(self, seconds: float) -> bool:
        """Wait ``seconds`` (or until the server stops); True as soon as the client closes
        its end, as a cancelled call should."""
        stopping: Callable[[], bool] = self.server.app.stopping.is_set
        deadline = time.monotonic() + seconds
        while not stopping() and time.monotonic() < deadline:
            wait = min(HANG_POLL_SECONDS, max(0.0, deadline - time.monotonic()))
            try:
                readable, _, _ = select.select([self.connection], [], [], wait)
                if readable and self.connection.recv(1, socket.MSG_PEEK) == b"":
                    return True
            except (OSError, ValueError):
                return True
            if readable:  # bytes we did not ask for; wait rather than spin
                time.sleep(HANG_POLL_SECONDS)
        return False
