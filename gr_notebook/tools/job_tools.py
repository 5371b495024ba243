"""job_complete: the model's way to end the job, with its status recorded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gr_notebook.errors import ToolError, WorkspaceError
from gr_notebook.tools.base import Tool, ToolContext, ToolOutput, object_schema
from gr_notebook.tools.effects import CompleteJob
from gr_notebook.workflow.phases import JobResult

__all__ = ["JOB_TOOLS"]


def _job_complete(ctx: ToolContext, params: Mapping[str, Any]) -> ToolOutput:
    deliverables = tuple(params.get("deliverables", ()))
    missing = []
    for name in deliverables:
        try:
            if not ctx.workspace.resolve(name).exists():
                missing.append(name)
        except WorkspaceError as exc:
            raise ToolError(f"deliverable {name!r}: {exc}") from None
    result = JobResult(
        summary=params["summary"],
        deliverables=deliverables,
        confidence=params["confidence"],
        notes=params.get("notes"),
        source=ctx.source,
    )
    ctx.phases.complete_job(result)
    warning = f" Missing deliverables: {', '.join(missing)}." if missing else ""
    text = f"Job complete (confidence {params['confidence']:.2f}).{warning}"
    return ToolOutput(text, effects=(CompleteJob(result),))


JOB_TOOLS = (
    Tool(
        "job_complete",
        "Finish the whole job, with a summary, deliverables and your confidence.",
        object_schema(
            ["summary", "confidence"],
            summary={"type": "string", "minLength": 1, "description": "What was achieved."},
            deliverables={
                "type": "array",
                "items": {"type": "string", "minLength": 1},
                "description": "Workspace paths of the deliverables.",
            },
            confidence={
                "type": "number",
                "minimum": 0,
                "maximum": 1,
                "description": "How sure you are the job is done well, 0 to 1.",
            },
            notes={"type": "string", "description": "Anything a person should review."},
        ),
        _job_complete,
        docs="Ends the run. The job's status, summary and confidence are stored. If the job "
        "cannot be finished, call it with a low confidence and detailed notes.",
        ends_job=True,
        effect="idempotent",
    ),
)
