"""One preflight request before the run: is the URL right, the model served, the key accepted,
and does the server stream? Each failure is a specific one-line TargetError, not a stack trace.

The preflight request is real (one output token, same API and options as the run) but is not part
of the measurement: it is reported apart in the result file.
"""

from __future__ import annotations

import uuid
from typing import Any

from tokenpace.client import OpenAIClient
from tokenpace.errors import TargetError
from tokenpace.record import RequestRecord

PREFLIGHT_PROMPT = "Say hello."


async def preflight(client: OpenAIClient, model: str | None, url: str, *,
                    api_key_env: str, api_key_set: bool) -> tuple[str, dict[str, Any]]:
    """Return the model to use and a short report of the preflight request."""
    models = await _listed_models(client, url, needed=model is None,
                                  key_hint=_key_hint(api_key_env, api_key_set))
    if model is None:
        if not models:
            raise TargetError(f"{url}/models lists no model; pass --model")
        model = models[0]
    elif models and model not in models:
        raise TargetError(f"model {model!r} not found; the server offers: {', '.join(models)}")
    client.model = model
    record = RequestRecord(request_id=f"tp-preflight-{uuid.uuid4().hex[:12]}", index=-1,
                           warmup=True, requested_output_tokens=1)
    await client.send(record, PREFLIGHT_PROMPT)
    _check(record, client, url, api_key_env, api_key_set)
    ttft_ms = ((record.first_token_ns - record.sent_ns) / 1e6
               if record.first_token_ns and record.sent_ns else None)
    return model, {"request_id": record.request_id, "status": record.status,
                   "http_status": record.http_status, "ttft_ms": ttft_ms,
                   "streamed": record.output_tokens_client is not None}


async def _listed_models(client: OpenAIClient, url: str, *, needed: bool, key_hint: str) -> list[str]:
    try:
        return await client.list_models()
    except TargetError as exc:
        text = str(exc)
        if "HTTP 401" in text or "HTTP 403" in text:
            raise TargetError(f"authentication failed: {text}; {key_hint}") from None
        if needed or "HTTP" not in text:  # unreachable, or we need the list to pick a model
            raise
        return []  # some servers have no /models; the named model is checked by the request


def _check(record: RequestRecord, client: OpenAIClient, url: str, env: str, key_set: bool) -> None:
    status, kind, msg = record.http_status, record.error_kind or "", record.error_message or ""
    endpoint = f"{url}{client.format.path}"
    if record.status == "ok":
        if client.stream and record.output_tokens_client is None:
            raise TargetError(f"{endpoint} answered without streaming; pass --no-stream to "
                              "measure it as a non-streaming endpoint")
        return
    if kind.startswith("connect") or kind == "reset_before_headers":
        raise TargetError(f"cannot reach {url}: {msg or kind}")
    if status in (401, 403):
        raise TargetError(f"authentication failed (HTTP {status}): {msg}; {_key_hint(env, key_set)}")
    if status == 404:
        other = "completions" if client.api == "chat" else "chat"  # the likeliest other answer
        raise TargetError(f"HTTP 404 from {endpoint}: {msg} (does the URL end in /v1? does the "
                          f"server offer this API? try --api {other})")
    if status in (400, 422):
        hint = ("; if the server rejects ignore_eos/min_tokens, pass --no-ignore-eos"
                if client.ignore_eos else "")
        raise TargetError(f"the server rejected the request (HTTP {status}): {msg}{hint}")
    raise TargetError(f"preflight request to {endpoint} failed: {record.status} "
                      f"({kind or 'no detail'}{': ' + msg if msg else ''})")


def _key_hint(env: str, key_set: bool) -> str:
    return (f"the key in ${env} was refused" if key_set
            else f"set ${env} (or name another variable with --api-key-env)")
