"""Observe live traffic: the official ``openai`` SDK (``instrument``) or any async iterator of SSE
events (``observe_events``), recorded as the same ``RequestRecord`` a load test produces.

    import openai, tokenpace
    client = tokenpace.instrument(openai.OpenAI(base_url=...), slo="chat", records="calls.jsonl")

Each call yields exactly one record, on every exit path, handed to the observers: a JSONL file
(rotating, bounded), a list, any callable, a Prometheus exporter, an OpenTelemetry exporter.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

from tokenpace.errors import UsageError
from tokenpace.metrics.slo import SLO, parse_slo
from tokenpace.record import RequestRecord

from .call import CallRecorder, Observer, RecordFactory
from .events import observe_events as _observe_events
from .openai_sdk import InstrumentedClient
from .prometheus import PrometheusExporter
from .sink import RotatingRecordSink

__all__ = ["InstrumentedClient", "PrometheusExporter", "RotatingRecordSink", "CallRecorder",
           "instrument", "observe_events", "observers_for"]

_DEFAULT_EXPORTER: PrometheusExporter | None = None


def instrument(client: Any, *, slo: str | SLO | None = None,
               records: str | Path | list[RequestRecord] | Callable[[RequestRecord], Any] | None = None,
               prometheus: bool | PrometheusExporter = True, otel: Any = False,
               observers: Iterable[Observer] = (), inject_usage: bool = True,
               prompt_hashes: bytes | str | None = None, hash_block: int = 16,
               tokenizer: Any = None) -> InstrumentedClient:
    """Wrap an ``openai.OpenAI`` or ``openai.AsyncOpenAI`` client so that every
    ``chat.completions.create`` and ``completions.create`` call is recorded.

    ``records``: a JSONL path (a rotating sink: 64 MiB a file, 4 old files kept), a list to append
    to, or a callable. ``prometheus``: True feeds one exporter shared by the process, registered in
    ``prometheus_client.REGISTRY`` (serve it with ``prometheus_client.start_http_server``; its SLO
    is the first one given); or an exporter of your own. ``otel``: True for the global
    OpenTelemetry ``MeterProvider``/``TracerProvider``, a ``MeterProvider``, or an ``OTelExporter``. ``inject_usage``:
    ask streams for usage (``stream_options.include_usage``) when the caller did not, and hide
    the extra usage-only chunk from the caller. ``prompt_hashes``: a secret salt; each record then
    keeps a salted hash chain of its prompt's blocks of ``hash_block`` words (tokens with
    ``tokenizer``: a tokenpace Tokenizer or a path for ``load_tokenizer``), never the text, for
    ``tokenpace workload reuse``; hashed when the call has ended.
    """
    return InstrumentedClient(client, RecordFactory(observers_for(slo=slo, records=records, prometheus=prometheus,
                                                                  otel=otel, observers=observers),
                                                    prompt_hasher(prompt_hashes, hash_block, tokenizer)),
                              inject_usage=inject_usage)


def prompt_hasher(salt: bytes | str | None, block: int = 16, tokenizer: Any = None) -> Any:
    """The ``PromptHasher`` of ``instrument(prompt_hashes=...)``; None without a salt; UsageError for
    an empty salt or a block under 1."""
    if salt is None:
        if tokenizer is not None:
            raise UsageError("tokenizer= goes with prompt_hashes=")
        return None
    from tokenpace.advise.hashchain import PromptHasher

    if isinstance(tokenizer, (str, Path)):
        from tokenpace.workload.tokenizer import load_tokenizer

        tokenizer = load_tokenizer(tokenizer)
    try:
        return PromptHasher(salt, block=block, tokenizer=tokenizer)
    except ValueError as exc:
        raise UsageError(f"prompt_hashes: {exc}") from None


def observe_events(events: AsyncIterator[Any], *, api: str = "chat", slo: str | SLO | None = None,
                   records: Any = None, prometheus: bool | PrometheusExporter = False, otel: Any = False,
                   observers: Iterable[Observer] = ()) -> AsyncIterator[Any]:
    """Pass an async iterator of SSE events through unchanged, recording the stream they make up."""
    factory = RecordFactory(observers_for(slo=slo, records=records, prometheus=prometheus, otel=otel,
                                          observers=observers))
    return _observe_events(events, factory, api=api)


def observers_for(*, slo: str | SLO | None, records: Any, prometheus: bool | PrometheusExporter,
                  otel: Any, observers: Iterable[Observer] = ()) -> tuple[Observer, ...]:
    """The observers the keyword arguments of ``instrument`` ask for."""
    global _DEFAULT_EXPORTER
    parsed = parse_slo(slo) if isinstance(slo, str) else slo
    chosen: list[Observer] = []
    if isinstance(records, (str, Path)):
        chosen.append(RotatingRecordSink(records))
    elif isinstance(records, list):
        chosen.append(records.append)
    elif callable(records):
        chosen.append(records)
    elif records is not None:
        raise UsageError(f"records must be a path, a list or a callable, not {type(records).__name__}")
    if isinstance(prometheus, PrometheusExporter):
        chosen.append(prometheus)
    elif prometheus:
        if _DEFAULT_EXPORTER is None:
            from prometheus_client import REGISTRY

            _DEFAULT_EXPORTER = PrometheusExporter(parsed, registry=REGISTRY)
        chosen.append(_DEFAULT_EXPORTER)
    if otel:
        from .otel import OTelExporter

        chosen.append(otel if isinstance(otel, OTelExporter) else OTelExporter(None if otel is True else otel))
    chosen.extend(observers)
    return tuple(chosen)
