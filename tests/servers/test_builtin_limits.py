"""The built-in server's limits, as vLLM's: a request must fit the context length, and a client that
leaves gives its engine slot back, streamed or not."""

from __future__ import annotations

import asyncio
import re

import aiohttp
import pytest
from servers_helpers import chat_body, completion_body, fast_config, run

from tokenpace.servers import running_server


async def _post(url: str, path: str, body: dict) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as s, s.post(url + path, json=body) as response:
        streamed = response.status == 200 and body.get("stream")
        return response.status, {} if streamed else await response.json()


@pytest.mark.parametrize("path, body", [("/chat/completions", chat_body), ("/completions", completion_body)])
@pytest.mark.parametrize("stream", [False, True])
def test_prompt_plus_max_tokens_over_the_context_length_is_a_vllm_400(path, body, stream):
    prompt_words = 4 if path == "/chat/completions" else 3  # the helpers' default prompts

    async def go():
        async with running_server(fast_config(max_model_len=20)) as url:
            fits = await _post(url, path, body(max_tokens=20 - prompt_words, stream=stream))
            over = await _post(url, path, body(max_tokens=21 - prompt_words, stream=stream))
            return fits, over

    (fits_status, _), (over_status, error) = run(go())
    assert fits_status == 200
    assert over_status == 400
    where = "messages" if path == "/chat/completions" else "prompt"
    assert error == {
        "object": "error", "type": "BadRequestError", "param": None, "code": 400,
        "message": f"This model's maximum context length is 20 tokens. However, you requested 21 tokens "
                   f"({prompt_words} in the {where}, {21 - prompt_words} in the completion). Please reduce the "
                   f"length of the {where} or completion.",
    }


def test_a_huge_max_tokens_or_prompt_is_refused_not_simulated():
    async def go():
        async with running_server(fast_config()) as url:  # the default context length, 131072
            huge_output = await _post(url, "/chat/completions", chat_body(max_tokens=10**12))
            huge_prompt = await _post(url, "/completions", completion_body(max_tokens=1, prompt="word " * 200_000))
            return huge_output, huge_prompt

    for status, error in run(asyncio.wait_for(go(), 60)):  # simulating them would take days
        assert status == 400 and error["object"] == "error"
        assert "maximum context length is 131072 tokens" in error["message"]


def test_a_client_that_leaves_a_non_streamed_request_frees_its_slot():
    # One slot. A takes it for a non-streamed answer due in ~200 s, and leaves; B must then be served.
    async def running(session: aiohttp.ClientSession, url: str) -> float:
        async with session.get(url.removesuffix("/v1") + "/metrics") as response:
            return float(re.search(r"^vllm:num_requests_running\{.*\} (\S+)$", await response.text(), re.M)[1])

    async def go():
        async with running_server(fast_config(max_num_seqs=1)) as url, aiohttp.ClientSession() as probe:
            async with aiohttp.ClientSession() as gone:
                left = asyncio.create_task(gone.post(url + "/chat/completions", json=chat_body(max_tokens=100_000)))
                while await running(probe, url) < 1:
                    await asyncio.sleep(0.01)
                left.cancel()
            status, answer = await _post(url, "/chat/completions", chat_body(max_tokens=3))
            return status, answer, await running(probe, url)

    status, answer, running_after = run(asyncio.wait_for(go(), 60))
    assert status == 200 and answer["usage"]["completion_tokens"] == 3
    assert running_after == 0


def test_with_the_engine_simulator_the_limit_is_also_what_its_kv_cache_holds():
    from tokenpace.servers import BuiltinServerConfig
    from tokenpace.simulator import SimConfig

    async def go():
        # 100 KV blocks of 16 tokens: 1,600 tokens, below the context length.
        config = BuiltinServerConfig(model="llama-3.1-8b", sim=SimConfig(num_gpu_blocks=100))
        async with running_server(config) as url:
            body = {"model": "llama-3.1-8b", "prompt": "word " * 1000, "max_tokens": 601}
            return await _post(url, "/completions", body)

    status, error = run(asyncio.wait_for(go(), 60))
    assert status == 400 and error["type"] == "BadRequestError"
    assert "maximum context length is 1600 tokens" in error["message"]
