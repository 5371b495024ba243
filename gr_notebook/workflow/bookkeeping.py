"""The loop's own files in the workspace: the plan, the todo list, the journal, the archive
of finished lists and the workspace summary.

The phase workflow has the model write and rewrite them at every phase; they record the job
rather than do it. A person who approves the agent's writes approves the work, not these
(:class:`~gr_notebook.guardrails.approval.ApprovalPolicy` leaves them out unless asked).
"""

from __future__ import annotations

import posixpath

from gr_notebook.workflow.journal import EXPERIENCES_FILE, NOTES_FILE
from gr_notebook.workflow.summary import SUMMARY_FILE
from gr_notebook.workflow.todos import ARCHIVE_DIR, TODOS_FILE

__all__ = ["is_bookkeeping"]

_FILES = frozenset({TODOS_FILE, NOTES_FILE, EXPERIENCES_FILE, SUMMARY_FILE})


def is_bookkeeping(name: str, plan_file: str) -> bool:
    """Whether ``name``, a workspace-relative POSIX path as
    :func:`~gr_notebook.guardrails.paths.canonical_path` gives it, is one of the loop's own
    files: ``plan_file``, ``todos.json``, ``notes.md``, ``experiences.md``,
    ``workspace_summary.md``, or anything under ``archive/``."""
    return (
        name in _FILES
        or name == posixpath.normpath(plan_file)
        or name.split("/", 1)[0] == ARCHIVE_DIR
    )
