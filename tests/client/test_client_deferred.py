"""``send_deferred``: the outcome at once, the token accounting when its returned function runs, and
then the same record as ``send`` fills (against the built-in server)."""

from __future__ import annotations

import asyncio

from tokenpace.client import OpenAIClient
from tokenpace.record import RequestRecord

COUNT_FIELDS = ("status", "error_kind", "output_tokens", "output_tokens_source", "output_tokens_client",
                "chunk_tokens", "chunk_tokens_source", "prompt_tokens", "prompt_tokens_source",
                "finish_reason")


def _record(i: int) -> RequestRecord:
    return RequestRecord(request_id=f"deferred-{i}", index=i, api="completions", stream=True,
                         requested_input_tokens=16, requested_output_tokens=12)


def test_send_deferred_counts_tokens_only_when_finished_and_matches_send(server_url):
    async def main() -> tuple[RequestRecord, RequestRecord, tuple]:
        async with OpenAIClient(server_url, model="tokenpace-sim", api="completions") as client:
            whole, deferred = _record(0), _record(1)
            await client.send(whole, "hello " * 16)
            finish = await client.send_deferred(deferred, "hello " * 16)
            before = (deferred.status, deferred.done_ns, len(deferred.chunk_ns),
                      deferred.output_tokens, list(deferred.chunk_tokens))
            finish()
            return whole, deferred, before

    whole, deferred, before = asyncio.run(main())
    status, done_ns, chunks, output_tokens, chunk_tokens = before
    assert status == "ok" and done_ns is not None and chunks == 12  # outcome and stamps at once
    assert output_tokens is None and chunk_tokens == []  # the counts wait for finish()
    assert {f: getattr(deferred, f) for f in COUNT_FIELDS} == {f: getattr(whole, f) for f in COUNT_FIELDS}
    assert deferred.output_tokens == 12 and sum(deferred.chunk_tokens) == 12
