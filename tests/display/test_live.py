"""The live view of a streaming turn: what it keeps of thousands of deltas, and its HTML."""

from __future__ import annotations

import re
import time

import pytest

from gr_notebook.display.live import LIVE_CHARS, LiveTurn, render_live
from gr_notebook.models.call_context import ModelDelta


def feed(live: LiveTurn, *deltas: tuple[str, str], turn: int = 1) -> None:
    for kind, text in deltas:
        live.add(ModelDelta(turn, kind, text))  # type: ignore[arg-type]


def visible(html: str) -> str:
    return re.sub(r"<[^>]+>", "", html).replace("&#x27;", "'")


def test_nothing_streams_until_a_delta_arrives() -> None:
    live = LiveTurn()
    assert live.view() is None and render_live(live.view()) == ""


def test_text_pieces_join_and_kinds_make_sections() -> None:
    live = LiveTurn()
    feed(
        live,
        ("thinking", "Let me "),
        ("thinking", "check."),
        ("text", "I will read "),
        ("text", "the notes."),
        ("tool_use", "read_file"),
        ("text", "Then write."),
    )
    view = live.view()
    assert view is not None and view.turn == 1
    assert [(s.kind, s.text) for s in view.sections] == [
        ("thinking", "Let me check."),
        ("text", "I will read the notes."),
        ("tool_use", "read_file"),
        ("text", "Then write."),
    ]
    assert view.received == len("Let me check.I will read the notes.read_fileThen write.")


def test_thinking_shows_collapsed_under_a_short_summary() -> None:
    live = LiveTurn()
    feed(live, ("thinking", "secret <plan> & steps"), ("redacted_thinking", ""), ("text", "Hi"))
    html = render_live(live.view())
    details = re.findall(r"<details class='gr-live-thinking'>(.*?)</details>", html)
    assert len(details) == 2
    assert "<summary>thinking…</summary>" in details[0] and "open" not in html
    assert "secret &lt;plan&gt; &amp; steps" in details[0]  # escaped, inside the details
    assert details[1] == "<summary>thinking… (redacted)</summary>"
    assert "<div class='gr-live-text'" in html and visible(html).endswith("Hi")


def test_a_tool_use_names_the_tool() -> None:
    live = LiveTurn()
    feed(live, ("tool_use", "write_file"))
    assert "→ calling write_file…" in visible(render_live(live.view()))


def test_a_new_turn_or_a_restart_starts_over() -> None:
    live = LiveTurn()
    feed(live, ("text", "first try, cut off"))
    feed(live, ("restart", ""))
    view = live.view()
    assert view is not None and view.sections == () and view.turn == 1
    assert "the model is writing" in visible(render_live(view))
    feed(live, ("text", "second try"))
    feed(live, ("text", "next turn"), turn=2)
    view = live.view()
    assert view is not None and view.turn == 2
    assert [s.text for s in view.sections] == ["next turn"]
    live.clear()
    assert live.view() is None


def test_a_long_turn_keeps_only_its_tail() -> None:
    live = LiveTurn(limit=100)
    text = "".join(f"{i:05d}," for i in range(5_000))  # 30,000 characters, 5,000 deltas
    for i in range(5_000):
        live.add(ModelDelta(1, "text", f"{i:05d},"))
    view = live.view()
    assert view is not None and view.received == len(text)
    [section] = view.sections
    assert 100 <= len(section.text) <= 150 and text.endswith(section.text)
    assert section.cut == len(text) - len(section.text)
    html = render_live(view)
    assert f"{len(text):,} characters" in visible(html)
    assert visible(html).endswith("…" + section.text)


def test_one_huge_delta_is_cut_to_its_tail() -> None:
    live = LiveTurn(limit=50)
    live.add(ModelDelta(1, "text", "x" * 10_000 + "END"))
    [section] = live.view().sections  # type: ignore[union-attr]
    assert len(section.text) <= 75 and section.text.endswith("END")
    assert section.cut + len(section.text) == 10_003


def test_old_sections_are_dropped_and_counted() -> None:
    live = LiveTurn(max_sections=3)
    for i in range(10):
        feed(live, ("thinking", f"t{i}"), ("tool_use", f"tool{i}"))
    view = live.view()
    assert view is not None and len(view.sections) == 3 and view.dropped == 17
    assert [s.text for s in view.sections] == ["tool8", "t9", "tool9"]
    assert "… 17 earlier part(s)" in visible(render_live(view))


def test_the_tail_limit_drops_whole_sections_before_the_newest() -> None:
    live = LiveTurn(limit=20)
    feed(live, ("thinking", "a" * 15), ("text", "b" * 30))
    view = live.view()
    assert view is not None and [s.kind for s in view.sections] == ["text"]
    assert view.dropped == 1


def test_the_defaults_bound_what_a_redraw_renders() -> None:
    live = LiveTurn()
    for _ in range(20_000):
        live.add(ModelDelta(1, "text", "word "))
    html = render_live(live.view())
    assert len(html) < LIVE_CHARS * 1.5 + 1_000


def test_adding_costs_the_same_at_delta_100000_as_at_delta_1000() -> None:
    """O(1) amortised: the time per delta does not grow with the turn (no O(n²) joins)."""

    def per_delta(n: int) -> float:
        live = LiveTurn()
        started = time.perf_counter()
        for _ in range(n):
            live.add(ModelDelta(1, "text", "abc "))
        return (time.perf_counter() - started) / n

    small = min(per_delta(1_000) for _ in range(3))
    large = min(per_delta(100_000) for _ in range(2))
    assert large < small * 3


def test_limits_below_one_are_refused() -> None:
    with pytest.raises(ValueError):
        LiveTurn(limit=0)
