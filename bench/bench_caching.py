"""Prompt caching pays: recorded runs replayed through the Anthropic adapter.

Two runs of the simulated agent are recorded, every request the loop assembled and every
response: a 20-turn run, and a 100-turn run that crosses phase transitions (each one
compacts the conversation, so the cache starts over). Each request is then sent again through
``gr.AnthropicModel`` and the real ``anthropic`` SDK to the local Messages API server
(``gr_notebook.testing``), which answers with the recorded response and reports usage the
way the API does, prompt caching included (a prefix of at least 1,024 tokens at a
breakpoint, or up to 20 blocks before one, is read once written). Each run is replayed three
ways, each against a fresh server: ``cache=False``; ``cache=True, layer2="system"`` (the old
placement: layer 2 a system block, one breakpoint after the tools and layer 1); and
``cache=True, layer2="tail"`` (layer 2 at the end of the last user turn, breakpoints after
layer 1 and at the end of the conversation). Input-token cost comes from the price table for
``claude-sonnet-4-6``: uncached input at the base price, cache writes at their 5-minute
premium (1.25x), cache reads at 0.1x. Token counts are deterministic, so one replay of each
is enough; the wall time per request is the median of ``REPEATS`` replays.

Goals: with the tail placement, the input costs at most 0.30 of the uncached cost on both
runs, and less than with the old placement.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace

import _util

import gr_notebook as gr
from gr_notebook.messages import Usage
from gr_notebook.models.anthropic_layout import Layer2Placement
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.base import ModelRequest, ModelResponse
from gr_notebook.models.pricing import DEFAULT_PRICES
from gr_notebook.testing import MessagesServer

RUNS = {20: 4, 100: 8}
"""Turns of each recorded run, and the phases of its job (the 20-turn one as it always was)."""
MODEL = "claude-sonnet-4-6"
MIN_CACHEABLE = 1024
REPEATS = 3
GOAL = 0.30
Pairs = list[tuple[ModelRequest, ModelResponse]]


@dataclass(frozen=True)
class Way:
    """One way to send the requests: caching on or off, and where layer 2 goes."""

    label: str
    cache: bool
    layer2: Layer2Placement = "tail"


WAYS = (
    Way("cache=False", cache=False),
    Way("layer 2 in system (old)", cache=True, layer2="system"),
    Way("layer 2 at the tail (new)", cache=True, layer2="tail"),
)


@dataclass(frozen=True)
class Recording:
    pairs: Pairs
    transitions: int


async def record(turns: int, phases: int) -> Recording:
    """The requests and responses of a ``turns``-turn simulated run."""
    simulated = gr.SimulatedModel("diligent")
    pairs: Pairs = []

    async def recording(request: ModelRequest) -> ModelResponse:
        response = await simulated.complete(request)
        pairs.append((request, response))
        return response

    instructions = _util.job("A field guide", phases=phases, steps=6, unit="Section")
    with tempfile.TemporaryDirectory(prefix="gr-bench-cache-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            gr.FunctionModel(recording, name=simulated.name),
            workspace=tmp,
            store=False,
            max_iterations=turns,
        )
        run = agent.start(instructions)
        await run.wait()
        transitions = len(run.events.of_kind("phase_transition"))
    return Recording(pairs, transitions)


@dataclass(frozen=True)
class Replay:
    way: Way
    usages: tuple[Usage, ...]
    wall_s: tuple[float, ...]
    same_responses: bool

    def total(self, field: str) -> int:
        return sum(getattr(u, field) for u in self.usages)

    def prompt(self) -> int:
        fields = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
        return sum(self.total(f) for f in fields)


async def replay(pairs: Pairs, way: Way) -> Replay:
    import anthropic

    usages: list[Usage] = []
    walls: list[float] = []
    same = True
    # Without their recorded usage, so that the server reports its own, caching included.
    turns = [replace(response, usage=None) for _, response in pairs]
    with MessagesServer(turns, min_cacheable_tokens=MIN_CACHEABLE) as server:
        client = anthropic.AsyncAnthropic(api_key="bench", base_url=server.url, max_retries=0)
        model = AnthropicModel(MODEL, client=client, cache=way.cache, layer2=way.layer2)
        for request, recorded in pairs:
            started = time.perf_counter()
            response = await model.complete(request)
            walls.append(time.perf_counter() - started)
            assert response.usage is not None
            usages.append(response.usage)
            same &= [b.type for b in response.content] == [b.type for b in recorded.content]
        await client.close()
    return Replay(way, tuple(usages), tuple(walls), same)


def main() -> int:
    goals = _util.Goals()
    price = DEFAULT_PRICES[MODEL]

    def input_cost(r: Replay) -> float:
        return sum(price.input_cost(u) for u in r.usages)

    rows = []
    results: dict[tuple[int, str], Replay] = {}
    recordings: dict[int, Recording] = {}
    for turns, phases in RUNS.items():
        recording = recordings[turns] = asyncio.run(record(turns, phases))
        replays: dict[Way, list[Replay]] = {way: [] for way in WAYS}
        for i in range(REPEATS):  # rotate, so that machine noise hits every way alike
            for way in WAYS[i % len(WAYS) :] + WAYS[: i % len(WAYS)]:
                replays[way].append(asyncio.run(replay(recording.pairs, way)))
        plain = replays[WAYS[0]][0]
        for way in WAYS:
            first = results[turns, way.label] = replays[way][0]
            wall = statistics.median(w for r in replays[way] for w in r.wall_s) * 1e3
            rows.append(
                [
                    f"{turns} turns, {recording.transitions} transitions",
                    way.label,
                    _util.fmt_int(first.total("input_tokens")),
                    _util.fmt_int(first.total("cache_creation_input_tokens")),
                    _util.fmt_int(first.total("cache_read_input_tokens")),
                    f"{input_cost(first):.4f}",
                    f"{input_cost(first) / input_cost(plain):.3f}",
                    f"{wall:.2f}",
                ]
            )
        goals.check(
            f"{turns} turns: the replays served the recorded turns",
            len(recording.pairs) == turns
            and all(r.same_responses for rs in replays.values() for r in rs),
            f"{len(recording.pairs)} turns, {REPEATS} replays each way",
        )
        tail = replays[WAYS[2]][0].prompt()
        goals.check(
            f"{turns} turns: the same prompt every way, but for the tail block's tag",
            len({r.prompt() for w in WAYS[:2] for r in replays[w]}) == 1
            and len({r.prompt() for r in replays[WAYS[2]]}) == 1
            and 0 <= tail - plain.prompt() <= 20 * turns,
            f"{plain.prompt():,} prompt tokens; the tag adds {tail - plain.prompt():,}",
        )

    _util.section(f"Recorded runs replayed through the adapter ({MODEL}), input cost")
    _util.print_table(
        [
            "run",
            "placement",
            "uncached in",
            "cache writes",
            "cache reads",
            "input USD",
            "of uncached",
            "wall ms",
        ],
        rows,
    )
    print(
        f"prices per MTok: input {price.input}, cache write {price.cache_write} (5-minute, "
        f"{price.cache_write / price.input:.2f}x), cache read {price.cache_read} "
        f"({price.cache_read / price.input:.2f}x)"
    )
    long_run = recordings[max(RUNS)]
    goals.check(
        f"the {max(RUNS)}-turn run crosses at least two phase transitions",
        long_run.transitions >= 2,
        f"{long_run.transitions} transitions",
    )
    for turns in RUNS:
        plain, old, new = (results[turns, way.label] for way in WAYS)
        fraction = input_cost(new) / input_cost(plain)
        goals.check(
            f"{turns} turns: tail placement at most {GOAL:.2f} of the uncached input cost",
            fraction <= GOAL,
            f"{fraction:.3f} (old placement {input_cost(old) / input_cost(plain):.3f})",
        )
        goals.check(
            f"{turns} turns: the tail placement costs less than the old one",
            input_cost(new) < input_cost(old),
            f"{input_cost(new):.4f} vs {input_cost(old):.4f} USD",
        )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
