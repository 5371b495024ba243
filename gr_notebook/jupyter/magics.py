"""``%%agent``, ``%agent``, ``%todo`` and ``%rewind``: thin bodies over :class:`Agent` and
:class:`Run`.

Misuse raises :class:`~IPython.core.error.UsageError` with one line saying what to type
instead; IPython shows it without a traceback.
"""

from __future__ import annotations

import asyncio
import contextvars
import difflib
import keyword
import re
import shlex
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from IPython import display as ipython_display
from IPython.core import magic_arguments as ma
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, line_magic, magics_class

from gr_notebook.agent import Agent
from gr_notebook.blocking import loop_is_running, run_blocking
from gr_notebook.errors import GrNotebookError, ModelSpecError, RunError
from gr_notebook.guardrails.budget import DEFAULT_MAX_ITERATIONS
from gr_notebook.guardrails.regulation import DEFAULT_CONFIRM_ABOVE
from gr_notebook.jupyter.cells import TopLevelAwait
from gr_notebook.jupyter.interrupts import INTERRUPTED, CtrlC
from gr_notebook.limits import usd
from gr_notebook.run import Run, current_run

if TYPE_CHECKING:
    from gr_notebook.jupyter.confirm import WidgetConfirmer

__all__ = ["AgentMagics", "load_ipython_extension", "unload_ipython_extension"]

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")
# IPython ships these untyped; give them the types they have.
display = cast(Callable[..., None], ipython_display.display)
magic_arguments = cast(Callable[[], Callable[[F], F]], ma.magic_arguments)
argument = cast(Callable[..., Callable[[F], F]], ma.argument)

AGENT_ACTIONS = ("status", "stop", "pause", "unpause")
AGENT_SUBCOMMANDS = {
    **{action: f"%agent {action}" for action in AGENT_ACTIONS},
    "resume": "%agent resume RUN_ID",
    "fork": "%agent fork --turn N",
}
TODO_SUBCOMMANDS = {"add": "%todo add TEXT", "complete": "%todo complete"}
CONFIRM_TIMEOUT_S = 300.0  # how long the Approve/Deny buttons %%agent shows wait for a click
# --run VAR is an option only as the first or last word: free text may mention "--run".
_RUN_FIRST = re.compile(r"^\s*--run(?:\s+|=)(\S+)(?:\s+|$)")
_RUN_LAST = re.compile(r"(?:^|\s)--run(?:\s+|=)(\S+)\s*$")


@magic_arguments()
@argument(
    "--model",
    help="model spec: 'simulated:diligent' (the default), 'simulated:<profile>' or "
    "'anthropic:<model-id>'",
)
@argument("--workspace", help="directory the agent works in (default: gr_runs/<run id>)")
@argument("--name", help="a name for the agent, kept with the run")
@argument(
    "--max-iterations",
    type=int,
    help=f"hard cap on model turns (default: {DEFAULT_MAX_ITERATIONS})",
)
@argument("--background", action="store_true", help="return at once; the run goes on")
@argument("--agent", dest="agent_var", help="use the gr.Agent in this variable")
@argument("--out", default="run", help="variable the run is bound to (default: run)")
def _agent_cell_args(line: str, cell: str) -> None:
    pass  # only carries the parser; AGENT_HELP is the magic's docstring


_PARSER = cast(Any, _agent_cell_args).parser
_PARSER.prog = "%agent"  # IPython's help formatter adds the other %


@magic_arguments()
@argument("run_id", help="the id of the interrupted run (gr.runs_df() lists them)")
@argument("--agent", dest="agent_var", help="the gr.Agent in this variable runs it on")
@argument("--workspace", help="resume on a copy: an empty folder for the checkpoint's files")
@argument("--store", help="the run store (default: gr_runs/store.sqlite)")
@argument("--out", default="run", help="variable the resumed run is bound to (default: run)")
def _resume_args(line: str) -> None:
    pass


