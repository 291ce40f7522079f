import pytest

from tokenpace.errors import UsageError
from tokenpace.metrics import summarize

from .factory import ns, record, steady


def two_requests():
    # Window 0..1000 ms = 1 s. 30 output tokens, 150 input tokens of which 40 cached.
    return [
        record(sent=0, chunks=[(100, 10), (200, 10)], prompt_tokens=100, cached_prompt_tokens=40),
        record(sent=500, chunks=[(600, 5), (1000, 5)], prompt_tokens=50, index=1),
    ]


def test_default_window_and_rates():
    summary = summarize(two_requests())
    assert summary["window"]["start_ns"] == 0
    assert summary["window"]["end_ns"] == ns(1000)
    assert summary["window"]["duration_s"] == 1.0
    assert "window" in summary["window"]["definition"].lower()
    t = summary["throughput"]
    assert t["output_tokens"] == 30 and t["output_tokens_s"] == 30.0
    assert t["input_tokens"] == 150 and t["input_tokens_s"] == 150.0
    assert t["cached_prompt_tokens"] == 40 and t["cached_prompt_tokens_s"] == 40.0
    assert t["uncached_input_tokens_s"] == 110.0
    assert t["total_tokens_s"] == 180.0
    assert t["requests_s"] == 2.0


def test_cancelled_tail_outside_window_changes_nothing():
    window = (0, ns(1000))
    tail = record(sent=900, chunks=[(1100, 5), (1200, 5)], done=1300, status="cancelled",
                  prompt_tokens=70, index=2)
    without = summarize(two_requests(), window=window)["throughput"]
    with_tail = summarize(two_requests() + [tail], window=window)["throughput"]
    assert with_tail == without


def test_default_window_counts_delivered_tail_tokens_not_the_requests():
    # The tail request was cancelled at 1300 ms after delivering 10 tokens: they are counted (the
    # server produced them), the request and its prompt are not (it never completed ok).
    tail = record(sent=900, chunks=[(1100, 5), (1200, 5)], done=1300, status="cancelled",
                  prompt_tokens=70, index=2)
    t = summarize(two_requests() + [tail])["throughput"]
    assert t["output_tokens"] == 40
    assert t["output_tokens_s"] == pytest.approx(40 / 1.3)
    assert t["requests_s"] == pytest.approx(2 / 1.3)
    assert t["input_tokens"] == 150


def test_only_chunks_inside_an_explicit_window_count():
    # Cut the window at 150 ms: only the first 10-token chunk (100 ms) is inside, and no request
    # completed inside it: the first request counts for the half of its tokens done inside (and
    # half its 100-token prompt), the second for nothing.
    t = summarize(two_requests(), window=(0, ns(150)))["throughput"]
    assert t["output_tokens"] == 10
    assert t["output_tokens_s"] == pytest.approx(10 / 0.15)
    assert t["requests"] == 0.5 and t["requests_s"] == pytest.approx(0.5 / 0.15)
    assert t["input_tokens"] == 50
    assert summarize(two_requests(), window=(0, ns(150)))["window"]["requests_completed"] == 0


def test_warmup_excluded_from_window_and_counts():
    warm = record(sent=-5000, chunks=[(-4000, 500)], prompt_tokens=9999, warmup=True, index=9)
    summary = summarize([warm] + two_requests())
    assert summary["window"]["start_ns"] == 0
    assert summary["throughput"]["output_tokens"] == 30
    assert summary["counts"]["warmup_excluded"] == 1
    assert summary["counts"]["sent"] == 2


def test_errors_add_no_input_tokens_or_requests():
    failed = record(sent=300, chunks=[], done=400, status="error", error_kind="http_500",
                    prompt_tokens=1000, index=3)
    t = summarize(two_requests() + [failed])["throughput"]
    assert t["input_tokens"] == 150 and t["requests_s"] == 2.0


def test_no_measured_records_have_no_rates():
    summary = summarize([])
    assert summary["window"]["duration_s"] == 0.0
    assert summary["window"]["start_ns"] is None
    assert summary["throughput"]["output_tokens_s"] is None
    assert summary["throughput"]["output_tokens"] == 0


def test_ramp_up_cut_by_explicit_window():
    records = steady(20, every=100.0, tokens=5)  # requests 0..1900 ms, each done 90 ms later
    full = summarize(records)["throughput"]
    steady_part = summarize(records, window=(ns(1000), ns(1990)))["throughput"]
    assert full["output_tokens"] == 100
    assert steady_part["output_tokens"] == 50  # requests sent at 1000..1900 ms
    assert steady_part["requests_s"] == pytest.approx(10 / 0.99)


@pytest.mark.parametrize("bad", [(5, 1), ("a", "b"), (1,), 42])
def test_bad_explicit_window_is_a_usage_error(bad):
    with pytest.raises(UsageError):
        summarize(two_requests(), window=bad)
