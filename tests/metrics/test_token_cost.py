"""Cache writes, reads and misses apart: TTFT, tokens and cost at per-token prices."""

from __future__ import annotations

import pytest

from tokenpace.metrics import summarize
from tokenpace.metrics.token_cost import CACHE_PRICE_MULTIPLIERS, TokenPrices

from .factory import record


def anthropic_run():
    return [
        # A write: 1,000 prompt tokens, 900 of them written to the cache.
        record(index=0, chunks=[(400, 10)], prompt_tokens=1000, cached_prompt_tokens=0,
               cache_write_prompt_tokens=900),
        # Two reads of those 900.
        record(index=1, chunks=[(100, 10)], prompt_tokens=1000, cached_prompt_tokens=900,
               cache_write_prompt_tokens=0),
        record(index=2, chunks=[(120, 10)], prompt_tokens=1000, cached_prompt_tokens=900,
               cache_write_prompt_tokens=0),
        # A miss: nothing read or written.
        record(index=3, chunks=[(380, 10)], prompt_tokens=1000, cached_prompt_tokens=0,
               cache_write_prompt_tokens=0),
        # Failed: counted nowhere.
        record(index=4, chunks=[(50, 1)], status="error", prompt_tokens=1000, cached_prompt_tokens=900,
               cache_write_prompt_tokens=0),
    ]


def test_the_default_multipliers_are_anthropics_five_minute_cache():
    assert CACHE_PRICE_MULTIPLIERS == {"write": 1.25, "read": 0.1}


def test_writes_reads_and_misses_apart_with_cost():
    summary = summarize(anthropic_run(), token_prices=TokenPrices(3.0, 15.0))
    use = summary["breakdowns"]["cache_use"]
    assert {k: v["requests"] for k, v in use.items()} == {"writes": 1, "reads": 2, "misses": 1}
    assert use["writes"]["ttft_ms"]["p50"] == 400.0 and use["reads"]["ttft_ms"]["p50"] == 110.0
    assert (use["reads"]["cached_prompt_tokens"], use["writes"]["cache_write_prompt_tokens"]) == (1800, 900)
    # Write: (100 + 900 x 1.25) x $3/M + 10 x $15/M = $0.003675 + $0.00015
    assert use["writes"]["usd"] == pytest.approx(0.003825)
    # Read: (100 + 900 x 0.1) x $3/M + 10 x $15/M = $0.00057 + $0.00015, twice
    assert use["reads"]["usd"] == pytest.approx(0.00144)
    assert use["misses"]["usd"] == pytest.approx(0.00315)
    cost = summary["token_cost"]
    assert cost["requests"] == 4 and cost["usd"] == pytest.approx(0.008415)
    assert cost["usd_without_cache"] == pytest.approx(0.0126)
    assert cost["saved_fraction"] == pytest.approx(1 - 0.008415 / 0.0126)
    assert cost["usd_by_cache"] == pytest.approx({"writes": 0.003825, "reads": 0.00144, "misses": 0.00315})


def test_other_multipliers_are_data():
    # OpenAI-style: no write surcharge, cached input at half price.
    summary = summarize(anthropic_run(), token_prices=TokenPrices(2.0, 8.0, {"write": 1.0, "read": 0.5}))
    assert summary["breakdowns"]["cache_use"]["reads"]["usd"] == pytest.approx(2 * ((100 + 450) * 2 + 80) / 1e6)


def test_no_cache_use_without_cache_write_counts_and_no_cost_without_prices():
    chat = [record(index=0, chunks=[(100, 1)], prompt_tokens=10, cached_prompt_tokens=0)]
    summary = summarize(chat)
    assert "cache_use" not in summary["breakdowns"] and "token_cost" not in summary
    assert "usd" not in summarize(anthropic_run())["breakdowns"]["cache_use"]["writes"]


@pytest.mark.parametrize("args", [(-1.0, 1.0), (1.0, float("nan")), (1.0, 1.0, {"write": 1.25}),
                                  (1.0, 1.0, {"write": 1.25, "read": -0.1})])
def test_bad_prices_are_refused(args):
    with pytest.raises(ValueError):
        TokenPrices(*args)
