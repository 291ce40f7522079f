"""OpenTelemetry export read back through the SDK's in-memory reader and span exporter; names
checked against the semantic conventions' own package; no prompt or completion text exported."""

from __future__ import annotations

import openai
import pytest

import tokenpace

metrics_sdk = pytest.importorskip("opentelemetry.sdk.metrics")
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as attrs  # noqa: E402
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics as names  # noqa: E402

from tokenpace.instrumentation.otel import OTelExporter  # noqa: E402

MODEL = "tokenpace-sim"
SECRET_PROMPT = "my-secret-prompt-text"
# The conventions' published boundaries for these two (semantic-conventions, gen-ai metrics).
DURATION_BOUNDS = [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92]
TOKEN_BOUNDS = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864]


def test_gen_ai_metrics_and_spans(server_url):
    reader = InMemoryMetricReader()
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    exporter = OTelExporter(metrics_sdk.MeterProvider(metric_readers=[reader]), tracer_provider)
    records: list = []
    client = tokenpace.instrument(openai.OpenAI(base_url=server_url, api_key="k", max_retries=0),
                                  records=records, prometheus=False, otel=exporter)
    messages = [{"role": "user", "content": SECRET_PROMPT}]
    list(client.chat.completions.create(model=MODEL, messages=messages, max_tokens=6, stream=True))
    client.completions.create(model=MODEL, prompt=SECRET_PROMPT, max_tokens=3)
    with pytest.raises(openai.BadRequestError):
        client.chat.completions.create(model=MODEL, messages=messages, max_tokens=10**8)

    data = reader.get_metrics_data()
    found = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert set(found) == {names.GEN_AI_CLIENT_OPERATION_DURATION, names.GEN_AI_CLIENT_TOKEN_USAGE,
                          names.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK,
                          names.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK}
    duration = found[names.GEN_AI_CLIENT_OPERATION_DURATION]
    assert duration.unit == "s"
    points = {(p.attributes[attrs.GEN_AI_OPERATION_NAME], p.attributes.get("error.type")): p
              for p in duration.data.data_points}
    assert set(points) == {("chat", None), ("text_completion", None), ("chat", "http_400")}
    assert list(points["chat", None].explicit_bounds) == DURATION_BOUNDS
    assert points["chat", None].attributes[attrs.GEN_AI_REQUEST_MODEL] == MODEL
    assert points["chat", None].attributes[attrs.GEN_AI_PROVIDER_NAME] == "openai"
    usage = {(p.attributes[attrs.GEN_AI_OPERATION_NAME], p.attributes[attrs.GEN_AI_TOKEN_TYPE]): p
             for p in found[names.GEN_AI_CLIENT_TOKEN_USAGE].data.data_points}
    assert usage["chat", "output"].sum == 6 and usage["text_completion", "output"].sum == 3
    assert list(usage["chat", "output"].explicit_bounds) == TOKEN_BOUNDS
    ttfc = found[names.GEN_AI_CLIENT_OPERATION_TIME_TO_FIRST_CHUNK].data.data_points
    assert [p.count for p in ttfc] == [1]  # the streamed call only
    [chunks] = found[names.GEN_AI_CLIENT_OPERATION_TIME_PER_OUTPUT_CHUNK].data.data_points
    assert chunks.count == 5  # 6 token chunks: 5 gaps

    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == [f"chat {MODEL}", f"text_completion {MODEL}", f"chat {MODEL}"]
    first = finished[0]
    assert first.attributes[attrs.GEN_AI_USAGE_OUTPUT_TOKENS] == 6
    assert first.attributes[attrs.GEN_AI_USAGE_INPUT_TOKENS] == records[0].prompt_tokens
    assert first.end_time - first.start_time == records[0].done_ns - records[0].sent_ns
    assert finished[2].attributes["error.type"] == "http_400"
    exported = repr(data.to_json()) + "".join(s.to_json() for s in finished)
    assert SECRET_PROMPT not in exported
