"""State to HTML (and to text): pure functions, testable without a kernel or a browser.

Styles are inline so the output looks the same in JupyterLab, in an exported HTML file and
in a saved notebook. Class names (``gr-todos``, ``gr-meter`` …) are stable hooks for tests.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from gr_notebook.display.state import (
    DashboardState,
    FeedbackEntry,
    Level,
    Meter,
    ThinkingEntry,
    TimelineEntry,
    Tone,
    ToolCallEntry,
)
from gr_notebook.wording import plural
from gr_notebook.workflow.plan import Plan
from gr_notebook.workflow.todos import WIDTH as TODO_WIDTH
from gr_notebook.workflow.todos import TodoList

__all__ = [
    "LEVEL_COLOURS",
    "STATE_COLOURS",
    "TONE_STYLES",
    "render_calls",
    "render_dashboard",
    "render_feedback",
    "render_header",
    "render_meters",
    "render_plan",
    "render_run_card",
    "render_shadow",
    "render_thinking",
    "render_timeline",
    "render_todos",
    "text_dashboard",
]

LEVEL_COLOURS: dict[Level, str] = {
    "none": "#9e9e9e",
    "ok": "#2e7d32",
    "warn": "#f9a825",
    "high": "#c62828",
}
EARLY_COLOUR = "#ef6c00"  # ended: the model stopped with the job not reported complete
STATE_COLOURS = {
    "running": "#1565c0",
    "stopping": "#616161",
    "pausing": "#6a1b9a",
    "paused": "#6a1b9a",
    "completed": "#2e7d32",
    "failed": "#c62828",
    "cancelled": "#616161",
    "interrupted": "#616161",  # Ctrl-C, or its process died
    "budget_exhausted": "#ef6c00",
    "incomplete": "#ef6c00",
    "stuck": "#ad1457",  # tier 3: the interventions gave up on the run
    "ended": EARLY_COLOUR,
}
SEVERITY_COLOURS = {"info": "#1565c0", "caution": "#f9a825", "warning": "#c62828"}
CALL_COLOURS = {
    "ran": "#2e7d32",
    "failed": "#c62828",
    "denied": "#ef6c00",
    "unverified": "#c62828",
}
#: One symbol per kind of line. Every one is in DejaVu Sans, the font Debian's Chromium falls
#: back on: an emoji (U+26D4 no entry, U+270B raised hand) shows as an empty box where no
#: emoji font is installed.
TIMELINE_ICONS = {
    "run_started": "▶",
    "todos_written": "✎",
    "todo_completed": "✓",
    "phase_started": "◆",
    "phase_transition": "⇢",
    "compaction": "⇊",
    "rewind": "↺",
    "progress_check": "⚠",
    "run_paused": "❚❚",
    "run_unpaused": "▶",
    "run_resumed": "▶",
    "job_complete": "✔",
    "error": "✖",
    "policy_decision": "✕",
    "approval_requested": "○",
    "approval_answered": "✓",
    "completion_check": "↩",
    "policies_reset": "↺",
    "intervention": "⚑",
    "intervention_skipped": "·",
    "task_assessed": "⚖",
    "confirmation": "⊘",
    "conversation_pruned": "✂",
    "run_finished": "■",
}
TONE_STYLES: dict[Tone, str] = {
    "plain": "",
    "muted": "color:#9e9e9e",
    "notice": "color:#e65100;font-weight:600",
    "alert": "color:#c62828;font-weight:700",
}
MONO = "font-family:var(--jp-code-font-family,monospace);font-size:12px;line-height:1.35"
PANEL = "border:1px solid #ddd;border-radius:4px;padding:6px 8px;margin:2px 0"
TITLE_STYLE = "font-weight:600;margin-bottom:4px"
PLAN_ROWS = 12
CURRENT_MARK = "← CURRENT"
_MORE_STYLE = "color:#9e9e9e;font-size:11px"


def _panel(cls: str, title: str, body: str) -> str:
    return (
        f"<div class='{cls}' style='{PANEL}'><div style='{TITLE_STYLE}'>{escape(title)}</div>"
        f"{body}</div>"
    )


def render_todos(todos: TodoList) -> str:
    """Layer 2 exactly as :meth:`TodoList.render` draws it, with the current task highlighted
    and done tasks in green: one source for the text, so the two never drift apart."""
    lines = [_unbroken(escape(line)) for line in todos.render().split("\n")]
    phase_at = next(i for i, line in enumerate(lines) if line.startswith("Phase: "))
    lines[phase_at] = f"Phase: <b>{escape(todos.phase_label())}</b>"
    first = phase_at + 2  # the items follow the phase line and a blank line
    if not todos.items:
        lines[first] = f"<i>{lines[first]}</i>"
    current = todos.current_index
    for i, item in enumerate(todos.items):
        if i == current:
            style = "class='gr-current' style='background:#fff3c4;font-weight:700'"
        elif item.done:
            style = "style='color:#2e7d32'"
        else:
            continue
        lines[first + i] = f"<span {style}>{lines[first + i]}</span>"
    body = "\n".join(lines)
    # Lines wrap between words only: ``anywhere`` also let the panel shrink below a word and
    # cut "CURRENT" in two. A word wider than the panel (a long path) still breaks, so
    # nothing overflows but the rules, which are cut at the panel's edge. The box is never
    # wider than its rules, so a long task wraps inside it, its "← CURRENT" too.
    style = (
        f"{MONO};margin:0;white-space:pre-wrap;overflow-wrap:break-word;overflow-x:hidden;"
        f"max-width:{TODO_WIDTH}ch"
    )
    return f"<pre class='gr-todos' style='{style}'>{body}</pre>"


def _unbroken(line: str) -> str:
    """A rule of the todo layer, or its "← CURRENT" mark, kept on one line."""
    if line and not line.strip("═─"):
        return f"<span style='white-space:pre'>{line}</span>"
    return line.replace(CURRENT_MARK, f"<span style='white-space:nowrap'>{CURRENT_MARK}</span>")


def render_plan(plan: Plan | None, *, rows: int = PLAN_ROWS) -> str:
    """The phases around the active one, at most ``rows`` of them: a 200-phase plan costs
    what a 12-phase plan does, and the panel stays readable."""
    if plan is None:
        body = "<i style='color:#757575'>No plan yet: the model writes it during bootstrap.</i>"
        return _panel("gr-plan", "Plan", body)
    phases = plan.phases
    active = plan.active
    at = phases.index(active) if active is not None else len(phases) - 1
    start = max(0, min(at - 2, len(phases) - rows))
    shown = phases[start : start + rows]
    items = []
    if start:
        done = sum(p.status == "complete" for p in phases[:start])
        items.append(_more_row(f"✔ Phases 1–{start}: {done} of {start} complete"))
    for phase in shown:
        if phase.status == "complete":
            icon, style = "✔", "color:#2e7d32"
        elif phase.status == "current":
            icon, style = "▶", "color:#1565c0;font-weight:700"
        else:
            icon, style = "○", "color:#757575"
        steps = f" <span style='color:#9e9e9e'>({len(phase.steps)} steps)</span>"
        items.append(
            f"<li class='gr-phase gr-phase-{phase.status}' style='{style};list-style:none'>"
            f"{icon} Phase {phase.number}: {escape(phase.name)}{steps}</li>"
        )
    hidden = len(phases) - start - len(shown)
    if hidden:
        items.append(_more_row(f"○ {plural(hidden, 'more phase')}"))
    body = f"<ul style='margin:0;padding-left:4px'>{''.join(items)}</ul>"
    title = plan.title if plan.title.lower().startswith("plan") else f"Plan: {plan.title}"
    return _panel("gr-plan", title if plan.title else "Plan", body)


def _more_row(text: str) -> str:
    return f"<li class='gr-phase-more' style='list-style:none;color:#9e9e9e'>{escape(text)}</li>"


def render_meter(meter: Meter) -> str:
    colour = LEVEL_COLOURS[meter.level]
    fraction = meter.fraction
    width = 0.0 if fraction is None else min(fraction, 1.0) * 100
    return (
        f"<div class='gr-meter gr-level-{meter.level}' style='margin:3px 0' "
        f"title='{escape(meter.describe())}'>"
        f"<div style='font-size:12px'>{escape(meter.describe())}</div>"
        + (
            ""  # nothing to measure against: no bar, rather than an empty one
            if fraction is None
            else "<div style='background:#eee;height:8px;border-radius:4px;overflow:hidden'>"
            f"<div style='width:{width:.1f}%;height:8px;background:{colour}'></div></div>"
        )
        + "</div>"
    )


def render_meters(meters: Sequence[Meter]) -> str:
    return _panel("gr-meters", "Resources", "".join(render_meter(m) for m in meters))


def render_feedback(entries: Sequence[FeedbackEntry], total: int | None = None) -> str:
    if not entries:
        body = "<i style='color:#757575'>No feedback yet.</i>"
    else:
        blocks = []
        for entry in entries:
            colour = SEVERITY_COLOURS.get(entry.severity, "#616161")
            items = "".join(f"<li>{escape(o)}</li>" for o in entry.observations)
            items += "".join(f"<li>→ {escape(s)}</li>" for s in entry.suggestions)
            listing = f"<ul style='margin:2px 0 0 0'>{items}</ul>" if items else ""
            head = (
                f"<span style='color:{colour};font-weight:600'>{escape(entry.severity)}</span> "
                f"<span style='color:#9e9e9e'>turn {entry.turn}</span>"
            )
            if entry.text:  # the block exactly as the model read it
                body_html = (
                    f"<pre class='gr-feedback-text' style='margin:2px 0;white-space:pre-wrap;"
                    f"{MONO}'>{escape(entry.text)}</pre>"
                )
            else:
                body_html = (
                    f"<code>&lt;feedback provider='{escape(entry.provider)}'&gt;</code>"
                    f"<div>{escape(entry.summary)}</div>{listing}"
                )
            blocks.append(
                f"<div class='gr-feedback-block gr-severity-{escape(entry.severity)}' "
                f"style='border-left:3px solid {colour};padding-left:6px;margin:4px 0'>"
                f"{head}{body_html}</div>"
            )
        body = "".join(blocks)
    title = "Feedback" + (f" ({total})" if total else "")
    return _panel("gr-feedback", title, body)


SHADOW_STYLE = "color:#9e9e9e"
"""A shadow's lines are grey: recorded, and nothing acted on them."""


