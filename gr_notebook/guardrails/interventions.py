"""Interventions: step in when an agent is stuck, never while it is still getting somewhere.

A *step* is one tool call. The engine watches every step (resets, edits, progress) and,
every ``check_every`` steps, decides whether to intervene. It intervenes only when every
safeguard allows it: enough steps have passed, no reset happened recently, the agent is
not busy editing, and it has gone ``consecutive_stuck_tolerance`` checks without progress.
Interventions escalate while the agent stays stuck: re-plan, rewind, stop.

The engine is pure (no clock, no I/O besides logging), so the loop drives it live and
:func:`gr_notebook.replay_guardrails` drives it again over a recorded run. Its tracker is
plain data (:meth:`InterventionEngine.to_json`), part of the run state's snapshot.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, Literal, TypeAlias

from gr_notebook.errors import ConfigError
from gr_notebook.eventdata import clip_json, fields_json
from gr_notebook.events import InterventionEvent, InterventionSkippedEvent
from gr_notebook.validation import whole_number

__all__ = [
    "InterventionCheck",
    "InterventionConfig",
    "InterventionEngine",
    "ProgressSignal",
    "ProgressTracker",
    "SkipReason",
    "ToolStep",
    "pass_count_and_todos",
    "pass_count_todos_and_first_reads",
]

logger = logging.getLogger("gr_notebook")

SkipReason: TypeAlias = Literal["min_steps", "grace_period", "actively_implementing", "not_stuck"]
Action: TypeAlias = Literal["replan", "rewind", "stop"]
ACTIONS: tuple[Action, ...] = ("replan", "rewind", "stop")
SESSION_ACTIONS = {"rewind": "second_strategy_check"}
"""A tier a session of another harness meets otherwise than gr's loop, as it is recorded:
gr's loop rewinds its todo list at tier 2, a session (no todo list) checks its strategy
again."""
MAX_TIER = len(ACTIONS)
RECENT_TOOLS = 10

_PASSED = re.compile(r"(\d+)\s*passed|(\d+)p_\d+f")


@dataclass(frozen=True, slots=True)
class ToolStep:
    """One tool call as the engine sees it: what ran, and what came back."""

    number: int
    tool: str
    input: Mapping[str, Any]
    result: str
    is_error: bool
    novel: bool = False
    """The run's first successful call of this tool with this input (as events record
    it): a first look at a file, say, rather than the fifth."""


ProgressSignal: TypeAlias = Callable[[ToolStep], "float | bool | None"]
"""Reads progress off a step: ``True`` is progress outright, a number is a score that
counts as progress when it beats the best score so far, ``None`` says nothing."""


def pass_count_and_todos(step: ToolStep) -> float | bool | None:
    """The default signal: the pass count a ``run_tests`` result reports, and every
    completed todo."""
    if step.is_error:
        return None
    if step.tool == "todo_complete":
        return True
    if step.tool == "run_tests":
        match = _PASSED.search(step.result)
        if match:
            return float(match.group(1) or match.group(2))
    return None


def pass_count_todos_and_first_reads(step: ToolStep) -> float | bool | None:
    """:func:`pass_count_and_todos`, and the first read of each file, for jobs where reading
    is the work (an audit, a review): taking in a file not seen before is gathering
    information, re-reading the same ones is going round in circles."""
    signal = pass_count_and_todos(step)
    if signal is None and step.novel and step.tool == "read_file":
        return True
    return signal


@dataclass(frozen=True, slots=True)
class InterventionConfig:
    """The safeguards' numbers, counted in tool calls (a *step* is one tool call). The
    defaults are the specification's; the two presets are its two alternative tunings."""

    check_every: int = 5
    min_steps_before_intervention: int = 10
    grace_period_after_reset: int = 15
    """Steps after a reset that are protected, the last one included (15/15 is inside)."""
    active_edit_threshold: int = 3
    """Edits since the previous check that mean the agent is actively implementing."""
    consecutive_stuck_tolerance: int = 3
    """Checks in a row without progress before the agent counts as stuck."""
    reset_tools: tuple[str, ...] = ("todo_rewind", "start_over")
    edit_tools: tuple[str, ...] = ("write_file", "edit_file", "apply_code_edit")
    progress_signal: ProgressSignal = field(default=pass_count_and_todos, compare=False)

    def __post_init__(self) -> None:
        for name in ("check_every", "active_edit_threshold", "consecutive_stuck_tolerance"):
            whole_number(getattr(self, name), name)
        for name in ("min_steps_before_intervention", "grace_period_after_reset"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"{name} must be a whole number >= 0, got {value!r}")
        for name in ("reset_tools", "edit_tools"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) for v in value):
                raise ConfigError(
                    f"{name} takes a tuple of tool names, e.g. {name}=('start_over',), "
                    f"got {value!r}"
                )
            object.__setattr__(self, name, tuple(value))
        if not callable(self.progress_signal):
            raise ConfigError(
                "progress_signal takes a function step -> float | bool | None, got "
                f"{type(self.progress_signal).__name__}"
            )

    @classmethod
    def default(cls) -> InterventionConfig:
        return cls()

    @classmethod
    def more_protective(cls) -> InterventionConfig:
        """More time to implement after a reset: 20 tool calls of grace, and 2 edits
        between checks already count as busy."""
        return cls(grace_period_after_reset=20, active_edit_threshold=2)

    @classmethod
    def less_protective(cls) -> InterventionConfig:
        """Faster intervention: 10 tool calls of grace, and 5 edits between checks to count
        as busy."""
        return cls(grace_period_after_reset=10, active_edit_threshold=5)

    def with_(self, **changes: Any) -> InterventionConfig:
        """A copy with some numbers changed; an unknown name is refused."""
        known = {f.name for f in fields(self)}
        unknown = sorted(set(changes) - known)
        if unknown:
            raise ConfigError(
                f"InterventionConfig has no field {unknown[0]!r}; the fields are: "
                + ", ".join(sorted(known))
            )
        return replace(self, **changes)

    def describe(self) -> dict[str, Any]:
        """The numbers and tool names, JSON-ready (the signal by name)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "progress_signal":
                value = getattr(value, "__name__", type(value).__name__)
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


@dataclass(frozen=True, slots=True)
class InterventionCheck:
    """What one check decided, and the tracker's figures it decided on."""

    step: int
    fired: bool
    tier: int
    """The tier that fired (1-3), or 0 for a skipped check."""
    skip_reason: SkipReason | None
    stuck_counter: int
    steps_since_reset: int | None
    steps_since_progress: int
    recent_edits: int
    recent_tools: tuple[str, ...] = ()
    threshold: int | None = None
    """The setting the deciding safeguard compared against: ``min_steps_before_intervention``,
    ``grace_period_after_reset``, ``active_edit_threshold`` or, for a check that fired or
    found the agent not stuck, ``consecutive_stuck_tolerance``."""

    @property
    def action(self) -> Action | None:
        return ACTIONS[self.tier - 1] if self.fired else None

    def event(self, *, phased: bool = True) -> InterventionEvent | InterventionSkippedEvent:
        """The ``intervention`` event when it fired, else ``intervention_skipped``. Without
        gr's phased loop (``phased=False``: a session of another harness) tier 2 is recorded
        as what such a session does, a second strategy check, since it has no todo list to
        rewind."""
        kind = InterventionEvent if self.fired else InterventionSkippedEvent
        action: str | None = self.action
        if not phased and action is not None:
            action = SESSION_ACTIONS.get(action, action)
        return kind(**fields_json(self), action=action)


