"""Each diagnosis rule on constructed series: the rule fires on the shape it names and stays
silent on the others."""

from __future__ import annotations

from tokenpace.observe.diagnose import diagnose
from tokenpace.observe.series import peaks, series, totals
from tokenpace.observe.snapshot import Snapshot

S = 1_000_000_000


def run(**columns: list[float | None]) -> tuple[dict, dict]:
    """Scrapes 1 s apart from t = 0 with the given values; (peaks, totals) over all of them."""
    n = len(next(iter(columns.values())))
    snaps = [Snapshot(i * S, {k: v[i] for k, v in columns.items() if v[i] is not None}) for i in range(n)]
    s = series(snaps, 0)
    return peaks(s, until_s=None), totals(s)


def rules(findings: list[dict]) -> list[str]:
    return [f["rule"] for f in findings]


def test_queue_with_low_kv_is_compute_bound():
    p, t = run(waiting=[0, 5, 9, 12, 8, 0], running=[4] * 6, kv_usage=[0.1, 0.2, 0.25, 0.3, 0.2, 0.1],
               preemptions=[0] * 6)
    found = diagnose(p, t)
    assert rules(found) == ["compute_bound"]
    assert "peak 12 waiting" in found[0]["message"] and "KV usage stayed low (peak 30%)" in found[0]["message"]


def test_full_kv_with_preemptions_is_memory_bound():
    p, t = run(waiting=[0, 3, 8, 9, 9, 2], kv_usage=[0.5, 0.9, 0.99, 1.0, 0.98, 0.7],
               preemptions=[10, 10, 14, 20, 31, 31])
    found = diagnose(p, t)
    assert rules(found) == ["memory_bound"]
    assert "KV cache full (peak 100%)" in found[0]["message"] and "21 preemptions" in found[0]["message"]


def test_preemptions_alone_are_memory_pressure_even_when_scrapes_miss_the_peak():
    p, t = run(waiting=[0] * 4, kv_usage=[0.5, 0.6, 0.7, 0.6], preemptions=[0, 0, 3, 3])
    assert rules(diagnose(p, t)) == ["memory_bound"]


def test_queue_without_kv_metrics_says_it_cannot_tell():
    p, t = run(waiting=[0, 2, 3, 4, 1], running=[1, 1, 1, 1, 1])  # llama.cpp: no KV gauge
    assert rules(diagnose(p, t)) == ["queue_built_up"]


def test_a_blip_is_brief_queueing_and_nothing_is_no_queueing():
    p, t = run(waiting=[0, 0, 0, 0, 0, 0, 0, 0, 0, 1], kv_usage=[0.2] * 10)
    assert rules(diagnose(p, t)) == ["brief_queueing"]
    p, t = run(waiting=[0] * 5, running=[3, 7, 8, 6, 2], kv_usage=[0.2] * 5)
    found = diagnose(p, t)
    assert rules(found) == ["no_queueing"] and "peak 8 running" in found[0]["message"]


def test_one_request_waiting_for_admission_at_concurrency_1_is_not_queueing():
    # Concurrency 1, 100 scrapes during the load: once, the scrape fell between the request's
    # arrival and the step that admitted it (the built-in server did this in 1% of the scrapes).
    waiting = [0.0] * 100
    waiting[37] = 1.0
    running = [1.0] * 100
    running[37] = 0.0
    p, t = run(waiting=waiting, running=running, kv_usage=[0.01] * 100, preemptions=[0] * 100)
    found = diagnose(p, t, points_in_load=100)
    assert rules(found) == ["no_queueing"]
    assert found[0]["message"].startswith("no queueing: the engine kept up (peak 1 running")
    assert "admission to the next step in 1% of the scrapes" in found[0]["message"]
    # A burst of arrivals seen once is admission too; seen in 5 of 100 scrapes, it is a queue.
    waiting[60] = 6.0
    assert rules(diagnose(*run(waiting=waiting, kv_usage=[0.01] * 100))) == ["no_queueing"]
    for i in (10, 20, 80):
        waiting[i] = 1.0
    found = diagnose(*run(waiting=waiting, kv_usage=[0.01] * 100))
    assert rules(found) == ["brief_queueing"]
    assert "peak 6 waiting, in 5% of the scrapes" in found[0]["message"]


