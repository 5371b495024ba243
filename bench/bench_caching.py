"""Prompt caching pays: a recorded 20-turn run replayed through the Anthropic adapter.

A 20-turn run of the simulated agent is recorded: every request the loop assembled and every
response. Each request is then sent again through ``gr.AnthropicModel`` and the real
``anthropic`` SDK to the local Messages API server (``gr_notebook.testing``), which answers
with the recorded response and reports usage the way the API does, prompt caching included
(a prefix of at least 1,024 tokens, written once, then read). It is replayed twice, each
time against a fresh server: with ``cache=True`` (a breakpoint after the tools and layer 1)
and with ``cache=False``. Input-token cost comes from the price table for
``claude-sonnet-4-6``: uncached input at the base price, cache writes at 1.25x, cache reads
at 0.1x. Token counts are deterministic, so one replay of each is enough; the wall time per
request is the median of ``REPEATS`` replays.

Goal: with caching, the input tokens cost less than without (fraction < 1).
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
from gr_notebook.models.anthropic_model import AnthropicModel
from gr_notebook.models.base import ModelRequest, ModelResponse
from gr_notebook.models.pricing import DEFAULT_PRICES
from gr_notebook.testing import MessagesServer

TURNS = 20
MODEL = "claude-sonnet-4-6"
MIN_CACHEABLE = 1024
REPEATS = 3


async def record() -> list[tuple[ModelRequest, ModelResponse]]:
    """The requests and responses of a 20-turn simulated run."""
    simulated = gr.SimulatedModel("diligent")
    pairs: list[tuple[ModelRequest, ModelResponse]] = []

    async def recording(request: ModelRequest) -> ModelResponse:
        response = await simulated.complete(request)
        pairs.append((request, response))
        return response

    instructions = _util.job("A field guide", phases=4, steps=6, unit="Section")
    with tempfile.TemporaryDirectory(prefix="gr-bench-cache-", dir=_util.SCRATCH) as tmp:
        agent = gr.Agent(
            gr.FunctionModel(recording, name=simulated.name),
            workspace=tmp,
            store=False,
            max_iterations=TURNS,
        )
        run = agent.start(instructions)
        await run.wait()
    return pairs


@dataclass(frozen=True)
class Replay:
    cache: bool
    usages: tuple[Usage, ...]
    wall_s: tuple[float, ...]
    same_responses: bool

    def total(self, field: str) -> int:
        return sum(getattr(u, field) for u in self.usages)


async def replay(pairs: list[tuple[ModelRequest, ModelResponse]], *, cache: bool) -> Replay:
    import anthropic

    usages: list[Usage] = []
    walls: list[float] = []
    same = True
    # Without their recorded usage, so that the server reports its own, caching included.
    turns = [replace(response, usage=None) for _, response in pairs]
    with MessagesServer(turns, min_cacheable_tokens=MIN_CACHEABLE) as server:
        client = anthropic.AsyncAnthropic(api_key="bench", base_url=server.url, max_retries=0)
        model = AnthropicModel(MODEL, client=client, cache=cache)
        for request, recorded in pairs:
            started = time.perf_counter()
            response = await model.complete(request)
            walls.append(time.perf_counter() - started)
            assert response.usage is not None
            usages.append(response.usage)
            same &= [b.type for b in response.content] == [b.type for b in recorded.content]
        await client.close()
    return Replay(cache, tuple(usages), tuple(walls), same)


def main() -> int:
    goals = _util.Goals()
    pairs = asyncio.run(record())
    replays: dict[bool, list[Replay]] = {True: [], False: []}
    for i in range(REPEATS):  # alternate, so that machine noise hits both alike
        for cache in (True, False) if i % 2 == 0 else (False, True):
            replays[cache].append(asyncio.run(replay(pairs, cache=cache)))
    cached, plain = replays[True][0], replays[False][0]
    price = DEFAULT_PRICES[MODEL]

    def input_cost(r: Replay) -> float:
        return sum(price.input_cost(u) for u in r.usages)

    def wall(cache: bool) -> float:
        return statistics.median(w for r in replays[cache] for w in r.wall_s) * 1e3

    _util.section(f"A recorded {len(pairs)}-turn run replayed through the adapter ({MODEL})")
    rows = []
    for label, field in [
        ("uncached input tokens", "input_tokens"),
        ("cache writes (tokens)", "cache_creation_input_tokens"),
        ("cache reads (tokens)", "cache_read_input_tokens"),
        ("output tokens", "output_tokens"),
    ]:
        rows.append([label, _util.fmt_int(cached.total(field)), _util.fmt_int(plain.total(field))])
    rows.append(["input cost (USD)", f"{input_cost(cached):.4f}", f"{input_cost(plain):.4f}"])
    rows.append(["request wall time, median (ms)", f"{wall(True):.2f}", f"{wall(False):.2f}"])
    _util.print_table(["", "cache=True", "cache=False"], rows)
    fraction = input_cost(cached) / input_cost(plain)
    prompt = cached.total("input_tokens") + cached.total("cache_creation_input_tokens")
    prompt += cached.total("cache_read_input_tokens")
    print(
        f"input cost with caching: {fraction:.3f} of the cost without "
        f"({cached.total('cache_read_input_tokens') / prompt:.0%} of the prompt tokens were "
        f"cache reads); prices per MTok: input {price.input}, cache write "
        f"{price.cache_write}, cache read {price.cache_read}"
    )

    goals.check(
        "the replays served the recorded turns",
        len(pairs) == TURNS and all(r.same_responses for rs in replays.values() for r in rs),
        f"{len(pairs)} turns, {REPEATS} replays each way",
    )
    goals.check(
        "the same prompt either way",
        prompt == plain.total("input_tokens"),
        f"{prompt:,} prompt tokens with caching, {plain.total('input_tokens'):,} without",
    )
    goals.check(
        "caching lowers the input cost",
        fraction < 1.0,
        f"{fraction:.3f} of the uncached cost",
    )
    return goals.report()


if __name__ == "__main__":
    sys.exit(main())
