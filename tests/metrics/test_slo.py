import pytest

from tokenpace.errors import ExitCode, UsageError
from tokenpace.metrics import SLO, SLO_PRESETS, parse_slo, summarize

from .factory import record


def test_presets_follow_reference_section_2():
    assert SLO_PRESETS["chat"].limits_ms() == {"ttft": 500.0, "tpot": 50.0}
    assert SLO_PRESETS["code"].limits_ms() == {"ttft": 200.0, "tpot": 30.0}
    assert SLO_PRESETS["code-completion"] == SLO_PRESETS["code"]
    assert SLO_PRESETS["summarization"].limits_ms() == {"ttft": 3000.0, "e2e": 30000.0}
    assert SLO_PRESETS["classification"].limits_ms() == {"ttft": 100.0, "e2e": 200.0}
    assert SLO_PRESETS["batch"].limits_ms() == {}
    assert {slo.attainment for slo in SLO_PRESETS.values()} == {0.90}


@pytest.mark.parametrize("text, expected", [
    ("chat", SLO(ttft_ms=500.0, tpot_ms=50.0, name="chat")),
    ("Code-Completion", SLO(ttft_ms=200.0, tpot_ms=30.0, name="code")),
    ("ttft=300ms,tpot=40ms,e2e=10s,attainment=0.95",
     SLO(ttft_ms=300.0, tpot_ms=40.0, e2e_ms=10000.0, attainment=0.95,
         name="ttft=300ms,tpot=40ms,e2e=10s,attainment=0.95")),
    ("chat,ttft=300ms", SLO(ttft_ms=300.0, tpot_ms=50.0, name="chat,ttft=300ms")),
    (" chat , TTFT = 0.25S ", SLO(ttft_ms=250.0, tpot_ms=50.0, name="chat , ttft = 0.25s")),
    ("ttft=300", SLO(ttft_ms=300.0, name="ttft=300")),  # a bare number is ms
    ("e2e=1.5e3ms", SLO(e2e_ms=1500.0, name="e2e=1.5e3ms")),
    ("summarization,attainment=95%",
     SLO(ttft_ms=3000.0, e2e_ms=30000.0, attainment=0.95, name="summarization,attainment=95%")),
    ("chat,tpot=none", SLO(ttft_ms=500.0, name="chat,tpot=none")),
])
def test_parse_valid(text, expected):
    assert parse_slo(text) == expected


@pytest.mark.parametrize("text, named", [
    ("", "empty"),
    ("   ", "empty"),
    ("chatty", "'chatty'"),
    ("ttft=fast", "'fast'"),
    ("ttft=-5ms", "'-5ms'"),
    ("ttft=5m", "'5m'"),
    ("ttft=0", "'ttft=0'"),
    ("ttft=1e400s", "'ttft=1e400s'"),
    ("foo=3", "'foo'"),
    ("ttft=1s,ttft=2s", "'ttft'"),
    ("ttft=300ms,chat", "'chat'"),
    ("chat,,ttft=1s", "empty part"),
    ("attainment=1.5", "'attainment=1.5'"),
    ("attainment=0", "'attainment=0'"),
    ("attainment=abc", "'abc'"),
    ("attainment=nan", "'attainment=nan'"),
])
def test_parse_errors_name_the_bad_part(text, named):
    with pytest.raises(UsageError) as error:
        parse_slo(text)
    assert named in str(error.value)
    assert error.value.exit_code == ExitCode.USAGE


def test_unknown_preset_lists_the_known_ones():
    with pytest.raises(UsageError, match="chat, code, summarization"):
        parse_slo("interactive")


@pytest.mark.parametrize("kwargs", [{"ttft_ms": -1.0}, {"tpot_ms": 0.0}, {"attainment": 0.0},
                                    {"attainment": 1.01}, {"e2e_ms": float("inf")}])
def test_invalid_slo_values(kwargs):
    with pytest.raises(UsageError):
        SLO(**kwargs)


