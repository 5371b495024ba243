"""A local stand-in for the Anthropic Messages API that serves scripted turns.

Testing the Anthropic adapter against a fake client would test the fake; this server puts the
real SDK on the wire instead — its headers, retries, error classes and response parsing — with
no network and no key. It validates requests the way the API does, answers each
``POST /v1/messages`` with the next scripted turn (streamed as server-sent events when the
request asks for ``stream``), emulates prompt caching in ``usage``, and can misbehave on
cue (error statuses, malformed JSON, slow or hung responses, streams that break, never end
or carry a raw event; :class:`~gr_notebook.testing.faults.Fault`).

It uses the standard library only and does not import the SDK, so it checks the adapter
rather than mirroring it. It listens on 127.0.0.1 only.
"""

from __future__ import annotations

import copy
import json
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, replace
from typing import Any

from gr_notebook.messages import THINKING_BLOCKS, TextBlock, ToolUseBlock, block_json
from gr_notebook.models.base import ModelResponse
from gr_notebook.testing.faults import Fault, Turn, error_type_for, status_for
from gr_notebook.testing.local_http import LocalServer, Reply, json_reply, json_text
from gr_notebook.testing.prompt_cache import PromptCache, estimate_tokens, prompt_tokens
from gr_notebook.testing.request_rules import InvalidRequest, validate
from gr_notebook.testing.sse import DEFAULT_CHUNK_CHARS, encode, error_frame, message_frames
from gr_notebook.testing.thinking import ThinkingSigner, check_thinking, thinking_content
from gr_notebook.validation import whole_number

