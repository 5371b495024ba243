"""A person approves a tool call: the approval policy, the question and its answer, the desk
where questions wait, and who answers.

A policy that returns :meth:`PolicyDecision.ask` holds the call (a denial from another
policy still wins). The call then waits for the first of these that can answer:

1. the run's :class:`ApprovalDesk` while someone attends it (a notebook dashboard, or code
   that watches ``run.approvals``): Approve, Deny with a reason, or Edit the input;
2. the agent's ``confirm=`` callback, which receives an :class:`ApprovalRequest` and returns
   True, False or an :class:`ApprovalAnswer`;
3. nobody: the call is denied, and the model reads why and what to do instead.

An edit is checked against the tool's schema, then against every live policy (by the guarded
step, :mod:`gr_notebook.engine.guarded_step`), before it runs; an edit the schema refuses is
asked again, with the problem shown, and what an approval runs is the input it showed. A
timeout, the run's deadline and Stop end the wait: the call is not run. Every question and
answer is an event (``approval_requested``, ``approval_answered``).
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import json
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from gr_notebook.errors import ConfigError, RunError, WorkspaceError
from gr_notebook.eventdata import clip
from gr_notebook.events import ApprovalAnsweredEvent, ApprovalRequestedEvent, Event
from gr_notebook.guardrails.paths import canonical_path
from gr_notebook.guardrails.policy import PolicyContext, PolicyDecision
from gr_notebook.guardrails.regulation import ConfirmationRequest, ConfirmerLike
from gr_notebook.guidance import Directive, action_of_text
from gr_notebook.validation import seconds
from gr_notebook.workflow.bookkeeping import is_bookkeeping

if TYPE_CHECKING:
    from gr_notebook.tools.base import Tool, ToolOutput

__all__ = [
    "ApprovalAnswer",
    "ApprovalDesk",
    "ApprovalPolicy",
    "ApprovalRequest",
    "Approvals",
    "Decision",
    "Resolution",
    "denial_order",
    "edited_note",
    "refused_edit",
]

Decision: TypeAlias = Literal["approve", "deny", "edit"]
Asked: TypeAlias = Literal["desk", "confirmer", "nobody"]
_PATH_PARAMS = ("path", "file_path")
MAX_CONFIRMER_EDITS = 3
"""A confirmer (code, not a person looking at the problem) whose edits the schema refuses
this many times in a row is taken to deny."""


class Ask(Protocol):
    """What the policies asked (the guardrails' held :class:`Denial`)."""

    @property
    def reason(self) -> str: ...
    @property
    def policies(self) -> tuple[str, ...]: ...
    @property
    def timeout_s(self) -> float | None: ...


@dataclass(frozen=True)
class ApprovalPolicy:
    """Asks a person before the tools in ``tools`` run, and before the calls that
    ``when(tool_name, params)`` picks; ``timeout_s`` bounds the wait (no answer denies).

    A person approves the work, not the loop's bookkeeping: a call whose path (its
    ``path`` or ``file_path``) is one of the loop's own files (the plan file,
    ``todos.json``, ``notes.md``, ``experiences.md``, ``workspace_summary.md``, anything
    under ``archive/``) runs unasked, unless ``include_bookkeeping=True``. A ``when`` that
    raises asks too: a person sees the call rather than a guess."""

    tools: Iterable[str] = ()
    when: Callable[[str, Mapping[str, Any]], object] | None = None
    timeout_s: float | None = None
    name: str = "approval"
    include_bookkeeping: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.tools, str):
            raise ConfigError(
                f"tools takes a list of tool names, e.g. tools=[{self.tools!r}], not a string"
            )
        try:
            names = frozenset(self.tools)
        except TypeError:
            raise ConfigError(
                f"tools takes a list of tool names, not {type(self.tools).__name__}"
            ) from None
        strays = [n for n in names if not isinstance(n, str) or not n]
        if strays:
            raise ConfigError(f"tools takes tool names (strings), got {strays[0]!r}")
        if self.when is not None and not callable(self.when):
            raise ConfigError(
                "when takes a function (tool_name, params) -> bool, e.g. when=lambda tool, "
                f"params: params.get('path', '').endswith('.py'); got {type(self.when).__name__}"
            )
        if not names and self.when is None:
            raise ConfigError(
                "ApprovalPolicy asks for nothing: name the tools, e.g. "
                "gr.ApprovalPolicy(tools=['write_file']), or pick calls with when=..."
            )
        if self.timeout_s is not None:
            object.__setattr__(
                self, "timeout_s", seconds(self.timeout_s, "timeout_s", minimum=0, above=True)
            )
        if not isinstance(self.include_bookkeeping, bool):
            raise ConfigError(
                f"include_bookkeeping takes True or False, got {self.include_bookkeeping!r}"
            )
        object.__setattr__(self, "tools", names)

    def check(
        self, tool: Tool, params: Mapping[str, Any], *, context: PolicyContext
    ) -> PolicyDecision:
        if not self.include_bookkeeping and _bookkeeping(params, context):
            return PolicyDecision.allow()
        if tool.name in self.tools:
            return PolicyDecision.ask(f"{tool.name} is on the list of tools a person approves")
        if self.when is None:
            return PolicyDecision.allow()
        try:
            picked = self.when(tool.name, params)
        except Exception as exc:
            return PolicyDecision.ask(
                f"the approval rule failed on this call ({type(exc).__name__}: {exc}), so a "
                "person decides"
            )
        if picked:
            return PolicyDecision.ask(f"the approval rule picked this {tool.name} call")
        return PolicyDecision.allow()

    def on_result(
        self,
        tool: Tool,
        params: Mapping[str, Any],
        result: ToolOutput,
        *,
        context: PolicyContext,
    ) -> None:
        return None


