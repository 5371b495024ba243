"""Feedback providers (seed 002): triggers, delivery, rendering, and WINK's faults fixed."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gr_notebook as gr
from gr_notebook.events import EventLog
from gr_notebook.guardrails import Budget, Guardrails, GuardrailSpec
from gr_notebook.guardrails.feedback_providers import format_duration
from gr_notebook.messages import ToolResultBlock
from gr_notebook.tools import CORE_TOOLS
from gr_notebook.workflow.todos import TodoList

# -- a run's feedback machinery, driven directly -------------------------------------------------


@dataclass
class Harness:
    guards: Guardrails
    clock: gr.FakeClock
    log: EventLog
    ws: gr.Workspace
    fired: list[list[str]] = field(default_factory=list)

    def call(self, tool: str = "list_files", *, advance: float = 0.0) -> list[gr.Feedback]:
        self.clock.advance(advance)
        blocks = self.guards.after_call(tool, {}, is_error=False, turn=1)
        self.fired.append([b.provider_name for b in blocks])
        return blocks


@dataclass
class View:
    """The run as the guardrails read it (a RunView), without a loop."""

    workspace: gr.Workspace
    clock: gr.FakeClock
    log: EventLog
    budget: Budget
    start: float
    run_id: str = ""
    name: str = "agent"
    todos: TodoList = field(default_factory=lambda: TodoList.of(["a"]))
    wrap_up: str | None = None

    def emit(self, kind: str, data: Any = None) -> None:
        self.log.append(kind, data)

    def usage(self) -> gr.BudgetUsage:
        return self.budget.usage(tokens=0, iterations=0, elapsed_s=self.clock() - self.start)

    def plan(self) -> None:
        return None

    def phase_ahead(self) -> tuple[int, str]:
        return 0, "the task"


def harness(
    tmp_path: Path, *configs: gr.FeedbackProviderConfig, deadline_s: float | None = None
) -> Harness:
    clock = gr.FakeClock(1000.0)
    log = EventLog(clock)
    ws = gr.Workspace(tmp_path / "ws")
    view = View(ws, clock, log, Budget(deadline_s=deadline_s), clock())
    guards = Guardrails(
        GuardrailSpec.build(tools=list(CORE_TOOLS), feedback_providers=configs), view
    )
    return Harness(guards, clock, log, ws)


def static(text: str, **trigger: Any) -> gr.FeedbackProviderConfig:
    return gr.FeedbackProviderConfig(
        gr.StaticFeedbackProvider(text, name=text), gr.FeedbackTrigger(**trigger)
    )


# -- rendering ----------------------------------------------------------------------------------


def test_render_follows_the_spec_layout() -> None:
    block = gr.Feedback(
        provider_name="Deadline",
        summary="The work so far took 5 minutes. You have 3 minutes remaining.",
        observations=(gr.Observation("Pace", "two phases left"),),
        suggestions=("Prioritize completing critical remaining work.",),
        severity="warning",
    )
    assert block.render() == (
        "<feedback provider='Deadline'>\n"
        "The work so far took 5 minutes. You have 3 minutes remaining.\n"
        "\n"
        "• Pace: two phases left\n"
        "\n"
        "→ Prioritize completing critical remaining work.\n"
        "</feedback>"
    )


def test_render_without_observations_or_suggestions() -> None:
    assert gr.Feedback(provider_name="S", summary="hi").render() == (
        "<feedback provider='S'>\nhi\n</feedback>"
    )


def test_render_escapes_xml_in_the_name_and_every_text() -> None:
    """WINK fault: ``</feedback>`` in a summary ended the block early."""
    block = gr.Feedback(
        provider_name='it\'s <me> & "you"',
        summary="a </feedback> b & c",
        observations=(gr.Observation("<x>", "1 < 2"),),
        suggestions=("use <b> & </b>",),
    )
    text = block.render()
    assert text.startswith("<feedback provider='it&apos;s &lt;me&gt; &amp; &quot;you&quot;'>")
    assert text.count("</feedback>") == 1 and text.endswith("</feedback>")
    assert "a &lt;/feedback&gt; b &amp; c" in text
    assert "• &lt;x&gt;: 1 &lt; 2" in text
    assert "→ use &lt;b&gt; &amp; &lt;/b&gt;" in text


def test_blocks_are_joined_by_a_blank_line() -> None:
    a, b = gr.Feedback(provider_name="A", summary="a"), gr.Feedback(provider_name="B", summary="b")
    assert gr.guardrails.render_feedback([a, b]) == a.render() + "\n\n" + b.render()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"severity": "fatal"}, "severity must be one of info, caution, warning"),
        ({"suggestions": "do it"}, "wrap a single one"),
    ],
)
def test_feedback_values_are_checked(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(gr.ConfigError, match=message):
        gr.Feedback(summary="x", **kwargs)


# -- trigger validation -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({}, "at least one condition"),
        ({"every_n_calls": 0}, "every_n_calls must be a whole number >= 1"),
        ({"every_n_calls": -3}, "every_n_calls"),
        ({"every_n_calls": 2.5}, "every_n_calls"),
        ({"every_n_calls": True}, "every_n_calls"),
        ({"every_n_seconds": 0}, "every_n_seconds must be a number of seconds > 0"),
        ({"every_n_seconds": -1.0}, "every_n_seconds"),
        ({"every_n_seconds": float("nan")}, "every_n_seconds"),
        ({"on_file_created": "AGENTS.md"}, "gr.FileCreatedTrigger"),
    ],
)
def test_triggers_are_validated_when_built(kwargs: dict[str, Any], message: str) -> None:
    """WINK fault: it accepted 0 and negative values."""
    with pytest.raises(gr.ConfigError, match=message):
        gr.FeedbackTrigger(**kwargs)


@pytest.mark.parametrize("name", ["", "  ", "/", "../x.md", "a/../../x.md"])
def test_file_trigger_names_a_file_inside(name: str) -> None:
    with pytest.raises(gr.ConfigError):
        gr.FileCreatedTrigger(name)


def test_a_config_needs_a_provider_and_a_trigger() -> None:
    with pytest.raises(gr.ConfigError, match="lacks name, should_run, provide"):
        gr.FeedbackProviderConfig(object(), gr.FeedbackTrigger(every_n_calls=1))  # type: ignore[arg-type]
    with pytest.raises(gr.ConfigError, match=r"trigger takes gr\.FeedbackTrigger"):
        gr.FeedbackProviderConfig(gr.StaticFeedbackProvider("x"), {"every_n_calls": 1})  # type: ignore[arg-type]


# -- how triggers fire --------------------------------------------------------------------------


def test_every_n_calls_counts_from_this_configs_last_feedback(tmp_path: Path) -> None:
    h = harness(tmp_path, static("three", every_n_calls=3))
    for _ in range(9):
        h.call()
    assert [bool(f) for f in h.fired] == [False, False, True] * 3


def test_two_static_providers_keep_their_own_cadence(tmp_path: Path) -> None:
    """WINK fault: trigger state keyed by provider name, so two StaticFeedbackProviders share
    one cadence and the second never fires."""
    configs = [
        gr.FeedbackProviderConfig(
            gr.StaticFeedbackProvider("a"), gr.FeedbackTrigger(every_n_calls=2)
        ),
        gr.FeedbackProviderConfig(
            gr.StaticFeedbackProvider("b"), gr.FeedbackTrigger(every_n_calls=3)
        ),
    ]
    h = harness(tmp_path, *configs)
    summaries = [[b.summary for b in h.call()] for _ in range(6)]
    assert summaries == [[], ["a"], ["b"], ["a"], [], ["a", "b"]]


def test_every_n_seconds_counts_from_the_start_not_the_first_call(tmp_path: Path) -> None:
    h = harness(tmp_path, static("tick", every_n_seconds=30))
    h.call(advance=1)  # WINK fires on the first evaluation; 1 s is not 30
    h.call(advance=28)
    h.call(advance=1)  # 30 s since the start
    h.call(advance=29)
    h.call(advance=1)
    assert [bool(f) for f in h.fired] == [False, False, True, False, True]


def test_file_trigger_fires_once_when_the_file_exists(tmp_path: Path) -> None:
    h = harness(tmp_path, static("agents", on_file_created=gr.FileCreatedTrigger("AGENTS.md")))
    h.call()
    h.ws.write_text("AGENTS.md", "conventions")
    h.call()
    h.call()
    (h.ws.root / "AGENTS.md").unlink()
    h.call()
    h.ws.write_text("AGENTS.md", "again")
    h.call()
    assert [bool(f) for f in h.fired] == [False, True, False, False, False]


def test_a_count_condition_never_uses_up_the_file_condition(tmp_path: Path) -> None:
    """WINK fault: the count firing before the file existed marked the file as fired."""
    h = harness(
        tmp_path,
        static("both", every_n_calls=2, on_file_created=gr.FileCreatedTrigger("/out/DONE.md")),
    )
    h.call()
    h.call()  # the count fires; DONE.md does not exist yet
    h.ws.write_text("out/DONE.md", "done")
    h.call()  # the file fires now, though the count would not
    h.call()
    h.call()  # only the count again
    assert [bool(f) for f in h.fired] == [False, True, True, False, True]


def test_conditions_are_ored(tmp_path: Path) -> None:
    h = harness(tmp_path, static("either", every_n_calls=4, every_n_seconds=10))
    h.call(advance=10)  # time
    h.call()
    h.call()
    h.call()
    h.call()  # four calls since the last feedback
    assert [bool(f) for f in h.fired] == [True, False, False, False, True]


def test_every_matching_provider_runs_and_blocks_come_together(
    make_agent: Callable[..., gr.Agent],
) -> None:
    model = gr.ScriptedModel([gr.tool_call("list_files"), gr.text("done")])
    configs = [static("first", every_n_calls=1), static("second", every_n_calls=1)]
    run = make_agent(model, feedback_providers=configs, stuck_turns=None).run_sync("job")
    result = [
        b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ][-1]
    listing, _, blocks = result.content.partition("\n\n")
    assert "instructions.md" in listing
    assert blocks == (
        "<feedback provider='first'>\nfirst\n</feedback>\n\n"
        "<feedback provider='second'>\nsecond\n</feedback>"
    )
    events = run.events.of_kind("feedback")
    assert [e["provider"] for e in events] == ["first", "second"]
    assert events[0]["text"] == "<feedback provider='first'>\nfirst\n</feedback>"
    assert events[0]["severity"] == "info" and events[0]["tool"] == "list_files"
    frame = run.feedback_df()
    assert list(frame.provider) == ["first", "second"]


def test_feedback_follows_an_error_result_too(make_agent: Callable[..., gr.Agent]) -> None:
    """A failed or denied call is a call: it counts toward the cadence and carries the blocks
    it triggers, still marked is_error (WINK's Codex adapter drops them after an error)."""
    model = gr.ScriptedModel([gr.tool_call("read_file", path="missing.txt"), gr.text("done")])
    run = make_agent(
        model, feedback_providers=[static("pace", every_n_calls=1)], stuck_turns=None
    ).run_sync("job")
    result = [
        b for m in model.requests[-1].messages for b in m.content if isinstance(b, ToolResultBlock)
    ][-1]
    assert result.is_error
    assert result.content.endswith("\n\n<feedback provider='pace'>\npace\n</feedback>")
    assert [e["tool"] for e in run.events.of_kind("feedback")] == ["read_file"]


@dataclass
class Picky:
    """Runs only when told to; records what its context said."""

    name: str = "Picky"
    ready: bool = False
    seen: list[dict[str, Any]] = field(default_factory=list)

    def should_run(self, *, context: gr.guardrails.FeedbackContext) -> bool:
        return self.ready

    def provide(self, *, context: gr.guardrails.FeedbackContext) -> gr.Feedback:
        self.seen.append(
            {
                "count": context.tool_call_count,
                "since": context.tool_calls_since_last_feedback(),
                "since_me": context.tool_calls_since_last_feedback_for_provider(self.name),
                "last": context.last_feedback.provider_name if context.last_feedback else None,
                "mine": context.last_feedback_for_provider(self.name),
                "recent": [c.tool for c in context.recent_tool_calls(2)],
                "none": context.recent_tool_calls(0),
                "deadline": context.deadline,
            }
        )
        return gr.Feedback(summary="picky", severity="caution")


def test_should_run_false_keeps_the_trigger_armed(tmp_path: Path) -> None:
    picky = Picky()
    h = harness(tmp_path, gr.FeedbackProviderConfig(picky, gr.FeedbackTrigger(every_n_calls=2)))
    h.call()
    h.call()  # due, but declines
    picky.ready = True
    h.call()  # still due: fires now
    assert [bool(f) for f in h.fired] == [False, False, True]


def test_feedback_context_answers_the_spec_questions(tmp_path: Path) -> None:
    picky = Picky(ready=True)
    h = harness(
        tmp_path,
        static("other", every_n_calls=1),
        gr.FeedbackProviderConfig(picky, gr.FeedbackTrigger(every_n_calls=3)),
    )
    h.call("read_file")
    h.call("write_file")
    h.call("list_files")
    (first,) = picky.seen
    assert first["count"] == 3
    assert first["since"] == 1  # 'other' spoke after call 2
    assert first["since_me"] == 3  # picky never spoke
    assert first["last"] == "other" and first["mine"] is None
    assert first["recent"] == ["write_file", "list_files"] and first["none"] == ()
    assert first["deadline"] is None
    block = h.guards.feedback.last_by_provider["Picky"]
    assert (block.call_index, block.severity, block.prompt_name) == (3, "caution", "agent")
    assert block.timestamp is not None and block.timestamp.timestamp() == 1000.0


def test_a_provider_that_fails_is_reported_and_the_call_goes_on(tmp_path: Path) -> None:
    class Broken:
        name = "Broken"

        def should_run(self, *, context: gr.guardrails.FeedbackContext) -> bool:
            return True

        def provide(self, *, context: gr.guardrails.FeedbackContext) -> gr.Feedback:
            raise ValueError("bug")

    h = harness(
        tmp_path,
        gr.FeedbackProviderConfig(Broken(), gr.FeedbackTrigger(every_n_calls=1)),
        static("fine", every_n_calls=1),
    )
    assert [b.summary for b in h.call()] == ["fine"]
    error = h.log.of_kind("error")[-1]
    assert (error["source"], error["provider"], error["message"]) == ("feedback", "Broken", "bug")


# -- DeadlineFeedback ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0 seconds"),
        (1, "1 second"),
        (45.9, "45 seconds"),
        (60, "1 minute"),
        (125, "2 minutes"),
        (3600, "1 hour"),
        (5400, "1 hour 30 minutes"),
        (3660, "1 hour 1 minute"),
        (7200, "2 hours"),
    ],
)
def test_durations_are_singular_and_plural(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def deadline_block(tmp_path: Path, elapsed: float, limit: float = 480) -> gr.Feedback | None:
    h = harness(
        tmp_path,
        gr.FeedbackProviderConfig(
            gr.DeadlineFeedback(warning_threshold_seconds=120), gr.FeedbackTrigger(every_n_calls=1)
        ),
        deadline_s=limit,
    )
    blocks = h.call(advance=elapsed)
    return blocks[0] if blocks else None


def test_deadline_feedback_with_time_to_spare(tmp_path: Path) -> None:
    block = deadline_block(tmp_path, 300)
    assert block is not None and block.severity == "info" and not block.suggestions
    assert block.summary == "The work so far took 5 minutes. You have 3 minutes remaining."


def test_deadline_feedback_below_the_threshold_warns(tmp_path: Path) -> None:
    block = deadline_block(tmp_path, 419)
    assert block is not None and block.severity == "warning"
    assert block.summary == "The work so far took 6 minutes. You have 1 minute remaining."
    assert block.suggestions == (
        "Prioritize completing critical remaining work.",
        "Consider summarizing progress and remaining tasks.",
    )


def test_deadline_feedback_once_the_deadline_passed(tmp_path: Path) -> None:
    block = deadline_block(tmp_path, 481)
    assert block is not None
    assert block.summary == "The work took 8 minutes. You have reached the time deadline."
    assert block.suggestions == ("Wrap up immediately.",)


def test_deadline_feedback_stays_quiet_without_a_deadline(tmp_path: Path) -> None:
    h = harness(
        tmp_path,
        gr.FeedbackProviderConfig(gr.DeadlineFeedback(), gr.FeedbackTrigger(every_n_calls=1)),
    )
    assert h.call() == []


def test_deadline_feedback_provide_without_a_deadline_says_nothing(tmp_path: Path) -> None:
    """WINK's raises ValueError; here None is a provider's way to have nothing to say."""
    h = harness(tmp_path)
    context = gr.guardrails.FeedbackContext(
        h.guards.feedback,
        workspace=h.ws,
        todos=TodoList.of(["a"]),
        plan=lambda: None,
        budget=Budget().usage(tokens=0, iterations=0, elapsed_s=10),
        now=h.clock(),
    )
    assert context.deadline is None
    assert gr.DeadlineFeedback().provide(context=context) is None


def test_deadline_feedback_threshold_is_checked() -> None:
    with pytest.raises(gr.ConfigError, match="warning_threshold_seconds"):
        gr.DeadlineFeedback(warning_threshold_seconds=-1)


# -- properties ---------------------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(n=st.integers(1, 12), calls=st.integers(0, 60))
def test_count_cadence_fires_at_every_multiple(tmp_path_factory: Any, n: int, calls: int) -> None:
    h = harness(tmp_path_factory.mktemp("c"), static("n", every_n_calls=n))
    for _ in range(calls):
        h.call()
    fired_at = [i + 1 for i, f in enumerate(h.fired) if f]
    assert fired_at == list(range(n, calls + 1, n))


@settings(max_examples=60, deadline=None)
@given(
    period=st.floats(0.5, 50, allow_nan=False),
    steps=st.lists(st.floats(0, 20, allow_nan=False), max_size=40),
)
def test_time_cadence_fires_exactly_when_the_period_has_passed(
    tmp_path_factory: Any, period: float, steps: list[float]
) -> None:
    h = harness(tmp_path_factory.mktemp("t"), static("t", every_n_seconds=period))
    last = h.clock()
    for step in steps:
        due = h.clock() + step - last >= period
        blocks = h.call(advance=step)
        assert bool(blocks) is due
        if due:
            last = h.clock()
