"""The workspace's files by content, and bringing a workspace back."""

from __future__ import annotations

from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.digests import digest_of
from gr_notebook.workflow.workspace_files import FileTree
from gr_notebook.workflow.workspace_restore import diff, restore_files


def tree_of(root: Path) -> tuple[FileTree, dict[str, bytes]]:
    tree = FileTree(root)
    return tree, tree.scan()


def test_one_changed_file_is_rehashed_alone_and_the_system_folder_never(tmp_path: Path) -> None:
    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("a/b/deep.md", "deep\n")
    ws.write_text("a/side.md", "side\n")
    ws.write_text("top.md", "top\n")
    (tmp_path / "ws" / ".gr").mkdir()
    (tmp_path / "ws" / ".gr" / "lock").write_text("system")
    tree, blobs = tree_of(tmp_path / "ws")
    assert tree.listing() == {
        "a/b/deep.md": digest_of(b"deep\n"),
        "a/side.md": digest_of(b"side\n"),
        "top.md": digest_of(b"top\n"),
    }  # .gr/ is the system's: never in a checkpoint
    assert sorted(blobs.values()) == [b"deep\n", b"side\n", b"top\n"]
    assert tree.update([]) == {} and tree.update(["top.md"]) == {}  # unchanged: nothing
    ws.write_text("a/b/deep.md", "deeper\n")
    assert tree.update(["a/b/deep.md"]) == {digest_of(b"deeper\n"): b"deeper\n"}
    assert tree.listing()["a/b/deep.md"] == digest_of(b"deeper\n")
    (tmp_path / "ws" / "a" / "b" / "deep.md").unlink()
    assert tree.update(["a/b/deep.md"]) == {}
    assert set(tree.listing()) == {"a/side.md", "top.md"}


def test_restore_sets_aside_what_differs_and_writes_the_rest(tmp_path: Path) -> None:
    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("keep.md", "keep\n")
    ws.write_text("change.md", "then\n")
    tree, blobs = tree_of(tmp_path / "ws")
    then = tree.listing()
    ws.write_text("change.md", "now\n")
    ws.write_text("new/added.md", "added\n")
    (tmp_path / "ws" / "keep.md").unlink()
    now_tree, _ = tree_of(tmp_path / "ws")
    change = diff(now_tree.listing(), then)
    assert (change.changed, change.added, change.removed) == (
        ("change.md",),
        ("new/added.md",),
        ("keep.md",),
    )
    assert change.describe() == "changed: change.md; added: new/added.md; removed: keep.md"
    aside = tmp_path / "ws" / ".gr" / "aside" / "r2"
    moved = restore_files(tmp_path / "ws", then, blobs.__getitem__, aside=aside)
    assert sorted(moved) == ["change.md", "new/added.md"]
    assert (aside / "change.md").read_text() == "now\n"
    assert (aside / "new" / "added.md").read_text() == "added\n"
    assert ws.read_text("change.md") == "then\n" and ws.read_text("keep.md") == "keep\n"


def test_a_stored_path_that_leaves_the_workspace_is_refused(tmp_path: Path) -> None:
    data = b"x"
    with pytest.raises(gr.errors.WorkspaceError, match="which is not a path inside a workspace"):
        restore_files(
            tmp_path / "ws",
            {"../escape.md": digest_of(data)},
            {digest_of(data): data}.__getitem__,
            aside=tmp_path / "aside",
        )
    assert not (tmp_path / "escape.md").exists()