__all__ = ["Fault", "MessagesServer", "RecordedRequest", "Turn"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """A request as the server saw it, kept so tests can assert on what the SDK sent."""

    method: str
    path: str
    body: Any
    """The parsed JSON body; None when the body was empty or not JSON."""
    headers: dict[str, str]
    """Header names are lower case."""


class MessagesServer(LocalServer):
    """Serves scripted turns over the Messages API on a free loopback port.

    Use it as a context manager; each ``POST /v1/messages`` consumes one turn, in order.
    ``POST /v1/messages/count_tokens`` answers with the server's token estimate and consumes
    nothing. An invalid request is refused with 400 before a turn is consumed, as the API
    would, so a script cannot be knocked out of step by a client bug.

    A request that turns ``thinking`` on gets signed thinking blocks back (a scripted
    :class:`~gr_notebook.messages.ThinkingBlock` or ``RedactedThinkingBlock``, or one the
    server writes; ``extra={"thinking": False}`` on a turn sends none), and thinking that
    comes back changed, or a tool loop that lost it, is refused with the API's 400
    (:mod:`~gr_notebook.testing.thinking`).
    """

    def __init__(
        self,
        turns: Iterable[Turn] = (),
        *,
        min_cacheable_tokens: int = 1024,
        chunk_chars: int = DEFAULT_CHUNK_CHARS,
        side: Callable[[dict[str, Any]], Turn | None] | None = None,
    ) -> None:
        """``side`` answers the requests a client makes beside its conversation (a title,
        a summary): a request it answers, with a turn, consumes none of the script."""
        self.chunk_chars = whole_number(chunk_chars, "chunk_chars")
        """Characters per delta of a streamed answer."""
        super().__init__()
        self._side = side
        self._cache = PromptCache(min_cacheable_tokens)
        self._signer = ThinkingSigner()
        self._turns: deque[Turn] = deque(turns)
        self._requests: list[RecordedRequest] = []
        self._served = 0
        self._disconnects = 0

    # ── what tests look at ─────────────────────────────────────────────────────────────────

    @property
    def min_cacheable_tokens(self) -> int:
        return self._cache.min_cacheable_tokens

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received, valid or not, in order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """Hung or streaming requests whose client went away: evidence that a cancelled call
        closes its connection."""
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

    def dispatch(
        self, method: str, path: str, headers: dict[str, str], raw: bytes
    ) -> tuple[int, Reply]:
        """Record a request and decide the reply; returns the request number with it."""
        number, body = self._record(method, path, headers, raw)

        if path not in ("/v1/messages", "/v1/messages/count_tokens") or method != "POST":
            message = f"local server: no route for {method} {path}"
            return number, self._error_reply(404, message, number)
        if not isinstance(body, dict):
            message = "local server: the request body must be a JSON object"
            return number, self._error_reply(400, message, number)
        generation = path == "/v1/messages"
        try:
            validate(body, generation=generation)
            check_thinking(body, self._signer, generation=generation)
        except InvalidRequest as invalid:
            return number, self._error_reply(400, str(invalid), number)

        if not generation:
            return number, json_reply({"input_tokens": prompt_tokens(body)})

        side = self._side(copy.deepcopy(body)) if self._side is not None else None
        if side is not None:
            return number, self._serve(side, body, 0, number)
        return number, self._next_turn(body, number)

    def _next_turn(self, body: dict[str, Any], number: int) -> Reply:
        """The script's next turn served, or the refusal when none is left."""
        with self._lock:
            turn = self._turns.popleft() if self._turns else None
            if turn is not None:
                self._served += 1
            turn_number = self._served
        if turn is None:
            message = f"local server: the script has no turn left for request {number}"
            return self._error_reply(400, message, number)
        return self._serve(turn, body, turn_number, number)

    def _serve(self, turn: Turn, body: dict[str, Any], turn_number: int, number: int) -> Reply:
        streamed = body.get("stream") is True
        while True:
            if isinstance(turn, ModelResponse):
                try:
                    message = self._message(turn, body, turn_number)
                except TypeError as err:
                    return self._script_error_reply(
                        f"local server: turn {turn_number}: {err}", number
                    )
                return self._stream_reply(message, body) if streamed else json_reply(message)
            if isinstance(turn, Fault):
                if turn.kind == "status":
                    return self._error_reply(
                        turn.status_code, turn.message, number, turn.error_type, turn.headers
                    )
                if turn.kind == "malformed":
                    return _malformed(turn_number, streamed)
                if turn.kind == "hang":
                    return Reply(hang=turn.seconds)
                if turn.kind in ("stream_error", "cut", "endless", "inject"):
                    return self._stream_fault(turn, body, turn_number, number)
                waits = turn.kind == "slow" or not streamed  # a drip waits between events
                if waits and turn.seconds and self._stopping.wait(turn.seconds):
                    return Reply(drop=True)
                if turn.then is None:
                    return self._script_error_reply(
                        f"local server: turn {turn_number}: {turn.kind} has no turn", number
                    )
                if turn.kind == "drip" and streamed:
                    reply = self._serve(turn.then, body, turn_number, number)
                    return replace(reply, chunk_delay=turn.seconds)
                turn = turn.then
                continue
            try:  # a callable that returns a non-turn fails here too, on the next pass
                turn = turn(copy.deepcopy(body))
            except Exception as err:
                problem = f"local server: turn {turn_number}'s callable raised {err!r}"
                return self._script_error_reply(problem, number)

    def _stream_fault(
        self, fault: Fault, body: dict[str, Any], turn_number: int, number: int
    ) -> Reply:
        """A stream that, after ``fault.after`` events, breaks (an error event, or a cut),
        never ends, or carries ``fault.raw``. Without streaming: the error's status, a
        dropped connection, a body that never ends, or ``fault.raw`` as the body."""
        if body.get("stream") is not True:
            if fault.kind == "cut":
                return Reply(drop=True)
            if fault.kind == "inject":
                return Reply(200, fault.raw, (("content-type", "application/json"),))
            if fault.kind == "endless":
                return Reply(stream=(), keepalive=b" ", keepalive_s=fault.seconds)
            status = status_for(fault.error_type)
            return self._error_reply(status, fault.message, number, fault.error_type)
        if fault.then is None:
            message = f"local server: turn {turn_number}: {fault.kind} has no turn"
            return self._script_error_reply(message, number)
        reply = self._serve(fault.then, body, turn_number, number)
        if reply.stream is None:  # an error: that is the answer
            return reply
        head, rest = reply.stream[: max(0, fault.after)], reply.stream[max(0, fault.after) :]
        if fault.kind == "cut":
            return replace(reply, stream=head, cut=True)
        if fault.kind == "stream_error":
            error = self._stream_error_event(fault.error_type, fault.message)
            return replace(reply, stream=(*head, error))
        if fault.kind == "inject":
            return replace(reply, stream=(*head, fault.raw, *rest))
        keepalive = self._keepalive_event(body)
        return replace(reply, stream=head, keepalive=keepalive, keepalive_s=fault.seconds)

    def _keepalive_event(self, body: dict[str, Any]) -> bytes:
        """What the API sends to keep a stream open: ``ping``; another API overrides it."""
        return encode(("ping", {"type": "ping"}))

    def _stream_reply(self, message: dict[str, Any], body: dict[str, Any]) -> Reply:
        """``message`` as the API streams it; a server for another API overrides it."""
        frames = message_frames(message, chunk_chars=self.chunk_chars)
        return event_stream(encode(frame) for frame in frames)

    def _stream_error_event(self, error_type: str, message: str) -> bytes:
        """The API's error event mid-stream; a server for another API overrides it."""
        return encode(error_frame(error_type, message))

    def _error_reply(
        self,
        status: int,
        message: str,
        number: int,
        error_type: str | None = None,
        headers: tuple[tuple[str, str], ...] = (),
    ) -> Reply:
        """An error in the API's JSON shape; a server for another API overrides it."""
        payload = {
            "type": "error",
            "error": {"type": error_type or error_type_for(status), "message": message},
            "request_id": f"req_local_{number}",
        }
        return Reply(status, json.dumps(payload).encode(), headers)

    def _script_error_reply(self, message: str, number: int) -> Reply:
        """A broken script answers 500, told not to be retried, so the test fails at once."""
        reply = self._error_reply(500, message, number)
        return Reply(reply.status, reply.body, (("x-should-retry", "false"),))

    def _message(
        self, response: ModelResponse, body: dict[str, Any], turn_number: int
    ) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        for i, block in enumerate(response.content):
            if isinstance(block, TextBlock):
                content.append({"type": "text", "text": block.text})
            elif isinstance(block, ToolUseBlock):
                tool_id = block.id or f"toolu_local_{turn_number}_{i}"
                input_ = json.loads(json_text(block.input))
                content.append(
                    {"type": "tool_use", "id": tool_id, "name": block.name, "input": input_}
                )
            elif isinstance(block, THINKING_BLOCKS):
                content.append(block_json(block))
            else:
                raise TypeError(f"{type(block).__name__} cannot appear in an assistant response")
        think = response.extra.get("thinking", True) is not False  # a turn may not think
        content = thinking_content(content, body, self._signer, turn_number, think=think)
        usage = self._cache.usage(body, sum(estimate_tokens(block) for block in content))
        if response.usage is not None:
            usage = asdict(response.usage)
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

    def note_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1


def event_stream(events: Iterable[bytes]) -> Reply:
    return Reply(stream=tuple(events), headers=(("content-type", "text/event-stream"),))


def _malformed(turn_number: int, streamed: bool) -> Reply:
    """A 200 whose JSON is cut short: the body, or the first event of a stream."""
    head = f'{{"id": "msg_local_{turn_number}", "type": "message", "content": ['
    if streamed:
        return event_stream([f"event: message_start\ndata: {head}\n\n".encode()])
    return Reply(200, head.encode(), (("content-type", "application/json"),))
