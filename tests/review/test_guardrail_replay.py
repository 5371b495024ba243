"""``gr.replay_guardrails`` and ``gr.sweep_guardrails``: every kind of guardrail replayed on
recorded runs, against the files as they were, with no model call."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import gr_notebook as gr
from gr_notebook.errors import ConfigError, StoreError
from gr_notebook.events import PolicyDecisionEvent, ToolCallEvent
from gr_notebook.guardrails.completion import CompositeChecker
from gr_notebook.guardrails.interventions import ACTIONS
from gr_notebook.history.store import Store
from gr_notebook.review import guardrail_replay
from gr_notebook.review.guardrail_replay import CANNOT_TELL, COLUMNS

JOB = gr.examples.QUICKSTART
RBW = gr.ReadBeforeWritePolicy()
SEQUENCE = gr.SequentialDependencyPolicy({"job_complete": {"list_files"}})
PLAN = gr.PlanBasedChecker()
FILES = gr.FileOutputChecker(["notes.md", "report.md"])
BOTH = CompositeChecker([gr.PlanBasedChecker(), gr.FileOutputChecker(["notes.md"])])
EVERY_4 = gr.FeedbackProviderConfig(
    gr.StaticFeedbackProvider("Keep notes short."), gr.FeedbackTrigger(every_n_calls=4)
)
ON_NOTES = gr.FeedbackProviderConfig(
    gr.StaticFeedbackProvider("You made notes; keep them tidy.", name="Notes"),
    gr.FeedbackTrigger(on_file_created=gr.FileCreatedTrigger("notes.md")),
)
DEADLINE = gr.FeedbackProviderConfig(gr.DeadlineFeedback(), gr.FeedbackTrigger(every_n_calls=5))
EAGER = gr.InterventionConfig(
    min_steps_before_intervention=3, check_every=2, consecutive_stuck_tolerance=1
)


@dataclasses.dataclass(frozen=True)
class WritesEarly:
    """Denies writes after the run's first 20 tool calls: it reads the call count."""

    name: str = "writes_early"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        if tool.name == "write_file" and context.call_index >= 20:
            return gr.PolicyDecision.deny("write in the first 20 calls only")
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        pass


LIVE: dict[str, tuple[str, dict[str, Any]]] = {
    "read_before_write": ("simulated:reckless", {"policies": [RBW]}),
    "sequential_dependency": ("simulated:impatient", {"policies": [SEQUENCE]}),
    "plan_based_checker": ("simulated:quitter", {"task_completion_checker": PLAN}),
    "file_output_checker": (
        "simulated:impatient",
        {"task_completion_checker": FILES, "max_refusals": 3},
    ),
    "composite_checker": ("simulated:quitter", {"task_completion_checker": BOTH}),
    "static_and_file_created_feedback": (
        "simulated:diligent",
        {"feedback_providers": [EVERY_4, ON_NOTES]},
    ),
    "deadline_feedback": (
        "simulated:diligent",
        {"feedback_providers": [DEADLINE], "budget": gr.Budget(deadline_s=3600)},
    ),
    "interventions": ("simulated:impatient", {"interventions": EAGER}),
    "interventions_wound_down": (
        "simulated:diligent",
        {"interventions": gr.InterventionConfig(), "max_iterations": 30},
    ),
    "call_count_policy": ("simulated:diligent", {"policies": [WritesEarly()]}),
}
REPLAYED = ("policies", "feedback_providers", "task_completion_checker", "interventions")


def agent_in(root: Path, model: str, name: str, **kwargs: Any) -> gr.Agent:
    kwargs.setdefault("store", root / "store.sqlite")
    kwargs.setdefault("max_iterations", 200)
    return gr.Agent(model, workspace=root / name, **kwargs)


@pytest.fixture(scope="module")
def live_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, gr.Run]:
    root = tmp_path_factory.mktemp("live")
    return {
        name: agent_in(root, model, name, **options).run_sync(JOB)
        for name, (model, options) in LIVE.items()
    }