@dataclass
class ProgressTracker:
    """The specification's ``progress_tracker``, plus the bookkeeping escalation needs."""

    last_start_over_step: int | None = None
    """``None`` until the first reset: a run's start is covered by ``min_steps``."""
    code_edit_count: int = 0
    """Edits since the previous check."""
    recent_tools: deque[str] = field(default_factory=lambda: deque(maxlen=RECENT_TOOLS))
    stuck_counter: int = 0
    last_progress_step: int = 0
    step: int = 0
    tier: int = 0
    """The highest tier fired since the last progress."""
    best_score: float = 0.0
    fresh_window: bool = False
    """Progress, or a reset, since the previous check: the next check is not stuck."""
    seen: dict[int, None] = field(default_factory=dict)
    """Digests of the successful calls so far, tool and input, in the order first seen: what
    makes a step ``novel`` (stable across processes, so a restored run keeps them)."""

    def to_json(self) -> dict[str, Any]:
        return {
            **fields_json(self),
            "recent_tools": list(self.recent_tools),
            "seen": list(self.seen),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProgressTracker:
        last = data["last_start_over_step"]
        return cls(
            last_start_over_step=None if last is None else int(last),
            code_edit_count=int(data["code_edit_count"]),
            recent_tools=deque(map(str, data["recent_tools"]), maxlen=RECENT_TOOLS),
            stuck_counter=int(data["stuck_counter"]),
            last_progress_step=int(data["last_progress_step"]),
            step=int(data["step"]),
            tier=int(data["tier"]),
            best_score=float(data["best_score"]),
            fresh_window=bool(data["fresh_window"]),
            seen=dict.fromkeys(int(k) for k in data["seen"]),
        )


class _Prefixed(logging.LoggerAdapter):  # type: ignore[type-arg]
    def process(self, msg: Any, kwargs: Any) -> tuple[Any, Any]:
        return f"{(self.extra or {})['prefix']}{msg}", kwargs


class InterventionEngine:
    """The combined safeguard logic, run at every ``check_every``-th tool call."""

    def __init__(self, config: InterventionConfig | None = None, *, log_prefix: str = "") -> None:
        """``log_prefix`` begins each line the engine logs (a shadow's are not acted on)."""
        self.config = config or InterventionConfig()
        self.tracker = ProgressTracker()
        self._log: logging.Logger | logging.LoggerAdapter[logging.Logger] = (
            _Prefixed(logger, {"prefix": log_prefix}) if log_prefix else logger
        )

    @property
    def protected(self) -> bool:
        """True while the agent is in a grace period, or made ``active_edit_threshold`` edits
        among its last 10 tool calls."""
        t, c = self.tracker, self.config
        since = self._since_reset()
        edits = sum(tool in c.edit_tools for tool in t.recent_tools)
        return (since is not None and since <= c.grace_period_after_reset) or (
            edits >= c.active_edit_threshold
        )

    @property
    def stopped(self) -> bool:
        """Tier 3 fired: the run is over as far as the engine is concerned."""
        return self.tracker.tier >= MAX_TIER

    def observe(
        self, tool: str, params: Mapping[str, Any], result: str, *, is_error: bool
    ) -> InterventionCheck | None:
        """Record one step; at a check step, return what the check decided."""
        t, c = self.tracker, self.config
        t.step += 1
        t.recent_tools.append(tool)
        novel = False
        if not is_error:
            if tool in c.reset_tools:
                self.note_reset()
            if tool in c.edit_tools:
                t.code_edit_count += 1
            # Keyed as events record the input, so that a replay sees the same novelty.
            key = _digest(tool, json.dumps(clip_json(params), sort_keys=True, default=str))
            novel = key not in t.seen
            if novel:
                t.seen[key] = None
        self._read_progress(ToolStep(t.step, tool, params, result, is_error, novel))
        if t.step % c.check_every or self.stopped:
            return None
        return self._check()

    def to_json(self) -> dict[str, Any]:
        return self.tracker.to_json()

    def note_reset(self) -> None:
        """A new strategy (start_over, a rewind): its grace period begins now."""
        t = self.tracker
        t.last_start_over_step = t.step
        t.stuck_counter = 0
        t.fresh_window = True  # the new strategy's stuck count starts at its first check
        self._log.info(
            "Grace period begins at step %d - %d steps protected",
            t.step,
            self.config.grace_period_after_reset,
        )

    def _read_progress(self, step: ToolStep) -> None:
        t = self.tracker
        try:
            signal = self.config.progress_signal(step)
        except Exception as exc:  # a user's signal must not break the run
            self._log.warning("progress_signal failed on step %d: %s", step.number, exc)
            return
        if signal is True or (
            isinstance(signal, (int, float))
            and not isinstance(signal, bool)
            and signal > t.best_score
        ):
            if not isinstance(signal, bool):
                t.best_score = float(signal)
            t.last_progress_step = step.number
            t.fresh_window = True
            t.tier = 0  # the agent recovered: escalation starts over

    def _since_reset(self) -> int | None:
        t = self.tracker
        return None if t.last_start_over_step is None else t.step - t.last_start_over_step

    def _check(self) -> InterventionCheck:
        t, c = self.tracker, self.config
        edits, t.code_edit_count = t.code_edit_count, 0
        t.stuck_counter = 0 if t.fresh_window else t.stuck_counter + 1
        t.fresh_window = False
        since = self._since_reset()
        reason: SkipReason | None = None
        threshold = c.consecutive_stuck_tolerance
        if t.step < c.min_steps_before_intervention:
            reason, threshold = "min_steps", c.min_steps_before_intervention
            self._log.info(
                "Only %d steps so far (minimum %d) - skipping intervention",
                t.step,
                c.min_steps_before_intervention,
            )
        elif since is not None and since <= c.grace_period_after_reset:
            reason, threshold = "grace_period", c.grace_period_after_reset
            self._log.info(
                "In grace period after start_over (%d/%d steps) - skipping intervention",
                since,
                c.grace_period_after_reset,
            )
        elif edits >= c.active_edit_threshold:
            reason, threshold = "actively_implementing", c.active_edit_threshold
            self._log.info(
                "Agent actively implementing (%d recent edits) - skipping intervention", edits
            )
        elif t.stuck_counter < c.consecutive_stuck_tolerance:
            reason = "not_stuck"
            self._log.info(
                "Not stuck (%d/%d checks without progress) - no intervention",
                t.stuck_counter,
                c.consecutive_stuck_tolerance,
            )
        counter = t.stuck_counter
        stalled = t.step - t.last_progress_step
        tier = 0
        if reason is None:
            tier = t.tier = t.tier + 1
            t.stuck_counter = 0  # the next tier needs as many stuck checks again
            self._log.warning(
                "No progress: %d consecutive checks, %d steps since last progress",
                counter,
                stalled,
            )
            self._log.warning("TIER %d INTERVENTION at step %d", tier, t.step)
            self._log.warning("Agent stuck for %d steps - %s", stalled, _DOING[tier - 1])
            if ACTIONS[tier - 1] == "rewind":
                self.note_reset()
        return InterventionCheck(
            step=t.step,
            fired=reason is None,
            tier=tier,
            skip_reason=reason,
            stuck_counter=counter,
            steps_since_reset=since,
            steps_since_progress=stalled,
            recent_edits=edits,
            recent_tools=tuple(t.recent_tools),
            threshold=threshold,
        )


_DOING = ("forcing strategy re-plan", "rewinding the todo list", "stopping the run")


def _digest(tool: str, encoded_input: str) -> int:
    """A call's identity, the same in every process (``hash()`` of a str is salted)."""
    data = f"{tool}\0{encoded_input}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big")


def replay_steps(
    engine: InterventionEngine, steps: Sequence[tuple[str, Mapping[str, Any], str, bool] | None]
) -> list[InterventionCheck]:
    """Drive ``engine`` over recorded steps; ``None`` marks a reset made from outside
    (a person's rewind). Stops at a tier-3 stop, as the live run would."""
    checks: list[InterventionCheck] = []
    for item in steps:
        if engine.stopped:
            break
        if item is None:
            engine.note_reset()
            continue
        tool, params, result, is_error = item
        check = engine.observe(tool, params, result, is_error=is_error)
        if check is not None:
            checks.append(check)
    return checks