def render_shadow(entries: Sequence[TimelineEntry], total: int | None = None) -> str:
    """What the shadow guardrails would have done, apart from the run's own feedback and
    timeline and in grey; nothing at all for a run without shadows."""
    if not entries:
        return ""
    rows = "".join(
        f"<li class='gr-shadow-entry gr-event-{escape(e.kind)}' style='list-style:none'>"
        f"<span style='display:inline-block;min-width:5.5em'>turn {e.turn}</span>"
        f"{TIMELINE_ICONS.get(e.kind, '•')} {escape(e.text)}</li>"
        for e in entries
    )
    body = f"<ul style='margin:0;padding-left:4px;font-size:12px;{SHADOW_STYLE}'>{rows}</ul>"
    body += _earlier(entries, total)
    title = "Shadow guardrails: would have, and did not (newest first)"
    return (
        f"<div class='gr-shadow' style='{PANEL};{SHADOW_STYLE};border-style:dashed'>"
        f"<div style='{TITLE_STYLE}'>{escape(title)}"
        f"{f' ({total:,})' if total else ''}</div>{body}</div>"
    )


def render_calls(entries: Sequence[ToolCallEntry], total: int | None = None) -> str:
    """The latest tool calls of a session that has no todo list: what the model did, and
    which calls the policies denied (said in words: no symbol a font may lack)."""
    if not entries:
        body = "<i style='color:#757575'>No tool calls yet.</i>"
    else:
        rows = "".join(
            f"<li class='gr-call gr-call-{e.outcome}' style='list-style:none'>"
            f"<span style='color:#9e9e9e;display:inline-block;min-width:5.5em'>turn {e.turn}"
            f"</span><code>{escape(e.tool)}</code>{escape(' ' + e.target if e.target else '')}"
            f": <span style='color:{CALL_COLOURS[e.outcome]};font-weight:600'>{escape(e.how)}"
            "</span></li>"
            for e in entries
        )
        style = "margin:0;padding-left:4px;font-size:12px;overflow-wrap:anywhere"
        body = f"<ul style='{style}'>{rows}</ul>" + _earlier(entries, total)
    title = "Tool calls (newest first)" + (f", {total:,} in all" if total else "")
    return _panel("gr-calls", title, body)


