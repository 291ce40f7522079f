"""OpenTelemetry export of finished records, with the GenAI semantic conventions' names:

| instrument | unit | recorded |
|---|---|---|
| ``gen_ai.client.operation.duration`` | s | every call: sent to done (``error.type`` set when it failed) |
| ``gen_ai.client.token.usage`` | {token} | input and output counts (``gen_ai.token.type``) |
| ``gen_ai.client.operation.time_to_first_chunk`` | s | ok streamed calls: sent to the first token-carrying chunk |
| ``gen_ai.client.operation.time_per_output_chunk`` | s | each token-carrying chunk after the first: its gap |

Attributes: ``gen_ai.operation.name`` (chat, text_completion), ``gen_ai.provider.name``,
``gen_ai.request.model``. With a tracer, one span per call (``{operation} {model}``, kind CLIENT,
start and end from the record) carrying ``gen_ai.usage.input_tokens``, ``output_tokens``,
``cache_read.input_tokens``, ``reasoning.output_tokens``. Bucket boundaries are the conventions'
for duration and token usage; for the two chunk timings, the conventions' boundaries of the
server's time to first token and time per output token (the same quantities seen from the
server). Never exported: prompt or completion text (a record holds none).

Needs ``opentelemetry-sdk`` (``pip install 'tokenpace[otel]'``) for anything to be collected.
"""

from __future__ import annotations

import time
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.metrics.latency import chunk_gaps, ttft
from tokenpace.record import RequestRecord

from . import buckets

OPERATION = {"chat": "chat", "completions": "text_completion"}
INSTALL_HINT = "OpenTelemetry export needs opentelemetry-sdk: pip install 'tokenpace[otel]'"


class OTelExporter:
    """An observer of finished records (``exporter(record)``)."""

    def __init__(self, meter_provider: Any = None, tracer_provider: Any = None, *, provider: str = "openai") -> None:
        try:
            from opentelemetry import metrics, trace
            from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as names
        except ImportError:
            raise UsageError(INSTALL_HINT) from None
        from tokenpace._version import __version__

        meter = (meter_provider or metrics.get_meter_provider()).get_meter("tokenpace", __version__)
        self._tracer = (tracer_provider or trace.get_tracer_provider()).get_tracer("tokenpace", __version__)
        self._span_kind = trace.SpanKind.CLIENT
        self._status_error = trace.StatusCode.ERROR
        self.provider = provider
        self.duration = meter.create_histogram(
            names.GEN_AI_CLIENT_OPERATION_DURATION, unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=list(buckets.OPERATION_DURATION_S))
        self.token_usage = meter.create_histogram(
            names.GEN_AI_CLIENT_TOKEN_USAGE, unit="{token}", description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=list(buckets.TOKENS))
        self.time_to_first_chunk = meter.create_histogram(
            names.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK, unit="s",
            description="Time to receive the first chunk.",
            explicit_bucket_boundaries_advisory=list(buckets.TIME_TO_FIRST_CHUNK_S))
        self.time_per_output_chunk = meter.create_histogram(
            names.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK, unit="s",
            description="Time per output chunk, for each chunk after the first.",
            explicit_bucket_boundaries_advisory=list(buckets.TIME_PER_OUTPUT_CHUNK_S))

    def __call__(self, record: RequestRecord) -> None:
        operation = OPERATION.get(record.api, record.api)
        attributes: dict[str, Any] = {"gen_ai.operation.name": operation, "gen_ai.provider.name": self.provider}
        if record.model:
            attributes["gen_ai.request.model"] = record.model
        ok = record.status == "ok"
        error_type = None if ok else (record.error_kind or record.status)
        if record.sent_ns is not None and record.done_ns is not None:  # the whole call, failed or not
            self.duration.record((record.done_ns - record.sent_ns) / 1e9,
                                 attributes if ok else {**attributes, "error.type": error_type})
        if record.prompt_tokens is not None:
            self.token_usage.record(record.prompt_tokens, {**attributes, "gen_ai.token.type": "input"})
        if record.output_tokens is not None and (ok or record.output_tokens):
            self.token_usage.record(record.output_tokens, {**attributes, "gen_ai.token.type": "output"})
        if ok and record.stream:
            ttft_ms = ttft(record)
            if ttft_ms is not None:
                self.time_to_first_chunk.record(ttft_ms / 1000, attributes)
            for gap_ms in chunk_gaps(record):
                self.time_per_output_chunk.record(gap_ms / 1000, attributes)
        self._span(record, operation, attributes, error_type)

    def _span(self, record: RequestRecord, operation: str, attributes: dict[str, Any], error_type: str | None) -> None:
        if record.sent_ns is None:
            return
        to_wall = time.time_ns() - time.monotonic_ns()  # records stamp the monotonic clock; spans want epoch ns
        span_attributes = dict(attributes)
        for key, value in (("gen_ai.usage.input_tokens", record.prompt_tokens),
                           ("gen_ai.usage.output_tokens", record.output_tokens),
                           ("gen_ai.usage.cache_read.input_tokens", record.cached_prompt_tokens),
                           ("gen_ai.usage.reasoning.output_tokens", record.reasoning_tokens),
                           ("gen_ai.response.finish_reasons", [record.finish_reason] if record.finish_reason else None)):
            if value is not None:
                span_attributes[key] = value
        if error_type is not None:
            span_attributes["error.type"] = error_type
        name = f"{operation} {record.model}" if record.model else operation
        span = self._tracer.start_span(name, kind=self._span_kind, attributes=span_attributes,
                                       start_time=record.sent_ns + to_wall)
        if error_type is not None:
            span.set_status(self._status_error, error_type)
        span.end(end_time=(record.done_ns or record.sent_ns) + to_wall)
