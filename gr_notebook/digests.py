"""Content addresses: a blob of bytes is named by the hash of what it holds.

The run store keeps files and messages under these names, so what many checkpoints share is
stored once; the workspace's file listing uses the same names, so a file on disk and a file
in a checkpoint compare by name.
"""

from __future__ import annotations

import hashlib

__all__ = ["digest_of"]


def digest_of(data: bytes) -> str:
    """The content address of ``data``: BLAKE2b, 128 bits, as 32 hex digits."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()
