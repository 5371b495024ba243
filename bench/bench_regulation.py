"""Self-regulation pays: a simulated codebase audit, unregulated and regulated, side by side.

Seed 003's benchmark. The same diligent simulated agent audits the same codebase twice:
- **unregulated**: no budget tools (``self_regulation=False``), so no ``assess_task``, no
  ``check_resources`` and no ``summarize_progress`` pruning; it lists and reads every file,
  and the reads pile up in the conversation. The intervention engine is off too, so nothing
  but the missing tools tells the two runs apart;
- **regulated**: the defaults. The agent assesses the task, searches for the planted
  patterns first, reads only the files that match, checks its resources and prunes its
  context after each module.

Both runs must end ``completed`` and write the same ``audit.md``, byte for byte: the saving
is only worth reporting if the deliverable is the same. The codebase is generated at three
sizes and from three seeds per size; a size's figure is the median over its seeds. Token
counts are deterministic (the simulated model counts its own requests), so the standard
size is run twice to check that, and wall time is reported only as a median.

Goal: at the standard size (60 files of 160 lines), the regulated run uses at least 6x
fewer tokens than the unregulated one (median of the per-seed ratios).

Then the ``literal`` agent, which obeys every order it reads, runs every job under the
defaults (issue 13): the quickstart job, an 8-phase and a 30-phase job, the audit and the
coding job. Goal: each completes, with every phase complete, ``job_complete`` called and no
guidance conflict found by ``gr.lint_guidance``.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import _util

import gr_notebook as gr
from gr_notebook.examples import ExampleJob, audit_job, coding_job, quickstart_job
from gr_notebook.guardrails import pass_count_todos_and_first_reads

SIZES = {  # name: (files per module, lines per file); there are 6 modules
    "small": (6, 80),
    "standard": (10, 160),
    "large": (16, 200),
}
STANDARD = "standard"
SEEDS = (0, 1, 2)
MAX_ITERATIONS = 300
MIN_RATIO = 6.0
READING = gr.InterventionConfig(progress_signal=pass_count_todos_and_first_reads)


@dataclass(frozen=True)
class AuditResult:
    regulated: bool
    status: str
    turns: int
    tokens: int
    max_context: int
    reads: int
    searches: int
    prunes: int
    interventions: int
    """Fired live, under the default progress signal (pass counts and completed todos)."""
    interventions_if_reads_count: int
    """Fired when the run is replayed with first reads counted as progress."""
    report: str | None
    wall_s: float


async def audit(
    files_per_module: int, lines_per_file: int, seed: int, *, regulated: bool
) -> AuditResult:
    job = audit_job(files_per_module, lines_per_file, seed)
    options = {} if regulated else {"self_regulation": False, "interventions": None}
    with tempfile.TemporaryDirectory(prefix="gr-bench-audit-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            gr.SimulatedModel("diligent"),
            workspace=job.prepare(tmp),
            tools=job.toolsets,
            store=False,
            max_iterations=MAX_ITERATIONS,
            **options,
        )
        started = time.perf_counter()
        run = agent.start(job.instructions)
        await run.wait()
        wall = time.perf_counter() - started
        report = Path(tmp, "audit.md")
        turns = run.turns_df()
        calls = run.tool_calls_df()
        return AuditResult(
            regulated=regulated,
            status=run.status,
            turns=run.turns,
            tokens=int(turns.tokens_used.max()),
            max_context=int(turns.context_tokens.max()),
            reads=int((calls.tool == "read_file").sum()),
            searches=int((calls.tool == "search").sum()),
            prunes=sum(e.kind == "conversation_pruned" for e in run.events),
            interventions=len(run.interventions_df().query("fired")),
            interventions_if_reads_count=len(
                gr.replay_guardrails(run, interventions=READING).interventions_df().query("fired")
            ),
            report=report.read_text() if report.exists() else None,
            wall_s=wall,
        )


def pair(files_per_module: int, lines_per_file: int, seed: int) -> tuple[AuditResult, AuditResult]:
    unregulated = asyncio.run(audit(files_per_module, lines_per_file, seed, regulated=False))
    regulated = asyncio.run(audit(files_per_module, lines_per_file, seed, regulated=True))
    return unregulated, regulated


LITERAL_MAX_ITERATIONS = 600


def literal_jobs() -> dict[str, ExampleJob]:
    return {
        "quickstart": quickstart_job(),
        "8 phases": ExampleJob(_util.job("Eight parts", phases=8, steps=5, unit="section")),
        "30 phases": ExampleJob(_util.job("Thirty parts", phases=30, steps=5, unit="section")),
        "audit": audit_job(),
        "coding": coding_job(),
    }


def literal_run(job: ExampleJob) -> list[object]:
    with tempfile.TemporaryDirectory(prefix="gr-bench-literal-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            gr.SimulatedModel("literal"),
            workspace=job.prepare(tmp),
            tools=job.toolsets,
            store=False,
            max_iterations=LITERAL_MAX_ITERATIONS,
        )
        run = agent.run_sync(job.instructions)
        plan = run.plan
        phases = plan.phases if plan else ()
        done = sum(p.status == "complete" for p in phases)
        peak = max(
            (
                e.data["budget_iterations_used"] / e.data["iterations_max"]
                for e in run.events.of_kind("model_call")
            ),
            default=0.0,
        )
        return [
            run.status,
            f"{done}/{len(phases)}",
            "yes" if run.job else "no",
            run.turns,
            int(run.turns_df().tokens_used.max()),
            f"{100 * peak:.0f}%",
            len(gr.lint_guidance(run)),
        ]


def main() -> int:
    goals = _util.Goals()
    _util.section("The literal agent (obeys every order) on every job, under the defaults")
    literal = {name: literal_run(job) for name, job in literal_jobs().items()}
    _util.print_table(
        [
            "job",
            "status",
            "phases",
            "job_complete",
            "turns",
            "tokens",
            "peak allotment",
            "conflicts",
        ],
        [[name, *row] for name, row in literal.items()],
    )
    goals.check(
        "the literal agent completes every job",
        all(
            row[0] == "completed"
            and row[2] == "yes"
            and str(row[1]).split("/")[0] == str(row[1]).split("/")[1]
            for row in literal.values()
        ),
        ", ".join(f"{name}: {row[0]} {row[1]}" for name, row in literal.items()),
    )
    goals.check(
        "no guidance conflicts",
        all(row[6] == 0 for row in literal.values()),
        f"{sum(int(str(row[6])) for row in literal.values())} conflicts in {len(literal)} runs",
    )

    pairs: dict[str, list[tuple[AuditResult, AuditResult]]] = {
        name: [pair(fpm, lines, seed) for seed in SEEDS] for name, (fpm, lines) in SIZES.items()
    }
    fpm, lines = SIZES[STANDARD]
    again = pair(fpm, lines, SEEDS[0])

    _util.section("Codebase audit: total tokens per run, median over seeds " + str(SEEDS))
    rows = []
    for name, results in pairs.items():
        fpm, lines = SIZES[name]
        ratios = [u.tokens / r.tokens for u, r in results]
        rows.append(
            [
                f"{name} ({6 * fpm} files x {lines} lines)",
                _util.fmt_int(_util.median([u.tokens for u, _ in results])),
                _util.fmt_int(_util.median([r.tokens for _, r in results])),
                f"{_util.median(ratios):.2f}x",
                f"{min(ratios):.2f}-{max(ratios):.2f}x",
            ]
        )
    _util.print_table(["codebase", "unregulated", "regulated", "ratio", "range"], rows)

    _util.section(f"What each run did, {STANDARD} size, median over seeds")
    standard = pairs[STANDARD]

    def med(side: int, field: str) -> str:
        return _util.fmt_int(_util.median([getattr(p[side], field) for p in standard]))

    _util.print_table(
        ["", "unregulated", "regulated"],
        [
            ["model calls", med(0, "turns"), med(1, "turns")],
            ["read_file calls", med(0, "reads"), med(1, "reads")],
            ["search calls", med(0, "searches"), med(1, "searches")],
            ["conversations pruned", med(0, "prunes"), med(1, "prunes")],
            ["largest request (tokens)", med(0, "max_context"), med(1, "max_context")],
            [
                "wall time",
                f"{_util.median([p[0].wall_s for p in standard]):.2f} s",
                f"{_util.median([p[1].wall_s for p in standard]):.2f} s",
            ],
        ],
    )

    every = [p for results in pairs.values() for p in results]
    regulated = [r for _, r in every]
    struck = [r for r in regulated if r.interventions]
    note = (
        f"Interventions on the regulated auditor: {len(struck)}/{len(regulated)} runs got a "
        f"strategy check ({sum(r.interventions for r in regulated)} in all) under the default "
        "progress signal, which sees only test passes and completed todos. Replayed with "
        "first reads counted as progress (pass_count_todos_and_first_reads): "
        f"{sum(r.interventions_if_reads_count > 0 for r in regulated)}/{len(regulated)} runs."
    )
    print("\n" + textwrap.fill(note, width=92))
    same = sum(u.report is not None and u.report == r.report for u, r in every)
    goals.check(
        "both runs complete the job",
        all(u.status == r.status == "completed" for u, r in every),
        f"{2 * len(every)} runs, statuses {sorted({x.status for p in every for x in p})}",
    )
    goals.check(
        "same deliverable",
        same == len(every),
        f"audit.md byte-identical in {same}/{len(every)} pairs",
    )
    goals.check(
        "token counts are deterministic",
        (again[0].tokens, again[1].tokens) == (standard[0][0].tokens, standard[0][1].tokens),
        f"{STANDARD}, seed {SEEDS[0]} run twice: "
        f"{again[0].tokens:,}/{again[1].tokens:,} and "
        f"{standard[0][0].tokens:,}/{standard[0][1].tokens:,}",
    )
    ratio = _util.median([u.tokens / r.tokens for u, r in standard])
    goals.check(
        f"regulated uses >= {MIN_RATIO:.0f}x fewer tokens ({STANDARD})",
        ratio >= MIN_RATIO,
        f"median ratio {ratio:.2f}x",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
