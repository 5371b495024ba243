"""Attacks on a shared page, each once a way to break it: a crafted store (values of the wrong
type, a NaN, a row that is not JSON, a workspace path naming another folder of this machine),
a file name that is not UTF-8, a run named twice, a mistaken path, title or height, files of
markup that took a page past 2 MB, and, in a real browser, a page whose every text is
hostile markup."""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import gr_notebook as gr
from gr_notebook.__main__ import main
from gr_notebook.errors import ConfigError
from gr_notebook.history.store import Store
from gr_notebook.share import export_html, page_of, view
from gr_notebook.share.page import embedded_json
from tests.chromium import NEEDS_CHROMIUM, launched
from tests.share.runs import agent_at, guarded_run
from tests.share.test_page_in_browser import Watched

with contextlib.suppress(ImportError):  # NEEDS_CHROMIUM skips the browser test without it
    from playwright.sync_api import Browser

MB = 2**20
EVIL = "<img src=x onerror='window.__pwned=1'>\"</script><!--\u2028"
"""Markup that runs if a page reads it as HTML, a quote, the end of a script, a separator."""


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> gr.Run:
    return guarded_run(tmp_path_factory.mktemp("attacked"))


def strict(page: str) -> dict[str, Any]:
    """The page's data, read as strictly as ``JSON.parse`` reads it (no NaN, no Infinity)."""
    found = re.search(r"<script type='application/json' id='gr-data'>(.*?)</script>", page, re.S)
    assert found is not None

    def refuse(word: str) -> None:
        raise AssertionError(f"the page's JSON holds {word}, which JSON.parse refuses")

    loaded: dict[str, Any] = json.loads(found.group(1), parse_constant=refuse)
    return loaded


