"""A tool is a name, a JSON schema, a short description and a handler.

Handlers receive a :class:`ToolContext`, the tool's view of the run (its workspace, phase
workflow and self-regulation), and return text or a :class:`ToolOutput`. Raising
:class:`~gr_notebook.errors.ToolError` gives the model an ``is_error`` result with the
message. What a call asks of the run beyond its result (end the job, prune the
conversation) are :mod:`effects <gr_notebook.tools.effects>` on the output, and what a tool
*is* (it reads a file, it ends the job) it declares on :class:`Tool`: the loop never looks
at a tool's name.

A tool also says what it does to the world outside the run (:data:`Effect`): a resume
restarts a killed run and must know which calls it may run again (see
:mod:`gr_notebook.engine.side_effects`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, get_args

from gr_notebook.errors import ConfigError
from gr_notebook.models.base import ToolSpec
from gr_notebook.workflow.workspace import TOOL_DOCS_DIR

if TYPE_CHECKING:
    from gr_notebook.guardrails.regulation import SelfRegulation
    from gr_notebook.guidance import Directive
    from gr_notebook.tools.effects import ToolEffect
    from gr_notebook.workflow.phases import PhaseController
    from gr_notebook.workflow.workspace import Workspace

__all__ = ["EFFECTS", "Effect", "Handler", "Probe", "Tool", "ToolContext", "ToolOutput"]

Effect: TypeAlias = Literal["read", "idempotent", "once"]
"""What a call does to the world: ``read``, nothing (it only reads); ``idempotent``, the
same again when run again with the same input (a write of a whole file, a PUT, a payment
sent with its idempotency key); ``once``, something that must not happen twice (an email
sent, a ticket opened). A tool that does not say is ``once``. (Not to be confused with a
:data:`~gr_notebook.tools.effects.ToolEffect`: what one call asks of the run.)"""
EFFECTS: Final[tuple[Effect, ...]] = get_args(Effect)


@dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    is_error: bool = False
    directive: Directive | None = None
    """The order the result gives the model, when it gives one (a resource
    recommendation, an assessment's guidance): recorded as guidance."""
    effects: tuple[ToolEffect, ...] = ()
    """What the call asks of the run beyond its result (ignored when ``is_error``)."""


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a handler may touch: the run's workspace and its phase workflow."""

    workspace: Workspace
    phases: PhaseController
    clock: Callable[[], float]
    turn: int = 0
    source: str = "model"
    regulation: SelfRegulation | None = None
    """The run's self-regulation state, when the agent has it on."""
    key: str = ""
    """The call's idempotency key: the same for this call across resumes, retries and forks
    from before it, so a handler can pass it to a service that refuses a repeat (a payment
    or messaging API's ``Idempotency-Key``). Empty where no call is made (a probe's own
    context has the key of the call it checks)."""


Handler: TypeAlias = Callable[
    [ToolContext, Mapping[str, Any]], "str | ToolOutput | Awaitable[str | ToolOutput]"
]
Probe: TypeAlias = Callable[[ToolContext, Mapping[str, Any]], "bool | Awaitable[bool]"]
"""Whether a call's effect happened (True) or not (False), asked on resume about a ``once``
call the run began and never saw end; ``ctx.key`` is that call's idempotency key. A probe
that raises leaves the outcome unknown."""


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    """One or two lines for Layer 3; the full text goes in ``docs``."""
    input_schema: Mapping[str, Any]
    handler: Handler = field(repr=False)
    docs: str = ""
    reads: str | None = None
    """The argument that names a file the tool reads: a successful call is checked for a
    redundant read of an unchanged file (seed 003)."""
    ends_job: bool = False
    """Calling it asks to end the job: the completion checker judges the call before it
    runs, and a refused call does not run."""
    effect: Effect = "once"
    """What a call does outside the run (:data:`Effect`): a resume runs a cut ``read`` or
    ``idempotent`` call again, and never runs a cut ``once`` call again unasked."""
    probe: Probe | None = field(default=None, repr=False)
    """Checks whether a cut ``once`` call took effect, so a resume need not guess."""

    def __post_init__(self) -> None:
        if self.effect not in EFFECTS:
            raise ConfigError(
                f"tool {self.name!r}: effect takes 'read', 'idempotent' or 'once', got "
                f"{self.effect!r}"
            )

    def spec(self) -> ToolSpec:
        text = self.description.rstrip()
        separator = " " if text.endswith((".", "!", "?")) else ". "
        pointer = f"{separator}Full docs: {TOOL_DOCS_DIR}/{self.name}.md"
        return ToolSpec(self.name, text + pointer, self.input_schema)

    def docs_markdown(self) -> str:
        params = self.input_schema.get("properties", {})
        required = set(self.input_schema.get("required", ()))
        lines = [f"# {self.name}", "", self.description, ""]
        if self.docs.strip():
            lines += [self.docs.strip(), ""]
        lines.append("## Arguments")
        for key, sub in params.items():
            need = "required" if key in required else "optional"
            lines.append(
                f"- `{key}` ({sub.get('type', 'any')}, {need}): {sub.get('description', '')}"
            )
        if not params:
            lines.append("- none")
        return "\n".join(lines) + "\n"


def object_schema(required: Sequence[str] = (), **properties: Mapping[str, Any]) -> dict[str, Any]:
    """The usual tool schema: an object with these properties and nothing else."""
    return {
        "type": "object",
        "properties": dict(properties),
        "required": list(required),
        "additionalProperties": False,
    }