@pytest.fixture(scope="module")
def reckless(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    """The reckless agent with no policy: it overwrites notes.md without reading it."""
    root = tmp_path_factory.mktemp("reckless")
    return agent_in(root, "simulated:reckless", "ws").run_sync(JOB)


def replayed(options: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in options.items() if k in REPLAYED}


# -- a guardrail replayed where it was live -----------------------------------------------------


@pytest.mark.parametrize("case", list(LIVE))
def test_a_guardrail_replayed_where_it_was_live_decides_as_it_did_live(
    live_runs: dict[str, gr.Run], case: str
) -> None:
    run = live_runs[case]
    replay = gr.replay_guardrails(run, **replayed(LIVE[case][1]))
    frame = replay.df
    assert list(frame.columns) == COLUMNS
    assert len(frame) > 0
    assert (frame["decision"] == frame["live"]).all(), frame[frame["decision"] != frame["live"]]
    assert not frame["differs"].any() and not frame["after_divergence"].any()
    assert replay.first_divergence(run) is None
    # row for row: what acted live is what acts in the replay
    live_policy = run.policy_df()
    denials = (frame["kind"] == "policy") & (frame["decision"] == "deny")
    live_denials = (live_policy["decision"] == "deny").sum() if len(live_policy) else 0
    assert denials.sum() == live_denials
    completion = run.completion_df()
    refusals = (frame["kind"] == "checker") & (frame["decision"] == "refuse")
    live_refusals = (completion["complete"] == False).sum() if len(completion) else 0  # noqa: E712
    assert refusals.sum() == live_refusals
    fired = frame[frame["decision"] == "fire"]
    live_fed = [e for e in run.events if e.kind == "feedback" and e.config is not None]
    assert len(fired) == len(live_fed)
    fired_live = [e for e in run.events if e.kind == "intervention"]
    assert frame["decision"].isin(ACTIONS).sum() == len(fired_live)


def test_the_cases_show_each_guardrail_acting(live_runs: dict[str, gr.Run]) -> None:
    """The row-for-row test above proves something only where the guardrails act."""
    acted = {
        case: gr.replay_guardrails(live_runs[case], **replayed(LIVE[case][1])).df["decision"]
        for case in LIVE
    }
    assert (acted["read_before_write"] == "deny").any()
    assert (acted["sequential_dependency"] == "deny").any()
    for case in ("plan_based_checker", "file_output_checker", "composite_checker"):
        assert (acted[case] == "refuse").any() and (acted[case] == "accept").any()
    for case in ("static_and_file_created_feedback", "deadline_feedback"):
        assert (acted[case] == "fire").any()
    assert acted["interventions"].isin(ACTIONS).any()
    assert (acted["call_count_policy"] == "deny").any()
    wound_down = live_runs["interventions_wound_down"]
    assert wound_down.status == "budget_exhausted"
    checks = [e for e in wound_down.events if e.kind.startswith("intervention")]
    assert len(acted["interventions_wound_down"]) == len(checks)  # none once told to wrap up


# -- a guardrail that was not live ---------------------------------------------------------------


def test_a_new_policy_diverges_where_it_would_have_denied(reckless: gr.Run) -> None:
    replay = gr.replay_guardrails(reckless, policies=[RBW])
    where = replay.first_divergence(reckless)
    assert where is not None
    assert (where.tool, where.decision, where.live) == ("write_file", "deny", "allow")
    assert "notes.md" in (where.reason or "")
    assert f"turn {where.turn}" in str(where)
    frame = replay.df
    assert (frame.loc[frame["seq"] > where.seq, "after_divergence"]).all()
    assert not (frame.loc[frame["seq"] <= where.seq, "after_divergence"]).any()
    summary = replay.summary()
    [row] = summary.to_dict("records")
    assert row["guardrail"] == "read_before_write" and row["deny"] >= 1
    assert row["first_divergence_turn"] == where.turn
    assert "diverge" in repr(replay) and "<table" in replay._repr_html_()


def test_a_fork_at_the_divergence_with_the_policy_live_denies_there(reckless: gr.Run) -> None:
    where = gr.replay_guardrails(reckless, policies=[RBW]).first_divergence(reckless)
    assert where is not None
    forked = reckless.fork(turn=where.turn, agent=gr.Agent("simulated:reckless", policies=[RBW]))
    assert forked.status == "completed"
    denials = forked.policy_df()
    denials = denials[denials["decision"] == "deny"]
    assert len(denials) >= 1
    assert denials["turn"].iloc[0] == where.turn
    assert "notes.md" in denials["reason"].iloc[0]


def test_a_checker_replayed_on_a_run_without_one_would_refuse_the_early_stop(
    tmp_path: Path,
) -> None:
    run = agent_in(tmp_path, "simulated:quitter", "ws").run_sync(JOB)
    replay = gr.replay_guardrails(run, task_completion_checker=gr.PlanBasedChecker())
    where = replay.first_divergence(run)
    assert where is not None and where.point == "stop"
    assert (where.decision, where.live) == ("refuse", "accept")


def test_feedback_replayed_with_another_cadence_counts_its_blocks(reckless: gr.Run) -> None:
    every = gr.FeedbackProviderConfig(
        gr.StaticFeedbackProvider("Check your notes."), gr.FeedbackTrigger(every_n_calls=10)
    )
    frame = gr.replay_guardrails(reckless, feedback_providers=[every]).df
    calls = len(reckless.tool_calls_df())
    assert (frame["decision"] == "fire").sum() == calls // 10
    assert (frame["live"] == "skip").all()


# -- what a replay cannot know -------------------------------------------------------------------


def test_without_checkpoints_workspace_readers_cannot_tell(tmp_path: Path) -> None:
    run = agent_in(tmp_path, "simulated:impatient", "ws", store=False).run_sync(JOB)
    replay = gr.replay_guardrails(
        run, policies=[RBW, SEQUENCE], task_completion_checker=gr.FileOutputChecker(["a.md"])
    )
    frame = replay.df
    writes = frame[(frame["guardrail"] == "read_before_write") & (frame["tool"] == "write_file")]
    assert len(writes) > 0 and (writes["decision"] == CANNOT_TELL).all()
    assert writes["reason"].str.contains("no checkpoint").all()
    reads = frame[(frame["guardrail"] == "read_before_write") & (frame["tool"] == "read_file")]
    assert len(reads) > 0 and (reads["decision"] == "allow").all()  # reads no file to decide
    assert (frame.loc[frame["guardrail"] == "sequential_dependency", "decision"] == "deny").any()
    [stop] = frame[frame["kind"] == "checker"].to_dict("records")
    assert (stop["decision"], stop["reason"]) == (
        "not asked",
        "sequential_dependency denied the call first",
    )
    alone = gr.replay_guardrails(run, task_completion_checker=gr.FileOutputChecker(["a.md"])).df
    assert len(alone) == 1 and alone["decision"].item() == CANNOT_TELL
    assert not frame.loc[frame["decision"] == CANNOT_TELL, "differs"].any()
    # its events alone replay the same
    again = gr.replay_guardrails(list(run.events), policies=[RBW, SEQUENCE])
    assert (
        again.df["decision"].tolist() == frame.loc[frame["kind"] == "policy", "decision"].tolist()
    )


def test_shadow_decisions_are_not_what_happened(reckless: gr.Run) -> None:
    """A shadow denial in the record did not stop the call: the replay compares with what
    happened live."""
    events = []
    for event in reckless.events:
        if isinstance(event, ToolCallEvent) and event.tool == "write_file":
            events.append(
                PolicyDecisionEvent(
                    tool="write_file",
                    allowed=False,
                    policy="read_before_write",
                    reason="shadow",
                    policies=["read_before_write"],
                    tool_use_id=event.tool_use_id,
                    mode="shadow",
                )
            )
        events.append(event)
    events = [dataclasses.replace(e, seq=i) for i, e in enumerate(events)]
    frame = gr.replay_guardrails(events, policies=[SEQUENCE]).df
    assert (frame["live"] == "allow").all()


# -- asks and failures ---------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class AskForWrites:
    name: str = "ask_for_writes"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        if tool.name == "write_file":
            return gr.PolicyDecision.ask("a person approves every write")
        return gr.PolicyDecision.allow()

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        pass


@dataclasses.dataclass(frozen=True)
class Broken:
    name: str = "broken"

    def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
        raise ValueError("no idea")

    def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
        pass


def test_an_ask_is_recorded_as_ask(reckless: gr.Run) -> None:
    frame = gr.replay_guardrails(reckless, policies=[AskForWrites()]).df
    writes = frame[frame["tool"] == "write_file"]
    assert (writes["decision"] == "ask").all()
    assert (writes["reason"] == "a person approves every write").all()
    assert writes["differs"].all()
    assert (frame.loc[frame["tool"] != "write_file", "decision"] == "allow").all()


def test_guardrails_that_raise_are_recorded_as_they_act_live(reckless: gr.Run) -> None:
    def crashes(context: Any) -> Any:
        raise RuntimeError("checker down")

    class Silent:
        name = "Silent"

        def should_run(self, *, context: Any) -> bool:
            return True

        def provide(self, *, context: Any) -> Any:
            raise KeyError("gone")

    config = gr.FeedbackProviderConfig(Silent(), gr.FeedbackTrigger(every_n_calls=1))
    frame = gr.replay_guardrails(
        reckless, policies=[Broken()], task_completion_checker=crashes, feedback_providers=[config]
    ).df
    policy = frame[frame["guardrail"] == "broken"]
    assert (policy["decision"] == "deny").all()
    assert policy["reason"].str.contains("the policy failed while checking").all()
    assert (policy["error"] == "ValueError: no idea").all()
    stop = frame[frame["kind"] == "checker"]
    assert len(stop) > 0 and (stop["decision"] == "not asked").all()  # the policy denied first
    fed = frame[frame["kind"] == "feedback"]
    assert (fed["decision"] == "skip").all()
    assert (fed["error"] == "KeyError: 'gone'").all()


def test_a_crashing_checker_refuses_with_its_error(tmp_path: Path) -> None:
    run = agent_in(tmp_path, "simulated:impatient", "ws").run_sync(JOB)

    def crashes(context: Any) -> Any:
        raise RuntimeError("checker down")

    frame = gr.replay_guardrails(run, task_completion_checker=crashes).df
    assert (frame["decision"] == "refuse").all()
    assert (frame["error"] == "RuntimeError: checker down").all()


# -- where the runs come from --------------------------------------------------------------------


def test_run_ids_with_a_store_and_a_mapping_of_runs(reckless: gr.Run) -> None:
    store = reckless.store
    assert store is not None
    by_id = gr.replay_guardrails([reckless.run_id], store=store.path, policies=[RBW])
    by_run = gr.replay_guardrails(reckless, policies=[RBW])
    pd.testing.assert_frame_equal(by_id.df, by_run.df)
    with Store(store.path, create=False) as opened:
        assert len(gr.replay_guardrails(reckless.run_id, store=opened, policies=[RBW]).df)
    labelled = gr.replay_guardrails({"wild": reckless}, policies=[RBW])
    assert set(labelled.df["run"]) == {"wild"}
    assert labelled.first_divergence("wild") == dataclasses.replace(
        by_run.first_divergence(reckless),  # type: ignore[arg-type]
        run="wild",
    )


def test_bad_input_says_what_to_type(reckless: gr.Run, tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="needs a guardrail to replay"):
        gr.replay_guardrails(reckless)
    with pytest.raises(StoreError, match="no run store at"):  # the default one, here none
        gr.replay_guardrails("20260101-000000-abcdef", policies=[RBW], store=tmp_path / "x")
    store = reckless.store
    assert store is not None
    with pytest.raises(ConfigError, match="no run 'nope'"):
        gr.replay_guardrails(["nope"], store=store.path, policies=[RBW])
    with pytest.raises(ConfigError, match="runs takes a run"):
        gr.replay_guardrails(42, policies=[RBW])
    with pytest.raises(ConfigError, match="runs takes a run"):
        gr.replay_guardrails([reckless, 3.5], policies=[RBW])
    with pytest.raises(ConfigError, match="not a tool policy"):
        gr.replay_guardrails(reckless, policies=[gr.ReadBeforeWritePolicy])
    with pytest.raises(ConfigError, match="FeedbackProviderConfig"):
        gr.replay_guardrails(reckless, feedback_providers=[RBW])
    with pytest.raises(ConfigError, match="InterventionConfig"):
        gr.replay_guardrails(reckless, interventions={"check_every": 3})
    with pytest.raises(ConfigError, match="takes a list"):
        gr.replay_guardrails(reckless, policies=RBW)
    with pytest.raises(ConfigError, match="was not replayed here"):
        gr.replay_guardrails(reckless, policies=[RBW]).first_divergence("other")


# -- sweeps --------------------------------------------------------------------------------------


def test_sweep_gives_a_row_per_run_and_setting(
    live_runs: dict[str, gr.Run], reckless: gr.Run
) -> None:
    runs = [reckless, live_runs["read_before_write"]]

    def make(every: int) -> gr.FeedbackProviderConfig:
        provider = gr.StaticFeedbackProvider("Check your notes.")
        return gr.FeedbackProviderConfig(provider, gr.FeedbackTrigger(every_n_calls=every))

    frame = gr.sweep_guardrails(runs, make=make, grid={"every": [5, 10]})
    assert list(frame.columns[:3]) == ["run", "model", "every"]
    assert len(frame) == 4
    by_run = frame.set_index(["run", "every"])["feedback"]
    assert by_run[(reckless.run_id, 5)] > by_run[(reckless.run_id, 10)] > 0
    both = gr.sweep_guardrails(
        [reckless],
        make=lambda strict: {
            "policies": [RBW] if strict else [],
            "task_completion_checker": gr.PlanBasedChecker(),
        },
        grid={"strict": [False, True]},
    ).set_index("strict")
    assert both.loc[True, "denials"] > both.loc[False, "denials"] == 0
    assert both.loc[True, "first_divergence_turn"] is not None


def test_a_replay_plots_per_guardrail_the_decisions_that_differ(
    live_runs: dict[str, gr.Run], reckless: gr.Run
) -> None:
    every = gr.FeedbackProviderConfig(
        gr.StaticFeedbackProvider("Check your notes."), gr.FeedbackTrigger(every_n_calls=10)
    )
    replay = gr.replay_guardrails(
        [reckless, live_runs["read_before_write"]], policies=[RBW], feedback_providers=[every]
    )
    figure = replay.plot()
    [axes] = figure.axes
    at = {t.get_position()[1]: t.get_text() for t in axes.get_yticklabels()}
    top_down = [at[y] for y in sorted(at, reverse=True)]
    assert top_down == ["read_before_write (policy)", "Static (feedback)"]  # as replayed
    frame = replay.df
    differs = frame.groupby("guardrail")["differs"].sum()
    widths = {at[bar.get_y() + bar.get_height() / 2]: bar.get_width() for bar in axes.patches}
    assert widths == {
        "read_before_write (policy)": differs["read_before_write"],
        "Static (feedback)": differs["Static"],
    }
    rows = (frame["guardrail"] == "read_before_write").sum()
    notes = [t.get_text() for t in axes.texts]
    assert f" {differs['read_before_write']} of {rows}" in notes
    assert {t.get_text() for t in axes.get_legend().get_texts()} == {"policy", "feedback"}
    assert figure._repr_png_()[:4] == b"\x89PNG"


def test_a_sweep_plots_a_count_across_its_grid(reckless: gr.Run) -> None:
    def make(every: int, words: str) -> gr.FeedbackProviderConfig:
        provider = gr.StaticFeedbackProvider(f"Check your {words}.")
        return gr.FeedbackProviderConfig(provider, gr.FeedbackTrigger(every_n_calls=every))

    sweep = gr.sweep_guardrails(
        [reckless], make=make, grid={"every": [5, 10, 20], "words": ["notes", "plan"]}
    )
    assert sweep.grid == ["every", "words"]
    [axes] = sweep.plot("feedback").axes
    assert axes.get_xlabel() == "every" and axes.get_ylabel() == "feedback"
    assert [line.get_label() for line in axes.get_lines()] == ["words=notes", "words=plan"]
    expected = sweep[sweep.words == "notes"].set_index("every")["feedback"]
    first = axes.get_lines()[0]
    assert list(first.get_xdata()) == [5, 10, 20]
    assert list(first.get_ydata()) == [float(expected[v]) for v in (5, 10, 20)]
    assert "differs, mean per run" in sweep.plot().axes[0].get_title()
    assert sweep.plot.bar is not None  # pandas' plots stay where they were
    assert type(sweep.head()) is pd.DataFrame  # frames made from it are plain
    with pytest.raises(ConfigError, match="'model' is not one: decisions, denials"):
        sweep.plot("model")


def test_sweep_bad_input(reckless: gr.Run) -> None:
    with pytest.raises(ConfigError, match="at least one value"):
        gr.sweep_guardrails([reckless], make=lambda n: RBW, grid={})
    with pytest.raises(ConfigError, match="at least one value"):
        gr.sweep_guardrails([reckless], make=lambda n: RBW, grid={"n": []})
    with pytest.raises(ConfigError, match=r"make\(n=1\) returned int"):
        gr.sweep_guardrails([reckless], make=lambda n: 42, grid={"n": [1]})
    with pytest.raises(ConfigError, match="keyword arguments"):
        gr.sweep_guardrails([reckless], make=lambda n: {"policy": RBW}, grid={"n": [1]})
    with pytest.raises(ConfigError, match="runs takes a run"):
        gr.sweep_guardrails(42, make=lambda n: RBW, grid={"n": [1]})
    with pytest.raises(ConfigError, match="make takes a function"):
        gr.sweep_guardrails([reckless], make=RBW, grid={"n": [1]})  # type: ignore[arg-type]


def test_a_grid_past_the_bound_is_refused_before_anything_is_made(reckless: gr.Run) -> None:
    def make(**params: int) -> object:
        raise AssertionError(f"make({params}) was called")

    with pytest.raises(ConfigError, match=r"20,000 settings \(200 a × 100 b\)"):
        gr.sweep_guardrails([reckless], make=make, grid={"a": range(200), "b": range(100)})
    grid = {"a": range(1000), "b": range(1000)}  # issue 39: hours of replays, no word
    with pytest.raises(ConfigError) as caught:
        gr.sweep_guardrails([reckless], make=make, grid=grid)
    message = str(caught.value)
    assert "1,000,000 settings (1,000 a × 1,000 b)" in message
    assert "at most 10,000" in message and "range(0, 1000, 50)" in message
    assert guardrail_replay.MAX_SETTINGS == 10_000
    bound = {"a": range(100), "b": range(100)}  # the bound itself is swept: make is called
    with pytest.raises(ConfigError, match=r"make\(a=0, b=0\) raised AssertionError"):
        gr.sweep_guardrails([reckless], make=make, grid=bound)


def test_a_long_sweep_shows_its_progress(
    reckless: gr.Run, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    twice = {"a": reckless, "b": reckless}
    gr.sweep_guardrails(twice, make=lambda n: RBW, grid={"n": [1, 2]})
    assert capsys.readouterr().err == ""  # a short sweep stays quiet
    monkeypatch.setattr(guardrail_replay, "LONG_SWEEP", 4)
    gr.sweep_guardrails(twice, make=lambda n: RBW, grid={"n": [1, 2]})
    shown = capsys.readouterr().err
    assert "sweep" in shown and "4/4" in shown and "replay" in shown
    gr.sweep_guardrails([reckless], make=lambda n: RBW, grid={"n": [1]}, progress=True)
    assert "1/1" in capsys.readouterr().err
    gr.sweep_guardrails(twice, make=lambda n: RBW, grid={"n": [1, 2]}, progress=False)
    assert capsys.readouterr().err == ""


def test_a_make_that_raises_names_the_setting(reckless: gr.Run) -> None:
    def make(n: int) -> object:
        return [RBW] if 1 / (n - 2) else []

    with pytest.raises(ConfigError, match=r"make\(n=2\) raised ZeroDivisionError") as caught:
        gr.sweep_guardrails([reckless], make=make, grid={"n": [1, 2, 3]})
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    with pytest.raises(ConfigError, match=r"the setting grace_period_after_reset=-1 .*grace"):
        gr.sweep_guardrails([reckless], grid={"grace_period_after_reset": [5, -1]})


def test_an_experiments_results_replay_from_its_merged_store(tmp_path: Path) -> None:
    agents = {
        "bare": gr.Agent("simulated:reckless", max_iterations=120),
        "read-first": gr.Agent("simulated:reckless", max_iterations=120, policies=[RBW]),
    }
    results = gr.Experiment(
        agents, {"guide": JOB}, root=tmp_path / "exp", store=tmp_path / "store.sqlite"
    ).run(progress=False)
    replay = gr.replay_guardrails(results, policies=[RBW])
    ids = results.df.set_index("agent")["run_id"]
    assert replay.runs == tuple(results.df["run_id"])
    assert replay.first_divergence(ids["read-first"]) is None
    where = replay.first_divergence(ids["bare"])
    assert where is not None and (where.decision, where.live) == ("deny", "allow")
    frame = replay.df.set_index("run")
    assert (frame.loc[ids["read-first"], "decision"] == "deny").sum() == (
        results.df.set_index("agent").loc["read-first", "denials"]
    )
    swept = gr.sweep_guardrails(results, make=lambda on: [RBW] if on else [], grid={"on": [1]})
    assert list(swept["run"]) == list(results.df["run_id"])  # read while the store is open


def test_a_clipped_input_is_read_whole_from_the_checkpoints(reckless: gr.Run) -> None:
    """The events clip long inputs; the policies see each call's whole input."""
    seen: list[int] = []

    @dataclasses.dataclass(frozen=True)
    class Measures:
        name: str = "measures"

        def check(self, tool: Any, params: Any, *, context: Any) -> gr.PolicyDecision:
            if tool.name == "write_file":
                seen.append(len(params["content"]))
            return gr.PolicyDecision.allow()

        def on_result(self, tool: Any, params: Any, result: Any, *, context: Any) -> None:
            pass

    clipped = [
        e
        for e in reckless.events
        if isinstance(e, ToolCallEvent)
        and e.tool == "write_file"
        and str(e.input["content"]).endswith("…")
    ]
    assert clipped, "the run has no write long enough to be clipped"
    frame = gr.replay_guardrails(reckless, policies=[Measures()]).df
    assert frame["full_input"].all()
    assert max(seen) > len(clipped[0].input["content"])
