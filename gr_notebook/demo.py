"""The main job: a multi-phase run on the simulated model, narrated for a terminal."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Callable

from gr_notebook.agent import Agent
from gr_notebook.events import Event, PhaseStartedEvent, RewindEvent
from gr_notebook.history.store import DEFAULT_STORE_PATH, StoreLike
from gr_notebook.run import Run

__all__ = ["DEMO_INSTRUCTIONS", "run_demo"]

DEMO_INSTRUCTIONS = """\
# A field guide to garden birds

Write a short field guide for beginners. Work through these parts in order.

## Survey
- List the twelve most common garden species
- Note the habitat each species prefers
- Describe each species' song
- Record the feeding habits of each species
- Collect identification tips

## Species pages
- Draft the pages for the finches
- Draft the pages for the tits
- Draft the pages for the thrushes
- Draft the pages for the corvids
- Draft the pages for the remaining species

## Guide chapters
- Write the introduction
- Write the chapter on feeders and nest boxes
- Write the chapter on seasonal visitors
- Write the glossary
- Write the further-reading list

## Review
- Check every species name
- Check the cross-references between chapters
- Check the glossary against the species pages
- Proofread the introduction
- Assemble the table of contents
"""


def run_demo(
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: StoreLike | None = None,
    profile: str = "diligent",
    out: Callable[[str], object] = print,
) -> Run:
    agent = Agent(
        model=f"simulated:{profile}", workspace=workspace, store=store, max_iterations=400
    )
    out(f"Running the demo job on {agent.model.name} …\n")

    def narrate(run: Run) -> Callable[[Event], None]:
        def on_event(event: Event) -> None:
            if isinstance(event, PhaseStartedEvent) and event.todo_kind != "bootstrap":
                out(f"\nTurn {event.turn}: a new todo list after the phase transition\n")
                out(run.todos.render())
            elif isinstance(event, RewindEvent):
                out(f"\nTurn {event.turn}: rewind: {event.issue}")

        return on_event

    async def main() -> Run:
        run = agent.start(DEMO_INSTRUCTIONS)
        run.subscribe(narrate(run))
        return await run.wait()

    run = asyncio.run(main())
    phases = run.phases_df()
    table = phases[
        ["phase", "name", "started_turn", "ended_turn", "tasks", "input_tokens", "outcome"]
    ]
    out("\nPhases\n")
    out(table.to_string(index=False))
    totals = run.summary()
    out(
        f"\nRun {run.run_id}: {run.status} after {totals['turns']} turns, "
        f"{totals['input_tokens']:,} input and {totals['output_tokens']:,} output tokens."
    )
    if run.job is not None:
        out(f"Job summary: {run.job.summary} (confidence {run.job.confidence})")
    out(f"Workspace: {run.workspace.root}")
    kept = run.store.path if run.store is not None else DEFAULT_STORE_PATH
    out(f"Store:     {os.path.abspath(kept)}")
    return run