def _bookkeeping(params: Mapping[str, Any], context: PolicyContext) -> bool:
    """Whether the call names a path, and every path it names is one of the loop's own
    files; a path that cannot be resolved is not (the call is asked about)."""
    raw = [params[key] for key in _PATH_PARAMS if key in params]
    if not raw:
        return False
    try:
        names = [canonical_path(context.workspace, path) for path in raw]
    except WorkspaceError:
        return False
    return all(is_bookkeeping(name, context.plan_file) for name in names)


@dataclass(frozen=True, slots=True)
class ApprovalRequest(ConfirmationRequest):
    """A tool call that waits for a person. It is a :class:`ConfirmationRequest` (operation
    ``tool:<name>``, the reason as its description), so a confirmer written for budgets
    reads it too; ``problem`` says why the person's last edit was refused."""

    request_id: str = ""
    tool: str = ""
    input: Mapping[str, Any] = field(default_factory=dict)
    reason: str = ""
    policies: tuple[str, ...] = ()
    tool_use_id: str | None = None
    timeout_s: float | None = None
    problem: str | None = None

    def input_json(self) -> str:
        return json.dumps(dict(self.input), indent=2, ensure_ascii=False, default=str)


@dataclass(frozen=True, slots=True)
class ApprovalAnswer:
    """A person's answer: approve the call, deny it with a reason the model reads, or run
    it with an edited input. ``by`` says who gave it, in ``approvals_df().by``: the desk's
    answers are ``dashboard`` (a click) or ``code`` (``run.approvals`` from a cell or a
    script); ``confirm=``'s are ``confirmer`` whatever it says."""

    decision: Decision
    reason: str | None = None
    input: Mapping[str, Any] | None = None
    by: str | None = None

    def __post_init__(self) -> None:
        if self.decision not in ("approve", "deny", "edit"):
            raise RunError(
                f"an approval's decision is 'approve', 'deny' or 'edit', not {self.decision!r}"
            )
        if self.decision == "edit" and not isinstance(self.input, Mapping):
            raise RunError(
                "an edit takes the call's whole new input as a dict, e.g. "
                "ApprovalAnswer.edit({'path': 'notes.md', 'content': '...'}); got "
                f"{type(self.input).__name__}"
            )
        if self.reason is not None and not isinstance(self.reason, str):
            raise RunError(f"a denial's reason is text, not {type(self.reason).__name__}")

    @classmethod
    def approve(cls, *, by: str | None = None) -> ApprovalAnswer:
        return cls("approve", by=by)

    @classmethod
    def deny(cls, reason: str = "", *, by: str | None = None) -> ApprovalAnswer:
        """``reason`` is what the model reads: say what to do instead."""
        return cls("deny", reason.strip() or None, by=by)

    @classmethod
    def edit(cls, input: Mapping[str, Any], *, by: str | None = None) -> ApprovalAnswer:
        return cls("edit", input=input, by=by)


@dataclass(slots=True)
class _Waiting:
    request: ApprovalRequest
    answer: asyncio.Future[ApprovalAnswer]


DeskWatcher: TypeAlias = Callable[[ApprovalRequest, str], object]
"""Called with a request and what happened to it: ``asked``, or how it closed (``answered``,
``timed out``, ``withdrawn``)."""


