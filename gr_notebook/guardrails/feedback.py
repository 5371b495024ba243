"""Feedback providers (seed 002): soft guidance delivered inside the triggering tool_result.

A :class:`FeedbackProviderConfig` pairs a provider with a :class:`FeedbackTrigger`. After
each tool call the run decides, in O(1) per configuration, which triggers fire; every
provider that fires and agrees (``should_run``) produces a :class:`Feedback`, and all the
blocks go back to the model together.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias, runtime_checkable
from xml.sax.saxutils import escape

from gr_notebook.errors import ConfigError
from gr_notebook.eventdata import fields_json
from gr_notebook.events import FeedbackEvent, GuidanceRecord
from gr_notebook.validation import seconds, whole_number

if TYPE_CHECKING:
    from gr_notebook.guardrails.budget import BudgetUsage, Deadline
    from gr_notebook.workflow.plan import Plan
    from gr_notebook.workflow.todos import TodoList
    from gr_notebook.workflow.workspace import Workspace

__all__ = [
    "SEVERITIES",
    "Feedback",
    "FeedbackBook",
    "FeedbackContext",
    "FeedbackProvider",
    "FeedbackProviderConfig",
    "FeedbackTrigger",
    "FileCreatedTrigger",
    "Observation",
    "Severity",
    "ToolCallRecord",
    "render_feedback",
]

Severity: TypeAlias = Literal["info", "caution", "warning"]
SEVERITIES: tuple[Severity, ...] = ("info", "caution", "warning")
_QUOTES = {"'": "&apos;", '"': "&quot;"}


@dataclass(frozen=True, slots=True)
class Observation:
    category: str
    description: str
    evidence: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Feedback:
    """One block of guidance. The run fills in the provenance fields a provider leaves out."""

    provider_name: str = ""
    summary: str
    observations: tuple[Observation, ...] = ()
    suggestions: tuple[str, ...] = ()
    severity: Severity = "info"
    timestamp: datetime | None = None
    call_index: int = 0
    """Tool calls made in the run when this was produced."""
    prompt_name: str = ""

    def __post_init__(self) -> None:
        if self.severity not in SEVERITIES:
            raise ConfigError(
                f"severity must be one of {', '.join(SEVERITIES)}, got {self.severity!r}"
            )
        suggestions: object = self.suggestions
        observations: object = self.observations
        if isinstance(suggestions, str) or isinstance(observations, Observation):
            raise ConfigError("observations and suggestions are tuples; wrap a single one: (x,)")
        object.__setattr__(self, "observations", tuple(self.observations))
        object.__setattr__(self, "suggestions", tuple(self.suggestions))

    def event(
        self, tool: str, config: int | None, *, directive: GuidanceRecord | None = None
    ) -> FeedbackEvent:
        """The ``feedback`` event: the block's fields, its text as the model read it, the
        tool call that triggered it, the provider configuration's index (None for the
        system's own feedback) and, when known, the block as an order."""
        return FeedbackEvent(
            **self.to_json(), text=self.render(), tool=tool, config=config, directive=directive
        )

    def render(self) -> str:
        """The block the model reads, with XML special characters escaped."""
        lines = [f"<feedback provider='{escape(self.provider_name, _QUOTES)}'>"]
        lines.append(escape(self.summary))
        if self.observations:
            lines.append("")
            lines += [f"• {escape(o.category)}: {escape(o.description)}" for o in self.observations]
        if self.suggestions:
            lines.append("")
            lines += [f"→ {escape(s)}" for s in self.suggestions]
        lines.append("</feedback>")
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        """The block as its ``feedback`` event stores it (the event adds where it came from)."""
        return {
            "provider": self.provider_name,
            "summary": self.summary,
            "severity": self.severity,
            "observations": [fields_json(o) for o in self.observations],
            "suggestions": list(self.suggestions),
            "call_index": self.call_index,
            "timestamp": self.timestamp.timestamp() if self.timestamp else None,
            "prompt_name": self.prompt_name,
        }


def render_feedback(blocks: Sequence[Feedback]) -> str:
    """Several blocks as the model receives them: separated by a blank line."""
    return "\n\n".join(b.render() for b in blocks)


@dataclass(frozen=True, slots=True)
class FileCreatedTrigger:
    """Fires once, the first time the file exists after a tool call."""

    filename: str

    def __post_init__(self) -> None:
        name = self.filename.replace("\\", "/") if isinstance(self.filename, str) else None
        if not name or not name.strip("/ "):
            raise ConfigError("FileCreatedTrigger needs a filename, e.g. 'AGENTS.md'")
        if ".." in name.split("/"):
            raise ConfigError(f"{self.filename!r} leads outside the workspace; name a file in it")


