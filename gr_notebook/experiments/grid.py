"""The grid of an experiment: every agent variant on every job, ``repeats`` times, each run
with a seed, all checked before anything runs.

A run's seed depends on its repeat only, so every variant meets the same seeds on a job: a
comparison between variants is paired, and the same grid gives the same runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TypeVar

from gr_notebook.agent import Agent
from gr_notebook.errors import ConfigError
from gr_notebook.examples import ExampleJob
from gr_notebook.validation import whole_number
from gr_notebook.wording import plural

__all__ = ["MAX_RUNS", "RunSpec", "build_grid", "check_agents", "check_jobs"]

MAX_RUNS = 100_000
"""The most runs one experiment holds. Each run gets a folder and a row, and the grid is
built whole before anything runs, so a grid past this (a typo such as ``repeats=10**9``) is
refused at once rather than left to fill the memory; split a larger study into experiments."""

T = TypeVar("T")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass(frozen=True, slots=True)
class RunSpec:
    """One cell of the grid: which variant runs which job, the how-many-th time, with which
    seed. ``key`` names it in the ledger and ``folder`` under the experiment's root."""

    agent: str
    job: str
    repeat: int
    seed: int

    @property
    def key(self) -> str:
        return f"{self.agent}/{self.job}/{self.repeat}"

    @property
    def folder(self) -> str:
        return f"{slug(self.agent)}--{slug(self.job)}--r{self.repeat:03d}"


def slug(name: str) -> str:
    """``name`` as one safe path component (``strict policy`` → ``strict_policy``)."""
    return _UNSAFE.sub("_", name).strip("._") or "_"


def check_agents(agents: object) -> dict[str, Agent]:
    """``{name: agent}``, a list of ``(name, agent)`` pairs, or a list of agents named by
    their ``name``; two variants of one name are refused, never one silently dropped."""
    if isinstance(agents, Mapping):
        pairs = list(agents.items())
    elif isinstance(agents, Iterable) and not isinstance(agents, (str, bytes, Agent)):
        pairs = [(a.name, a) if isinstance(a, Agent) else a for a in agents]
        if any(not isinstance(p, tuple) or len(p) != 2 for p in pairs):
            pairs = [(None, None)]  # refused below
    else:
        pairs = [(None, None)]
    if pairs == [(None, None)]:
        raise ConfigError(
            "agents takes a dict of variant name -> gr.Agent, e.g. agents={'bare': gr.Agent(), "
            "'strict': gr.Agent(policies=[...])}, or a list of agents with distinct names; "
            f"got {type(agents).__name__}"
        )
    checked: dict[str, Agent] = {}
    folders: dict[str, str] = {}
    for name, agent in pairs:
        if not isinstance(agent, Agent):
            raise ConfigError(
                f"agents[{name!r}] is a {type(agent).__name__}, not a gr.Agent; build it with "
                "gr.Agent(model, policies=..., ...)"
            )
        _add(checked, folders, _name(name, "agents"), agent, "agents")
    return checked


def check_jobs(jobs: object) -> dict[str, ExampleJob]:
    if not isinstance(jobs, Mapping):
        raise ConfigError(
            "jobs takes a dict of job name -> instructions (a str) or a gr.examples.ExampleJob, "
            f"e.g. jobs={{'guide': gr.examples.QUICKSTART}}; got {type(jobs).__name__}"
        )
    checked: dict[str, ExampleJob] = {}
    folders: dict[str, str] = {}
    for name, job in jobs.items():
        if isinstance(job, str):
            job = ExampleJob(job)
        if not isinstance(job, ExampleJob):
            raise ConfigError(
                f"jobs[{name!r}] is a {type(job).__name__}; give the instructions as a str or "
                "a gr.examples.ExampleJob"
            )
        if not job.instructions.strip():
            raise ConfigError(f"jobs[{name!r}] has empty instructions; say what the job is")
        _add(checked, folders, _name(name, "jobs"), job, "jobs")
    return checked


def build_grid(
    agents: Mapping[str, Agent], jobs: Mapping[str, ExampleJob], repeats: object, seed: object
) -> tuple[RunSpec, ...]:
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"seed must be a whole number >= 0, got {seed!r}")
    if not agents or not jobs or repeats == 0:
        empty = [w for w, n in (("agents", len(agents)), ("jobs", len(jobs))) if not n]
        what = " and ".join(empty) + " empty" if empty else "repeats=0"
        raise ConfigError(
            f"the experiment's grid is empty ({what}): give at least one agent, one job and "
            "repeats >= 1"
        )
    count = whole_number(repeats, "repeats")
    runs = len(agents) * len(jobs) * count
    if runs > MAX_RUNS:
        raise ConfigError(
            f"the grid has {plural(runs, 'run')} ({plural(len(agents), 'agent')} × "
            f"{plural(len(jobs), 'job')} × {plural(count, 'repeat')}); an experiment holds at "
            f"most {MAX_RUNS:,}: use fewer repeats, or split the study into several experiments "
            "(each with its own name=)"
        )
    return tuple(
        RunSpec(agent, job, repeat, seed + repeat)
        for agent in agents
        for job in jobs
        for repeat in range(count)
    )


def _name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"every key of {what} is a variant's name, a non-empty str; got {name!r}")
    return name.strip()


def _add(named: dict[str, T], folders: dict[str, str], name: str, value: T, what: str) -> None:
    """Two names that name one folder (``a b`` and ``a_b``, ``A`` and ``a``) would mix
    their runs, as would one name given twice: each variant needs its own. ``folders``
    maps each folder name to the name that took it."""
    key = slug(name).lower()
    other = folders.get(key)
    if other is not None:
        same = (
            f"a variant {name!r} twice"
            if other == name
            else f"two variants, {other!r} and {name!r}, that name one folder"
        )
        raise ConfigError(f"{what} names {same}; give each variant a distinct name")
    folders[key] = name
    named[name] = value
