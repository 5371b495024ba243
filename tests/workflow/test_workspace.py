"""Tests for the sandboxed Workspace: path confinement, reads, atomic writes and listing."""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from gr_notebook.errors import GrNotebookError, WorkspaceError
from gr_notebook.workflow.workspace import Workspace, display_name, special_kind


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "ws")


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A directory next to the workspace, holding a secret file."""
    path = tmp_path / "outside"
    path.mkdir()
    (path / "secret.txt").write_text("secret", encoding="utf-8")
    return path


# ── construction ─────────────────────────────────────────────────────────────


def test_workspace_creates_missing_directory(tmp_path: Path) -> None:
    ws = Workspace(tmp_path / "a" / "b")
    assert ws.root == (tmp_path / "a" / "b").resolve()
    assert ws.root.is_dir()


def test_workspace_on_an_existing_file_raises(tmp_path: Path) -> None:
    target = tmp_path / "file.txt"
    target.write_text("x", encoding="utf-8")
    with pytest.raises(WorkspaceError, match="is a file"):
        Workspace(target)


def test_workspace_error_is_a_gr_notebook_error() -> None:
    assert issubclass(WorkspaceError, GrNotebookError)


def test_workspace_fspath_is_root(ws: Workspace) -> None:
    assert os.fspath(ws) == str(ws.root)


# ── resolve: refusals ────────────────────────────────────────────────────────


@pytest.mark.parametrize("rel", ["../x", "a/../../x", "..", "./../x", "a/b/../../../x"])
def test_resolve_refuses_parent_traversal(ws: Workspace, rel: str) -> None:
    with pytest.raises(WorkspaceError, match="outside the workspace"):
        ws.resolve(rel)


def test_resolve_refuses_absolute_path(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="absolute path"):
        ws.resolve("/etc/passwd")


def test_resolve_refuses_absolute_path_inside_the_workspace(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="absolute path"):
        ws.resolve(str(ws.root / "notes.md"))


def test_resolve_refuses_backslash_traversal(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError):
        ws.resolve("..\\x")


@pytest.mark.parametrize("rel", ["", "   "])
def test_resolve_refuses_empty_path(ws: Workspace, rel: str) -> None:
    with pytest.raises(WorkspaceError, match="empty"):
        ws.resolve(rel)


def test_resolve_refuses_nul_byte(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="NUL"):
        ws.resolve("a\x00b.txt")


def test_resolve_refuses_file_symlink_pointing_outside(ws: Workspace, outside: Path) -> None:
    (ws.root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("link.txt")


def test_resolve_refuses_dir_symlink_pointing_outside(ws: Workspace, outside: Path) -> None:
    (ws.root / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("linkdir/secret.txt")
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("linkdir")


def test_resolve_refuses_new_file_under_dir_symlink_pointing_outside(
    ws: Workspace, outside: Path
) -> None:
    (ws.root / "linkdir").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError):
        ws.resolve("linkdir/new.txt")


def test_read_through_outside_symlink_is_refused(ws: Workspace, outside: Path) -> None:
    (ws.root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspaceError):
        ws.read_text("link.txt")


def test_write_through_outside_symlink_is_refused(ws: Workspace, outside: Path) -> None:
    (ws.root / "link.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(WorkspaceError):
        ws.write_text("link.txt", "overwritten")
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "secret"


def test_exists_is_false_for_refused_paths(ws: Workspace) -> None:
    assert ws.exists("../x") is False
    assert ws.exists("/etc/passwd") is False


# ── resolve: allowed ─────────────────────────────────────────────────────────


def test_resolve_allows_dotdot_that_stays_inside(ws: Workspace) -> None:
    assert ws.resolve("a/../b.txt") == ws.root / "b.txt"


def test_resolve_allows_nested_new_paths(ws: Workspace) -> None:
    path = ws.resolve("x/y/z/new.md")
    assert path == ws.root / "x" / "y" / "z" / "new.md"
    assert not path.exists()


def test_resolve_dot_is_root(ws: Workspace) -> None:
    assert ws.resolve(".") == ws.root


@pytest.mark.parametrize(
    "rel",
    [
        "a.txt",
        "sub/b.txt",
        "sub/new/deeper.txt",
        "a.txt/under_a_file",
        "missing/x/y",
        "inner/b.txt",
        "inner/new.txt",
        "sub/../a.txt",
        "./sub//b.txt",
        "chain/b.txt",
    ],
)
def test_resolve_is_the_real_path_inside_the_workspace(ws: Workspace, rel: str) -> None:
    """Whether a path goes through a symlink or not, it resolves to what ``realpath``
    gives (the fast path for a path without links must not differ)."""
    (ws.root / "sub").mkdir()
    (ws.root / "sub" / "b.txt").write_text("b", encoding="utf-8")
    (ws.root / "a.txt").write_text("a", encoding="utf-8")
    (ws.root / "inner").symlink_to(ws.root / "sub", target_is_directory=True)
    (ws.root / "chain").symlink_to(ws.root / "inner", target_is_directory=True)
    expected = Path(os.path.realpath(ws.root / os.path.normpath(rel)))
    assert ws.resolve(rel) == expected


def test_resolve_refuses_a_link_deep_below_that_points_outside(
    ws: Workspace, outside: Path
) -> None:
    (ws.root / "a" / "b").mkdir(parents=True)
    (ws.root / "a" / "b" / "out").symlink_to(outside, target_is_directory=True)
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("a/b/out/secret.txt")
    with pytest.raises(WorkspaceError, match="symlink"):
        ws.resolve("a/b/out")


def test_resolve_allows_symlink_inside_workspace(ws: Workspace) -> None:
    (ws.root / "real.txt").write_text("hi", encoding="utf-8")
    (ws.root / "alias.txt").symlink_to(ws.root / "real.txt")
    assert ws.resolve("alias.txt") == ws.root / "real.txt"
    assert ws.read_text("alias.txt") == "hi"


def test_relative_gives_posix_name(ws: Workspace) -> None:
    assert ws.relative(ws.resolve("a/b/c.txt")) == "a/b/c.txt"


# ── read_text ────────────────────────────────────────────────────────────────


def test_read_text_round_trips_write(ws: Workspace) -> None:
    ws.write_text("notes.md", "héllo ✓\n")
    assert ws.read_text("notes.md") == "héllo ✓\n"


def test_read_missing_file_mentions_list_files(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="list_files") as info:
        ws.read_text("missing.md")
    assert "missing.md" in str(info.value)


def test_read_non_utf8_file_gives_clear_error(ws: Workspace) -> None:
    (ws.root / "blob.bin").write_bytes(b"ok\xff\xfe")
    with pytest.raises(WorkspaceError, match="not UTF-8") as info:
        ws.read_text("blob.bin")
    assert "blob.bin" in str(info.value)


def test_read_directory_suggests_list_files(ws: Workspace) -> None:
    (ws.root / "sub").mkdir()
    with pytest.raises(WorkspaceError, match=r"directory.*list_files"):
        ws.read_text("sub")


# ── write_text ───────────────────────────────────────────────────────────────


def test_write_creates_parent_directories(ws: Workspace) -> None:
    path = ws.write_text("deep/er/file.txt", "content")
    assert path == ws.root / "deep" / "er" / "file.txt"
    assert path.read_text(encoding="utf-8") == "content"


def test_write_leaves_no_temp_files(ws: Workspace) -> None:
    ws.write_text("a.txt", "one")
    ws.write_text("a.txt", "two")
    ws.write_text("sub/b.txt", "three")
    names = sorted(p.relative_to(ws.root).as_posix() for p in ws.root.rglob("*") if p.is_file())
    assert names == ["a.txt", "sub/b.txt"]
    assert (ws.root / "a.txt").read_text(encoding="utf-8") == "two"


def test_write_preserves_newlines_exactly(ws: Workspace) -> None:
    ws.write_text("crlf.txt", "a\r\nb\n")
    assert (ws.root / "crlf.txt").read_bytes() == b"a\r\nb\n"


def test_write_refuses_directory_target(ws: Workspace) -> None:
    (ws.root / "sub").mkdir()
    with pytest.raises(WorkspaceError, match="directory"):
        ws.write_text("sub", "x")
    assert (ws.root / "sub").is_dir()


def test_write_refuses_escaping_path(ws: Workspace, tmp_path: Path) -> None:
    with pytest.raises(WorkspaceError):
        ws.write_text("../escaped.txt", "x")
    assert not (tmp_path / "escaped.txt").exists()


def test_failed_write_cleans_up_temp_file(ws: Workspace) -> None:
    with pytest.raises(TypeError):
        ws.write_text("a.txt", 123)  # type: ignore[arg-type]
    assert list(ws.root.iterdir()) == []


# ── files ────────────────────────────────────────────────────────────────────


def test_files_skip_hidden_dirs_and_temp_files(ws: Workspace) -> None:
    ws.write_text("c.txt", "c")
    ws.write_text("b.txt", "b")
    ws.write_text("a/z.txt", "z")
    ws.write_text(".git/config", "hidden")
    (ws.root / ".a.txt.abc.tmp").write_text("partial", encoding="utf-8")
    names = [ws.relative(p) for p in ws.files()]
    assert set(names) == {"a/z.txt", "b.txt", "c.txt"}
    assert names.index("b.txt") < names.index("c.txt")


def test_files_of_missing_directory_raises(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="no directory"):
        list(ws.files("nope"))


def test_files_of_a_single_file_yields_it(ws: Workspace) -> None:
    ws.write_text("one.txt", "1")
    assert [ws.relative(p) for p in ws.files("one.txt")] == ["one.txt"]


def test_listing_skips_symlinks_that_leave_the_workspace_or_dangle(tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("top secret\n")
    ws = Workspace(tmp_path / "ws")
    ws.write_text("inside.md", "# Inside\n")
    (ws.root / "leak.md").symlink_to(secret)
    (ws.root / "dangling.md").symlink_to(tmp_path / "missing.md")
    (ws.root / "alias.md").symlink_to(ws.root / "inside.md")
    names = [ws.relative(p) for p in ws.files()]
    assert names == ["alias.md", "inside.md"]


# ── special files: FIFOs, sockets, devices (issue 14) ────────────────────────


@pytest.mark.usefixtures("fails_if_it_hangs")
@pytest.mark.parametrize(("name", "kind"), [("pipe", "FIFO"), ("sock", "socket")])
def test_reading_a_special_file_is_refused_without_blocking(
    special_files: Path, name: str, kind: str
) -> None:
    ws = Workspace(special_files)
    with pytest.raises(WorkspaceError, match=f"'{name}' is a {kind}, not a regular file"):
        ws.read_text(name)


@pytest.mark.parametrize(
    ("mode", "kind"),
    [
        (stat.S_IFIFO, "FIFO"),
        (stat.S_IFSOCK, "socket"),
        (stat.S_IFCHR, "character device"),
        (stat.S_IFBLK, "block device"),
        (stat.S_IFREG, None),
        (stat.S_IFDIR, None),
    ],
)
def test_special_kind_names_every_file_that_is_not_regular(mode: int, kind: str | None) -> None:
    assert special_kind(mode | 0o644) == kind


@pytest.mark.usefixtures("fails_if_it_hangs")
def test_files_lists_only_regular_files_and_entries_label_the_rest(special_files: Path) -> None:
    ws = Workspace(special_files)
    assert [ws.relative(p) for p in ws.files()] == ["notes.txt"]
    assert [(ws.relative(p), kind) for p, kind in ws.entries()] == [
        ("notes.txt", None),
        ("pipe", "FIFO"),
        ("sock", "socket"),
    ]


@pytest.mark.usefixtures("fails_if_it_hangs")
def test_a_symlink_to_a_fifo_is_refused_too(special_files: Path) -> None:
    ws = Workspace(special_files)
    (special_files / "link").symlink_to(special_files / "pipe")
    with pytest.raises(WorkspaceError, match="is a FIFO"):
        ws.read_text("link")


# ── file names that are not UTF-8 (issue 14) ─────────────────────────────────


def test_display_name_escapes_what_utf8_cannot_hold() -> None:
    assert display_name(os.fsdecode(b"caf\xe9.txt")) == "caf\\xe9.txt"
    assert display_name("\ud800.txt") == "\\ud800.txt"
    assert display_name("café.txt") == "café.txt"


def test_a_path_no_file_name_can_hold_is_refused(ws: Workspace) -> None:
    with pytest.raises(WorkspaceError, match="no file name can"):
        ws.write_text("\ud800.txt", "x")


# ── writes race-free against symlinks (issue 14) ─────────────────────────────


def swap_after_check(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]
) -> None:
    """Run ``swap`` right after the path check, as a process racing the write would."""
    check = ws.resolve

    def check_then_swap(rel: str | os.PathLike[str]) -> Path:
        path = check(rel)
        swap()
        return path

    monkeypatch.setattr(ws, "resolve", check_then_swap)


def test_a_directory_swapped_for_a_symlink_after_the_check_is_not_followed(
    ws: Workspace, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (ws.root / "sub").mkdir()

    def swap() -> None:
        (ws.root / "sub").rename(ws.root / "old_sub")
        (ws.root / "sub").symlink_to(outside, target_is_directory=True)

    swap_after_check(ws, monkeypatch, swap)
    with pytest.raises(WorkspaceError, match="'sub' became a symlink"):
        ws.write_text("sub/evil.txt", "x")
    assert sorted(p.name for p in outside.iterdir()) == ["secret.txt"]


def test_a_file_swapped_for_a_symlink_after_the_check_is_replaced_not_followed(
    ws: Workspace, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ws.write_text("a.txt", "old")

    def swap() -> None:
        (ws.root / "a.txt").unlink()
        (ws.root / "a.txt").symlink_to(outside / "secret.txt")

    swap_after_check(ws, monkeypatch, swap)
    ws.write_text("a.txt", "new")
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "secret"
    assert not (ws.root / "a.txt").is_symlink()
    assert (ws.root / "a.txt").read_text(encoding="utf-8") == "new"


def test_writing_below_a_file_says_the_file_is_in_the_way(ws: Workspace) -> None:
    ws.write_text("a.txt", "x")
    with pytest.raises(WorkspaceError, match=r"'a\.txt' is a file, not a directory"):
        ws.write_text("a.txt/b.txt", "y")