def copied(run: gr.Run, tmp_path: Path) -> Path:
    """A copy of ``run``'s store, to craft."""
    assert run.store is not None
    copy = tmp_path / "crafted.sqlite"
    with sqlite3.connect(run.store.path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    return copy


def craft(store: Path, run_id: str, kind: str, change: Callable[[dict[str, Any]], Any]) -> int:
    """Change the data of ``run_id``'s first ``kind`` event; returns its seq."""
    with sqlite3.connect(store) as conn:
        seq, data = conn.execute(
            "SELECT seq, data FROM events WHERE run_id = ? AND kind = ? ORDER BY seq",
            (run_id, kind),
        ).fetchone()
        value = json.loads(data)
        change(value)
        conn.execute(
            "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?",
            (json.dumps(value), run_id, seq),
        )
    return int(seq)


# -- a crafted or damaged store ------------------------------------------------------------------


def test_a_number_json_cannot_hold_leaves_the_page_readable(
    guarded: gr.Run, tmp_path: Path
) -> None:
    """``json.dumps`` writes NaN, which JSON.parse refuses: the page drew nothing."""
    store = copied(guarded, tmp_path)
    craft(store, guarded.run_id, "model_call", lambda d: d.update(cost_usd=math.nan))
    craft(store, guarded.run_id, "tool_call", lambda d: d.update(duration_s=math.inf))
    craft(store, guarded.run_id, "approval_answered", lambda d: d.update(waited_s=-math.inf))
    data = strict(page_of(guarded.run_id, store=store))
    assert data["runs"][0]["cost"] is None  # a NaN cost is no price
    assert embedded_json({"a": math.nan, "b": [math.inf, 1.5]}) == '{"a":null,"b":[null,1.5]}'


WRONG_TYPES = [
    ("model_call", "duration_s", "slow"),
    ("model_call", "cost_usd", "1.0"),
    ("model_call", "text", ["a", "list"]),
    ("tool_call", "tool_use_id", ["x"]),
    ("tool_call", "result", {"a": 1}),
    ("policy_decision", "policies", [1, 2]),
    ("approval_answered", "waited_s", "long"),
    ("run_started", "config", [1, 2]),
    ("run_finished", "turns", "nine"),
    ("run_finished", "status", 5),
    ("todos_written", "titles", None),
    ("todo_completed", "index", "first"),
    ("compaction", "tokens_before", "many"),
]
"""A value of the wrong type, in the first event of a kind: each ended the export in a raw
TypeError, AttributeError or ValueError."""


@pytest.mark.parametrize(
    ("kind", "key", "value"), [pytest.param(*w, id=f"{w[0]}.{w[1]}") for w in WRONG_TYPES]
)
def test_an_event_of_the_wrong_type_is_left_out_and_named(
    guarded: gr.Run, tmp_path: Path, kind: str, key: str, value: object
) -> None:
    store = copied(guarded, tmp_path)
    seq = craft(store, guarded.run_id, kind, lambda d: d.update({key: value}))
    [run] = strict(page_of(guarded.run_id, store=store))["runs"]
    [note] = [n for n in run["missing"] if "could not be read" in n]
    assert f"event {seq} ({kind}): its {key} is {value!r}, of the wrong type" in note
    assert len(run["by_turn"]) > 5  # the rest of the run is there


def test_odd_settings_in_a_recorded_config_read_as_none(guarded: gr.Run, tmp_path: Path) -> None:
    store = copied(guarded, tmp_path)
    odd = {"tools": 5, "policies": "read_before_write", "shadow": [1], "price": {"input": 1}}
    craft(store, guarded.run_id, "run_started", lambda d: d["config"].update(odd))
    [run] = strict(page_of(guarded.run_id, store=store))["runs"]
    settings = run["settings"]
    assert (settings["tools"], settings["shadow"], settings["price"]) == ([], [], None)


def test_a_row_that_is_not_json_is_named_not_drawn_as_an_empty_call(
    guarded: gr.Run, tmp_path: Path
) -> None:
    store = copied(guarded, tmp_path)
    seq = craft(store, guarded.run_id, "tool_call", lambda d: None)
    with sqlite3.connect(store) as conn:
        conn.execute(
            "UPDATE events SET data = 'not json' WHERE run_id = ? AND seq = ?",
            (guarded.run_id, seq),
        )
    [run] = strict(page_of(guarded.run_id, store=store))["runs"]
    assert any(f"event {seq} (tool_call): it is not JSON" in n for n in run["missing"])
    assert all(call["tool"] for turn in run["by_turn"] for call in turn["calls"])


def test_a_store_naming_another_folder_as_the_workspace_carries_none_of_its_files(
    guarded: gr.Run, tmp_path: Path
) -> None:
    """A store someone sent could name any folder here: the page, sent back, carried it."""
    store = copied(guarded, tmp_path)
    private = tmp_path / "private"
    private.mkdir()
    (private / "id_rsa").write_text("PRIVATE KEY 42\n")
    with sqlite3.connect(store) as conn:
        conn.execute("UPDATE runs SET workspace = ?", (str(private),))
    page = page_of(guarded.run_id, store=store)
    assert "PRIVATE KEY 42" not in page and "id_rsa" not in page
    [run] = strict(page)["runs"]
    assert any("not a folder gr ran in" in n for n in run["missing"])
    assert "report.md" in {f["path"] for f in run["files"]}  # its last checkpoint's files


# -- what a run holds ----------------------------------------------------------------------------


def test_a_file_name_that_is_not_utf8_is_kept_as_an_escape(tmp_path: Path) -> None:
    """The name read back as a lone surrogate, which no UTF-8 file can hold: the write
    raised UnicodeEncodeError."""
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / os.fsdecode(b"caf\xe9.md")).write_text("menu\n")
    script = [gr.tool_call("list_files"), gr.tool_call("todo_write", todos=["x"]), gr.text("Ok.")]
    run = agent_at(tmp_path, script).run_sync("List the files.")
    path = export_html(run, tmp_path / "run.html")
    page = path.read_text(encoding="utf-8")
    assert "caf\\udce9.md" in page
    assert "caf\udce9.md" in {f["path"] for f in strict(page)["runs"][0]["files"]}


