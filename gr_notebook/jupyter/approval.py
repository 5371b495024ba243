"""Approve, Deny or Edit a tool call in the notebook: the dashboard's view of a run's
:class:`~gr_notebook.guardrails.approval.ApprovalDesk`.

Each request shows the call, why it waits and its input, with Approve, Deny (and a box for
the reason the model reads) and Edit (the input as JSON, run as edited). The buttons answer
on the desk, as ``run.approvals`` does from code, so they work while a background run goes
on. A refused edit closes its prompt and the request comes back with the problem shown. An
answered (or closed) prompt folds into one line: the call and what became of it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from html import escape
from typing import Any

import ipywidgets as w

from gr_notebook.errors import GrNotebookError
from gr_notebook.eventdata import clip
from gr_notebook.guardrails.approval import ApprovalDesk, ApprovalRequest
from gr_notebook.jupyter.clicks import on_this_loop

__all__ = ["ApprovalPrompt", "ApprovalView"]

_TARGETS = ("path", "file_path", "command", "url")
_CLOSED = {
    "answered": "Answered.",
    "timed out": "No answer in time: the call was denied.",
    "withdrawn": "No longer waiting (the run stopped or its time ran out); the call did not run.",
}


def _target(request: ApprovalRequest) -> str:
    """What the call acts on, for its one line: its path or command, clipped."""
    value = next((request.input[k] for k in _TARGETS if request.input.get(k)), "")
    return clip(" ".join(str(value).split()), 60)


def _question(request: ApprovalRequest) -> str:
    limit = f" No answer within {request.timeout_s:g} s denies." if request.timeout_s else ""
    problem = (
        f"<div style='color:#c62828'>Your edit was refused: {escape(request.problem)}. "
        "Fix the input and press Run edited, or approve or deny the call as it is.</div>"
        if request.problem
        else ""
    )
    return (
        f"<div><b>Approve {escape(request.tool)}?</b> {escape(request.reason)}."
        f"{escape(limit)}</div>{problem}"
        f"<pre style='margin:2px 0;max-height:12em;overflow:auto'>"
        f"{escape(request.input_json())}</pre>"
    )


class ApprovalPrompt(w.VBox):  # type: ignore[misc]
    """One waiting call on screen; its buttons answer it on the desk."""

    def __init__(self, request: ApprovalRequest, desk: ApprovalDesk) -> None:
        self.request, self.desk = request, desk
        self.outcome = "waiting"
        self.folded = False
        self.approve_button = w.Button(description="Approve", icon="check", button_style="success")
        self.deny_button = w.Button(description="Deny", icon="times", button_style="danger")
        self.reason = w.Text(placeholder="Why not, and what to do instead (the model reads it)")
        self.reason.layout = w.Layout(flex="1 1 auto")
        self.edit_button = w.Button(description="Edit…", icon="pencil")
        self.input = w.Textarea(value=request.input_json(), rows=6)
        self.input.layout = w.Layout(width="100%", display="none")
        self.run_edited = w.Button(description="Run edited", icon="play", button_style="warning")
        self.run_edited.layout = w.Layout(display="none")
        self.status = w.HTML()
        self.approve_button.on_click(on_this_loop(self.approve))
        self.deny_button.on_click(on_this_loop(self.deny))
        self.edit_button.on_click(on_this_loop(self.open_editor))
        self.run_edited.on_click(on_this_loop(self.edit))
        super().__init__(
            [
                w.HTML(_question(request)),
                w.HBox([self.approve_button, self.deny_button, self.reason, self.edit_button]),
                self.input,
                self.run_edited,
                self.status,
            ]
        )
        self.add_class("gr-approval")
        self.layout = w.Layout(border="1px solid #f9a825", padding="4px 8px", margin="2px 0")

    @property
    def controls(self) -> tuple[w.Widget, ...]:
        return (self.approve_button, self.deny_button, self.edit_button, self.run_edited)

    def approve(self) -> None:
        """What the Approve button does."""
        self._answer(
            lambda: self.desk.approve(self.request.request_id, by="dashboard"),
            "✔ Approved: it runs.",
        )

    def deny(self, reason: str | None = None) -> None:
        """What the Deny button does: the reason box's text is what the model reads."""
        text = (self.reason.value if reason is None else reason).strip()
        self._answer(
            lambda: self.desk.deny(text, self.request.request_id, by="dashboard"),
            f"✖ Denied{': ' + text if text else ''}.",
        )

    def open_editor(self) -> None:
        """What Edit… does: shows the input as JSON and the Run edited button."""
        self.input.layout.display = self.run_edited.layout.display = ""

    def edit(self, text: str | None = None) -> None:
        """What Run edited does: the box's JSON, as the call's whole new input."""
        source = self.input.value if text is None else text
        try:
            value: Any = json.loads(source)
        except ValueError as exc:
            self._say(f"That is not JSON ({exc}); fix it and press Run edited again.", bad=True)
            return
        if not isinstance(value, dict):
            self._say("The input is a JSON object, {...}; fix it and press Run edited.", bad=True)
            return
        self._answer(
            lambda: self.desk.edit(value, self.request.request_id, by="dashboard"),
            "✎ Edited: the tool's schema checks it before it runs.",
        )

    def closed(self, how: str) -> None:
        """The desk closed the request: the buttons answer nothing any more."""
        for control in self.controls:
            control.disabled = True
        if self.outcome == "waiting":
            self.outcome = how
            self._say(_CLOSED.get(how, how), bad=how != "answered")
        self._fold()

    def _answer(self, answer: Callable[[], None], said: str) -> None:
        try:
            answer()
        except GrNotebookError as exc:
            self._say(str(exc), bad=True)
            return
        self.outcome = "answered"
        for control in self.controls:
            control.disabled = True
        self._say(said, bad=said.startswith("✖"))
        self._fold()

    def _fold(self) -> None:
        """An answered prompt shrinks to its one line: the call and what became of it, so
        a job's answered prompts do not pile up in the dashboard."""
        if not self.folded:
            self.folded = True
            self.children = (self.status,)
            self.layout = w.Layout(padding="0 8px", margin="0")

    def _say(self, message: str, *, bad: bool) -> None:
        colour = "#c62828" if bad else "#2e7d32"
        call = f"{self.request.tool} {_target(self.request)}".rstrip()
        self.status.value = (
            f"<div title='{escape(message)}' style='white-space:nowrap;overflow:hidden;"
            "text-overflow:ellipsis'>"
            f"<b>{escape(call)}</b>: <span style='color:{colour}'>{escape(message)}</span></div>"
        )

    def __repr__(self) -> str:
        return f"<ApprovalPrompt {self.request.request_id} {self.request.tool}: {self.outcome}>"


class ApprovalView:
    """Follows a desk: each request it is asked becomes an :class:`ApprovalPrompt` handed
    to ``show``; watching attends the desk, so the run asks here before ``confirm=``."""

    def __init__(self, desk: ApprovalDesk, show: Callable[[ApprovalPrompt], object]) -> None:
        self.desk, self.show = desk, show
        self.prompts: dict[str, ApprovalPrompt] = {}
        self._unwatch = desk.watch(self._changed)

    def _changed(self, request: ApprovalRequest, what: str) -> None:
        if what == "asked":
            prompt = self.prompts[request.request_id] = ApprovalPrompt(request, self.desk)
            self.show(prompt)
        elif (shown := self.prompts.get(request.request_id)) is not None:
            shown.closed(what)

    @property
    def pending(self) -> tuple[ApprovalPrompt, ...]:
        return tuple(p for p in self.prompts.values() if p.outcome == "waiting")

    def close(self) -> None:
        self._unwatch()
