"""Runs to share, made offline: one that meets every kind of guardrail decision, and one
whose every text is hostile markup."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gr_notebook as gr

HOSTILE = "<script>window.__pwned = 1</script></script><img src=x onerror='window.__pwned=2'>"
LINK = '<a href="javascript:window.__pwned=3">click me</a> &amp; &lt;b&gt;'


def agent_at(tmp: Path, script: list[Any], **kwargs: Any) -> gr.Agent:
    ws = tmp / "ws"
    ws.mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("self_regulation", False)
    return gr.Agent(
        model=gr.ScriptedModel(script), workspace=ws, store=tmp / "store.sqlite", **kwargs
    )


def guarded_script() -> list[Any]:
    return [
        gr.tool_call("todo_write", todos=["Revise the draft", "Write the report"]),
        gr.tool_call("write_file", path="draft.md", content="first draft\n"),
        gr.tool_call("read_file", path="draft.md"),
        gr.tool_call("write_file", path="draft.md", content="second draft\n"),
        gr.tool_call("todo_complete"),
        gr.text("I am done."),
        gr.tool_call("write_file", path="report.md", content="# Report\n"),
        gr.tool_call("todo_complete"),
        gr.text("Done: the report is written."),
    ]


def guarded_run(tmp: Path, **kwargs: Any) -> gr.Run:
    """A live policy that denies (a write before a read), a shadow that would deny, two
    approvals and a refused stop."""

    async def yes(request: Any) -> bool:
        return True

    (tmp / "ws").mkdir(parents=True, exist_ok=True)
    (tmp / "ws" / "draft.md").write_text("the draft as the job found it\n")
    agent = agent_at(
        tmp,
        guarded_script(),
        policies=[gr.ReadBeforeWritePolicy(), gr.ApprovalPolicy(tools=["write_file"])],
        shadow=[gr.SequentialDependencyPolicy({"write_file": {"list_files"}})],
        task_completion_checker=gr.FileOutputChecker(["report.md"]),
        confirm=yes,
        **kwargs,
    )
    return agent.run_sync("Revise the draft, then write a report.")


def hostile_run(tmp: Path) -> gr.Run:
    """Every text a page shows holds markup that would run if it were read as HTML."""
    script = [
        gr.tool_call("todo_write", todos=[f"Task {HOSTILE}", f"Then {LINK}"]),
        gr.tool_call("write_file", path="main_plan.md", content=f"# Plan {HOSTILE}\n{LINK}\n"),
        gr.tool_call("write_file", path="evil.md", content=f"{HOSTILE}\n{LINK}\n"),
        gr.tool_call("add_note", note=f"note {HOSTILE}"),
        gr.tool_call("read_file", path="evil.md"),
        gr.tool_call("read_file", path=HOSTILE),
        gr.text(f"Done {HOSTILE} {LINK}"),
    ]
    agent = agent_at(tmp, script, policies=[gr.ReadBeforeWritePolicy()])
    return agent.run_sync(f"Job {HOSTILE} {LINK}")


def forked_pair(tmp: Path) -> tuple[gr.Run, gr.Run]:
    """A run and its fork from turn 4 under an agent that asks nobody: the fork's write at
    turn 4 is allowed where its parent's was held for approval."""
    parent = guarded_run(tmp / "parent")
    agent = gr.Agent(
        model=gr.ScriptedModel(guarded_script()[3:]),
        store=tmp / "parent" / "store.sqlite",
        policies=[gr.ReadBeforeWritePolicy()],
        task_completion_checker=gr.FileOutputChecker(["report.md"]),
        self_regulation=False,
    )
    return parent, parent.fork(4, agent, workspace=tmp / "fork")


def long_run(tmp: Path, turns: int = 200) -> gr.Run:
    """A run of ``turns`` turns that rewrites a few files of a few kilobytes each turn,
    under a live and a shadow policy: what the page's size and speed are measured on."""
    script: list[Any] = [gr.tool_call("todo_write", todos=["Write the parts", "Check them"])]
    for i in range(1, turns - 1):
        body = "".join(f"Line {n} of part {i % 7}, revision {i}.\n" for n in range(80))
        script.append(gr.tool_call("write_file", path=f"parts/part_{i % 7}.md", content=body))
    script.append(gr.text("Done."))
    agent = agent_at(
        tmp,
        script,
        policies=[gr.ReadBeforeWritePolicy()],
        shadow=[gr.SequentialDependencyPolicy({"write_file": {"list_files"}})],
        max_iterations=turns + 10,
    )
    return agent.run_sync("Write the parts, revising each as you go.")
