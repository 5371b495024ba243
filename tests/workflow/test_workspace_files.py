"""The workspace's files as content-addressed folders, and bringing a workspace back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import gr_notebook as gr
from gr_notebook.errors import WorkspaceError
from gr_notebook.history.checkpoint_store import digest_of
from gr_notebook.workflow.workspace_files import FileTree, diff, flatten, restore_files


def tree_of(root: Path) -> tuple[FileTree, dict[str, bytes]]:
    tree = FileTree(root)
    return tree, tree.scan()


def test_one_changed_file_rewrites_only_the_folders_on_its_path(tmp_path: Path) -> None:
    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("a/b/deep.md", "deep\n")
    ws.write_text("a/side.md", "side\n")
    ws.write_text("top.md", "top\n")
    (tmp_path / "ws" / ".gr").mkdir()
    (tmp_path / "ws" / ".gr" / "lock").write_text("system")
    tree, blobs = tree_of(tmp_path / "ws")
    store = dict(blobs)
    assert flatten(tree.digest, store.__getitem__) == {
        "a/b/deep.md": digest_of(b"deep\n"),
        "a/side.md": digest_of(b"side\n"),
        "top.md": digest_of(b"top\n"),
    }  # .gr/ is the system's: never in a checkpoint
    assert tree.update([]) == {} and tree.update(["top.md"]) == {}  # unchanged: nothing
    ws.write_text("a/b/deep.md", "deeper\n")
    new = tree.update(["a/b/deep.md"])
    folders = [json.loads(data) for digest, data in new.items() if data != b"deeper\n"]
    assert len(folders) == 3 and b"deeper\n" in new.values()  # a/b, a and the root
    store.update(new)
    assert flatten(tree.digest, store.__getitem__)["a/b/deep.md"] == digest_of(b"deeper\n")
    (tmp_path / "ws" / "a" / "b" / "deep.md").unlink()
    store.update(tree.update(["a/b/deep.md"]))
    assert set(flatten(tree.digest, store.__getitem__)) == {"a/side.md", "top.md"}


def test_restore_sets_aside_what_differs_and_writes_the_rest(tmp_path: Path) -> None:
    ws = gr.Workspace(tmp_path / "ws")
    ws.write_text("keep.md", "keep\n")
    ws.write_text("change.md", "then\n")
    tree, blobs = tree_of(tmp_path / "ws")
    then = flatten(tree.digest, blobs.__getitem__)
    ws.write_text("change.md", "now\n")
    ws.write_text("new/added.md", "added\n")
    (tmp_path / "ws" / "keep.md").unlink()
    now_tree, now_blobs = tree_of(tmp_path / "ws")
    change = diff(flatten(now_tree.digest, now_blobs.__getitem__), then)
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
    with pytest.raises(WorkspaceError, match="which is not inside a workspace"):
        restore_files(
            tmp_path / "ws",
            {"../escape.md": digest_of(data)},
            {digest_of(data): data}.__getitem__,
            aside=tmp_path / "aside",
        )
    assert not (tmp_path / "escape.md").exists()