def render_thinking(entries: Sequence[ThinkingEntry]) -> str:
    """The model's latest finished thinking, each reply collapsed under a one-line summary
    (a ``<details>``): it is long, and read only when wanted. Nothing at all for a model that
    does not think, so dashboards of such runs are unchanged."""
    if not entries:
        return ""
    items = []
    for entry in entries:
        body = escape(entry.text) if entry.text else "<i>The API sent no thinking text.</i>"
        if entry.redacted:
            body += f"<div><i>{plural(entry.redacted, 'redacted block')}, not shown.</i></div>"
        items.append(
            f"<details class='gr-thinking-entry' style='margin:2px 0'><summary "
            f"style='cursor:pointer;font-size:12px'><span style='color:#9e9e9e'>turn "
            f"{entry.turn}</span> {escape(entry.headline)}</summary><div "
            f"style='{MONO};white-space:pre-wrap;color:#616161;margin:2px 0 4px 12px'>"
            f"{body}</div></details>"
        )
    return _panel("gr-thinking", "Thinking (newest first)", "".join(items))


def render_timeline(
    entries: Sequence[TimelineEntry],
    total: int | None = None,
    earlier: Sequence[TimelineEntry] = (),
) -> str:
    """The newest lines of ``total``; the "… N earlier" under them unfolds ``earlier``, the
    latest of the lines that left (newest first), and says where the rest are."""
    if not entries:
        body = "<i style='color:#757575'>Nothing yet.</i>"
    else:
        body = _timeline_list(entries)
        hidden = 0 if total is None else total - len(entries)
        if hidden > 0 and earlier:
            older = hidden - len(earlier)
            rest = (
                f"<div style='{_MORE_STYLE}'>… and {older:,} older: run.events_df() has "
                "every event</div>"
                if older > 0
                else ""
            )
            body += (
                f"<details class='gr-timeline-earlier'><summary style='cursor:pointer;"
                f"{_MORE_STYLE}'>… {hidden:,} earlier</summary>{_timeline_list(earlier)}{rest}"
                "</details>"
            )
        else:
            body += _earlier(entries, total)
    return _panel("gr-timeline", "Timeline (newest first)", body)


