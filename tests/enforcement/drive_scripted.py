"""Runtime 1: gr's loop on the scripted model."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

import gr_notebook as gr
from gr_notebook.messages import ToolResultBlock
from gr_notebook.models import ModelResponse
from tests.enforcement.gr_loop import GrLoopDriver


class ScriptedBackend:
    def __init__(self) -> None:
        self._model: gr.ScriptedModel | None = None

    @contextmanager
    def model(self, script: Sequence[ModelResponse]) -> Iterator[gr.ScriptedModel]:
        self._model = gr.ScriptedModel(list(script), keep_requests=None)
        yield self._model

    def told(self) -> Mapping[str, str]:
        found: dict[str, str] = {}
        for request in self._model.requests if self._model else ():
            for message in request.messages:
                for block in message.content:
                    if isinstance(block, ToolResultBlock):
                        found[block.tool_use_id] = block.content
        return found


DRIVER = GrLoopDriver("scripted", "gr's loop, scripted model", ScriptedBackend)
