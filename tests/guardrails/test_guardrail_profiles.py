"""The misbehaving simulated agents, each with and without the guardrail it trips, and
what the guardrails look like in DataFrames, on the dashboard and under hypothesis."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gr_notebook as gr
from gr_notebook.display.render import render_dashboard
from gr_notebook.display.state import RunTracker
from gr_notebook.errors import WorkspaceError
from gr_notebook.guardrails import canonical_path

INSTRUCTIONS = "## Gather\n- a\n- b\n- c\n- d\n## Build\n- e\n- f\n- g\n- h\n## Ship\n- i\n- j\n"


def run_profile(make_agent: Callable[..., gr.Agent], profile: str, **kwargs: Any) -> gr.Run:
    return make_agent(
        f"simulated:{profile}", max_iterations=400, workspace=None, **kwargs
    ).run_sync(INSTRUCTIONS)


def test_reckless_clobbers_notes_without_the_policy(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(make_agent, "reckless")
    notes = run.workspace.read_text("notes.md")
    assert run.job is not None
    assert "Finished phase 1" not in notes  # the accomplishment of phase 1 was overwritten


def test_reckless_is_denied_then_reads_and_merges(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(make_agent, "reckless", policies=[gr.ReadBeforeWritePolicy()])
    denials = run.policy_df().query("decision == 'deny'")
    assert len(denials) >= 2 and set(denials.tool) == {"write_file"}
    assert denials.reason.str.contains("read_file\\('notes.md'\\)").all()
    notes = run.workspace.read_text("notes.md")
    assert "Finished phase 1" in notes and "Starting phase 3" in notes  # nothing lost
    assert run.job is not None


def test_impatient_skips_verification_without_guardrails(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = run_profile(make_agent, "impatient")
    assert run.job is not None and not run.workspace.exists("report.md")


def test_impatient_is_held_to_the_order(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(
        make_agent,
        "impatient",
        policies=[gr.SequentialDependencyPolicy({"job_complete": {"list_files"}})],
        task_completion_checker=gr.PlanBasedChecker(),
    )
    [denial] = run.policy_df().query("decision == 'deny'").itertuples()
    assert denial.tool == "job_complete" and "requires list_files" in denial.reason
    assert run.job is not None and run.workspace.exists("report.md")


def test_impatient_is_caught_by_the_checker_alone(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(make_agent, "impatient", task_completion_checker=gr.PlanBasedChecker())
    checks = run.completion_df()
    assert list(checks.complete) == [False, True]
    assert "Verify all deliverables" in checks.feedback.iloc[0]
    assert run.workspace.exists("report.md")


def test_quitter_ends_early_without_a_checker(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(make_agent, "quitter")
    assert run.status == "ended" and run.job is None
    assert run.todos.remaining > 0


def test_quitter_is_sent_back_to_work(make_agent: Callable[..., gr.Agent]) -> None:
    run = run_profile(make_agent, "quitter", task_completion_checker=gr.PlanBasedChecker())
    refused = run.completion_df().query("complete == False")
    assert len(refused) == 3  # once per work phase
    assert run.job is not None


def test_dataframes_have_their_columns_even_when_empty(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("x")])).run_sync("job")
    assert list(run.policy_df().columns) == [
        "seq",
        "turn",
        "phase",
        "tool",
        "decision",
        "guardrail",
        "reason",
        "policies",
        "mode",
        "traceback",
    ]
    assert list(run.feedback_df().columns)[3:6] == ["provider", "severity", "summary"]
    assert list(run.completion_df().columns)[3:6] == ["stop", "checker", "complete"]


def test_the_dashboard_shows_denials_refusals_and_feedback(
    make_agent: Callable[..., gr.Agent],
) -> None:
    run = run_profile(
        make_agent,
        "quitter",
        policies=[gr.ReadBeforeWritePolicy()],
        task_completion_checker=gr.PlanBasedChecker(),
        feedback_providers=[
            gr.FeedbackProviderConfig(
                gr.StaticFeedbackProvider("Watch <the> plan", severity="caution"),
                gr.FeedbackTrigger(every_n_calls=25),
            )
        ],
    )
    tracker = RunTracker(timeline_size=1000)
    for event in run.events:
        tracker.add(event)
    texts = [e.text for e in tracker.timeline]
    assert any(t.startswith("Stop by a final reply refused (1 in a row)") for t in texts)
    assert not any(" denied by " in t for t in texts)  # allowed calls stay off it
    html = render_dashboard(tracker.snapshot(run))
    assert "gr-severity-caution" in html and "#f9a825" in html
    assert "&lt;feedback provider=&#x27;Static&#x27;&gt;" in html
    assert "Watch &amp;lt;the&amp;gt; plan" in html  # escaped for XML, then for HTML


def test_a_denial_reaches_the_timeline(make_agent: Callable[..., gr.Agent]) -> None:
    model = gr.ScriptedModel(
        [gr.tool_call("write_file", path="instructions.md", content="x"), gr.text("done")]
    )
    run = make_agent(model, policies=[gr.ReadBeforeWritePolicy()]).run_sync("job")
    tracker = RunTracker()
    for event in run.events:
        tracker.add(event)
    [denied] = [e for e in tracker.timeline if e.kind == "policy_decision"]
    assert denied.text.startswith(
        "write_file denied by the policy read_before_write: 'instructions.md'"
    )


# -- path canonicalisation, as properties ------------------------------------------------------

SEGMENT = st.text(alphabet="abcxyz019_-", min_size=1, max_size=6)


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> gr.Workspace:
    return gr.Workspace(tmp_path_factory.mktemp("canon"))


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(SEGMENT, min_size=1, max_size=4), noise=st.data())
def test_every_spelling_of_a_path_is_one_name(
    workspace: gr.Workspace, parts: list[str], noise: st.DataObject
) -> None:
    plain = "/".join(parts)
    spelled: list[str] = []
    for part in parts:
        detour = noise.draw(st.sampled_from(["", "./", "zz/../", ".//"]))
        spelled.append(detour + part)
    variant = noise.draw(st.sampled_from(["", "/", "./", "/workspace/"])) + "/".join(spelled)
    assert canonical_path(workspace, variant, mount_point="/workspace") == plain
    assert canonical_path(workspace, plain) == plain


@settings(max_examples=200, deadline=None)
@given(
    ups=st.integers(1, 4),
    parts=st.lists(SEGMENT, max_size=3),
    prefix=st.sampled_from(["", "/", "a/"]),
)
def test_a_path_that_climbs_out_is_always_refused(
    workspace: gr.Workspace, ups: int, parts: list[str], prefix: str
) -> None:
    climb = "/".join([".."] * (ups + (1 if prefix == "a/" else 0)))
    path = prefix + climb + ("/" + "/".join(parts) if parts else "")
    with pytest.raises(WorkspaceError):
        canonical_path(workspace, path)


def test_canonical_names_follow_symlinks_inside(tmp_path: Path) -> None:
    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("real/a.txt", "x")
    os.symlink(ws.root / "real", ws.root / "alias")
    assert canonical_path(ws, "alias/a.txt") == "real/a.txt"
