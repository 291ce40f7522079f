"""The fault-injecting server: the --faults grammar, which requests get which fault, and what a
faulted response looks like on the wire, in the send log and in /metrics."""

from __future__ import annotations

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families
from servers_helpers import chat_body, fast_config, run

from tokenpace.servers import config_from_args, config_to_argv, read_send_log, running_server
from tokenpace.servers.__main__ import build_parser
from tokenpace.servers.__main__ import main as server_main
from tokenpace.servers.faults import KINDS, FaultInjector, FaultRule, parse_faults

# -- the grammar ------------------------------------------------------------------------------


def test_valid_specs():
    assert parse_faults("reset-mid=0.05,stall-first=0.02:3s,http-429=0.1") == (
        FaultRule("reset-mid", fraction=0.05),
        FaultRule("stall-first", fraction=0.02, param=3.0),
        FaultRule("http-429", fraction=0.1),
    )
    assert parse_faults(" http-503=every:10:500ms , malformed-sse=at:3;7;9:2 ") == (
        FaultRule("http-503", every=10, param=0.5),
        FaultRule("malformed-sse", at=frozenset({3, 7, 9}), param=2),
    )
    assert parse_faults("stall=1:2")[0] == FaultRule("stall-first", fraction=1.0, param=2.0)  # the alias
    assert parse_faults("http-429=.5:0")[0].param == 0.0  # Retry-After: 0 is allowed
    assert {rule.kind for rule in parse_faults(",".join(f"{k}=every:3" for k in KINDS))} == set(KINDS)


@pytest.mark.parametrize("spec, needle", [
    ("", "empty spec"),
    ("no-done=0.1,", "an empty entry"),
    ("reset-mid", "needs =WHEN"),
    ("resett-mid=0.1", "unknown fault 'resett-mid'"),
    ("reset-mid=0", "fraction in (0, 1]"),
    ("reset-mid=1.5", "fraction in (0, 1]"),
    ("reset-mid=nan", "fraction in (0, 1]"),
    ("reset-mid=1_0", "fraction in (0, 1]"),
    ("reset-mid=every:0", "request numbers >= 1"),
    ("reset-mid=every:x", "request numbers >= 1"),
    ("reset-mid=at:3;;7", "request numbers >= 1"),
    ("reset-mid=at", "expected KIND=WHEN[:PARAM]"),
    ("reset-mid=0.1:2:3", "expected KIND=WHEN[:PARAM]"),
    ("no-done=0.1:3", "no-done takes no parameter"),
    ("stall-first=0.1:3x", "stall-first needs seconds > 0"),
    ("stall-first=0.1:0s", "stall-first needs seconds > 0"),
    ("endless=0.1:0", "endless needs seconds > 0"),
    ("slow-headers=0.1:1e9", "slow-headers needs seconds"),
    ("reset-mid=0.1:1.5", "whole number of tokens"),
    ("http-429=0.6,http-500=0.6", "add up to 1.2; at most 1"),
])  # fmt: skip
def test_invalid_specs_say_what_is_wrong_on_one_line(spec, needle):
    with pytest.raises(ValueError) as info:
        parse_faults(spec)
    message = str(info.value)
    assert needle in message and message.startswith("--faults: ") and "\n" not in message


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_is_a_spec_or_a_value_error(text):
    try:
        rules = parse_faults(text)
    except ValueError as e:
        assert "\n" not in str(e)
    else:
        assert rules and all(rule.kind in KINDS for rule in rules)


_WHEN = st.one_of(
    st.integers(1, 1000).map(lambda n: f"{n / 1000:g}"),
    st.integers(1, 50).map(lambda n: f"every:{n}"),
    st.lists(st.integers(1, 99), min_size=1, max_size=4).map(lambda ns: "at:" + ";".join(map(str, ns))),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(sorted(KINDS)), _WHEN), min_size=1, max_size=5))
def test_generated_specs_parse_to_their_entries(entries):
    spec = ",".join(f"{kind}={when}" for kind, when in entries)
    fractions = sum(float(when) for _, when in entries if when[0].isdigit())
    if fractions > 1 + 1e-9:
        with pytest.raises(ValueError, match="add up to"):
            parse_faults(spec)
        return
    rules = parse_faults(spec)
    assert [rule.kind for rule in rules] == [kind for kind, _ in entries]
    for rule, (_, when) in zip(rules, entries):
        if when.startswith("every:"):
            assert rule.every == int(when[6:])
        elif when.startswith("at:"):
            assert rule.at == {int(n) for n in when[3:].split(";")}
        else:
            assert rule.fraction == float(when)


# -- which requests get a fault ---------------------------------------------------------------


def picks(spec: str, seed: int = 0, n: int = 2000, stream: bool = True) -> list[str | None]:
    injector = FaultInjector(parse_faults(spec), seed)
    return [getattr(injector.pick(number, stream=stream), "kind", None) for number in range(1, n + 1)]


