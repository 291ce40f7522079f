"""Fuzzing the user-facing parsers: any text gives a value or the documented UsageError, nothing else."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from tokenpace.cli.options import parse_json_object, parse_warmup
from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.metrics import parse_slo
from tokenpace.workload import parse_length

SPEC_ALPHABET = st.sampled_from(list("0123456789.,:=-+eE ") + ["uniform", "normal", "lognormal",
                                 "min", "max", "mean", "std", "sigma", "nan", "inf", "ms", "s",
                                 "ttft", "tpot", "e2e", "chat", "attainment", "%", "req"])
spec_text = st.one_of(st.text(max_size=40), st.lists(SPEC_ALPHABET, max_size=12).map("".join))


@settings(max_examples=400, deadline=None)
@given(spec_text)
def test_length_spec_parser(text):
    try:
        spec = parse_length(text)
    except UsageError:
        return
    draws = spec.sample(np.random.default_rng(0), 50)
    assert draws.dtype == np.int64 and (draws >= 1).all()


@settings(max_examples=400, deadline=None)
@given(spec_text)
def test_slo_parser(text):
    try:
        slo = parse_slo(text)
    except UsageError:
        return
    assert 0 < slo.attainment <= 1


@settings(max_examples=300, deadline=None)
@given(spec_text, st.booleans())
def test_warmup_parser(text, by_time):
    try:
        requests, seconds = parse_warmup(text, by_time=by_time)
    except UsageError:
        return
    assert requests >= 0 and seconds >= 0


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_extra_body_parser(text):
    try:
        assert isinstance(parse_json_object(text, "--extra-body"), dict)
    except UsageError:
        pass


numbers = st.one_of(st.none(), st.integers(-5, 10_000), st.floats(allow_nan=True, allow_infinity=True))


@settings(max_examples=400, deadline=None)
@given(concurrency=numbers, rate=numbers, requests=numbers, duration=numbers, timeout=numbers,
       gpus=numbers, warmup=numbers, price=numbers, api=st.sampled_from(["chat", "completions", "x"]),
       arrival=st.sampled_from(["poisson", "gamma", "constant", "zipf"]))
def test_config_validation(concurrency, rate, requests, duration, timeout, gpus, warmup, price, api,
                           arrival):
    config = BenchConfig(concurrency=concurrency, rate=rate, requests=requests, duration_s=duration,
                         timeout_s=600.0 if timeout is None else timeout, gpus=1 if gpus is None else gpus,
                         warmup_s=0.0 if warmup is None else warmup, gpu_hour_usd=price, api=api,
                         arrival=arrival)
    try:
        config.validate()
    except UsageError:
        return
    assert config.api in ("chat", "completions")