@magic_arguments()
@argument("--turn", type=int, help="the turn to play again (without it: a picker)")
@argument("--agent", dest="agent_var", help="the gr.Agent in this variable (default: the same)")
@argument("--workspace", help="an empty folder for the fork (default: gr_runs/<run id>)")
@argument("--out", default="fork", help="variable the fork is bound to (default: fork)")
def _fork_args(line: str) -> None:
    pass


_RESUME = cast(Any, _resume_args).parser
_RESUME.prog = "%agent resume"
_FORK = cast(Any, _fork_args).parser
_FORK.prog = "%agent fork"
AGENT_HELP = f"""Run an agent job in this cell; the cell body is the job's instructions.

{_PARSER.format_help().strip()}

As a line magic, %agent controls a run: %agent status|stop|pause|unpause [--run VAR].
%agent resume RUN_ID [--agent VAR] restarts an interrupted run from its last checkpoint;
%agent fork --turn N [--agent VAR] [--run VAR] plays a run again from turn N under VAR;
without --turn it shows Fork…, a picker of the run's turns and the notebook's agents.

A budget above the agent's confirm threshold ({DEFAULT_CONFIRM_ABOVE:,} tokens unless set)
waits for Approve or Deny in the dashboard; no answer in {CONFIRM_TIMEOUT_S:g} s denies. A cell
that blocks the kernel (%%agent inside %%time or %%capture, or a shell without top-level
await) cannot receive the click, so there such a budget is denied at once. An agent built
with gr.Agent(confirm=...) keeps its own confirmer.
"""