def chat_run():
    """9 ok requests and one error. TTFT 100 ms except one of 700 ms; TPOT 20 ms; one request
    produced a single token (TPOT undefined: vacuously met)."""
    records = []
    for i in range(7):
        s = 1000 * i
        records.append(record(sent=s, chunks=[(s + 100, 1), (s + 120, 1), (s + 140, 1)], index=i))
    records.append(record(sent=7000, chunks=[(7700, 1), (7720, 1), (7740, 1)], index=7))  # slow
    records.append(record(sent=8000, chunks=[(8100, 1)], index=8))  # one token
    records.append(record(sent=9000, chunks=[], done=9050, status="error", error_kind="http_500",
                          index=9))
    return records


def test_goodput_counts_and_verdict():
    summary = summarize(chat_run(), slo="chat")
    g = summary["goodput"]
    assert g["good_requests"] == 8  # 7 fast + the one-token request
    assert g["fraction"] == 0.8
    assert g["verdict"]["ttft"] == {"threshold_ms": 500.0, "value_ms": pytest.approx(220.0),
                                    "met": True}  # p90 of [100 x8, 700]
    assert g["verdict"]["tpot"] == {"threshold_ms": 50.0, "value_ms": pytest.approx(20.0),
                                    "met": True}
    assert g["verdict"]["met"] is False  # 0.8 < 0.9: the slow one and the error are misses
    assert summary["counts"]["errors_by_kind"] == {"http_500": 1}
    assert "e2e" not in g["verdict"]


def test_goodput_rates_count_good_requests_and_their_tokens():
    g = summarize(chat_run(), slo="chat")["goodput"]
    # Window 0..9050 ms. Good tokens: 7 x 3 + 1.
    assert g["output_tokens"] == 22
    assert g["output_tokens_s"] == pytest.approx(22 / 9.05)
    assert g["requests_s"] == pytest.approx(8 / 9.05)


def test_lower_attainment_meets():
    g = summarize(chat_run(), slo="chat,attainment=0.8")["goodput"]
    assert g["verdict"]["met"] is True


def test_timeouts_and_cancellations_are_misses():
    records = chat_run()[:7]
    records.append(record(sent=7000, chunks=[(7100, 1)], done=9000, status="timeout", index=7))
    records.append(record(sent=8000, chunks=[(8100, 1)], status="cancelled", index=8))
    g = summarize(records, slo="batch")["goodput"]
    assert g["good_requests"] == 7 and g["fraction"] == pytest.approx(7 / 9)


def test_batch_has_no_limits_but_still_needs_ok():
    g = summarize(chat_run(), slo="batch")["goodput"]
    assert g["good_requests"] == 9
    assert g["verdict"] == {"met": True}


def test_ok_without_any_token_misses_a_ttft_limit():
    empty = record(sent=0, chunks=[], done=50)
    assert SLO_PRESETS["batch"].is_good(empty)
    assert not SLO_PRESETS["chat"].is_good(empty)


def test_summary_good_mask_agrees_with_per_record_rule():
    records = chat_run()
    slo = parse_slo("ttft=150ms,tpot=20ms")
    expected = sum(slo.is_good(r) for r in records)
    assert summarize(records, slo=slo)["goodput"]["good_requests"] == expected == 8


def test_verdict_without_values_is_undecided():
    g = summarize([record(sent=0, chunks=[(50, 1)])], slo="chat")["goodput"]
    assert g["verdict"]["tpot"] == {"threshold_ms": 50.0, "value_ms": None, "met": None}
    assert g["verdict"]["met"] is True


@pytest.mark.parametrize("text", ["ttft=0.3", "tpot=0.04", "chat,e2e=0.5"])
def test_a_bare_number_below_one_needs_its_unit(text):
    with pytest.raises(UsageError, match=r"a bare number is milliseconds; below 1 give the unit \(0\.\d+s or 0\.\d+ms\)"):
        parse_slo(text)
    assert parse_slo(text + "s").limits_ms()  # with the unit it is fine
