"""The built-in server driven by the engine simulator, in wall-clock time (``tokenpace serve --sim``).

It stands where ``engine.Engine`` stands (same ``generate`` / ``running`` / ``waiting`` /
``kv_tokens``), but one loop runs the simulator's engine step by step, the way a real engine runs:
form a batch from what has arrived (``Engine.start_step``, never jumping over steps), sleep the
step's predicted time, deliver it (``Engine.finish_step``), then hand each stream the tokens that
step produced. Requests that arrive during a step join the next one, as in the simulator's event
order. Sleeps aim at absolute due times, so oversleeping one step does not push back the next.

``/metrics`` then reports the engine's true state under vLLM's names: running and waiting
sequences, KV usage (blocks held / blocks), prefix-cache hits (per request, at admission, beside
the queries the server counts), preemptions; TTFT and ITL come from the chunks as they are written.

The prefix cache sees each full block of prompt words as a content id (``tokens.text_block_ids``;
the same words give the same ids whichever request format carried them, see formats.py), and its
hits are reported in each format's usage. A request that could never fit in the KV cache fails its
stream.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from time import monotonic_ns

from tokenpace.simulator import SimConfig, SimRequest
from tokenpace.simulator.args import DEFAULT_MODEL, add_engine_arguments, engine_argv, engine_config
from tokenpace.simulator.engine import Step
from tokenpace.simulator.sequence import DONE, WAITING
from tokenpace.simulator.sequence import Sequence as SimSequence
from tokenpace.simulator.simulate import build_engine, build_predictor

from .engine import Sequence
from .prom import ServerMetrics

_END, _FAILED = -1, -2  # queue items: the stream is complete; the engine loop died


class _Stream:
    __slots__ = ("seq", "sim", "queue", "delivered", "aborted")

    def __init__(self, seq: Sequence, sim: SimSequence) -> None:
        self.seq, self.sim = seq, sim
        self.queue: asyncio.Queue[int] = asyncio.Queue()
        self.delivered = 0
        self.aborted = False


class SimBackend:
    """The simulator's engine behind the server's ``generate`` interface, stepping in real time."""

    def __init__(self, config: SimConfig, metrics: ServerMetrics | None = None) -> None:
        self.engine, _ = build_engine(config, build_predictor(config), jump=False)
        self.scheduler, self.kv = self.engine.scheduler, self.engine.kv
        blocks = self.kv.num_blocks
        self.metrics = metrics
        if metrics is not None:
            metrics.kv_capacity_tokens = blocks * config.block_size  # kv_usage = kv_tokens / this
        self._streams: dict[int, _Stream] = {}
        self._aborted: list[_Stream] = []
        self._next_index = 0
        self._wake: asyncio.Event | None = None
        self._task: asyncio.Task | None = None
        self._preemptions_seen = 0

    # -- what the server and /metrics read ------------------------------------------------------

    @property
    def running(self) -> int:
        return len(self.scheduler.running)

    @property
    def waiting(self) -> int:
        return len(self.scheduler.waiting)

    @property
    def max_seq_tokens(self) -> int:
        """Prompt + output of one request at most: what fits in the KV cache alone (with the
        draft tokens of a verification step)."""
        return self.engine.max_seq_tokens - (self.engine.decode_tokens - 1)

    @property
    def kv_tokens(self) -> int:
        """KV slots held by running sequences (whole blocks)."""
        return (self.kv.num_blocks - self.kv.num_free) * self.kv.block_size

    # -- one request ----------------------------------------------------------------------------

    async def generate(self, seq: Sequence) -> AsyncIterator[int]:
        """Yield the token count of each chunk as the engine produces it. Run it under
        ``contextlib.aclosing``: a consumer that stops early aborts the request in the engine."""
        self._ensure_loop()
        index, self._next_index = self._next_index, self._next_index + 1
        sim = SimSequence(index, SimRequest(seq.prompt_tokens, seq.max_tokens,
                                            prompt_block_hashes=seq.prompt_block_ids), monotonic_ns())
        if not self.engine.arrive(sim):
            raise ValueError(f"prompt + output = {seq.prompt_tokens + seq.max_tokens} tokens exceed the KV cache "
                             f"({self.engine.max_seq_tokens} tokens)")
        stream = _Stream(seq, sim)
        self._streams[index] = stream
        self._wake.set()  # type: ignore[union-attr]
        try:
            while (k := await stream.queue.get()) != _END:
                if k == _FAILED:
                    raise RuntimeError("the simulated engine failed (see the server's log)")
                seq.generated_tokens += k
                yield k
        finally:
            if sim.state != DONE:
                stream.aborted = True
                self._aborted.append(stream)  # applied between steps, never inside one
                self._wake.set()  # type: ignore[union-attr]
            else:
                self._streams.pop(index, None)

    # -- the engine loop -------------------------------------------------------------------------

    def _ensure_loop(self) -> None:
        if self._task is None or self._task.done():
            self._wake = asyncio.Event()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._steps()
        except Exception:  # a bug: end every stream rather than leave it hanging
            for stream in list(self._streams.values()):
                stream.queue.put_nowait(_FAILED)
            raise

    async def _steps(self) -> None:
        wake = self._wake
        assert wake is not None
        t_ns: int | None = None  # when the next step starts: the last step's end while busy
        while True:
            self._apply_aborts()
            now = monotonic_ns()
            step = self.engine.start_step(now if t_ns is None else max(t_ns, now - 1_000_000_000), None)
            if step is None:  # nothing to run: wait for an arrival
                t_ns = None
                wake.clear()
                await wake.wait()
                continue
            self._on_start(step)
            end = step.end_ns
            while (delay_ns := end - monotonic_ns()) > 0:
                await asyncio.sleep(delay_ns / 1e9)
            self.engine.finish_step(step)  # finished sequences are DONE and released
            self._deliver(step)
            t_ns = end

    def _on_start(self, step: Step) -> None:
        for sim, _ in step.batch.prefill:
            stream = self._streams.get(sim.index)
            if stream is not None and stream.seq.admitted_ns is None:
                stream.seq.admitted_ns = step.start_ns
        if self.metrics is not None:
            new = self.scheduler.preemptions - self._preemptions_seen
            if new:
                self.metrics.preemptions.inc(new)
                self._preemptions_seen = self.scheduler.preemptions

    def _deliver(self, step: Step) -> None:
        for sim in [s for s, _ in step.batch.prefill] + step.batch.decode:
            stream = self._streams.get(sim.index)
            if stream is None or stream.aborted:
                continue
            k = sim.generated - stream.delivered
            if k > 0:
                if stream.delivered == 0:
                    stream.seq.cached_tokens = sim.cached_prompt_tokens  # reported in usage
                    if self.metrics is not None and sim.cached_prompt_tokens:
                        self.metrics.prefix_cache_hits.inc(sim.cached_prompt_tokens)
                stream.delivered = sim.generated
                stream.queue.put_nowait(k)
            if sim.state == DONE:
                stream.queue.put_nowait(_END)

    def _apply_aborts(self) -> None:
        """Drop requests whose client went away: out of the queue, or freeing their KV blocks."""
        for stream in self._aborted:
            sim = stream.sim
            self._streams.pop(sim.index, None)
            if sim.state == DONE:
                continue
            if sim.state == WAITING:
                self.scheduler.waiting.remove(sim)
            else:
                self.scheduler.finish(sim)
            sim.state = DONE
        self._aborted.clear()


# -- `tokenpace serve --sim` flags ---------------------------------------------------------------

SERVED_NAME_DEFAULT = "tokenpace-sim"  # BuiltinServerConfig.model's default


def add_sim_arguments(parser: argparse.ArgumentParser) -> None:
    """``--sim`` and the engine's flags (``--max-num-seqs`` and ``--seed`` are the server's own)."""
    g = parser.add_argument_group("engine simulator (--sim)")
    g.add_argument("--sim", action="store_true",
                   help="drive the server with the engine simulator in wall-clock time; --model then names "
                        f"the simulated model too (default {DEFAULT_MODEL})")
    g.add_argument("--sim-model", metavar="NAME|PATH",
                   help="the simulated model, when it should differ from the served --model name")
    add_engine_arguments(parser, max_num_seqs=False, calibration=True)


def sim_config_from_args(ns: argparse.Namespace, default_max_num_seqs: int) -> SimConfig | None:
    """The simulated engine; with ``--calibration``, its model, hardware, efficiencies and limits
    unless flags name them (``--max-num-seqs`` None: not given)."""
    if not ns.sim:
        if ns.calibration:
            raise ValueError("--calibration describes a simulated engine: it needs --sim")
        return None
    model = ns.sim_model or (ns.model if ns.model != SERVED_NAME_DEFAULT else None)  # None: the calibration's
    preset = getattr(ns, "engine", None)  # an engine preset sets its own limit unless --max-num-seqs is given
    max_num_seqs = ns.max_num_seqs if ns.max_num_seqs is not None or ns.calibration or preset else default_max_num_seqs
    return engine_config(ns, model=model, max_num_seqs=max_num_seqs, seed=ns.seed or 0)


def sim_argv(config: SimConfig | None) -> list[str]:
    if config is None:
        return []
    if not all(isinstance(x, str) for x in (config.gpu, config.weights, config.kv_cache_dtype)):
        # A calibration's hardware and precisions are objects read from its file, with no catalog name.
        raise ValueError("an engine from a calibration file runs only in this process "
                         "(tokenpace serve --sim --calibration FILE)")
    model = config.model if isinstance(config.model, str) else config.model.id
    return ["--sim", "--sim-model", model, *engine_argv(config)]
