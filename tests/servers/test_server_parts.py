"""The server's parts alone: token counting, the timing model, the scheduling core, the flags."""

from __future__ import annotations

import argparse
import asyncio
import contextlib

import pytest
from servers_helpers import run

from tokenpace.servers import (
    BuiltinServerConfig,
    Engine,
    ParametricTiming,
    Sequence,
    TimingModel,
    add_server_arguments,
    config_from_args,
    config_to_argv,
    count_chat_prompt_tokens,
    count_completion_prompt_tokens,
)
from tokenpace.servers.tokens import output_text, output_text_json


def test_token_counting_rules():
    assert count_completion_prompt_tokens("the quick  brown\nfox") == 4
    assert count_completion_prompt_tokens([1, 2, 3]) == 3  # token ids
    assert count_completion_prompt_tokens(["one two"]) == 2
    with pytest.raises(ValueError):
        count_completion_prompt_tokens(["a", "b"])  # batched prompts
    messages = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": [{"type": "text", "text": "three more words"}, {"type": "image_url"}]},
        {"role": "assistant", "content": None},
    ]
    assert count_chat_prompt_tokens(messages) == 5  # content only, no template tokens
    for bad in (None, [], ["not a message"]):
        with pytest.raises(ValueError):
            count_chat_prompt_tokens(bad)


def test_a_prompt_over_a_mebibyte_counts_the_same_a_slice_at_a_time():
    from tokenpace.servers.tokens import count_text_tokens

    mib = 1 << 20
    for text in ("ab " * mib,  # words cut by every slice boundary
                 "x" * (mib - 1) + " " + "y" * (mib + 5),  # a space right before the cut
                 "word\n" * (mib // 2) + "\t" + "z" * 3 * mib,  # one long word over two cuts
                 " " * (3 * mib)):
        assert count_text_tokens(text) == len(text.split())


def test_output_text_recounts_to_its_token_count():
    for start, n in ((0, 1), (3, 7), (14, 40)):
        text = output_text(start, n)
        assert len(text.split()) == n and text.startswith(" ")
    assert output_text(2, 3) == output_text(2, 1) + output_text(3, 1) + output_text(4, 1)
    assert output_text_json(5, 1) == b'"' + output_text(5, 1).encode() + b'"'


def test_parametric_timing_formula_jitter_and_seed():
    exact = ParametricTiming(prefill_base_s=0.005, prefill_per_token_s=0.001, decode_base_s=0.01,
                             decode_per_running_s=0.002, jitter_frac=0.0)  # fmt: skip
    assert isinstance(exact, TimingModel)
    assert exact.prefill_s(100, running=3) == pytest.approx(0.105)
    assert exact.decode_step_s(running=4) == pytest.approx(0.018)

    a, b = ParametricTiming(jitter_frac=0.1, seed=7), ParametricTiming(jitter_frac=0.1, seed=7)
    draws = [a.decode_step_s(10) for _ in range(200)]
    assert draws == [b.decode_step_s(10) for _ in range(200)]  # same seed, same times
    nominal = 0.010 + 0.0001 * 10
    assert all(0.9 * nominal <= d <= 1.1 * nominal for d in draws)
    assert max(draws) - min(draws) > 0.1 * nominal  # jitter is really applied
    with pytest.raises(ValueError):
        ParametricTiming(jitter_frac=1.5)


class _Instant:
    def prefill_s(self, prompt_tokens, running):
        return 0.0

    def decode_step_s(self, running):
        return 0.0


def test_engine_admits_fifo_and_cancelled_waiters_leak_no_slot():
    async def go():
        engine = Engine(_Instant(), max_num_seqs=1)
        first = Sequence(prompt_tokens=10, max_tokens=1, arrival_ns=0)
        await engine.admit(first)
        order = []

        async def wait(name):
            seq = Sequence(prompt_tokens=1, max_tokens=1, arrival_ns=0)
            await engine.admit(seq)
            order.append(name)
            return seq

        waiters = {name: asyncio.create_task(wait(name)) for name in ("a", "b", "c")}
        await asyncio.sleep(0)
        assert (engine.running, engine.waiting, engine.kv_tokens) == (1, 3, 10)
        waiters["b"].cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await waiters["b"]
        assert engine.waiting == 2
        engine.release(first)
        engine.release(await waiters["a"])
        engine.release(await waiters["c"])
        return order, engine.running, engine.waiting, engine.kv_tokens

    assert run(go()) == (["a", "c"], 0, 0, 0)


def test_engine_generate_chunks_and_releases_on_early_close():
    async def go():
        engine = Engine(_Instant(), max_num_seqs=4, tokens_per_chunk=3)
        seq = Sequence(prompt_tokens=5, max_tokens=8, arrival_ns=0)
        chunks = [k async for k in engine.generate(seq)]
        stopped = Sequence(prompt_tokens=5, max_tokens=100, arrival_ns=0)
        async with contextlib.aclosing(engine.generate(stopped)) as gen:
            async for _ in gen:
                assert engine.running == 1
                break
        return chunks, engine.running, engine.kv_tokens

    assert run(go()) == ([3, 3, 2], 0, 0)


def test_flags_round_trip_through_argv():
    config = BuiltinServerConfig(port=8001, model="m", prefill_base_s=0.02, prefill_per_token_s=0.00005,
                                 decode_base_s=0.015, decode_per_running_s=0.0003, jitter_frac=0.1, seed=None,
                                 tokens_per_chunk=3, max_num_seqs=8, kv_capacity_tokens=5000, default_max_tokens=9,
                                 send_log_path="x.jsonl", send_log_flush_s=0.25)  # fmt: skip
    parser = argparse.ArgumentParser()
    add_server_arguments(parser)
    back = config_from_args(parser.parse_args(config_to_argv(config)))
    for name, value in vars(config).items():
        assert getattr(back, name) == pytest.approx(value), name
    defaults = config_from_args(parser.parse_args([]))
    assert defaults == BuiltinServerConfig()


@pytest.mark.parametrize("bad", [{"tokens_per_chunk": 0}, {"max_num_seqs": 0}, {"timing": "vidur"},
                                 {"decode_base_s": -1.0}, {"port": 70000}])  # fmt: skip
def test_config_rejects_bad_values(bad):
    with pytest.raises(ValueError):
        BuiltinServerConfig(**bad)


def test_public_surface_is_importable():
    import tokenpace.servers as servers

    assert sorted(servers.__all__) == sorted(set(servers.__all__))
    for name in servers.__all__:
        assert getattr(servers, name) is not None, name