def _timeline_list(entries: Sequence[TimelineEntry]) -> str:
    rows = "".join(
        f"<li class='gr-event gr-event-{escape(e.kind)} gr-tone-{e.tone}' "
        f"style='list-style:none;{TONE_STYLES[e.tone]}'>"
        f"<span style='color:#9e9e9e;font-weight:400;display:inline-block;min-width:5.5em'>"
        f"turn {e.turn}</span>{TIMELINE_ICONS.get(e.kind, '•')} {escape(e.text)}</li>"
        for e in entries
    )
    return f"<ul style='margin:0;padding-left:4px;font-size:12px'>{rows}</ul>"


def _earlier(entries: Sequence[object], total: int | None) -> str:
    """The line under a list that shows only the newest of ``total`` entries."""
    if total is None or total <= len(entries):
        return ""
    return f"<div style='{_MORE_STYLE}'>… {total - len(entries)} earlier</div>"


def _state_colour(state: DashboardState) -> str:
    return STATE_COLOURS.get(state.status, "#616161")


def render_header(state: DashboardState) -> str:
    colour = _state_colour(state)
    reason = f" <span style='color:#757575'>({escape(state.note)})</span>" if state.note else ""
    job = (
        f"<div style='color:#2e7d32'>✔ {escape(state.job_summary)}</div>"
        if state.job_summary
        else ""
    )
    return (
        f"<div class='gr-header'><b>Run {escape(state.run_id)}</b> "
        f"<span class='gr-state' style='color:#fff;background:{colour};border-radius:3px;"
        f"padding:0 6px'>{escape(state.status)}</span>{reason}{job}</div>"
    )