@magics_class
class AgentMagics(Magics):
    @line_cell_magic
    def agent(self, line: str, cell: str | None = None) -> None:
        if cell is None:
            self._control(line)
        else:
            self._start(line, cell)

    agent.__doc__ = AGENT_HELP

    @line_magic
    def todo(self, line: str) -> None:
        """%todo [add TEXT | complete] [--run VAR]: the protected todo layer of a run.

        %todo                 shows the list live (Layer 2, as the model sees it)
        %todo add TEXT        appends a task; the model sees it on its next turn
        %todo complete        marks the current task done, as todo_complete() would;
                              finishing the list starts the phase transition
        --run VAR             acts on the run in VAR instead of the latest one

        Edits are recorded as events whose source is "person".
        """
        _check_subcommand("%todo", line, TODO_SUBCOMMANDS, "%todo alone shows the list")
        rest, run = self._resolve_run(line, "%todo")
        action, text = _split_action(rest)
        if not action:
            from gr_notebook.jupyter.widgets import TodoPanel

            display(TodoPanel.for_run(run))
        elif action == "add":
            if not text.strip():
                raise UsageError("say what the task is: %todo add Check the glossary")
            print(_person(lambda: run.add_todo(text)))
        elif action == "complete" and not text.strip():
            print(_person(run.complete_todo))
        else:
            raise UsageError(
                f"unknown %todo action {rest!r}; type %todo, %todo add TEXT or %todo complete"
            )

    @line_magic
    def rewind(self, line: str) -> None:
        """%rewind ISSUE TEXT [--run VAR]: the panic button, pressed by a person.

        At the next safe point between turns the current todo list is archived as rewound,
        the issue is written to experiences.md, and the model is asked to re-read the plan,
        revise it, and write a new list for the phase. --run VAR picks another run.
        """
        issue, run = self._resolve_run(line, "%rewind")
        if not issue:
            raise UsageError("say what is wrong: %rewind The approach fails because …")
        _person(lambda: run.rewind(issue))
        when = (
            "when the run is unpaused (%agent unpause)"
            if run.status in ("paused", "pausing")
            else "at the next safe point between turns"
        )
        print(f"Rewind requested for run {run.run_id}: it happens {when}.")

    # -- %%agent ------------------------------------------------------------------------------

    def _start(self, line: str, cell: str) -> None:
        args = self._parse(line, cell)
        agent = self._agent_for(args)
        if args.background:
            self._start_background(agent, cell.strip(), args.out)
        else:
            self._run_blocking(agent, cell.strip(), args.out)

    def _confirmer(self) -> WidgetConfirmer | None:
        """Approve/Deny buttons for a run that does not block the kernel (callers ask only
        then); none outside a kernel, where no widget shows and no click can come."""
        if getattr(self.shell, "kernel", None) is None:
            return None
        from gr_notebook.jupyter.confirm import WidgetConfirmer

        return WidgetConfirmer(timeout=CONFIRM_TIMEOUT_S)

    def _parse(self, line: str, cell: str) -> Any:
        args = _parse_line(_PARSER, line, "%%agent", "%agent? lists the options")
        if args.workspace is not None and not args.workspace.strip():
            raise UsageError("--workspace is empty; give a directory, e.g. --workspace my_job")
        if not cell.strip():
            raise UsageError(
                "the cell body is empty; write the job's instructions below the %%agent line"
            )
        if not args.out.isidentifier() or keyword.iskeyword(args.out):
            raise UsageError(f"--out {args.out!r} is not a variable name; try --out run2")
        return args

    def _agent_for(self, args: Any) -> Agent:
        if args.agent_var is not None:
            given = [
                f"--{name.replace('_', '-')}"
                for name in ("model", "workspace", "name", "max_iterations")
                if getattr(args, name) is not None
            ]
            if given:
                raise UsageError(
                    f"--agent {args.agent_var} brings its own settings; drop {' '.join(given)} "
                    f"or set them on the agent"
                )
            return self._agent_var(args.agent_var)
        options: dict[str, Any] = {"model": args.model, "workspace": args.workspace}
        if args.name is not None:
            options["name"] = args.name
        if args.max_iterations is not None:
            if args.max_iterations < 1:
                raise UsageError(f"--max-iterations must be at least 1, not {args.max_iterations}")
            options["max_iterations"] = args.max_iterations
        try:
            return Agent(**options)
        except ModelSpecError as exc:
            raise UsageError(
                f"{str(exc).split(';')[0]}; use --model simulated (or simulated:diligent, or "
                "anthropic:<model-id>), or build gr.Agent(model=...) in a cell and pass --agent VAR"
            ) from None
        except (GrNotebookError, ValueError) as exc:
            raise UsageError(str(exc)) from None

    def _start_background(self, agent: Agent, instructions: str, out: str) -> None:
        from gr_notebook.jupyter.widgets import Dashboard

        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raise UsageError(
                "--background needs the kernel's running event loop (run it in Jupyter), "
                "or drop --background to run the job in this cell"
            ) from None
        # A fresh context: the task's output is attributed to the cell running when it
        # happens, not to this one, which will have finished (ipykernel 7).
        run = _launch(agent, instructions, self._confirmer(), context=contextvars.Context())
        self._namespace[out] = run
        display(Dashboard.for_run(run))
        print(
            f"Run {run.run_id} goes on in the background as `{out}`. Steer it with %todo, "
            f"%rewind ISSUE, %agent status|pause|unpause|stop; `await {out}.wait()` waits."
        )

    def _run_blocking(self, agent: Agent, instructions: str, out: str) -> None:
        """The fallback for shells without top-level await, and a cell nested in ``%%time``
        or ``%%capture``: wait as ``run_sync`` does.

        The run and its dashboard go on a worker thread's loop while the kernel's thread
        waits (:func:`~gr_notebook.blocking.run_blocking`); :class:`TopLevelAwait` routes
        top-level cells through :meth:`run_async` instead wherever it can. ipykernel hands a
        widget's click to the cell's own shell, which is waiting here, so no click reaches the
        run before the cell ends: Ctrl-C stops it. No Approve/Deny buttons
        either: a request would wait out its timeout in a frozen cell, so a large budget is
        denied at once, on the timeline.
        """
        with CtrlC() as ctrl_c:
            run_blocking(
                self._run_async(agent, instructions, out, confirmer=None, ctrl_c=ctrl_c),
                wind_down=False,  # the first Ctrl-C asked the run to stop; a second leaves
            )

    async def run_async(self, line: str, cell: str) -> None:
        """``%%agent`` as top-level ``await``: the kernel keeps serving the dashboard's
        controls while the job runs in this cell."""
        args = self._parse(line, cell)
        agent = self._agent_for(args)
        if not args.background:
            await self._run_async(agent, cell.strip(), args.out, confirmer=self._confirmer())
        elif getattr(self.shell, "kernel", None) is None:
            # A terminal runs each cell's loop only while the cell runs: the task would freeze.
            raise UsageError(
                "--background needs a Jupyter kernel, whose event loop runs between cells; "
                "drop --background to run the job in this cell"
            )
        else:
            self._start_background(agent, cell.strip(), args.out)

    async def _run_async(
        self,
        agent: Agent,
        instructions: str,
        out: str,
        *,
        confirmer: WidgetConfirmer | None,
        ctrl_c: CtrlC | None = None,
    ) -> None:
        from gr_notebook.jupyter.widgets import Dashboard

        run = _launch(agent, instructions, confirmer)
        self._namespace[out] = run
        if ctrl_c is not None:
            ctrl_c.watch(run)
        display(Dashboard.for_run(run))
        try:
            await run.wait()
        except (KeyboardInterrupt, asyncio.CancelledError):
            run.cancel(INTERRUPTED, interrupted=True)
            raise
        display(run)

    # -- %agent status|stop|pause|unpause ------------------------------------------------------

    def _control(self, line: str) -> None:
        _check_subcommand("%agent", line, AGENT_SUBCOMMANDS, "%%agent as a cell starts a run")
        match = _RUN_FIRST.match(line) or _RUN_LAST.search(line)
        bare = (line[: match.start()] + " " + line[match.end() :] if match else line).split()
        if bare[:1] == ["resume"]:
            if len(bare) == 1 or match:
                raise UsageError(
                    "%agent resume restarts an interrupted run from its checkpoint and takes "
                    "its id: %agent resume RUN_ID; to let a paused run go on, type "
                    "%agent unpause"
                )
            self._resume_stored(line.strip().removeprefix("resume"))
            return
        if bare[:1] == ["fork"]:
            self._fork(line)
            return
        action, run = self._resolve_run(line, "%agent")
        if action not in AGENT_ACTIONS:
            raise UsageError(
                f"unknown %agent action {action!r}; type %agent status, %agent stop, "
                "%agent pause, %agent unpause or %agent resume RUN_ID (or %%agent as a cell "
                "magic to start a run)"
            )
        if action == "status":
            print(status_line(run))
        elif action == "stop":
            if run.done:
                print(f"Run {run.run_id} has already finished ({run.status}).")
            else:
                run.cancel("stopped by the person")
                print(f"Stop requested for run {run.run_id}.")
        elif action == "pause":
            _person(run.pause)
            print(f"Run {run.run_id} pauses at the next safe point; %agent unpause goes on.")
        elif run.status not in ("paused", "pausing"):
            _person(run.unpause)  # a finished run says so
            print(f"Run {run.run_id} is not paused ({run.status}); nothing to unpause.")
        else:
            run.unpause()
            print(f"Run {run.run_id} unpaused.")

    # -- %agent resume RUN_ID, %agent fork --turn N ----------------------------------------------

    def _resume_stored(self, rest: str) -> None:
        from gr_notebook.review.timetravel import resume

        args = _parse_line(
            _RESUME, rest, "%agent resume", "type %agent resume RUN_ID [--agent VAR]"
        )
        agent = None if args.agent_var is None else self._agent_var(args.agent_var)
        run = _person(
            lambda: resume(
                args.run_id,
                agent,
                store=args.store,
                workspace=args.workspace or None,
                wait=not loop_is_running(),
            )
        )
        self._show_started(run, args.out, f"Run {args.run_id} resumed as run {run.run_id}")

    def _fork(self, line: str) -> None:
        from gr_notebook.review.timetravel import fork

        rest, parent = self._resolve_run(line, "%agent fork")
        rest = rest.strip().removeprefix("fork").strip()
        args = _parse_line(_FORK, rest, "%agent fork", "type %agent fork --turn N [--agent VAR]")
        agent = None if args.agent_var is None else self._agent_var(args.agent_var)
        if args.turn is None:
            self._fork_picker(parent, args)
            return
        run = _person(
            lambda: fork(
                parent,
                args.turn,
                agent,
                workspace=args.workspace or None,
                wait=not loop_is_running(),
            )
        )
        self._show_started(
            run, args.out, f"Run {parent.run_id} forked at turn {args.turn} as run {run.run_id}"
        )

    def _fork_picker(self, run: Run, args: Any) -> None:
        from gr_notebook.jupyter.widgets import ForkPicker

        if args.workspace:
            raise UsageError("--workspace goes with --turn N: %agent fork --turn N --workspace DIR")
        if not args.out.isidentifier() or keyword.iskeyword(args.out):
            raise UsageError(f"--out {args.out!r} is not a variable name; try --out fork2")
        picker = _person(lambda: ForkPicker(run, out=args.out))
        if args.agent_var in dict(picker.agent.options).values():
            picker.agent.value = args.agent_var
        display(picker)

    def _agent_var(self, name: str) -> Agent:
        agent = self._lookup(name, "--agent")
        if not isinstance(agent, Agent):
            raise UsageError(
                f"{name} is a {type(agent).__name__}, not a gr.Agent; build one with "
                f"{name} = gr.Agent(...)"
            )
        return agent

    def _show_started(self, run: Run, out: str, said: str) -> None:
        if not out.isidentifier() or keyword.iskeyword(out):
            raise UsageError(f"--out {out!r} is not a variable name; try --out run2")
        self._namespace[out] = run
        if run.done:  # no event loop kept running (a terminal): it ran to its end here
            print(f"{said}: {run.status} after {run.turns} turns, as `{out}`.")
            display(run)
            return
        from gr_notebook.jupyter.widgets import Dashboard

        display(Dashboard.for_run(run))
        print(f"{said}; it goes on in the background as `{out}`.")

    # -- shared ---------------------------------------------------------------------------------

    @property
    def _namespace(self) -> dict[str, Any]:
        assert self.shell is not None, "magics are registered on a shell"
        return cast(dict[str, Any], self.shell.user_ns)

    def _lookup(self, name: str, option: str) -> Any:
        try:
            return self._namespace[name]
        except KeyError:
            raise UsageError(f"{option} {name}: no variable named {name!r} here") from None

    def _resolve_run(self, line: str, magic: str) -> tuple[str, Run]:
        match = _RUN_FIRST.match(line) or _RUN_LAST.search(line)
        rest = (line[: match.start()] + line[match.end() :] if match else line).strip()
        if match:
            run = self._lookup(match.group(1), "--run")
            run = getattr(run, "run", run) if not isinstance(run, Run) else run  # a Dashboard's
            if not isinstance(run, Run):
                raise UsageError(
                    f"--run {match.group(1)}: that is a {type(run).__name__}, not a gr.Run"
                )
            return rest, run
        latest = current_run()
        if latest is None:
            raise UsageError(f"{magic}: no run yet; start one with %%agent, or pass --run VAR")
        return rest, latest


