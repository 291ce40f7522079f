"""What reaches the upstream: the client's headers, Authorization included, and an X-Request-ID;
what reaches the client: the upstream's status, headers and body, errors included."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from aiohttp import web

from tokenpace.proxy import ProxyConfig
from tokenpace.runner.sink import read_records


def _upstream() -> tuple[web.Application, list]:
    seen: list = []

    async def chat(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        body = {"error": {"message": f"bad key {request.headers.get('Authorization')}", "type": "auth"}}
        return web.json_response(body, status=401, headers={"X-Upstream": "yes"})

    async def models(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"object": "list", "data": [{"id": "m", "object": "model"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_get("/v1/models", models)
    return app, seen


def test_headers_pass_through_and_the_key_is_never_stored(make_proxy, serve_app_thread, tmp_path):
    app, seen = _upstream()
    path = tmp_path / "r.jsonl"
    with serve_app_thread(app) as upstream, make_proxy(ProxyConfig(upstream=upstream, port=0,
                                                                   records_path=str(path))) as (url, _):
        models = urllib.request.urlopen(urllib.request.Request(
            url + "/models", headers={"Authorization": "Bearer sk-abc123456789"}), timeout=5)
        assert json.loads(models.read())["data"][0]["id"] == "m"
        request = urllib.request.Request(url + "/chat/completions", method="POST", data=json.dumps(
            {"model": "m", "messages": [], "stream": True}).encode(), headers={
            "Authorization": "Bearer sk-abc123456789", "X-Custom": "kept", "Content-Type": "application/json"})
        try:
            urllib.request.urlopen(request, timeout=5)
            raise AssertionError("expected 401")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401 and exc.headers["X-Upstream"] == "yes"
            assert "bad key Bearer sk-abc123456789" in exc.read().decode()  # the body, unchanged
    assert [h.get("Authorization") for h in seen] == ["Bearer sk-abc123456789"] * 2
    assert seen[1]["X-Custom"] == "kept" and seen[1]["X-Request-ID"]
    [record] = read_records(path)  # /v1/models is passed through, not recorded
    assert (record.status, record.error_kind, record.http_status) == ("error", "http_401", 401)
    assert record.request_id == seen[1]["X-Request-ID"]
    assert "sk-abc123456789" not in path.read_text()  # masked in the error message kept
    assert "bad key" in record.error_message
