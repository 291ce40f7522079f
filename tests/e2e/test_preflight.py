"""Preflight: each way a target can be wrong gets its own one-line message and exit code 3."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from aiohttp import web

from tokenpace import BenchConfig, TargetError, run_bench


class FakeServer:
    """A deliberately wrong OpenAI-ish server on 127.0.0.1, in its own thread and event loop."""

    def __init__(self, *, need_key=None, chat_status=200, chat_error="", stream=True, models=True, echo_auth=False):
        self.need_key, self.chat_status, self.chat_error = need_key, chat_status, chat_error
        self.echo_auth = echo_auth  # a refusal that quotes the Authorization header it got
        self.stream, self.models = stream, models
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _authorized(self, request):
        return self.need_key is None or request.headers.get("Authorization") == f"Bearer {self.need_key}"

    def _refuse(self, request):
        quoted = f": {request.headers.get('Authorization')}" if self.echo_auth else ""
        return web.json_response({"error": {"message": f"bad key{quoted}"}}, status=401)

    async def _models(self, request):
        if not self._authorized(request):
            return self._refuse(request)
        if not self.models:
            return web.json_response({"error": {"message": "no such route"}}, status=404)
        return web.json_response({"object": "list", "data": [{"id": "m1"}]})

    async def _chat(self, request):
        if not self._authorized(request):
            return self._refuse(request)
        if self.chat_status != 200:
            return web.json_response({"error": {"message": self.chat_error}}, status=self.chat_status)
        body = {"id": "x", "object": "chat.completion", "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "hi"}, "finish_reason": "length"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
        if not self.stream:
            return web.json_response(body)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        chunk = {"id": "x", "object": "chat.completion.chunk",
                 "choices": [{"index": 0, "delta": {"content": "hi"}, "finish_reason": "length"}]}
        await resp.write(f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode())
        return resp

    def _run(self):
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/chat/completions", self._chat)
        runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.url = f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        self._ready.set()
        self._loop.run_forever()
        self._loop.run_until_complete(runner.cleanup())

    def __enter__(self):
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc):
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def _bench(url, tmp_path, **kw):
    return run_bench(BenchConfig(url=url, requests=2, concurrency=1, output_tokens="4",
                                 progress=False, out=str(tmp_path / "r.json"), **kw))


@pytest.mark.parametrize("server, config, message", [
    (dict(need_key="k1"), dict(api_key_env="TP_TEST_NO_SUCH_VAR"),
     "authentication failed: GET"),
    (dict(need_key="k1", models=False), dict(model="m1", api_key_env="TP_TEST_NO_SUCH_VAR"),
     "set $TP_TEST_NO_SUCH_VAR"),
    (dict(chat_status=400, chat_error="unknown field ignore_eos"), {},
     "rejected the request (HTTP 400): unknown field ignore_eos; if the server rejects "
     "ignore_eos/min_tokens, pass --no-ignore-eos"),
    (dict(stream=False), {}, "answered without streaming; pass --no-stream"),
    (dict(), dict(api="completions"), "HTTP 404 from"),
    (dict(), dict(model="m2"), "model 'm2' not found; the server offers: m1"),
])
def test_preflight_explains_what_is_wrong(server, config, message, tmp_path):
    with FakeServer(**server) as fake, pytest.raises(TargetError) as info:
        _bench(fake.url, tmp_path, **config)
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_preflight_passes_with_the_right_key_and_is_reported_apart(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_TEST_KEY", "k1")
    with FakeServer(need_key="k1") as fake:
        result = _bench(fake.url, tmp_path, api_key_env="TP_TEST_KEY")
    assert result.preflight["status"] == "ok" and result.preflight["streamed"] is True
    assert result.summary["counts"]["sent"] == 2  # the preflight request is not measured
    assert all(not r.request_id.startswith("tp-preflight") for r in result.records)


@pytest.mark.parametrize("key", ["sk-proj-abc123def456", "plain-secret-42"])
@pytest.mark.parametrize("models", [True, False])  # refused by GET /models, or by the request itself
def test_a_key_the_server_echoes_is_never_in_the_error(key, models, tmp_path, monkeypatch):
    monkeypatch.setenv("TP_TEST_KEY", key)
    with FakeServer(need_key="k1", echo_auth=True, models=models) as fake, pytest.raises(TargetError) as info:
        _bench(fake.url, tmp_path, model="m1", api_key_env="TP_TEST_KEY")
    message = str(info.value)
    assert "authentication failed" in message and "bad key: Bearer ***" in message
    assert key not in message and key[:10] not in message