def status_line(run: Run) -> str:
    summary = run.summary()
    limits = run.limits
    todos = run.todos
    if run.job:
        where = f"job complete: {run.job.summary}"
    elif not run.harness.phased:  # a session with no todo list (a Claude Agent SDK session)
        where = run.harness.label
    else:
        where = f"{todos.phase_label()}, {todos.done_count}/{len(todos.items)} tasks"
    reason = f" ({run.reason})" if run.reason and run.status != "completed" else ""
    turns = f"turn {summary['turns']}/{limits.max_iterations}"
    tokens = f"{summary['tokens_used']:,}"
    tokens += f"/{limits.token_budget:,} tokens" if limits.token_budget else " tokens"
    scope = summary["budget_scope"]
    if scope != "the run":  # the hard limits first, the allotment in force beside them
        turns += (
            f" ({summary['budget_iterations_used']}/{summary['iterations_max']} "
            f"assessed for {scope})"
        )
        if summary["tokens_budget"]:
            tokens += f" ({summary['budget_tokens_used']:,}/{summary['tokens_budget']:,} assessed)"
    cost = f"; ${summary['cost_usd']:.4f}" if summary["cost_usd"] is not None else ""
    if limits.cost_limit_usd is not None:  # against the cost limit: what is left to spend
        spent, cap = summary["cost_usd"] or 0.0, limits.cost_limit_usd
        share = f" ({spent / cap:.0%})" if cap else ""
        cost = f"; {usd(spent)}/{usd(cap)} spent{share}"
    return (
        f"Run {run.run_id}: {run.status}{reason}; {turns}; {where}; {tokens}{cost}; "
        f"context {summary['context_tokens']:,}/{limits.context_window:,}{_waiting(run)}"
    )