def test_a_run_of_markup_files_stays_under_two_megabytes(tmp_path: Path) -> None:
    """Each ``<`` and ``>`` is six bytes in the page: 24 turns of an HTML file took 2.9 MB."""
    markup = "<>" * 10_000
    script = [
        gr.tool_call("write_file", path=f"p{i % 3}.html", content=f"{i}{markup}") for i in range(24)
    ]
    run = agent_at(tmp_path, [*script, gr.text("Done.")], max_iterations=40).run_sync("Write.")
    path = export_html(run, tmp_path / "run.html")
    assert path.stat().st_size <= 2 * MB
    data = strict(path.read_text(encoding="utf-8"))
    texts, [shown] = data["texts"], data["runs"]
    for name in ("p0.html", "p1.html", "p2.html"):  # as the run left them, first of all
        [file] = [f for f in shown["files"] if f["path"] == name]
        assert texts[file["text"]].startswith(f"{21 + int(name[1])}<>")


def test_the_files_a_run_wrote_keep_their_text_beside_many_it_did_not(tmp_path: Path) -> None:
    """Files no turn changed, earlier in the alphabet, took all the room for file text."""
    (tmp_path / "ws").mkdir()
    for n in range(25):
        (tmp_path / "ws" / f"a_data_{n:02}.txt").write_text(f"{n} " * 10_000)
    script = [gr.tool_call("write_file", path="z_report.md", content="# Report\n"), gr.text("Ok.")]
    run = agent_at(tmp_path, script).run_sync("Write the report.")
    data = strict(page_of(run))
    [report] = [f for f in data["runs"][0]["files"] if f["path"] == "z_report.md"]
    assert data["texts"][report["text"]] == "# Report\n"


# -- mistakes -----------------------------------------------------------------------------------


