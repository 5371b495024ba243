"""The environment that runs the Claude Code CLI against a local Messages API server.

The CLI the SDK bundles honours ``ANTHROPIC_BASE_URL``; with non-essential traffic off it
sends nothing but model requests, so a session runs on loopback with no key and no network
(tests, and the notebook when no key is set, use :class:`gr_notebook.testing.MessagesServer`).
Its own files (settings, session transcripts) go to ``config_dir`` rather than ``~/.claude``.
"""

from __future__ import annotations

import os

__all__ = ["local_env"]


def local_env(base_url: str, config_dir: str | os.PathLike[str]) -> dict[str, str]:
    """``ClaudeAgentOptions(env=...)`` for a session against the server at ``base_url``."""
    return {
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "local-server",  # the CLI wants one; the local server ignores it
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CONFIG_DIR": os.fspath(config_dir),
        "DISABLE_AUTOUPDATER": "1",
    }
