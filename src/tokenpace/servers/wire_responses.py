"""The bytes of the OpenAI Responses API (``POST /v1/responses``), as OpenAI and vLLM stream them.

A stream: ``response.created`` and ``response.in_progress`` as soon as the request is accepted
(before queueing and prefill, like chat's role chunk: a client that stamps TTFT on them is visibly
wrong); ``response.output_item.added`` and ``response.content_part.added`` with the first token;
one ``response.output_text.delta`` per token chunk; then ``response.output_text.done``,
``response.content_part.done``, ``response.output_item.done`` and ``response.incomplete`` (the
server always stops at ``max_output_tokens``: ``incomplete_details.reason: "max_output_tokens"``)
with usage: ``input_tokens`` (cached included), ``input_tokens_details.cached_tokens``,
``output_tokens``, ``output_tokens_details.reasoning_tokens`` (0).
"""

from __future__ import annotations

from typing import Any

import orjson

from .tokens import output_text
from .wire import error_body as openai_error_body

error_body = openai_error_body  # the Responses API answers errors in OpenAI's body


def _event(name: bytes, obj: dict[str, Any]) -> bytes:
    return b"event: %b\ndata: %b\n\n" % (name, orjson.dumps(obj))


class ResponsesFramer:
    def __init__(self, api: str, response_id: str, model: str, created: int,
                 cache_breakpoint_tokens: int | None = None) -> None:
        self.api, self.response_id, self.model, self.created = api, response_id, model, created
        self.item_id = "msg_" + response_id.removeprefix("resp_")
        self.sequence = 0  # every event's sequence_number
        self.delta_head = (b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
                           b'"item_id":%b,"output_index":0,"content_index":0,"delta":' % orjson.dumps(self.item_id))

    def _next(self) -> int:
        self.sequence += 1
        return self.sequence - 1

    def _response(self, status: str, seq: Any, usage: bool) -> dict[str, Any]:
        response: dict[str, Any] = {"id": self.response_id, "object": "response", "created_at": self.created,
                                    "model": self.model, "status": status, "output": [], "usage": None}
        if status == "incomplete":
            response["incomplete_details"] = {"reason": "max_output_tokens"}
            response["output"] = [self._item(seq, "incomplete")]
        if usage:
            response["usage"] = {
                "input_tokens": seq.prompt_tokens, "input_tokens_details": {"cached_tokens": seq.cached_tokens},
                "output_tokens": seq.generated_tokens, "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": seq.prompt_tokens + seq.generated_tokens}
        return response

    def _item(self, seq: Any, status: str) -> dict[str, Any]:
        text = output_text(0, seq.generated_tokens) if status != "in_progress" else ""
        content = [{"type": "output_text", "text": text, "annotations": []}] if status != "in_progress" else []
        return {"id": self.item_id, "type": "message", "role": "assistant", "status": status, "content": content}

    def opening(self, seq: Any, continuous_usage: bool) -> list[bytes]:
        return [b"".join((
            _event(b"response.created", {"type": "response.created", "sequence_number": self._next(),
                                          "response": self._response("in_progress", seq, False)}),
            _event(b"response.in_progress", {"type": "response.in_progress", "sequence_number": self._next(),
                                              "response": self._response("in_progress", seq, False)})))]

    def first(self, seq: Any) -> bytes:
        return b"".join((
            _event(b"response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "sequence_number": self._next(),
                                                    "item": self._item(seq, "in_progress")}),
            _event(b"response.content_part.added", {"type": "response.content_part.added", "item_id": self.item_id,
                                                     "output_index": 0, "content_index": 0,
                                                     "sequence_number": self._next(),
                                                     "part": {"type": "output_text", "text": "", "annotations": []}})))

    def token(self, text_json: bytes, finished: bool, seq: Any, continuous_usage: bool, extra: bytes = b"") -> bytes:
        return b'%b%b,"sequence_number":%d}\n\n' % (self.delta_head, text_json, self._next())

    def empty(self) -> bytes:
        """An event that carries nothing (the ``empty-choices`` fault)."""
        return _event(b"response.in_progress", {"type": "response.in_progress", "sequence_number": self._next(),
                                                 "response": {"id": self.response_id, "status": "in_progress"}})

    def closing(self, seq: Any, include_usage: bool) -> list[tuple[bytes, str]]:
        text = output_text(0, seq.generated_tokens)
        done = b"".join((
            _event(b"response.output_text.done", {"type": "response.output_text.done", "item_id": self.item_id,
                                                   "output_index": 0, "content_index": 0, "text": text,
                                                   "sequence_number": self._next()}),
            _event(b"response.content_part.done", {"type": "response.content_part.done", "item_id": self.item_id,
                                                    "output_index": 0, "content_index": 0,
                                                    "sequence_number": self._next(),
                                                    "part": {"type": "output_text", "text": text,
                                                             "annotations": []}}),
            _event(b"response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                   "sequence_number": self._next(),
                                                   "item": self._item(seq, "incomplete")})))
        end = _event(b"response.incomplete", {"type": "response.incomplete", "sequence_number": self._next(),
                                               "response": self._response("incomplete", seq, include_usage)})
        return [(done, "control"), (end, "done")]

    def error_event(self, error_type: str, message: str) -> bytes:
        return _event(b"error", {"type": "error", "code": error_type, "message": message, "param": None,
                                 "sequence_number": self._next()})

    def whole(self, seq: Any, extra: bytes = b"") -> bytes:
        return orjson.dumps(self._response("incomplete", seq, True))