def test_a_run_named_twice_is_drawn_once(
    guarded: gr.Run, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was set side by side with itself, and the index linked both rows to the second."""
    assert guarded.store is not None
    data = strict(page_of([guarded, guarded.run_id, guarded], store=guarded.store))
    assert len(data["runs"]) == 1 and data["pairs"] == [] and data["index"] is None
    store, out = str(guarded.store.path), str(tmp_path / "run.html")
    assert main(["export", store, guarded.run_id, guarded.run_id, "-o", out]) == 0
    assert "(1 run," in capsys.readouterr().out


@pytest.mark.parametrize(
    ("call", "problem"),
    [
        pytest.param(
            lambda run, tmp: export_html(run, tmp / "folder.html"),
            "is a folder: name a file",
            id="a folder",
        ),
        pytest.param(
            lambda run, tmp: export_html(run, None), "name the HTML file to write", id="no path"
        ),
        pytest.param(
            lambda run, tmp: export_html(run, tmp / "x.html", title=5),
            "title= is the page's",
            id="a title",
        ),
        pytest.param(
            lambda run, tmp: export_html(run.run_id, tmp / "x.html", store=5),
            "store= is a gr",
            id="a store",
        ),
        pytest.param(
            lambda run, tmp: view(run, height='1" onload="alert(1)'),
            "height= is the frame's",
            id="markup for a height",
        ),
        pytest.param(lambda run, tmp: run.view(height=0), "height= is the frame's", id="no height"),
    ],
)
def test_a_mistake_is_named_in_one_line(
    guarded: gr.Run, tmp_path: Path, call: Callable[[gr.Run, Path], Any], problem: str
) -> None:
    """Each was a raw IsADirectoryError, TypeError or AttributeError, and a height that is
    not a number was written into the notebook's own markup, outside the frame's sandbox."""
    (tmp_path / "folder.html").mkdir()
    with pytest.raises(ConfigError, match=problem):
        call(guarded, tmp_path)


# -- in a browser -------------------------------------------------------------------------------


def hostile(value: Any) -> Any:
    """Every text in ``value`` made hostile markup, every number and flag left as it is."""
    if isinstance(value, str):
        return EVIL
    if isinstance(value, list):
        return [hostile(v) for v in value]
    if isinstance(value, dict):
        return {k: hostile(v) for k, v in value.items()}
    return value


def hostile_store(run: gr.Run, tmp_path: Path) -> tuple[Path, str]:
    """``run``'s store with every text of its events, its id, model and job made hostile, a
    NaN cost, files named with markup or in no encoding, and a run with no events."""
    store = copied(run, tmp_path)
    run_id = f"run {EVIL}"
    with sqlite3.connect(store) as conn:
        rows = conn.execute("SELECT seq, data FROM events WHERE run_id = ?", (run.run_id,))
        for seq, data in list(rows):
            value = hostile(json.loads(data))
            conn.execute(
                "UPDATE events SET data = ? WHERE run_id = ? AND seq = ?",
                (json.dumps(value), run.run_id, seq),
            )
        for table in ("runs", "jobs", "events", "checkpoints"):
            conn.execute(f"UPDATE {table} SET run_id = ? WHERE run_id = ?", (run_id, run.run_id))
        conn.execute("UPDATE runs SET model = ?, instructions = ?", (EVIL, EVIL))
    craft(store, run_id, "model_call", lambda d: d.update(cost_usd=math.nan))
    with Store(store, create=False) as opened:
        opened.record_run_started(
            "empty", started_at=0.0, model=EVIL, workspace=EVIL, instructions=EVIL, config={}
        )
    ws = run.workspace.root
    (ws / "<img src=x onerror='window.__pwned=2'>.md").write_text(EVIL)
    (ws / 'x"</script><!--').mkdir(parents=True)
    (ws / 'x"</script><!--' / "<svg onload='window.__pwned=3'>.md").write_text(EVIL)
    (ws / os.fsdecode(b"caf\xe9 <b>.md")).write_text(EVIL)
    return store, run_id


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    yield from launched()


class TestInABrowser:
    pytestmark = NEEDS_CHROMIUM

    def test_a_page_of_hostile_texts_and_odd_numbers_opens_clean_and_runs_nothing(
        self, browser: Browser, tmp_path: Path
    ) -> None:
        """It drew nothing at all: the NaN made its JSON invalid, and the file name in no
        encoding failed the write. A run with no events said "Turn 0 of undefined"."""
        store, run_id = hostile_store(guarded_run(tmp_path / "run"), tmp_path)
        path = export_html([run_id, "empty"], tmp_path / "hostile.html", store=store)
        watched = Watched(browser)
        page = watched.open(path, "#run=0&turn=1")
        assert page.locator("#header pre.job").text_content() == EVIL
        page.keyboard.press("Alt+ArrowRight")  # the browser's (Alt+← is back), not the viewer's
        assert page.locator("#turn-label").inner_text().startswith("Turn 1 of")
        for _ in range(10):
            page.keyboard.press("ArrowRight")
            page.locator("#turn details").evaluate_all("all => all.forEach(d => d.open = true)")
        for link in page.locator("#changed-files a", has_text="pwned").all():
            link.click()  # the file's text, under its hostile name
            assert page.locator("#files pre").text_content() == EVIL
        files = page.locator("#files").inner_text()
        assert "<img src=x onerror='window.__pwned=2'>.md" in files and "caf\udce9 <b>.md" in files
        page.evaluate("location.hash = '#run=1'")  # an address typed: the run with no events
        page.wait_for_function("document.querySelector('#header b').textContent === 'Run empty'")
        assert page.locator("#scrub").count() == 0
        assert "No turns recorded." in page.locator("#app").inner_text()
        assert page.evaluate("window.__pwned === undefined")
        assert page.locator("#app img, #app svg, #app script, #nav img").count() == 0
        watched.check(path)
