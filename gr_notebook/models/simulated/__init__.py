"""The simulated agent: a deterministic model that works the phased job through the real
tools, with profiles for the habits and struggles of real agents."""

from gr_notebook.models.simulated.model import PROFILES, Profile, SimulatedModel, register_profile

__all__ = ["PROFILES", "Profile", "SimulatedModel", "register_profile"]
