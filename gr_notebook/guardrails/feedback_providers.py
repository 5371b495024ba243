"""The built-in feedback providers of seed 002: a fixed message, and the deadline."""

from __future__ import annotations

from dataclasses import dataclass

from gr_notebook.errors import ConfigError
from gr_notebook.guardrails.feedback import Feedback, FeedbackContext
from gr_notebook.validation import seconds
from gr_notebook.wording import plural

__all__ = ["DeadlineFeedback", "StaticFeedbackProvider", "format_duration"]


@dataclass(frozen=True, slots=True)
class StaticFeedbackProvider:
    """Delivers a fixed message; pair it with a ``FileCreatedTrigger`` for one-time advice."""

    feedback: str
    name: str = "Static"
    severity: str = "info"

    def __post_init__(self) -> None:
        if not isinstance(self.feedback, str) or not self.feedback.strip():
            raise ConfigError("StaticFeedbackProvider needs the feedback text to deliver")

    def should_run(self, *, context: FeedbackContext) -> bool:
        return True

    def provide(self, *, context: FeedbackContext) -> Feedback:
        return Feedback(
            provider_name=self.name,
            summary=self.feedback,
            severity=self.severity,  # type: ignore[arg-type]  # checked by Feedback
        )


@dataclass(frozen=True, slots=True)
class DeadlineFeedback:
    """Reports the time used and left; below the threshold it warns and suggests wrapping up.

    Runs only when the agent's budget has a deadline (``gr.Budget(deadline_s=...)``).
    """

    warning_threshold_seconds: float = 120.0
    name: str = "Deadline"

    def __post_init__(self) -> None:
        seconds(self.warning_threshold_seconds, "warning_threshold_seconds", minimum=0)

    def should_run(self, *, context: FeedbackContext) -> bool:
        return context.deadline is not None

    def provide(self, *, context: FeedbackContext) -> Feedback | None:
        deadline = context.deadline
        if deadline is None:
            return None
        elapsed = format_duration(deadline.elapsed_s)
        if deadline.remaining_s <= 0:
            return Feedback(
                provider_name=self.name,
                summary=f"The work took {elapsed}. You have reached the time deadline.",
                suggestions=("Wrap up immediately.",),
                severity="warning",
            )
        summary = (
            f"The work so far took {elapsed}. "
            f"You have {format_duration(deadline.remaining_s)} remaining."
        )
        if deadline.remaining_s > self.warning_threshold_seconds:
            return Feedback(provider_name=self.name, summary=summary)
        return Feedback(
            provider_name=self.name,
            summary=summary,
            suggestions=(
                "Prioritize completing critical remaining work.",
                "Consider summarizing progress and remaining tasks.",
            ),
            severity="warning",
        )


def format_duration(seconds: float) -> str:
    """'1 second', '45 seconds', '1 minute', '5 minutes', '1 hour', '1 hour 30 minutes'."""
    whole = max(0, int(seconds))
    if whole < 60:
        return plural(whole, "second")
    if whole < 3600:
        return plural(whole // 60, "minute")
    hours, minutes = divmod(whole // 60, 60)
    return plural(hours, "hour") + (f" {plural(minutes, 'minute')}" if minutes else "")