def _waiting(run: Run) -> str:
    """The calls waiting for a person, and how to answer them: a run that waits looks
    stalled in every other field of the status line."""
    try:
        pending = run.approvals.pending
    except RunError:  # read from the store: nothing of it waits
        return ""
    if not pending:
        return ""
    calls = "; ".join(f"{r.tool} ({r.reason})" for r in pending)
    return (
        f". Waiting for approval: {calls}. Answer with run.approvals.approve(), "
        ".deny('reason') or .edit({...}), or with the dashboard's buttons"
    )


def _parse_line(parser: Any, line: str, magic: str, hint: str) -> Any:
    """``line``'s options; a misquoted line or a wrong option is a usage error that ends
    with ``hint``."""
    try:
        argv = shlex.split(line)
    except ValueError as exc:
        raise UsageError(f"cannot read the {magic} line ({exc}); check its quotes") from None
    try:
        return parser.parse_args(argv)
    except UsageError as exc:
        raise UsageError(f"{exc}; {hint}") from None


def _check_subcommand(magic: str, line: str, valid: Mapping[str, str], aside: str) -> None:
    """A misspelt subcommand is a usage error that names it and the nearest valid one, said
    before any run is looked for: ``%agent stauts`` is a typo whether or not a run exists."""
    match = _RUN_FIRST.match(line) or _RUN_LAST.search(line)
    words = (line[: match.start()] + " " + line[match.end() :] if match else line).split()
    if not words or words[0] in valid:
        return
    typed = words[0]
    near = difflib.get_close_matches(typed, list(valid), n=1)
    guess = f"did you mean {valid[near[0]]}? " if near else ""
    *first, last = valid.values()
    raise UsageError(
        f"unknown {magic} action {typed!r}; {guess}type {', '.join(first)} or {last} ({aside})"
    )


