"""Each API gets the prompt shape it takes: messages for chat, Responses and Anthropic (which the
client takes apart), one text for completions; reasoning effort in each API's own field."""

from __future__ import annotations

import pytest

from tokenpace.config import BenchConfig
from tokenpace.errors import UsageError
from tokenpace.workload import conversations_for, plan_requests, workload_from_config


@pytest.mark.parametrize("api, messages", [("chat", True), ("responses", True), ("anthropic", True),
                                           ("completions", False)])
def test_shared_prefix_and_conversation_prompts_keep_their_messages(api, messages):
    spec = workload_from_config(BenchConfig(api=api, shared_prefix="groups=1,prefix-tokens=8,per-group=2",
                                            input_tokens="4"))
    prompt = next(plan_requests(spec)).prompt
    assert isinstance(prompt, list) == messages
    if messages:
        assert [m["role"] for m in prompt] == ["system", "user"]
    spec = workload_from_config(BenchConfig(api=api, conversations="sessions=1,turns=2", input_tokens="4"))
    turn = conversations_for(spec)[0].next_turn()
    assert isinstance(turn.prompt(api), list) == messages


def test_reasoning_effort_in_each_apis_field():
    def body(api):
        return next(plan_requests(workload_from_config(BenchConfig(api=api, reasoning_effort="high")))).extra_body

    assert body("chat") == {"reasoning_effort": "high"}
    assert body("responses") == {"reasoning": {"effort": "high"}}
    with pytest.raises(UsageError, match="extended thinking"):
        workload_from_config(BenchConfig(api="anthropic", reasoning_effort="high"))
    with pytest.raises(UsageError, match="--tools needs --api chat"):
        workload_from_config(BenchConfig(api="responses", tools=2))
