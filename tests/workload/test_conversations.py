"""Multi-turn conversations: history grows, history comes first, think times follow their spec."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.workload import build_conversations, parse_conversations, parse_length
from tokenpace.workload.conversations import parse_think_time


def sessions(text="sessions=3,turns=4,think-time=exp:2s", **kw):
    return build_conversations(parse_conversations(text), parse_length("uniform:min=10,max=20"),
                               parse_length("uniform:min=5,max=9"), seed=1, **kw)


def test_history_grows_and_stays_first():
    conv = sessions()[0]
    previous = None
    for k in range(1, 5):
        turn = conv.next_turn()
        assert turn.turn == k and len(turn.messages) == 2 * k - 1
        assert [m["role"] for m in turn.messages] == ["user", "assistant"] * (k - 1) + ["user"]
        if previous is not None:
            assert turn.messages[: len(previous.messages)] == previous.messages  # cache-friendly
            # the history holds the previous reply at its planned length, then the new message
            assert len(turn.messages[-2]["content"].split()) == previous.output_tokens
            assert turn.input_tokens == previous.input_tokens + previous.output_tokens + turn.new_input_tokens
        previous = turn
    assert conv.done
    with pytest.raises(IndexError):
        conv.next_turn()


def test_the_received_reply_goes_into_the_history():
    conv = sessions()[1]
    conv.next_turn()
    turn = conv.next_turn("the actual reply text")
    assert turn.messages[1] == {"role": "assistant", "content": "the actual reply text"}


def test_think_times_and_starts():
    convs = sessions("sessions=200,turns=3,think-time=exp:2s")
    thinks = [c.think_times_s for c in convs]
    assert all(t[0] == 0.0 for t in thinks)
    later = np.array([x for t in thinks for x in t[1:]])
    assert later.mean() == pytest.approx(2.0, rel=0.1)
    assert all(c.start_offset_s == 0.0 for c in convs)  # closed loop: every session at once
    open_loop = sessions("sessions=50,turns=2", rate=10.0)
    starts = [c.start_offset_s for c in open_loop]
    assert starts == sorted(starts) and starts[0] == 0.0 and starts[-1] == pytest.approx(4.9, rel=0.35)


def test_deterministic_for_a_seed():
    a = [c.next_turn().messages for c in sessions()]
    b = [c.next_turn().messages for c in sessions()]
    assert a == b


@pytest.mark.parametrize("text, kind, mean", [("3s", "fixed", 3.0), ("exp:250ms", "exp", 0.25),
                                              ("uniform:1s..5s", "uniform", 3.0)])
def test_think_time_syntax(text, kind, mean):
    t = parse_think_time(text)
    assert (t.kind, t.mean_s) == (kind, mean)


@pytest.mark.parametrize("text", ["sessions=2", "turns=2", "sessions=2,turns=3,think-time=poisson:3s",
                                  "sessions=2,turns=3,think-time=uniform:5s..1s", "sessions=x,turns=1"])
def test_conversation_spec_errors(text):
    with pytest.raises(UsageError, match="--conversations"):
        parse_conversations(text)


def test_conversations_from_the_workload_flags():
    from tokenpace.config import BenchConfig
    from tokenpace.workload import conversations_for, plan_requests, workload_from_config

    spec = workload_from_config(BenchConfig(conversations="sessions=2,turns=2", reasoning_effort="low",
                                            api="completions", input_tokens="6"))
    convs = conversations_for(spec)
    turn = convs[0].next_turn()
    assert turn.extra_body == {"reasoning_effort": "low"}
    assert turn.prompt("completions").startswith("user: ") and turn.prompt("chat") == turn.messages
    with pytest.raises(UsageError, match="conversations_for"):
        next(plan_requests(spec))
    with pytest.raises(UsageError, match="--tools with --conversations"):
        workload_from_config(BenchConfig(conversations="sessions=2,turns=2", tools=1))