def _split_action(rest: str) -> tuple[str, str]:
    """``"add  Check the index"`` → ``("add", "Check the index")``; any whitespace splits."""
    parts = rest.split(None, 1)
    return (parts[0], parts[1].strip()) if len(parts) == 2 else (rest.strip(), "")


def _launch(
    agent: Agent,
    instructions: str,
    confirmer: WidgetConfirmer | None,
    *,
    context: contextvars.Context | None = None,
) -> Run:
    """Start the run. A self-regulating agent without a confirmer of its own uses
    ``confirmer`` for this run; its prompts go to the run's dashboard."""
    run = _person(lambda: agent.start(instructions, context=context, confirm=confirmer))
    if confirmer is not None:
        from gr_notebook.jupyter.widgets import Dashboard

        confirmer.show = Dashboard.for_run(run).show_prompt
    return run


def _person(action: Callable[[], T]) -> T:
    """Run a person's request; a refused one becomes a one-line usage error."""
    try:
        return action()
    except GrNotebookError as exc:
        raise UsageError(str(exc)) from None
    except OSError as exc:  # a workspace that cannot be made, say
        where = f" {exc.filename}" if exc.filename else ""
        raise UsageError(
            f"cannot use{where}: {exc.strerror or exc}; pick a writable directory "
            "with --workspace DIR"
        ) from None


def load_ipython_extension(ipython: Any) -> None:
    ipython.register_magics(AgentMagics)
    TopLevelAwait.install(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    TopLevelAwait.uninstall(ipython)
