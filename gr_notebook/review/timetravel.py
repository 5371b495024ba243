"""Resume an interrupted run, or fork a run at a turn under another agent.

Both start a *new* run from a checkpoint (:mod:`gr_notebook.engine.checkpoint`), linked to
its parent in the store's ``lineage`` table and by its first event, ``run_resumed``:

- :func:`resume` continues an interrupted run (a kill, a dead kernel, Ctrl-C, a stop, a
  failed model) from its latest checkpoint, in its own workspace brought back to that
  checkpoint's files; what the run wrote after it is moved into ``.gr/aside/<new run>/``,
  never deleted. The new run has its own id, so that no replayed event collides with one
  the killed turn stored: the interrupted run's record stays as it happened, and the new
  one's events start with a copy of the parent's up to the checkpoint, so each run reads
  whole on its own.
- :func:`fork` starts from any turn's checkpoint, in a new workspace, under any agent;
  policies, feedback, self-regulation and interventions the other agent lacks are dropped,
  and those it adds start fresh (:func:`fit_snapshot`).

Both wait for the new run's end and return it, as ``agent.run_sync`` does, in a script, a
notebook cell and async code alike; ``wait=False`` returns the live run at once instead, as
``agent.start`` does. Every refusal is one line that says what to do instead.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from gr_notebook import runner
from gr_notebook.agent import DEFAULT_RUNS_DIR, Agent
from gr_notebook.blocking import run_blocking
from gr_notebook.engine.checkpoint import written_since
from gr_notebook.engine.side_effects import CutTurn, cut_turn, once_calls
from gr_notebook.engine.state import RunState
from gr_notebook.errors import ConfigError, RunError, WorkspaceError
from gr_notebook.events import ParentCallsEvent, RunResumedEvent
from gr_notebook.history import checkpoint_store as rows
from gr_notebook.history.checkpoint_store import RESUMABLE, Checkpoint, load_checkpoint
from gr_notebook.history.lineage import Lineage, copy_events, lineage, record_lineage
from gr_notebook.history.run_arg import given_run
from gr_notebook.history.store import DEFAULT_STORE_PATH, Store, StoreLike
from gr_notebook.run import Run
from gr_notebook.tools import ToolRegistry
from gr_notebook.workflow.workspace import SYSTEM_DIR, TOOL_DOCS_DIR, Workspace
from gr_notebook.workflow.workspace_files import hash_files
from gr_notebook.workflow.workspace_lock import live_owner
from gr_notebook.workflow.workspace_restore import diff, linked, restore_files

__all__ = ["fit_snapshot", "fork", "fork_run", "resume"]

_OWN_ENDS: Final = frozenset({"budget_exhausted", "incomplete", "stuck"})


# -- resume ---------------------------------------------------------------------------------------


def resume(
    run: Run | str,
    agent: Agent | None = None,
    *,
    store: StoreLike | None = None,
    workspace: str | os.PathLike[str] | None = None,
    wait: bool = True,
) -> Run:
    """Restart the interrupted ``run`` (a Run, or a run id in ``store``) from its latest
    checkpoint, as a new run linked to it. In its own workspace (brought back to the
    checkpoint's files; the run's later writes set aside), or in ``workspace``, an empty
    folder: a copy. (A paused run needs no restart: ``run.unpause()``.)

    Returns the new run once it has ended, wherever it is called from; ``wait=False``
    returns it live at once (it needs a running event loop: a notebook cell or async code).
    """
    _check_wait(wait, "gr.resume")
    run_id, store = _checkpointed(run, store, "gr.resume")
    with _opened(store) as opened:
        row = _run_row(opened, run_id)
        _check_resumable(opened, row)
        chosen = _agent_for(run_id, agent, "gr.resume")
        checkpoint = _checkpoint(opened, row, None)
        original = Path(row["workspace"] or "")
        target = _resume_target(row, checkpoint, original, workspace)
        origin = _FromCheckpoint(
            checkpoint,
            parent=row["run_id"],
            relation="resume",
            target=target,
            mark_parent=row["status"] == "running",
            root=_root(opened, run_id),
            cut=_cut_turn(opened, run_id, checkpoint),
        )
        return _start(chosen, opened, origin, row["instructions"] or "", target, wait=wait)


def _check_resumable(store: Store, row: Mapping[str, Any]) -> None:
    run_id, status = row["run_id"], row["status"]
    later = [x for x in lineage(store, [run_id]) if x.parent_run_id == run_id]
    resumed = [x for x in later if x.relation == "resume"]
    if resumed:
        raise _resumed_already(run_id, resumed[-1].run_id)
    if status == "running":
        owner = live_owner(row["workspace"]) if row["workspace"] else None
        if owner is not None and owner.run_id in ("", run_id):
            raise RunError(
                f"run {run_id} is still live ({owner.describe()}); it needs no resume: steer "
                "it, or stop it first (run.cancel() or %agent stop) and then resume it"
            )
        return
    if status == "completed":
        raise RunError(
            f"run {run_id} completed; there is nothing to resume. To try it another way, fork "
            f"it at a turn: gr.fork({run_id!r}, turn=N, agent=other_agent)"
        )
    if status == "ended":
        raise RunError(
            f"run {run_id} ended: its model ended its turn without the job reported complete, "
            f"and would again; fork it at a turn with another agent (a completion checker "
            f"refuses such a stop) instead: gr.fork({run_id!r}, turn=N, agent=other_agent)"
        )
    if status in _OWN_ENDS:
        raise RunError(
            f"run {run_id} is {status}: its own limits and checks stopped it, and would stop "
            f"it again; fork it at a turn with another agent instead: gr.fork({run_id!r}, "
            "turn=N, agent=other_agent)"
        )
    if status not in RESUMABLE:  # a status this version does not know
        raise RunError(f"run {run_id} has status {status!r}, which cannot be resumed")


def _resumed_already(run_id: str, by: str, *, after: str = "") -> RunError:
    return RunError(
        f"run {run_id} was already resumed as run {by}; resume that one "
        f"(gr.resume({by!r})), or fork this one at a turn{after}"
    )


def _resume_target(
    row: Mapping[str, Any],
    checkpoint: Checkpoint,
    original: Path,
    workspace: str | os.PathLike[str] | None,
) -> Path:
    run_id, turn = row["run_id"], checkpoint.turn
    copy_hint = (
        f"resume on a copy: gr.resume({run_id!r}, workspace='{original.name or 'ws'}-copy') "
        f"restores turn {turn}'s files there"
    )
    if workspace is not None:
        target = Path(workspace).expanduser().absolute()
        if target.resolve() != original.resolve():
            _check_apart(target, row, "resume", "the run resumed")
            _check_new(target, checkpoint, "resume")
            return target
    if not original.is_dir():
        raise WorkspaceError(
            f"the workspace {original} of run {run_id} is gone (moved or deleted); {copy_hint}"
        )
    now = hash_files(original)
    change = diff(now, checkpoint.files)
    own = written_since(original, run_id, checkpoint.turn)
    by_hand = [p for p in change.paths if p not in own]
    # a link where the run keeps or wrote a file: the hashes skip links, a person made it
    by_hand += [p for p in linked(original, {*own, *checkpoint.files}) if p not in by_hand]
    if by_hand:
        shown = ", ".join(by_hand[:5]) + (
            f" and {len(by_hand) - 5} more" if len(by_hand) > 5 else ""
        )
        raise WorkspaceError(
            f"the workspace {original} changed by hand since run {run_id}'s checkpoint of turn "
            f"{turn} ({shown}); {copy_hint}, and leaves this folder as it is"
        )
    return original


# -- fork -----------------------------------------------------------------------------------------


def fork(
    run: Run | str,
    turn: int,
    agent: Agent | None = None,
    *,
    workspace: str | os.PathLike[str] | None = None,
    store: StoreLike | None = None,
    wait: bool = True,
) -> Run:
    """A new run from the checkpoint of ``turn`` of ``run`` (a Run, or a run id in ``store``):
    that turn is played again, under ``agent`` (default: the run's own), in ``workspace``
    (default ``gr_runs/<new run id>``), which must be new or empty. The new run records its
    parent and the turn. ``run.fork(turn, ...)`` is this call for a run in hand.

    Returns the new run once it has ended, wherever it is called from; ``wait=False``
    returns it live at once (it needs a running event loop: a notebook cell or async code).
    """
    call = "run.fork" if isinstance(run, Run) else "gr.fork"
    _check_wait(wait, call)
    if isinstance(run, Run):
        refusal = run.loop_control_refusal("fork")
        if refusal is not None:
            raise refusal
    run_id, store = _checkpointed(run, store, call)
    chosen = _agent_for(run_id, agent, call)
    if isinstance(turn, bool) or not isinstance(turn, int):
        raise RunError(f"turn takes a turn number, e.g. turn=12; got {turn!r}")
    with _opened(store) as opened:
        row = _run_row(opened, run_id)
        checkpoint = _checkpoint(opened, row, turn)
        new_id = runner.new_run_id()
        target = (
            Path(workspace).expanduser().absolute()
            if workspace is not None
            else (DEFAULT_RUNS_DIR / new_id).absolute()
        )
        _check_apart(target, row, "fork", "its parent")
        _check_new(target, checkpoint, "fork")
        origin = _FromCheckpoint(
            checkpoint,
            parent=run_id,
            relation="fork",
            target=target,
            root=_root(opened, run_id),
            inherited=_parent_calls(opened, run_id, checkpoint),
        )
        return _start(
            chosen, opened, origin, row["instructions"] or "", target, run_id=new_id, wait=wait
        )


def _root(store: Store, run_id: str) -> str:
    """The first run of ``run_id``'s lineage: its calls' idempotency keys are made from it."""
    parents = {x.run_id: x.parent_run_id for x in lineage(store)}
    seen = {run_id}
    while run_id in parents and parents[run_id] not in seen:
        run_id = parents[run_id]
        seen.add(run_id)
    return run_id


def _cut_turn(store: Store, run_id: str, checkpoint: Checkpoint) -> CutTurn | None:
    """The turn the kill cut, from the run's events after the checkpoint resumed from."""
    later = [e for e in store.events(run_id) if e.seq > checkpoint.seq]
    try:
        return cut_turn(later, lambda digest: rows.blob(store, digest))
    except (KeyError, TypeError, ValueError) as exc:
        raise RunError(
            f"the record of turn {checkpoint.turn} of run {run_id} cannot be read back "
            f"({type(exc).__name__}: {exc}); fork an earlier turn instead"
        ) from None


def _parent_calls(store: Store, run_id: str, checkpoint: Checkpoint) -> list[dict[str, Any]]:
    """The ``once`` calls the parent (and the runs that resumed it) made from the fork's
    turn on: they happened in the world, whatever the fork does."""
    found = once_calls(store.events(run_id), since_seq=checkpoint.seq)
    links = lineage(store)
    chain = [run_id]
    while True:
        resumed = [
            x.run_id for x in links if x.parent_run_id == chain[-1] and x.relation == "resume"
        ]
        if not resumed or resumed[0] in chain:
            break
        chain.append(resumed[0])
        later = [e for e in store.events(resumed[0]) if e.turn >= checkpoint.turn]
        found += once_calls(later)
    calls: dict[str, dict[str, Any]] = {}
    for call in found:  # a resume's copy of a call is the same call: one key
        kept = calls.setdefault(call["key"], call)
        kept["done"] = kept["done"] or call["done"]
    return list(calls.values())


def fork_run(
    run: Run, turn: int, agent: object, *, workspace: str | os.PathLike[str] | None, wait: bool
) -> Run:
    """:meth:`Run.fork`, as the facade hands it to the run, which imports no review code."""
    return fork(run, turn, agent, workspace=workspace, wait=wait)  # type: ignore[arg-type]


def _check_apart(target: Path, row: Mapping[str, Any], what: str, whose: str) -> None:
    """Refuse a new workspace that is the run's own, or inside it, or around it (their
    real paths compared): the new run would rewrite the run's files, add its own to them,
    or set them aside as its own."""
    if not row["workspace"]:
        return
    mine, theirs = target.resolve(), Path(row["workspace"]).resolve()
    run_id = row["run_id"]
    if mine == theirs:
        why = f"is the workspace of run {run_id}, {whose}: a {what} there rewrites its files"
    elif mine.is_relative_to(theirs):
        why = (
            f"is inside the workspace of run {run_id}, {whose} ({theirs}): the {what}'s files "
            "would become part of that run's"
        )
    elif theirs.is_relative_to(mine):
        why = (
            f"holds the workspace of run {run_id}, {whose} ({theirs}): a {what} there would "
            "take that run's files for its own"
        )
    else:
        return
    beside = theirs.parent / f"{theirs.name}-{what}"
    raise WorkspaceError(f"{target} {why}; give a new folder outside it, e.g. workspace='{beside}'")


def _check_new(target: Path, checkpoint: Checkpoint, what: str) -> None:
    if target.exists() and not target.is_dir():
        raise WorkspaceError(f"{target} is a file; give a new or empty folder to {what} into")
    busy = target.is_dir() and any(p.name != SYSTEM_DIR for p in target.iterdir())
    if busy and hash_files(target) != checkpoint.files:  # a moved workspace is welcome
        raise WorkspaceError(
            f"{target} is not empty; a {what} starts in a new workspace: give a new or empty folder"
        )


# -- shared ---------------------------------------------------------------------------------------


def _checkpointed(run: object, store: StoreLike | None, call: str) -> tuple[str, StoreLike | None]:
    """The run's id and the store that holds its checkpoints, from any run argument; events
    alone hold no checkpoint, and a Run that kept no store has none."""
    try:
        given = given_run(run, store, call)
    except ConfigError as exc:
        raise RunError(str(exc)) from None
    if given.events is not None:
        raise RunError(
            f"{call} starts from a checkpoint, which a run's events do not hold: pass the run "
            "or its id (with store=)"
        )
    if given.run is not None and given.store is None:
        raise RunError(
            f"run {given.run_id} kept no store, so it has no checkpoints to start from; give "
            "its agent a store (the default) and run it again"
        )
    return given.run_id, given.store


class _opened:
    """The store given, or opened from a path (and closed after) or the default."""

    def __init__(self, store: StoreLike | None) -> None:
        self._given = store if isinstance(store, Store) else None
        self._path = None if isinstance(store, Store) else (store or DEFAULT_STORE_PATH)
        self._opened: Store | None = None

    def __enter__(self) -> Store:
        if self._given is not None:
            return self._given
        assert self._path is not None
        if not Path(self._path).exists():
            raise RunError(f"there is no run store at {self._path}; pass store= the one you used")
        self._opened = Store(self._path)
        return self._opened

    def __exit__(self, failed: type[BaseException] | None, *exc: object) -> None:
        if failed is not None and self._opened is not None:
            self._opened.close()  # else the new run records into it: it stays open


def _run_row(store: Store, run_id: str) -> dict[str, Any]:
    if not isinstance(run_id, str) or not run_id.strip():
        raise RunError(f"give a run id, e.g. gr.resume('20250101-120000-abc123'); got {run_id!r}")
    for row in store.runs():
        if row["run_id"] == run_id:
            return row
    raise RunError(f"no run {run_id!r} in run store {store.path}; gr.runs_df() lists its runs")


def _checkpoint(store: Store, row: Mapping[str, Any], turn: int | None) -> Checkpoint:
    run_id = row["run_id"]
    turns = rows.checkpoint_turns(store, run_id)
    if not turns:
        if rows.from_earlier_version(store, run_id, row["started_at"]):
            raise RunError(
                f"run {run_id} was recorded by an earlier gr_notebook, which kept no "
                "checkpoints or kept them in a format this version does not read: its events "
                "and DataFrames open as before, but it cannot be resumed or forked; run the "
                "job again"
            )
        raise RunError(
            f"run {run_id} has no checkpoints (its agent had checkpoints=False, or it ended "
            "before its first turn); run the job again"
        )
    if turn is not None and turn not in turns:
        raise RunError(
            f"run {run_id} has no turn {turn}: its checkpoints are of turns {turns[0]}–"
            f"{turns[-1]}; fork at one of those"
        )
    return load_checkpoint(store, run_id, turn)


def _check_wait(wait: object, call: str) -> None:
    """Refuse a ``wait`` that is not a bool, and ``wait=False`` with no loop to run on."""
    if not isinstance(wait, bool):
        raise RunError(f"wait takes True or False, got {wait!r}")
    if not wait:
        runner.running_loop(f"{call}(..., wait=False)", f"{call}(...) without wait=False")


def _agent_for(run_id: str, agent: object, call: str) -> runner.Runnable:
    if agent is not None:
        if not isinstance(agent, Agent):
            raise RunError(f"agent takes a gr.Agent, not {type(agent).__name__}")
        return agent
    known = runner.started_by.get(run_id)
    if known is None:
        raise RunError(
            f"run {run_id} was started by an agent this process does not have (a new kernel?); "
            f"build it again and pass it: {call}({run_id!r}, agent=my_agent)"
        )
    return known


def _start(
    agent: runner.Runnable,
    store: Store,
    origin: _FromCheckpoint,
    instructions: str,
    target: Path,
    *,
    run_id: str | None = None,
    wait: bool,
) -> Run:
    new_id = run_id or runner.new_run_id()
    origin.run_id = new_id

    def launch(loop: asyncio.AbstractEventLoop) -> Run:
        # the new run records into its parent's store, whatever store its agent names
        return runner.launch(
            agent, new_id, Workspace(target), instructions, loop, origin=origin, store=store
        )

    if not wait:
        return launch(asyncio.get_running_loop())  # _check_wait made sure there is one

    async def to_the_end() -> Run:
        return await launch(asyncio.get_running_loop()).wait()

    # as agent.run_sync: in a running loop (a notebook cell), on a loop of its own
    return run_blocking(to_the_end())


@dataclass
class _FromCheckpoint:
    """A run's :class:`~gr_notebook.runner.RunOrigin`: a checkpoint of another run."""

    checkpoint: Checkpoint
    parent: str
    relation: str
    target: Path
    mark_parent: bool = False
    run_id: str = ""
    kept_aside: tuple[str, ...] = ()
    root: str = ""
    """The first run of the lineage: the idempotency keys' root."""
    cut: CutTurn | None = None
    """A resume's turn the kill cut, rebuilt from its record (decision 407)."""
    inherited: list[dict[str, Any]] = field(default_factory=list)
    """A fork's parent's ``once`` calls from the fork's turn on (decision 410)."""

    @property
    def aside(self) -> Path:
        return self.target / SYSTEM_DIR / "aside" / self.run_id

    def restore(self, state: RunState) -> None:
        ck = self.checkpoint
        try:
            snapshot = fit_snapshot(ck.snapshot, state.snapshot(history=False))
        except (KeyError, TypeError, AttributeError) as exc:  # restore() checks the rest
            raise RunError(
                f"the checkpoint of turn {ck.turn} of run {ck.run_id} is not a run state this "
                f"version reads ({type(exc).__name__}: {exc}); fork another turn"
            ) from None
        self.kept_aside = restore_files(self.target, ck.files, ck.read, aside=self.aside)
        state.restore(snapshot, events=ck.events)
        state.root_run_id = self.root or self.parent

    def record(self, store: Store, run_id: str) -> None:
        link = Lineage(run_id, self.parent, self.checkpoint.turn, self.relation)
        earlier = record_lineage(store, link)  # checked and recorded at once
        if earlier is not None:  # another resume won the race: this run never began
            with store.transaction() as conn:
                conn.execute("DELETE FROM runs WHERE run_id = ?", (run_id,))
            kept = (
                f". The files this resume set aside are in {self.aside}" if self.kept_aside else ""
            )
            raise _resumed_already(self.parent, earlier.run_id, after=kept)
        copy_events(store, self.parent, run_id, self.checkpoint.seq)
        if self.mark_parent:  # its process died: its record says so from now on
            store.record_run_finished(
                self.parent,
                status="interrupted",
                finished_at=self.checkpoint.time,
                error=f"interrupted; resumed as run {run_id} from turn {self.checkpoint.turn}",
            )

    def begin(self, state: RunState, registry: ToolRegistry) -> None:
        workspace = state.workspace
        for tool in registry:  # a fork's agent may have other tools: its docs are its own
            rel = f"{TOOL_DOCS_DIR}/{tool.name}.md"
            text = tool.docs_markdown()
            try:
                same = workspace.read_text(rel) == text
            except WorkspaceError:
                same = False
            if not same:
                workspace.write_text(rel, text)
        state.emit(
            RunResumedEvent(
                parent_run_id=self.parent,
                parent_turn=self.checkpoint.turn,
                relation=self.relation,
                kept_aside=list(self.kept_aside) or None,
                aside=str(self.aside) if self.kept_aside else None,
            )
        )
        if self.inherited:
            state.emit(ParentCallsEvent(parent_run_id=self.parent, calls=self.inherited))


def fit_snapshot(saved: Mapping[str, Any], fresh: Mapping[str, Any]) -> dict[str, Any]:
    """``saved`` made to fit the agent whose fresh state is ``fresh``: what it shares with
    the saved agent carries over (policy memories by name, feedback by provider, the
    refusal streak, self-regulation, the intervention tracker); what it lacks is dropped,
    and what it adds starts as in a fresh run, counting from the fork. A policy the saved
    run had in shadow and the agent has live keeps what the shadow remembered: it saw every
    call that really ran, so it goes on as if it had been live all along."""
    fitted = dict(saved)
    shadow = saved.get("shadow")
    promoted = shadow["guardrails"]["policies"] if shadow else {}
    fitted["guardrails"] = _fit_guardrails(saved["guardrails"], fresh["guardrails"], promoted)
    fitted["shadow"] = _fit_shadow(shadow, fresh.get("shadow"))
    for part in ("regulation", "interventions"):
        if (saved.get(part) is None) != (fresh.get(part) is None):
            fitted[part] = fresh.get(part)
    if fresh.get("stuck_detector") is None or saved.get("stuck_detector") is None:
        fitted["stuck_detector"] = None
    return fitted


def _fit_shadow(saved: Mapping[str, Any] | None, fresh: Mapping[str, Any] | None) -> Any:
    """The shadows' part, fitted as the live guardrails' is (none saved: they start now)."""
    if saved is None or fresh is None:
        return fresh
    both = saved["interventions"] is not None and fresh["interventions"] is not None
    return {
        "guardrails": _fit_guardrails(saved["guardrails"], fresh["guardrails"]),
        "interventions": saved["interventions"] if both else fresh["interventions"],
    }


def _fit_guardrails(
    saved: Mapping[str, Any],
    fresh: Mapping[str, Any],
    promoted: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    kept = {**(promoted or {}), **saved["policies"]}
    policies = {key: kept.get(key, memory) for key, memory in fresh["policies"].items()}
    feedback = dict(saved["feedback"])
    names = [t["provider"] for t in feedback["triggers"]]
    if names != [t["provider"] for t in fresh["feedback"]["triggers"]]:
        now = time.time()
        feedback["triggers"] = [
            {**t, "last_call": feedback["calls"], "last_time": now}
            for t in fresh["feedback"]["triggers"]
        ]
        feedback["last_by_provider"] = {
            name: block
            for name, block in feedback["last_by_provider"].items()
            if name in {t["provider"] for t in fresh["feedback"]["triggers"]}
        }
    return {**saved, "policies": policies, "feedback": feedback}