class ApprovalDesk:
    """The requests of one run that wait for a person, and their answers (the shape of
    Inspect AI's ``HumanApprovalManager``). The dashboard and code answer here; someone
    who :meth:`watch` es attends the desk, and only an attended desk is asked."""

    def __init__(self) -> None:
        self._waiting: dict[str, _Waiting] = {}
        self._closed: dict[str, tuple[ApprovalRequest, str]] = {}
        self._watchers: list[DeskWatcher] = []

    @property
    def attended(self) -> bool:
        return bool(self._watchers)

    def watch(self, watcher: DeskWatcher) -> Callable[[], None]:
        """Follow the desk (and attend it) until the returned function is called; a watcher
        that joins late is told of the requests still waiting (one answered a moment ago
        is not: its call has yet to take the answer up)."""
        self._watchers.append(watcher)
        for request in self.pending:
            watcher(request, "asked")

        def unwatch() -> None:
            if watcher in self._watchers:
                self._watchers.remove(watcher)

        return unwatch

    @property
    def pending(self) -> tuple[ApprovalRequest, ...]:
        """The requests waiting now, oldest first."""
        return tuple(w.request for w in self._waiting.values() if not w.answer.done())

    async def requested(self, timeout_s: float | None = None) -> ApprovalRequest:
        """The oldest request waiting, once there is one: a cell awaits it, then answers.
        The desk is attended while this waits, so the call asked meanwhile waits here."""
        if self.pending:
            return self.pending[0]
        arrived: asyncio.Future[ApprovalRequest] = asyncio.get_running_loop().create_future()

        def seen(request: ApprovalRequest, what: str) -> None:
            if what == "asked" and not arrived.done():
                arrived.set_result(request)

        unwatch = self.watch(seen)
        try:
            return await asyncio.wait_for(arrived, timeout_s)
        except TimeoutError:
            raise RunError(
                f"no tool call asked for approval within {timeout_s:g} s; a request appears "
                "when a policy asks (see run.approvals_df())"
            ) from None
        finally:
            unwatch()

    def answer(self, request_id: str, answer: ApprovalAnswer) -> None:
        waiting = self._waiting.get(request_id)
        if waiting is None or waiting.answer.done():
            raise RunError(self._not_waiting(request_id, waiting))
        waiting.answer.set_result(answer)

    def approve(self, request_id: str | None = None, *, by: str = "code") -> None:
        """Approve ``request_id``, or the oldest waiting request; ``by`` is who answers
        (``code``; the dashboard's buttons say ``dashboard``)."""
        self.answer(self._id(request_id, "approve"), ApprovalAnswer.approve(by=by))

    def deny(self, reason: str = "", request_id: str | None = None, *, by: str = "code") -> None:
        """Deny with ``reason``, which the model reads: say what it should do instead."""
        self.answer(self._id(request_id, "deny"), ApprovalAnswer.deny(reason, by=by))

    def edit(
        self, input: Mapping[str, Any], request_id: str | None = None, *, by: str = "code"
    ) -> None:
        """Run the call with ``input`` (its whole new input) instead."""
        self.answer(self._id(request_id, "edit"), ApprovalAnswer.edit(input, by=by))

    async def ask(self, request: ApprovalRequest, limit: float | None = None) -> ApprovalAnswer:
        """Put ``request`` on the desk and wait for its answer, at most ``limit`` seconds
        (TimeoutError); a cancelled wait (Stop) withdraws it."""
        answer: asyncio.Future[ApprovalAnswer] = asyncio.get_running_loop().create_future()
        self._waiting[request.request_id] = _Waiting(request, answer)
        self._tell(request, "asked")
        how = "withdrawn"
        try:
            result = await asyncio.wait_for(answer, limit)
            how = "answered"
            return result
        except TimeoutError:
            how = "timed out"
            raise
        finally:
            self._waiting.pop(request.request_id, None)
            self._closed[request.request_id] = (request, how)
            self._tell(request, how)

    def _tell(self, request: ApprovalRequest, what: str) -> None:
        for watcher in list(self._watchers):
            try:
                watcher(request, what)
            except Exception:  # a broken view must not hold up the run
                continue

    def _id(self, request_id: str | None, action: str) -> str:
        if request_id is not None:
            return request_id
        if not self.pending:
            raise RunError(
                f"nothing to {action}: no tool call is waiting for approval (run.approvals."
                "pending is empty); a request appears when a policy asks"
            )
        return self.pending[0].request_id

    def _not_waiting(self, request_id: str, answered: _Waiting | None) -> str:
        waiting = ", ".join(r.request_id for r in self.pending) or "none"
        if answered is not None:  # answered; the call has not taken it up yet
            return (
                f"approval request {request_id!r} ({answered.request.tool}) was answered and "
                "no longer waits; await run.approvals.requested() for the next one. The "
                f"requests waiting now: {waiting}"
            )
        closed = self._closed.get(request_id)
        if closed is None:
            return (
                f"no approval request {request_id!r} in this run; the requests waiting now: "
                f"{waiting}"
            )
        request, how = closed
        return (
            f"approval request {request_id!r} ({request.tool}) is no longer waiting: it was "
            f"{how}, and the run has moved on. The requests waiting now: {waiting}"
        )

    def __repr__(self) -> str:
        return f"<ApprovalDesk: {len(self._waiting)} waiting, {len(self._closed)} closed>"