@dataclass(frozen=True, slots=True)
class FeedbackTrigger:
    """When a provider runs: conditions OR'd, each counted from this configuration's own
    last feedback (or from the start of the run)."""

    every_n_calls: int | None = None
    every_n_seconds: float | None = None
    on_file_created: FileCreatedTrigger | None = None

    def __post_init__(self) -> None:
        n, s = self.every_n_calls, self.every_n_seconds
        if n is not None:
            whole_number(n, "every_n_calls")
        if s is not None:
            seconds(s, "every_n_seconds", minimum=0, above=True)
        f = self.on_file_created
        if f is not None and not isinstance(f, FileCreatedTrigger):
            raise ConfigError(
                "on_file_created takes gr.FileCreatedTrigger('NAME'), not " + type(f).__name__
            )
        if n is None and s is None and f is None:
            raise ConfigError(
                "a FeedbackTrigger needs at least one condition: every_n_calls=, "
                "every_n_seconds= or on_file_created="
            )


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """A tool call as feedback providers see it."""

    call_index: int
    tool: str
    params: Mapping[str, Any]
    is_error: bool
    turn: int
    time: float

    def to_json(self) -> dict[str, Any]:
        return fields_json(self)


@runtime_checkable
class FeedbackProvider(Protocol):
    @property
    def name(self) -> str: ...

    def should_run(self, *, context: FeedbackContext) -> bool:
        """Filtering beyond the trigger; return False to stay quiet this time."""
        ...

    def provide(self, *, context: FeedbackContext) -> Feedback | None: ...


@dataclass(frozen=True, slots=True)
class FeedbackProviderConfig:
    provider: FeedbackProvider
    trigger: FeedbackTrigger

    def __post_init__(self) -> None:
        if not isinstance(self.trigger, FeedbackTrigger):
            raise ConfigError(
                "trigger takes gr.FeedbackTrigger(every_n_calls=..., every_n_seconds=..., "
                "on_file_created=...)"
            )
        missing = [m for m in ("name", "should_run", "provide") if not hasattr(self.provider, m)]
        if missing:
            raise ConfigError(
                f"{type(self.provider).__name__} is not a feedback provider: it lacks "
                f"{', '.join(missing)} (see gr.guardrails.FeedbackProvider)"
            )


class FeedbackBook(Protocol):
    """The run's feedback record that a :class:`FeedbackContext` reads: the
    :class:`~gr_notebook.guardrails.triggers.FeedbackRunner`, which builds the contexts and so
    sits above this module."""

    @property
    def prompt_name(self) -> str: ...
    @property
    def calls(self) -> int: ...
    @property
    def last(self) -> Feedback | None: ...
    @property
    def last_by_provider(self) -> Mapping[str, Feedback]: ...
    @property
    def recent(self) -> Iterable[ToolCallRecord]: ...


class FeedbackContext:
    """What a provider may consult. Every property and method costs O(1), or O(n) for
    ``recent_tool_calls(n)`` over a bounded window, however long the run."""

    __slots__ = ("_book", "_plan", "budget", "now", "todos", "workspace")

    def __init__(
        self,
        book: FeedbackBook,
        *,
        workspace: Workspace,
        todos: TodoList,
        plan: Callable[[], Plan | None],
        budget: BudgetUsage,
        now: float,
    ) -> None:
        self._book, self._plan = book, plan
        self.workspace = workspace
        self.todos = todos
        self.budget = budget
        self.now = now

    @property
    def plan(self) -> Plan | None:
        """The plan file, parsed only when asked for (and cached until the file changes)."""
        return self._plan()

    @property
    def deadline(self) -> Deadline | None:
        return self.budget.deadline

    @property
    def prompt_name(self) -> str:
        return self._book.prompt_name

    @property
    def tool_call_count(self) -> int:
        return self._book.calls

    @property
    def last_feedback(self) -> Feedback | None:
        return self._book.last

    def last_feedback_for_provider(self, name: str) -> Feedback | None:
        return self._book.last_by_provider.get(name)

    def tool_calls_since_last_feedback(self) -> int:
        last = self._book.last
        return self._book.calls - (last.call_index if last else 0)

    def tool_calls_since_last_feedback_for_provider(self, name: str) -> int:
        last = self._book.last_by_provider.get(name)
        return self._book.calls - (last.call_index if last else 0)

    def recent_tool_calls(self, n: int) -> tuple[ToolCallRecord, ...]:
        """The last ``n`` calls, oldest first; at most the bounded window is kept."""
        if n <= 0:
            return ()
        recent = self._book.recent
        return tuple(recent)[-n:]
