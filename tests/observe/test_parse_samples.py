"""Parsing /metrics as each engine writes it: detection, the name variants across versions,
label sets combined, counters with and without `_total`, histograms. The samples in data/ were
written from the names in REFERENCE section 3 in each engine's exposition format (TYPE/HELP lines,
labels, `_created` samples, process and Python noise)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tokenpace.observe.families import ENGINE_FAMILIES, detect_engine
from tokenpace.observe.histograms import describe_ms
from tokenpace.observe.snapshot import Selector, all_sample_names, parse, select_lines

DATA = Path(__file__).parent / "data"


def sample(name: str) -> str:
    return (DATA / name).read_text()


@pytest.mark.parametrize("file, engine", [
    ("vllm_v1.txt", "vllm"), ("vllm_v0.txt", "vllm"), ("vllm_v1_early.txt", "vllm"),
    ("sglang.txt", "sglang"), ("tgi.txt", "tgi"), ("llamacpp.txt", "llamacpp"),
    ("not_an_engine.txt", None),
])
def test_the_engine_is_detected_from_its_families(file, engine):
    assert detect_engine(all_sample_names(sample(file))) == engine


def test_vllm_v1_label_sets_are_combined():
    snap = parse(sample("vllm_v1.txt"), "vllm", 0, histograms=True)
    v = snap.values
    # Two data-parallel engines: counts add up, KV usage is the fuller one's.
    assert v["running"] == 22 and v["waiting"] == 4
    assert v["kv_usage"] == pytest.approx(0.57)
    assert v["prefix_cache_queries"] == 51200 and v["prefix_cache_hits"] == 20480
    assert v["preemptions"] == 2
    assert v["spec_draft_tokens"] == 3000 and v["spec_accepted_tokens"] == 2100
    assert "prefix_cache_hit_rate" not in v  # the V0 gauge is absent
    ttft = snap.histograms["ttft"]
    assert ttft.count == 100 and ttft.buckets[-1] == (float("inf"), 100)
    assert set(snap.histograms) == {"ttft", "itl", "tpot", "e2e", "queue_time"}


def test_vllm_older_names_are_found():
    v0 = parse(sample("vllm_v0.txt"), "vllm", 0, histograms=True)
    assert v0.values["kv_usage"] == pytest.approx(0.981)  # vllm:gpu_cache_usage_perc
    assert v0.values["prefix_cache_hit_rate"] == pytest.approx(0.08)
    assert v0.values["spec_acceptance_rate"] == pytest.approx(0.41)
    assert v0.values["preemptions"] == 17
    assert v0.histograms["itl"].count == 2000  # vllm:time_per_output_token_seconds
    early = parse(sample("vllm_v1_early.txt"), "vllm", 0, histograms=False)
    assert early.values["kv_usage"] == pytest.approx(0.12)
    assert early.values["prefix_cache_queries"] == 4096 and early.values["prefix_cache_hits"] == 3072
    assert early.histograms == {}  # not asked for


def test_sglang_tgi_llamacpp():
    sg = parse(sample("sglang.txt"), "sglang", 0, histograms=True)
    assert (sg.values["running"], sg.values["waiting"]) == (24, 5)
    assert sg.values["kv_usage"] == pytest.approx(0.93)
    assert sg.values["prefix_cache_hit_rate"] == pytest.approx(0.12)
    assert sg.values["spec_accept_length"] == pytest.approx(2.4)
    assert sg.values["prompt_tokens"] == 401234
    assert set(sg.histograms) == {"ttft", "itl", "e2e"}
    tgi = parse(sample("tgi.txt"), "tgi", 0, histograms=True)
    assert (tgi.values["running"], tgi.values["waiting"]) == (32, 6)
    assert "kv_usage" not in tgi.values and "ttft" not in tgi.histograms  # TGI has neither
    assert describe_ms(tgi.histograms["queue_time"])["count"] == 118
    lc = parse(sample("llamacpp.txt"), "llamacpp", 0, histograms=True)
    assert (lc.values["running"], lc.values["waiting"]) == (2, 1)
    assert lc.values["prompt_tokens"] == 1024 and lc.values["generation_tokens"] == 512
    assert lc.values["kv_usage"] == pytest.approx(0.15)
    assert lc.values["prefix_cache_hits"] == 3072 and lc.values["spec_draft_tokens"] == 0


def test_histogram_from_the_sample_reads_like_histogram_quantile():
    snap = parse(sample("vllm_v0.txt"), "vllm", 0, histograms=True)
    stats = describe_ms(snap.histograms["ttft"])
    # 100 TTFTs evenly from 30 to 228 ms: exact mean; the median in the 100-250 ms bucket.
    assert stats["count"] == 100
    assert stats["mean"] == pytest.approx(129.0)
    assert stats["p50_bucket_ms"] == [100.0, 250.0]
    assert 100.0 <= stats["p50"] <= 250.0


@pytest.mark.parametrize("file, engine", [("vllm_v1.txt", "vllm"), ("sglang.txt", "sglang"),
                                          ("tgi.txt", "tgi"), ("llamacpp.txt", "llamacpp")])
def test_selecting_lines_changes_nothing_but_the_cost(file, engine):
    text = sample(file)
    full = parse(text, engine, 0, histograms=True)
    sel = Selector(engine)
    assert sel.parse(text, 0, histograms=True) == full
    scalars = sel.parse(text, 0, histograms=False)
    assert scalars.values == full.values and scalars.histograms == {}
    assert len(select_lines(text, sel.scalars)) < len(text) / 2 or engine == "llamacpp"


def test_every_table_names_only_known_quantities_and_prefixes():
    prefixes = {"vllm": "vllm:", "sglang": "sglang:", "tgi": "tgi_", "llamacpp": "llamacpp:"}
    for engine, table in ENGINE_FAMILIES.items():
        for names in table.values():
            assert names and all(n.startswith(prefixes[engine]) for n in names)


def test_not_prometheus_text_is_a_value_error():
    with pytest.raises(ValueError):
        all_sample_names("<html><body>Not Found</body></html>\n")