def render_dashboard(state: DashboardState) -> str:
    """The whole dashboard as one static block: what a saved notebook or export shows. A
    session of another harness has no todo list or plan: its tool calls stand in their place."""
    if state.harness.phased:
        main = render_todos(state.todos)
        side = f"{render_plan(state.plan)}{render_meters(state.meters)}"
    else:
        main, side = render_calls(state.calls, state.calls_total), render_meters(state.meters)
    return (
        "<div class='gr-dashboard'>"
        f"{render_header(state)}"
        "<div style='display:flex;gap:8px;flex-wrap:wrap'>"
        f"<div style='flex:1 1 480px;min-width:0'>{main}</div>"
        f"<div style='flex:1 1 260px'>{side}</div></div>"
        f"{render_feedback(state.feedback, state.feedback_total)}"
        f"{render_shadow(state.shadow, state.shadow_total)}"
        f"{render_thinking(state.thinking)}"
        f"{render_timeline(state.timeline, state.timeline_total, state.timeline_earlier)}"
        "</div>"
    )


def render_run_card(state: DashboardState, *, turns: int, phases_completed: int) -> str:
    """A run in one line: what sits under a live dashboard once the run has ended."""
    colour = _state_colour(state)
    tokens = state.meters[0].used if state.meters else 0
    reason = f" ({escape(state.note)})" if state.note else ""
    job = f" · job complete: {escape(state.job_summary)}" if state.job_summary else ""
    phases = (
        f" · {plural(phases_completed, 'phase')} complete"
        if state.harness.phased
        else f" · {escape(state.harness.label)}"
    )
    return (
        f"<div class='gr-run'><b>Run {escape(state.run_id)}</b> "
        f"<span style='color:{colour};font-weight:600'>{escape(state.status)}</span>{reason}"
        f" · {plural(turns, 'turn')}{phases}"
        f" · {tokens:,} tokens{job}</div>"
    )


def text_dashboard(state: DashboardState) -> str:
    """The dashboard as plain text, for ``text/plain`` and terminals."""
    head = f"Run {state.run_id}: {state.status}"
    if state.note:
        head += f" ({state.note})"
    lines = [head]
    if state.job_summary:
        lines.append(f"Job complete: {state.job_summary}")
    if not state.harness.phased:  # no todo list or plan: the session's tool calls
        total = f", {state.calls_total:,} in all" if state.calls_total else ""
        lines.append(f"Tool calls (newest first{total}):")
        lines += [f"  turn {c.turn}: {c.describe()}" for c in state.calls] or ["  (none yet)"]
    elif state.plan is not None:
        marks = {"complete": "[x]", "current": "[>]", "pending": "[ ]"}
        lines += [state.todos.render(), "", "Plan:"]
        lines += [f"  {marks[p.status]} Phase {p.number}: {p.name}" for p in state.plan.phases]
    else:
        lines += [state.todos.render(), "", "Plan: none yet"]
    lines += [m.describe() for m in state.meters]
    if state.feedback:
        lines.append("Feedback (newest first):")
        lines += [f"  [{f.severity}] {f.provider}: {f.summary}" for f in state.feedback]
    if state.shadow:
        lines.append("Shadow guardrails, not enforced (newest first):")
        lines += [f"  turn {e.turn}: {e.text}" for e in state.shadow]
    if state.thinking:
        lines.append("Thinking (newest first):")
        lines += [f"  turn {t.turn}: {t.headline}" for t in state.thinking]
    lines.append("Timeline (newest first):")
    lines += [f"  turn {e.turn}: {e.text}" for e in state.timeline] or ["  (nothing yet)"]
    return "\n".join(lines)