def test_low_prefix_hit_rate_only_when_prompts_are_known_to_share_prefixes():
    cols = dict(waiting=[0] * 3, prefix_cache_queries=[0, 5000, 10000], prefix_cache_hits=[0, 200, 500])
    p, t = run(**cols)
    assert t["prefix_cache_hit_rate"] == 0.05
    assert "low_prefix_hit_rate" in rules(diagnose(p, t, prefix_shared=True))
    assert "low_prefix_hit_rate" not in rules(diagnose(p, t, prefix_shared=None))
    p, t = run(waiting=[0] * 3, prefix_cache_queries=[0, 5000, 10000], prefix_cache_hits=[0, 4000, 8000])
    assert "low_prefix_hit_rate" not in rules(diagnose(p, t, prefix_shared=True))
    p, t = run(waiting=[0] * 3, prefix_cache_hit_rate=[0.1, 0.1, 0.1])  # SGLang gives only a rate
    assert "low_prefix_hit_rate" in rules(diagnose(p, t, prefix_shared=True))


def test_llama_cpp_prompt_tokens_leave_out_cache_hits():
    s = series([Snapshot(0, {"prompt_tokens": 100.0, "prefix_cache_hits": 0.0}),
                Snapshot(S, {"prompt_tokens": 1100.0, "prefix_cache_hits": 3000.0})], 0)
    assert totals(s, prompt_excludes_cached=True)["prefix_cache_hit_rate"] == 0.75  # 3000 of 4000
    assert "prefix_cache_hit_rate" not in totals(s)  # elsewhere, hits without queries say nothing


def test_low_draft_acceptance():
    p, t = run(waiting=[0] * 3, spec_draft_tokens=[0, 400, 800], spec_accepted_tokens=[0, 120, 240],
               spec_drafts=[0, 100, 200])
    assert t["spec_acceptance_rate"] == 0.3 and t["spec_mean_acceptance_length"] == 2.2
    assert "low_spec_acceptance" in rules(diagnose(p, t))
    p, t = run(waiting=[0] * 3, spec_draft_tokens=[0, 400, 800], spec_accepted_tokens=[0, 300, 600])
    assert "low_spec_acceptance" not in rules(diagnose(p, t))


def test_time_outside_the_engine():
    p, t = run(waiting=[0] * 3)
    far = {"engine": {"mean": 40.0}, "client": {"mean": 140.0}, "mean_diff_ms": 100.0}
    near = {"engine": {"mean": 400.0}, "client": {"mean": 460.0}, "mean_diff_ms": 60.0}  # 13%: not named
    assert "time_outside_engine" in rules(diagnose(p, t, ttft=far))
    assert "time_outside_engine" not in rules(diagnose(p, t, ttft=near))


def test_no_scrape_inside_the_load_says_so_instead_of_guessing():
    p, t = run(waiting=[0, 0])
    found = diagnose(p, t, prefix_shared=True, points_in_load=0)
    assert rules(found) == ["no_scrape_during_load"]
    assert rules(diagnose(p, t, points_in_load=2)) == ["no_queueing"]


def test_series_counters_start_at_zero_and_a_reset_ends_them():
    snaps = [Snapshot(i * S, {"preemptions": v, "waiting": 1.0}) for i, v in enumerate([5, 7, 9, 2, 4])]
    s = series(snaps, start_ns=S)
    assert s["t_s"] == [-1.0, 0.0, 1.0, 2.0, 3.0]
    assert s["preemptions"] == [0, 2, 4, None, None]
    assert totals(s)["preemptions"] == 4
    # Peaks cover the load only (t >= 0): the baseline before it does not count.
    assert peaks(s, until_s=1.0)["waiting"]["points"] == 2
