"""An experiment on a Dask LocalCluster (the optional ``dask`` extra, which dev installs)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr

distributed = pytest.importorskip("dask.distributed", reason="the dask extra is not installed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    )
    client = distributed.Client(cluster)
    try:
        yield client
    finally:
        client.close()
        cluster.close()


def experiment(tmp_path: Path) -> gr.Experiment:
    agents = {
        "bare": gr.Agent("simulated:reckless", max_iterations=80),
        "guarded": gr.Agent(
            "simulated:reckless", policies=[gr.ReadBeforeWritePolicy()], max_iterations=80
        ),
    }
    return gr.Experiment(
        agents,
        {"guide": gr.examples.QUICKSTART},
        repeats=2,
        root=tmp_path / "exp",
        store=tmp_path / "store.sqlite",
    )


@pytest.mark.slow
def test_an_experiment_runs_on_a_local_cluster_through_its_client(
    tmp_path: Path, client: Any
) -> None:
    results = experiment(tmp_path).run(client, progress=False)
    frame = results.df
    assert len(frame) == 4 and set(frame.status) == {"completed"}
    assert all(not w.startswith(f"{os.uname().nodename}:{os.getpid()}:") for w in frame.worker)
    assert frame.groupby("agent").denials.sum()["guarded"] > 0
    runs = gr.runs_df(tmp_path / "store.sqlite")
    assert sorted(runs.run_id) == sorted(frame.run_id)  # merged: nothing lost or duplicated
    # the same grid on the event loop gives the same runs
    (tmp_path / "loop").mkdir()
    again = experiment(tmp_path / "loop").run("loop", progress=False).df
    figures = ["agent", "repeat", "status", "turns", "tokens", "denials"]
    assert frame[figures].equals(again[figures])


@pytest.mark.slow
def test_the_clients_executor_is_accepted_too(tmp_path: Path, client: Any) -> None:
    results = experiment(tmp_path).run(client.get_executor(), progress=False)
    assert [r.status for r in results.records] == ["completed"] * 4
    assert len(gr.runs_df(tmp_path / "store.sqlite")) == 4
