"""The live dashboard shows what the shadow guardrails would have done in a grey panel of its
own, above the timeline, apart from the run's feedback and timeline."""

from __future__ import annotations

from collections.abc import Callable

import gr_notebook as gr
from gr_notebook.history.labels import stored_labels
from gr_notebook.jupyter.widgets import Dashboard
from tests.guardrails.test_shadow import SCRIPT, Broken, NoListing, every_call

Factory = Callable[..., gr.Agent]


async def test_a_live_dashboard_shows_the_shadows_apart_and_greyed(make_agent: Factory) -> None:
    agent = make_agent(
        gr.ScriptedModel(list(SCRIPT)),
        self_regulation=False,
        shadow=[NoListing(), every_call("Mind the plan."), gr.FileOutputChecker(["r.md"])],
    )
    run = agent.start("job")
    dash = Dashboard(run)
    await run.wait()
    dash.refresh()
    assert dash._shadow_panel is not None  # built at the shadows' first decision worth a line
    panel = dash.shadow.value
    children = list(dash.children)
    assert children.index(dash.shadow) + 2 == children.index(dash.timeline)  # its marks between
    assert "class='gr-shadow'" in panel and "color:#9e9e9e" in panel
    assert "list_files denied by the policy no_listing" in panel
    assert "Feedback from Checker (info): Mind the plan." in panel
    assert "Stop by a final reply refused" in panel
    assert "No feedback yet." in dash.feedback.value  # the run's own feedback panel
    assert "denied" not in dash.timeline.value and "refused" not in dash.timeline.value


def test_a_dashboard_without_shadows_has_no_shadow_panel(make_agent: Factory) -> None:
    run = make_agent(gr.ScriptedModel([gr.text("done")])).run_sync("job")
    dash = Dashboard(run)
    assert dash._shadow_panel is None
    assert all("gr-shadow" not in str(getattr(c, "value", "")) for c in dash.children)


async def test_a_failing_shadow_is_not_logged_as_the_runs_error(make_agent: Factory) -> None:
    agent = make_agent(gr.ScriptedModel(list(SCRIPT)), self_regulation=False, shadow=[Broken()])
    run = agent.start("job")
    dash = Dashboard(run)
    await run.wait()
    dash.refresh()
    assert "a shadow policy (broken)" in dash.shadow.value
    assert "shadow" not in dash.log_panel.value and "bug" not in dash.log_panel.value


async def test_one_click_marks_a_shadow_decision_right_or_wrong(make_agent: Factory) -> None:
    """The click is a label in the run's store, which gr.backtest reads; what cannot be
    labelled is a line in the log, never an exception in the kernel."""
    agent = make_agent(gr.ScriptedModel(list(SCRIPT)), self_regulation=False, shadow=[NoListing()])
    run = agent.start("job")
    dash = Dashboard(run)
    await run.wait()
    dash.refresh()
    options = dict((seq, text) for text, seq in dash.shadow_choice.options)
    denied = next(seq for seq, text in options.items() if "denied by the policy no_listing" in text)
    dash.shadow_choice.value = denied
    dash._mark_chosen(False)
    assert run.store is not None
    [label] = stored_labels(run.store, [run.run_id])
    assert (label.seq, label.label, label.kind) == (denied, False, "policy")
    assert f"event {denied}: the shadow decision marked wrong" in dash.log_panel.value
    dash.mark_shadow(1, right=True)  # the run's first event decides nothing
    assert "Not labelled: event 1 of run" in dash.log_panel.value
