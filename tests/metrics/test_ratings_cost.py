import pytest

from tokenpace.errors import UsageError
from tokenpace.metrics import rate, summarize, usd_per_1m_tokens
from tokenpace.metrics.cost import cost

from .factory import steady


@pytest.mark.parametrize("value, expected", [
    (0.0, "excellent"), (199.99, "excellent"), (200.0, "acceptable"), (800.0, "acceptable"),
    (800.01, "poor"), (950.0, "poor"),  # REFERENCE leaves 800 ms-1 s unassigned: poor
    (1500.0, "poor"), (None, None),
])
def test_ttft_rating_boundaries(value, expected):
    assert rate("ttft", value) == expected


@pytest.mark.parametrize("metric", ["tpot", "itl"])
@pytest.mark.parametrize("value, expected", [
    (29.99, "excellent"), (30.0, "acceptable"), (80.0, "acceptable"), (80.01, "poor"),
    (90.0, "poor"),  # 80-100 ms unassigned in REFERENCE: poor
])
def test_per_token_rating_boundaries(metric, value, expected):
    assert rate(metric, value) == expected


def test_summary_rates_p50_and_p99():
    records = steady(10, ttft=150.0, itl=40.0)
    ratings = summarize(records)["ratings"]
    assert ratings["ttft"] == {"p50": "excellent", "p99": "excellent"}
    assert ratings["tpot"] == {"p50": "acceptable", "p99": "acceptable"}
    assert ratings["itl"] == {"p50": "acceptable", "p99": "acceptable"}
    assert summarize([])["ratings"]["ttft"] == {"p50": None, "p99": None}


def test_reference_worked_example():
    # $3/h at 4,000 tok/s -> 14.4M tok/h -> about $0.21 per 1M.
    assert usd_per_1m_tokens(3.0, 1, 4000.0) == pytest.approx(0.2083333, rel=1e-6)
    assert round(usd_per_1m_tokens(3.0, 1, 4000.0), 2) == 0.21
    assert usd_per_1m_tokens(3.0, 4, 4000.0) == pytest.approx(0.8333333, rel=1e-6)


def test_no_rate_no_cost():
    assert usd_per_1m_tokens(3.0, 1, 0.0) is None
    assert usd_per_1m_tokens(3.0, 1, None) is None


@pytest.mark.parametrize("price, gpus", [(-1.0, 1), (float("nan"), 1), (3.0, 0), (3.0, 1.5),
                                         (3.0, True)])
def test_bad_cost_inputs(price, gpus):
    with pytest.raises(UsageError):
        cost(price, gpus, 100.0)


def test_summary_cost_section():
    # 10 requests, 5 tokens each, sent every 100 ms: window 0..990 ms, 50 tokens.
    records = steady(10)
    summary = summarize(records, slo="chat", gpu_hour_usd=2.0, gpus=2)
    c = summary["cost"]
    rate_s = 50 / 0.99
    assert c["gpu_hour_usd"] == 2.0 and c["gpus"] == 2
    assert c["usd_per_1m_output_tokens"] == pytest.approx(4.0 / (rate_s * 3600) * 1e6)
    assert c["usd_per_1m_good_output_tokens"] == pytest.approx(c["usd_per_1m_output_tokens"])
    assert summarize(records)["cost"] is None
    assert summarize(records, gpu_hour_usd=2.0)["cost"]["usd_per_1m_good_output_tokens"] is None
