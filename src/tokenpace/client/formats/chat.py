"""OpenAI chat completions and legacy completions (vLLM, SGLang, llama.cpp, TGI, OpenAI)."""

from __future__ import annotations

from typing import Any

from ..chunks import classify_chunk, classify_response


class ChatFormat:
    name = "chat"
    path = "/chat/completions"

    def auth_headers(self, api_key: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {api_key}"}

    def request_body(self, model: str, prompt: str | list[dict[str, Any]], max_tokens: int | None, *,
                     stream: bool, ignore_eos: bool, cache_breakpoint: str = "none") -> dict[str, Any]:
        body: dict[str, Any] = {"model": model}
        self._prompt(body, prompt)
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
            if ignore_eos:  # only with a cap: ignoring EOS without one runs to the context limit
                body["ignore_eos"] = True
                body["min_tokens"] = max_tokens
        body["stream"] = stream
        if stream:
            body["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        return body

    def _prompt(self, body: dict[str, Any], prompt: str | list[dict[str, Any]]) -> None:
        body["messages"] = prompt if isinstance(prompt, list) else [{"role": "user", "content": prompt}]

    # The classifiers themselves, not wrappers: one call less per chunk on the hot path.
    classify_event = staticmethod(classify_chunk)
    classify_whole = staticmethod(classify_response)


class CompletionsFormat(ChatFormat):
    name = "completions"
    path = "/completions"

    def _prompt(self, body: dict[str, Any], prompt: str | list[dict[str, Any]]) -> None:
        body["prompt"] = prompt
