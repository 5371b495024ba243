"""Shadow guardrails (``gr.Agent(shadow=[...])``): they decide at every call, stop and check as
live ones would, their decisions are recorded with ``mode="shadow"``, and nothing they decide
reaches the run."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.display.render import render_dashboard, text_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.errors import ConfigError
from gr_notebook.events import is_shadow
from gr_notebook.experiments.grid import RunSpec
from gr_notebook.experiments.record import record_of
from gr_notebook.models import ModelRequest, ModelResponse
from gr_notebook.models.simulated.model import SimulatedModel
from gr_notebook.review.compare import compare

Factory = Callable[..., gr.Agent]


class NoListing:
    """Denies ``list_files``: a policy to try before trusting it."""

    name = "no_listing"

    def __init__(self) -> None:
        self.results: list[str] = []

    def check(self, tool: Any, params: Mapping[str, Any], *, context: Any) -> gr.PolicyDecision:
        if tool.name == "list_files":
            return gr.PolicyDecision.deny("listing the folder is not allowed")
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        self.results.append(tool.name)


class Broken:
    name = "broken"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        raise ValueError("the policy has a bug")

    def on_result(self, *args: Any, **kwargs: Any) -> None:
        raise KeyError("on_result has a bug too")


def every_call(text: str = "Check your work against the plan.") -> gr.FeedbackProviderConfig:
    return gr.FeedbackProviderConfig(
        provider=gr.StaticFeedbackProvider(text, name="Checker"),
        trigger=gr.FeedbackTrigger(every_n_calls=1),
    )


AGGRESSIVE = gr.InterventionConfig(
    check_every=1,
    min_steps_before_intervention=1,
    consecutive_stuck_tolerance=1,
    grace_period_after_reset=0,
    active_edit_threshold=99,
)

SCRIPT = [
    gr.tool_call("write_file", path="notes.md", content="a\n"),
    gr.tool_call("list_files"),
    gr.text("Done."),
]


def shadow_run(make_agent: Factory, shadow: list[object], **kwargs: Any) -> gr.Run:
    agent = make_agent(
        gr.ScriptedModel(list(SCRIPT)), self_regulation=False, shadow=shadow, **kwargs
    )
    return agent.run_sync("job")


# -- byte for byte ------------------------------------------------------------------------------


class Recording:
    """The simulated agent, keeping every request it is sent."""

    def __init__(self) -> None:
        self.inner = SimulatedModel("diligent", seed=3)
        self.requests: list[ModelRequest] = []

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: ModelRequest) -> ModelResponse:
        self.requests.append(request)
        return await self.inner.complete(request)


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_a_run_with_shadows_makes_the_same_requests_and_files_byte_for_byte(
    tmp_path: Path,
) -> None:
    shadows: list[object] = [
        NoListing(),
        every_call(),
        gr.FileOutputChecker(["never_written.md"]),
        AGGRESSIVE,
    ]

    def job(shadow: list[object], store: str) -> tuple[gr.Run, list[str], dict[str, bytes]]:
        ws = tmp_path / "ws"  # the same path both times: paths appear in the requests
        if ws.exists():
            shutil.rmtree(ws)
        model = Recording()
        agent = gr.Agent(
            model, workspace=ws, store=tmp_path / store, clock=gr.FakeClock(), shadow=shadow
        )
        run = agent.run_sync("Write a short report on the files in this folder into report.md.")
        return run, [repr(r) for r in model.requests], _files(ws)

    plain, plain_requests, plain_files = job([], "plain.sqlite")
    shadowed, requests, files = job(shadows, "shadowed.sqlite")
    assert plain.status == shadowed.status == "completed"
    assert len(requests) == len(plain_requests) > 20
    assert requests == plain_requests  # every message sent, byte for byte
    assert files == plain_files
    # ... while the shadows decided all along, and said where they would have acted
    assert plain.shadow_df().empty
    kinds = shadowed.shadow_df().groupby(["kind", "live", "decision"]).size().to_dict()
    assert kinds[("policy", "allow", "deny")] >= 1
    assert kinds[("feedback", "skip", "fire")] == len(plain.tool_calls_df())
    assert kinds[("checker", "accept", "refuse")] == 1
    assert kinds[("intervention", "skip", "replan")] >= 1
    for frame in ("policy_df", "feedback_df", "completion_df", "interventions_df"):
        assert "shadow" in set(getattr(shadowed, frame)()["mode"])
    assert list(shadowed.policy_df().query("mode == 'live'").index) == []  # no live policy
    assert gr.lint_guidance(plain) == []


# -- each kind ----------------------------------------------------------------------------------


def test_a_shadow_policy_denies_nothing_and_remembers_what_really_ran(make_agent: Factory) -> None:
    policy = NoListing()
    run = shadow_run(make_agent, [policy])
    assert run.status == "ended"
    listing = run.tool_calls_df().query("tool == 'list_files'")
    assert not listing.is_error.any()  # it ran: the denial never reached the run
    [denial] = run.policy_df().query("decision == 'deny'").itertuples()
    assert denial.mode == "shadow" and denial.reason == "listing the folder is not allowed"
    assert policy.results == ["write_file", "list_files"]  # on_result after live successes
    [row] = run.shadow_df().itertuples()
    assert (row.kind, row.guardrail, row.tool, row.live, row.decision) == (
        "policy",
        "no_listing",
        "list_files",
        "allow",
        "deny",
    )
    ids = [e.tool_use_id for e in run.events.of_kind("tool_call")]
    assert row.tool_use_id == ids[1]


def test_shadow_feedback_reaches_no_tool_result(make_agent: Factory) -> None:
    model = gr.ScriptedModel(list(SCRIPT))
    agent = make_agent(model, self_regulation=False, shadow=[every_call("Slow down.")])
    run = agent.run_sync("job")
    assert all("Slow down." not in repr(r) for r in model.requests)
    assert all("<feedback" not in r for r in run.tool_calls_df().result)
    feedback = run.feedback_df()
    assert list(feedback["mode"]) == ["shadow", "shadow"]
    assert run.guidance_df().query("source.str.startswith('feedback')").empty  # no order
    rows = run.shadow_df()
    assert list(rows.kind) == ["feedback", "feedback"]
    assert list(rows.tool) == ["write_file", "list_files"]


def test_a_stricter_shadow_checker_refuses_nothing(make_agent: Factory) -> None:
    model = gr.ScriptedModel(list(SCRIPT))
    checker = gr.FileOutputChecker(["report.md"])
    run = make_agent(model, self_regulation=False, shadow=[checker]).run_sync("job")
    assert run.status == "ended" and len(model.requests) == 3  # the stop went through
    [check] = run.completion_df().itertuples()
    assert check.mode == "shadow" and check.complete is False and check.refusals == 1
    [row] = run.shadow_df().itertuples()
    assert (row.kind, row.guardrail, row.live, row.decision) == (
        "checker",
        "FileOutputChecker",
        "accept",
        "refuse",
    )
    assert "report.md" in row.reason


def test_a_shadow_checker_beside_a_live_one_keeps_its_own_streak(make_agent: Factory) -> None:
    model = gr.ScriptedModel([*SCRIPT[:2], gr.text("Done."), gr.text("Done.")])
    agent = make_agent(
        model,
        self_regulation=False,
        task_completion_checker=gr.FileOutputChecker(["notes.md"]),
        shadow=[gr.FileOutputChecker(["report.md"])],
    )
    run = agent.run_sync("job")
    checks = run.completion_df()
    assert list(zip(checks["mode"], checks.complete, strict=True)) == [
        ("live", True),
        ("shadow", False),
    ]
    assert run.status == "completed"


def test_a_shadow_intervention_stops_nothing(
    make_agent: Factory, caplog: pytest.LogCaptureFixture
) -> None:
    looping = [gr.tool_call("list_files") for _ in range(12)]
    model = gr.ScriptedModel([*looping, gr.text("Done.")])
    with caplog.at_level("WARNING", logger="gr_notebook"):
        run = make_agent(
            model, self_regulation=False, interventions=None, stuck_turns=None, shadow=[AGGRESSIVE]
        ).run_sync("job")
    tiers = [r.getMessage() for r in caplog.records if "INTERVENTION" in r.getMessage()]
    assert tiers and all(line.startswith("[shadow, not acted on] ") for line in tiers)
    assert run.status == "ended" and len(model.requests) == 13
    fired = run.interventions_df().query("fired")
    assert set(fired["mode"]) == {"shadow"}
    assert list(fired.tier[:3]) == [1, 2, 3]
    assert run.events.of_kind("prompt_injected") == []  # no strategy check was sent
    assert set(run.shadow_df().decision) >= {"replan", "rewind", "stop"}


def test_a_shadow_that_raises_is_recorded_and_never_enforced(make_agent: Factory) -> None:
    def failing_checker(context: Any) -> Any:
        raise RuntimeError("the checker has a bug")

    class BadProvider:
        name = "bad"

        def should_run(self, *, context: Any) -> bool:
            return True

        def provide(self, *, context: Any) -> Any:
            raise OSError("the provider has a bug")

    config = gr.FeedbackProviderConfig(
        provider=BadProvider(), trigger=gr.FeedbackTrigger(every_n_calls=1)
    )
    run = shadow_run(make_agent, [Broken(), failing_checker, config])
    assert run.status == "ended"
    assert not run.tool_calls_df().is_error.any()
    errors = [e for e in run.events.of_kind("error")]
    sources = {e.data["source"] for e in errors}
    assert sources == {"shadow:policy", "shadow:feedback", "shadow:completion_checker"}
    assert all(is_shadow(e) for e in errors)
    # as live, a failing policy denies and a failing checker refuses: recorded, not enforced
    assert set(run.policy_df().decision) == {"deny"}
    assert "the policy failed while checking" in run.policy_df().reason.iloc[0]
    assert list(run.completion_df().complete) == [False]
    # on the dashboard they stand with the shadows, not on the run's timeline
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    assert all(e.kind != "error" for e in tracker.timeline)
    assert "Error in a shadow policy (broken): ValueError: the policy has a bug" in [
        e.text for e in tracker.shadow
    ]


# -- bad input ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "says"),
    [
        (["no_secrets"], "got str"),
        ([42], "got int"),
        ([gr.ReadBeforeWritePolicy], "pass an instance, e.g. ReadBeforeWritePolicy(...)"),
        ([gr.StaticFeedbackProvider("x")], "gr.FeedbackProviderConfig(provider=..."),
        (
            [gr.FileOutputChecker(["a"]), gr.PlanBasedChecker()],
            "2 completion checkers; it takes one",
        ),
        ([gr.InterventionConfig(), AGGRESSIVE], "2 InterventionConfigs"),
        (gr.ReadBeforeWritePolicy(), "shadow takes a list of guardrails"),
    ],
)
def test_a_shadow_that_is_no_guardrail_gets_one_clear_error(given: Any, says: str) -> None:
    with pytest.raises(ConfigError) as caught:
        gr.Agent(store=False, shadow=given)
    message = str(caught.value)
    assert says in message
    if "got" in says:
        for kind in ("tool policy", "FeedbackProviderConfig", "completion checker"):
            assert kind in message
        assert "InterventionConfig" in message


def test_a_shadow_policy_naming_a_missing_tool_is_caught_at_start() -> None:
    policy = gr.SequentialDependencyPolicy({"deploy": {"run_tests"}})
    agent = gr.Agent(store=False, shadow=[policy])
    with pytest.raises(ConfigError, match="names tools this agent does not have"):
        agent.run_sync("job")


def test_the_shadows_are_in_the_config_and_survive_replace(make_agent: Factory) -> None:
    agent = gr.Agent(
        store=False,
        shadow=[NoListing(), every_call(), gr.FileOutputChecker(["a.md"]), AGGRESSIVE],
    )
    shadow = agent.config()["shadow"]
    assert shadow["policies"] == ["no_listing"]
    assert shadow["feedback_providers"] == ["Checker"]
    assert shadow["task_completion_checker"] == "FileOutputChecker"
    assert shadow["interventions"]["check_every"] == 1
    assert gr.Agent(store=False).config()["shadow"] is None
    assert agent.replace(name="other").config()["shadow"] == shadow
    assert agent.replace(shadow=[]).config()["shadow"] is None
    run = shadow_run(make_agent, [NoListing()])
    [started] = run.events.of_kind("run_started")
    assert started.data["config"]["shadow"]["policies"] == ["no_listing"]


# -- the consumers leave shadows out ------------------------------------------------------------


def test_counts_compare_and_the_dashboard_leave_shadows_out(make_agent: Factory) -> None:
    shadows: list[object] = [NoListing(), every_call(), gr.FileOutputChecker(["r.md"])]
    shadowed = shadow_run(make_agent, shadows)
    plain = shadow_run(make_agent, [])
    spec = RunSpec(agent="a", job="j", repeat=0, seed=0)
    record = record_of(spec, shadowed, wall_s=0.0, attempts=1, worker="w", store=None)
    assert (record.denials, record.refused_stops, record.interventions) == (0, 0, 0)
    assert record.guidance_conflicts == 0
    diff = compare(plain, shadowed)
    assert diff.outcomes.loc["policy_denials"].tolist() == [0, 0]
    tracker = RunTracker()
    for event in shadowed.events:
        tracker.add(event)
    assert tracker.feedback_total == 0 and not tracker.feedback
    assert all(e.kind not in ("policy_decision", "completion_check") for e in tracker.timeline)
    state = tracker.snapshot(shadowed)
    html = render_dashboard(state)
    assert "No feedback yet." in html  # the live feedback panel stays empty
    start = html.index("class='gr-shadow'")
    panel = html[start : html.index("class='gr-timeline'")]
    assert "color:#9e9e9e" in panel  # greyed
    assert "list_files denied by the policy no_listing" in panel
    assert "Feedback from Checker" in panel
    assert "refused" in panel
    assert html.index("gr-feedback") < start
    assert "Shadow guardrails, not enforced" in text_dashboard(state)
    assert "gr-shadow" not in render_dashboard(_tracked(plain).snapshot(plain))


def _tracked(run: gr.Run) -> RunTracker:
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    return tracker


def test_the_lint_checks_shadow_feedback_as_if_it_had_been_sent(make_agent: Factory) -> None:
    wrap_up = every_call("Stop now and call job_complete.")
    run = shadow_run(make_agent, [wrap_up])
    conflicts = gr.lint_guidance(run)
    assert conflicts and {c.mode for c in conflicts} == {"shadow"}
    assert all(str(c).startswith(f"turn {c.turn} (shadow)") for c in conflicts)
    assert any("Stop now" in " ".join(c.texts) for c in conflicts)
    healthy = shadow_run(make_agent, [every_call()])
    assert gr.lint_guidance(healthy) == []


# -- resume and fork ----------------------------------------------------------------------------


def test_a_fork_keeps_the_shadows_state_and_a_promoted_policy_its_memory(
    make_agent: Factory,
) -> None:
    script = [
        gr.tool_call("read_file", path="instructions.md"),
        gr.tool_call("write_file", path="instructions.md", content="edited\n"),
        gr.tool_call("list_files"),
        gr.text("Done."),
    ]

    def read_first() -> gr.SequentialDependencyPolicy:
        return gr.SequentialDependencyPolicy({"write_file": {"read_file"}})

    agent = make_agent(
        gr.ScriptedModel(list(script)),
        self_regulation=False,
        shadow=[read_first(), every_call(), gr.FileOutputChecker(["x.md"]), AGGRESSIVE],
    )
    run = agent.run_sync("job")
    assert run.status == "ended"
    assert run.shadow_df().query("kind == 'policy'").empty  # read, then written: allowed
    snapshot = run._loop.state.snapshot()  # type: ignore[union-attr]
    assert snapshot["shadow"]["guardrails"]["policies"]["sequential_dependency"]
    # the same agent, forked at turn 3: the shadows go on from where they were
    same = agent.replace(model=gr.ScriptedModel(script[2:]))
    forked = run.fork(3, same)
    assert forked.status == "ended"
    calls = [e for e in forked.events.of_kind("feedback") if e.turn >= 3]
    assert [e.data["call_index"] for e in calls][-1] == 3
    # the policy live in the fork remembers the read its shadow saw
    live = agent.replace(
        model=gr.ScriptedModel(
            [gr.tool_call("write_file", path="instructions.md", content="again\n"), gr.text("Ok")]
        ),
        policies=[read_first()],
        shadow=[],
    )
    promoted = run.fork(3, live)
    [resumed] = promoted.events.of_kind("run_resumed")
    decisions = promoted.policy_df().query(f"seq > {resumed.seq}")
    assert list(decisions.decision) == ["allow"], list(decisions.reason)
    assert not promoted.tool_calls_df().is_error.iloc[-1]


def test_the_snapshot_round_trips_the_shadows(make_agent: Factory) -> None:
    run = shadow_run(make_agent, [NoListing(), every_call(), AGGRESSIVE])
    state = run._loop.state  # type: ignore[union-attr]
    snapshot = state.snapshot()
    assert snapshot["shadow"]["guardrails"]["feedback"]["recent"] is None  # kept once, live
    fresh = type(state)(run._loop.definition, workspace=state.workspace, clock=state.clock)  # type: ignore[union-attr]
    fresh.restore(snapshot)
    assert fresh.guards.shadow_snapshot() is not None
    assert fresh.guards.shadow_snapshot() == state.guards.shadow_snapshot()
    assert fresh.guards._shadow.guards.feedback.recent == state.guards.feedback.recent  # type: ignore[union-attr]


async def test_a_resumed_run_goes_on_with_its_shadows_state(make_agent: Factory) -> None:
    def read_first() -> gr.SequentialDependencyPolicy:
        return gr.SequentialDependencyPolicy({"write_file": {"read_file"}})

    first = [
        gr.tool_call("read_file", path="instructions.md"),
        gr.tool_call("list_files"),
        gr.tool_call("list_files"),
    ]
    agent = make_agent(
        gr.ScriptedModel(first),
        self_regulation=False,
        shadow=[read_first(), every_call()],
    )
    run = agent.start("job")

    def stop_at_turn_2(event: gr.Event) -> None:
        if event.kind == "tool_call" and event.turn == 2:
            run.cancel("stopped by the test")

    run.subscribe(stop_at_turn_2)
    await run.wait()
    assert run.status == "cancelled"
    rest = [gr.tool_call("write_file", path="notes.md", content="x\n"), gr.text("Done.")]
    resumed = gr.resume(run, agent.replace(model=gr.ScriptedModel(rest)), wait=False)
    await resumed.wait()
    assert resumed.status == "ended"
    [resumed_at] = resumed.events.of_kind("run_resumed")
    after = [e for e in resumed.events if e.seq > resumed_at.seq and is_shadow(e)]
    feedback = [e.data["call_index"] for e in after if e.kind == "feedback"]
    # the latest checkpoint came after the first call: a fresh shadow would count 1; the
    # resume rebuilds the turn the stop cut, whose list_files (a read) runs again, then writes
    assert feedback == [2, 3]
    policy = [e for e in after if e.kind == "policy_decision"]
    # it remembers the read: the write is allowed (the rebuilt list_files was judged too)
    assert [(e.data["tool"], e.data["allowed"]) for e in policy][-1] == ("write_file", True)
