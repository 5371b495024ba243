"""Approve or Deny in the notebook: a confirmer for budgets large enough to ask a person.

``gr.Agent(confirm=WidgetConfirmer())`` shows each request (what the model asked for, its
estimated tokens against the threshold) with two buttons, and the run waits for the answer
without holding the kernel. No answer within the timeout denies: a run never spends
unasked.

A click only reaches the kernel while no cell blocks it. Under top-level ``await`` or a
background run it arrives at once; in a blocking cell (``agent.run_sync``, or ``%%agent``
nested in ``%%time``) it cannot, and the request is denied when the timeout runs out. That
is why ``%%agent`` gives this confirmer to non-blocking runs only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from html import escape
from typing import Any, Literal, TypeAlias, cast

import ipywidgets as w
from IPython import display as ipython_display

from gr_notebook.errors import RunError
from gr_notebook.guardrails.approval import ApprovalRequest
from gr_notebook.guardrails.regulation import ConfirmationRequest
from gr_notebook.jupyter.clicks import on_this_loop
from gr_notebook.validation import seconds

__all__ = ["DEFAULT_TIMEOUT", "ConfirmationPrompt", "Outcome", "WidgetConfirmer"]

DEFAULT_TIMEOUT = 300.0
Outcome: TypeAlias = Literal["waiting", "approved", "denied", "timed_out", "withdrawn"]
_display = cast(Callable[..., None], ipython_display.display)  # IPython ships it untyped


def _ask(request: ConfirmationRequest, timeout: float | None) -> str:
    deadline = "" if timeout is None else f" No answer within {timeout:g} s denies."
    run = f" (run {request.run_id})" if request.run_id else ""
    if isinstance(request, ApprovalRequest):  # a tool call, when it is the agent's confirmer
        return (
            f"<div><b>Approve {escape(request.tool)}{escape(run)}?</b> "
            f"{escape(request.reason)}.{escape(deadline)}</div>"
            f"<pre>{escape(request.input_json())}</pre>"
        )
    return (
        f"<div><b>Confirm a large budget{escape(run)}</b></div>"
        f"<div>{escape(request.operation)}: {escape(request.description)}</div>"
        f"<div>Estimated <b>{request.estimated_tokens:,}</b> tokens; confirmation is asked "
        f"above {request.threshold:,}.{escape(deadline)}</div>"
    )


class ConfirmationPrompt(w.VBox):  # type: ignore[misc]
    """One request on screen. The first answer wins: a click after the timeout (or a second
    click) changes nothing, so what the run was told is what the prompt shows."""

    def __init__(self, request: ConfirmationRequest, *, timeout: float | None) -> None:
        self.request = request
        self.timeout = timeout
        self.outcome: Outcome = "waiting"
        self._answered = asyncio.Event()  # binds to a loop on first wait (Python >= 3.10)
        self.approve_button = w.Button(description="Approve", icon="check", button_style="success")
        self.deny_button = w.Button(description="Deny", icon="times", button_style="danger")
        self.approve_button.on_click(on_this_loop(self.approve))
        self.deny_button.on_click(on_this_loop(self.deny))
        self.status = w.HTML()
        super().__init__(
            [
                w.HTML(_ask(request, timeout)),
                w.HBox([self.approve_button, self.deny_button]),
                self.status,
            ]
        )
        self.add_class("gr-confirmation")
        self.layout = w.Layout(border="1px solid #f9a825", padding="4px 8px", margin="2px 0")

    @property
    def approved(self) -> bool:
        return self.outcome == "approved"

    @property
    def settled(self) -> bool:
        return self.outcome != "waiting"

    def approve(self) -> None:
        """What the Approve button does."""
        self._settle("approved", "✔ Approved: the run goes on with this budget.")

    def deny(self) -> None:
        """What the Deny button does."""
        self._settle("denied", "✖ Denied: the run keeps its previous budget.")

    async def wait(self) -> bool:
        """The answer, once there is one; the timeout denies, and a cancelled run withdraws
        the question rather than leave live buttons that answer nothing."""
        try:
            await asyncio.wait_for(self._answered.wait(), self.timeout)
        except TimeoutError:
            self._settle("timed_out", f"✖ Denied: no answer within {self.timeout:g} s.")
        except asyncio.CancelledError:
            self._settle("withdrawn", "The run stopped before an answer.")
            raise
        return self.approved

    def _settle(self, outcome: Outcome, message: str) -> None:
        if self.settled:
            return
        self.outcome = outcome
        self._answered.set()
        self.approve_button.disabled = self.deny_button.disabled = True
        colour = "#2e7d32" if outcome == "approved" else "#c62828"
        self.status.value = f"<span style='color:{colour}'>{escape(message)}</span>"

    def __repr__(self) -> str:
        r = self.request
        return (
            f"<Confirmation {r.operation}: {r.estimated_tokens:,} tokens "
            f"(threshold {r.threshold:,}), {self.outcome}>"
        )


class WidgetConfirmer:
    """A :class:`~gr_notebook.guardrails.regulation.Confirmer` that asks in the notebook.

    Each request becomes a :class:`ConfirmationPrompt`, handed to ``show`` (by default
    IPython's ``display``; ``%%agent`` puts it in the run's dashboard). :meth:`approve` and
    :meth:`deny` answer the oldest open prompt from code, as its buttons would.
    """

    def __init__(
        self,
        *,
        timeout: float | None = DEFAULT_TIMEOUT,
        show: Callable[[ConfirmationPrompt], object] | None = None,
    ) -> None:
        self.timeout = (
            None if timeout is None else seconds(timeout, "timeout", minimum=0, above=True)
        )
        self.show: Callable[[ConfirmationPrompt], object] = show or _display
        self.prompts: list[ConfirmationPrompt] = []
        """Every prompt so far, oldest first: the record of what was asked and answered."""

    def __call__(self, request: ConfirmationRequest) -> Coroutine[Any, Any, bool]:
        prompt = ConfirmationPrompt(request, timeout=self.timeout)
        self.prompts.append(prompt)
        self.show(prompt)
        return prompt.wait()

    @property
    def pending(self) -> tuple[ConfirmationPrompt, ...]:
        return tuple(p for p in self.prompts if not p.settled)

    def approve(self) -> None:
        self._oldest("approve").approve()

    def deny(self) -> None:
        self._oldest("deny").deny()

    def _oldest(self, action: str) -> ConfirmationPrompt:
        for prompt in self.prompts:
            if not prompt.settled:
                return prompt
        raise RunError(
            f"nothing to {action}: no confirmation is waiting; a request appears when the "
            "model asks for a budget above the threshold"
        )

    def __repr__(self) -> str:
        return f"WidgetConfirmer(timeout={self.timeout!r}, pending={len(self.pending)})"
