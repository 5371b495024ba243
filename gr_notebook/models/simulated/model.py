"""The simulated agent: a deterministic, rule-based model that really works the phased loop.

:class:`SimulatedModel` reads the situation from each request and lets its profile decide
the turn: the diligent agent of :mod:`.diligent`, or a behaviour profile that reproduces
one of the failure modes the guardrails exist for. Importing this module registers every
profile.
"""

from __future__ import annotations

import asyncio

from gr_notebook.errors import ModelSpecError
from gr_notebook.models.base import ModelRequest, ModelResponse, finish_response
from gr_notebook.models.simulated import literal, profiles, struggles  # noqa: F401  (register)
from gr_notebook.models.simulated.diligent import PROFILES, Profile, register_profile
from gr_notebook.models.simulated.situation import Situation

__all__ = ["PROFILES", "Profile", "SimulatedModel", "register_profile"]


class SimulatedModel:
    """A deterministic, rule-based agent; the embedded default model."""

    def __init__(self, profile: str = "diligent", seed: int = 0, *, latency: float = 0.0) -> None:
        """``latency`` seconds of pretend thinking per call let a notebook watch a run unfold
        and steer it, as it would a real model's."""
        if profile not in PROFILES:
            known = ", ".join(sorted(PROFILES))
            raise ModelSpecError(f"unknown simulated profile {profile!r}; choose one of: {known}")
        if latency < 0:
            raise ModelSpecError(f"latency must be >= 0 seconds, got {latency}")
        self.profile = PROFILES[profile](seed)
        self.seed = seed
        self.latency = latency

    @property
    def name(self) -> str:
        return f"simulated:{self.profile.name}"

    async def complete(self, request: ModelRequest) -> ModelResponse:
        if self.latency:
            await asyncio.sleep(self.latency)
        situation = Situation.read(request)
        response = self.profile.act(situation)
        response = self.profile.regulate(situation, response, _task_types(request))
        return finish_response(
            response, request, id_stem=f"sim_{request.turn:05d}", model=self.name
        )

    def __repr__(self) -> str:
        latency = f", latency={self.latency}" if self.latency else ""
        return f"SimulatedModel(profile={self.profile.name!r}, seed={self.seed}{latency})"


def _task_types(request: ModelRequest) -> tuple[str, ...]:
    for tool in request.tools:
        if tool.name == "assess_task":
            enum = tool.input_schema.get("properties", {}).get("task_type", {}).get("enum", ())
            return tuple(enum)
    return ()