@dataclass(frozen=True, slots=True)
class Resolution:
    """What becomes of a call that waited: it runs with ``input`` (edited when ``edited``),
    or it is denied with ``message``, which the model reads."""

    input: Mapping[str, Any]
    message: str | None = None
    edited: bool = False

    @property
    def denied(self) -> bool:
        return self.message is not None


class Approvals:
    """One run's approvals: asks the desk, the confirmer or nobody, bounds the wait by the
    timeout and the run's deadline, and records every question and answer. ``clock`` is the
    run's: it times each wait, so an answer given past the limit is late even when the
    confirmer blocked the event loop until it came."""

    def __init__(
        self,
        *,
        emit: Callable[[Event], None],
        confirm: ConfirmerLike | None,
        run_id: str,
        time_left: Callable[[], float | None],
        desk: ApprovalDesk | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.desk = desk or ApprovalDesk()
        self.confirm = confirm
        self._emit, self._run_id, self._time_left = emit, run_id, time_left
        self._clock = clock
        self._ids = itertools.count(1)

    def who(self) -> Asked:
        if self.desk.attended:
            return "desk"
        return "confirmer" if self.confirm is not None else "nobody"

    async def decide(
        self,
        ask: Ask,
        tool: str,
        params: Mapping[str, Any],
        *,
        tool_use_id: str | None,
        check: Callable[[Mapping[str, Any]], str | None],
    ) -> Resolution:
        """Wait for an answer to the call ``ask`` holds; ``check`` returns the tool's schema
        problem with an edited input, or None. A Stop (cancellation) is recorded, then
        raised on: the call is not run."""
        problem: str | None = None
        refused_edits = 0
        current: Mapping[str, Any] = params
        while True:
            asked = self.who()
            request = ApprovalRequest(
                operation=f"tool:{tool}",
                estimated_tokens=0,
                threshold=0,
                description=ask.reason,
                run_id=self._run_id,
                request_id=f"approval-{next(self._ids)}",
                tool=tool,
                input=dict(current),
                reason=ask.reason,
                policies=ask.policies,
                tool_use_id=tool_use_id,
                timeout_s=ask.timeout_s,
                problem=problem,
            )
            self._emit(
                ApprovalRequestedEvent(
                    request_id=request.request_id,
                    tool=tool,
                    tool_use_id=tool_use_id,
                    input=request.input,
                    reason=request.reason,
                    policies=list(request.policies),
                    asked=asked,
                    timeout_s=request.timeout_s,
                    problem=problem,
                )
            )
            started = self._clock()
            answer, by = await self._answer(request, asked, started)
            waited = self._clock() - started
            if answer.decision == "edit":
                assert answer.input is not None
                problem = check(answer.input)
                self._answered(request, answer, by, waited, problem=problem)
                if problem is None:
                    return Resolution(dict(answer.input), edited=True)
                refused_edits += 1
                if asked == "confirmer" and refused_edits >= MAX_CONFIRMER_EDITS:
                    return self._deny_unanswered(
                        request,
                        asked,
                        "confirmer",
                        f"the confirmer's edits of this call failed the tool's schema "
                        f"{refused_edits} times ({problem})",
                    )
                current = answer.input
                continue
            self._answered(request, answer, by, waited)
            if answer.decision == "approve":  # what the request showed: the edit, if one
                return Resolution(dict(current), edited=current is not params)
            return Resolution(current, _denied(tool, by, answer.reason, request))

    async def _answer(
        self, request: ApprovalRequest, asked: Asked, started: float
    ) -> tuple[ApprovalAnswer, str]:
        """The answer and who gave it: a person, or what ended the wait."""
        if asked == "nobody":
            return ApprovalAnswer.deny(), "nobody"
        limit, ends = self._limit(request.timeout_s)
        if limit is not None and limit <= 0:
            return ApprovalAnswer.deny(), ends
        try:
            if asked == "desk":
                answer = await self.desk.ask(request, limit)
                return answer, answer.by or "code"
            reply = await asyncio.wait_for(self._confirmer(request), limit)
            if limit is not None and self._clock() - started > limit:
                return ApprovalAnswer.deny(), ends  # a blocking confirmer answered too late
            return reply, "confirmer"
        except TimeoutError:
            return ApprovalAnswer.deny(), ends
        except asyncio.CancelledError:
            self._answered(
                request,
                ApprovalAnswer.deny("the run was stopped while the call waited"),
                "stop",
                self._clock() - started,
            )
            raise

    async def _confirmer(self, request: ApprovalRequest) -> ApprovalAnswer:
        assert self.confirm is not None
        try:
            reply = self.confirm(request)
            if inspect.isawaitable(reply):
                reply = await reply
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a broken confirmer denies: never run unasked
            return ApprovalAnswer.deny(f"the confirmer failed ({type(exc).__name__}: {exc})")
        if isinstance(reply, ApprovalAnswer):
            return reply
        if reply is True:
            return ApprovalAnswer.approve()
        if reply is False or reply is None:
            return ApprovalAnswer.deny()
        return ApprovalAnswer.deny(
            f"the confirmer answered {type(reply).__name__}, not True, False or an ApprovalAnswer"
        )

    def _limit(self, timeout_s: float | None) -> tuple[float | None, str]:
        """How long the wait may last, and what ends it then: the timeout or the deadline."""
        left = self._time_left()
        if left is not None and (timeout_s is None or left < timeout_s):
            return max(left, 0.0), "deadline"
        return timeout_s, "timeout"

    def _answered(
        self,
        request: ApprovalRequest,
        answer: ApprovalAnswer,
        by: str,
        waited: float,
        *,
        problem: str | None = None,
    ) -> None:
        self._emit(
            ApprovalAnsweredEvent(
                request_id=request.request_id,
                tool=request.tool,
                tool_use_id=request.tool_use_id,
                decision=answer.decision,
                by=by,
                waited_s=waited,
                reason=answer.reason,
                input=None if answer.input is None else dict(answer.input),
                problem=problem,
            )
        )

    def _deny_unanswered(
        self, request: ApprovalRequest, asked: Asked, by: str, why: str
    ) -> Resolution:
        self._answered(request, ApprovalAnswer.deny(why), by, 0.0)
        return Resolution(request.input, _denied(request.tool, by, why, request))


def _denied(tool: str, by: str, reason: str | None, request: ApprovalRequest) -> str:
    """What the model reads when the call it made was not approved: why, and what to do."""
    instead = (
        f"Do not call {tool} again for this; carry on with the rest of your task without it, "
        "and say in your final summary that this step needs a person's approval."
    )
    if by == "nobody":
        return (
            f"Not run: {tool} needs a person's approval ({request.reason}), and nobody is "
            f"here to give it in this run. {instead}"
        )
    if by == "timeout":
        return (
            f"Not run: {tool} needs a person's approval, and nobody answered within "
            f"{request.timeout_s:g} s. {instead}"
        )
    if by == "deadline":
        return (
            f"Not run: {tool} needs a person's approval, and the run's time limit ran out "
            f"while it waited. {instead}"
        )
    if reason:
        return (
            f"Not run: a person denied this {tool} call. Their reason: {reason.rstrip('.')}. "
            "Follow it; do not repeat the same call."
        )
    return f"Not run: a person denied this {tool} call. {instead}"


def denial_order(text: str, policy: str) -> Directive:
    """A call that was not approved, as an order from ``approval:<policy>``: what the
    person's reason asks for (wrap up, narrow the scope), else to carry on without it."""
    return Directive(text, f"approval:{policy}", action_of_text(text) or "continue")


def edited_note(params: Mapping[str, Any]) -> str:
    """The line the model reads before the result of a call a person edited: what ran."""
    shown = clip(json.dumps(dict(params), ensure_ascii=False, default=str))
    return f"A person edited this call's input before it ran; it ran as {shown}.\n\n"


def refused_edit(params: Mapping[str, Any], problem: str) -> str:
    """What the model reads of a call a person edited into an input the tool refuses: it
    did not run, and the model is not to run it as first made either."""
    shown = clip(json.dumps(dict(params), ensure_ascii=False, default=str))
    return (
        f"Not run: a person edited this call into {shown}, which the tool refuses "
        f"({problem.rstrip('.')}). Do not repeat the call as you first made it; carry on "
        "with the rest of your task, and say in your final summary that this step was not "
        "done."
    )