def test_schedules_select_exact_request_numbers():
    assert picks("no-done=every:3", n=10) == [None, None, "no-done"] * 3 + [None]
    assert picks("no-done=at:2;5", n=6) == [None, "no-done", None, None, "no-done", None]


def test_fractions_are_seeded_deterministic_and_about_right():
    first = picks("reset-mid=0.1")
    assert first == picks("reset-mid=0.1") and first != picks("reset-mid=0.1", seed=1)
    assert 150 <= first.count("reset-mid") <= 250
    # Request n's draw depends on the seed and n only, not on which kinds are listed.
    assert [k is not None for k in picks("http-500=0.1")] == [k is not None for k in first]


def test_fraction_entries_take_disjoint_slices_and_the_first_matching_entry_wins():
    both = picks("http-429=0.5,http-503=0.5", n=400)
    assert None not in both and 150 <= both.count("http-429") <= 250
    assert picks("no-done=every:2,no-usage=every:1", n=4) == ["no-usage", "no-done", "no-usage", "no-done"]


def test_stream_only_faults_skip_non_streamed_requests():
    assert picks("reset-mid=every:1,http-500=every:2", n=4, stream=False) == [None, "http-500", None, "http-500"]
    assert picks("slow-headers=every:1", n=2, stream=False) == ["slow-headers"] * 2


# -- the server --------------------------------------------------------------------------------


def test_faults_flag_round_trips_and_bad_specs_exit_2(capsys):
    parser = build_parser()
    config = config_from_args(parser.parse_args(["--faults", "http-429=at:1;3:2s,reset-mid=0.5"]))
    assert config.faults == "http-429=at:1;3:2s,reset-mid=0.5"
    assert config_from_args(parser.parse_args(config_to_argv(config))) == config
    with pytest.raises(SystemExit) as info:
        server_main(["--faults", "reset-mid=2"])
    assert info.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--faults: WHEN must be a fraction in (0, 1]" in err


def test_faulted_requests_are_logged_counted_and_answered_as_specified(send_log_path):
    config = fast_config(send_log_path=str(send_log_path), faults="http-429=at:1:2.5,wrong-content-type=at:2")

    async def scenario():
        async with running_server(config) as url, aiohttp.ClientSession() as session:
            async with session.post(f"{url}/chat/completions", json=chat_body(stream=True)) as r:
                first = (r.status, r.headers.get("Retry-After"), await r.json())
            async with session.post(f"{url}/chat/completions", json=chat_body(stream=True)) as r:
                second = (r.status, r.content_type, await r.read())
            async with session.post(f"{url}/chat/completions", json=chat_body(stream=True)) as r:
                third = (r.status, r.content_type)
            async with session.get(url.removesuffix("/v1") + "/metrics") as r:
                metrics = await r.text()
        return first, second, third, metrics

    first, second, third, metrics = run(scenario())
    assert first[:2] == (429, "2.5") and first[2]["error"]["type"] == "RateLimitError"
    assert second[:2] == (200, "text/plain") and b"data: [DONE]" in second[2]
    assert third == (200, "text/event-stream")
    counted = {s.labels["kind"]: s.value for f in text_string_to_metric_families(metrics)
               if f.name == "tokenpace_faults_injected" for s in f.samples}  # fmt: skip
    assert counted == {"http-429": 1, "wrong-content-type": 1}
    faults = [line for line in read_send_log(send_log_path) if line["kind"] == "fault"]
    assert [(f["fault"], f["param"], f["request_number"]) for f in faults] == [
        ("http-429", 2.5, 1), ("wrong-content-type", None, 2)]  # fmt: skip


def test_empty_choices_and_no_usage_change_what_is_streamed(send_log_path):
    config = fast_config(send_log_path=str(send_log_path), faults="empty-choices=at:1,no-usage=at:2,no-done=at:3")
    body = chat_body(max_tokens=3, stream=True, stream_options={"include_usage": True, "continuous_usage_stats": True})

    async def scenario():
        streams = []
        async with running_server(config) as url, aiohttp.ClientSession() as session:
            for _ in range(3):
                async with session.post(f"{url}/chat/completions", json=body) as r:
                    streams.append(await r.read())
        return streams

    empty, no_usage, no_done = run(scenario())
    assert b'"choices":[]}' in empty and b"usage" not in empty and b'"content":"' not in empty.split(b"\n\n", 1)[1]
    assert b"usage" not in no_usage and no_usage.endswith(b"data: [DONE]\n\n")
    assert b"[DONE]" not in no_done and b'"usage"' in no_done
    kinds = [line["kind"] for line in read_send_log(send_log_path) if line["request_id"]]
    assert kinds.count("empty") == 3
