"""The OpenAI-compatible load client: an SSE parser, chunk classification and the HTTP client."""

from .openai import OpenAIClient
from .sse import SSEEvent, SSEParser

__all__ = ["OpenAIClient", "SSEEvent", "SSEParser"]
