"""The built-in OpenAI-compatible server (``tokenpace serve``): real HTTP and SSE, simulated timing,
so a benchmark runs on a machine with no GPU and no model.

In-process: ``async with running_server(config) as base_url: ...``. Separate process (what the
benchmark runner should use, so the server's CPU work does not disturb the client's timestamps):
``with start_server_process(config) as server: server.url``.
"""

from .args import add_server_arguments, config_from_args, config_to_argv
from .builtin import SERVER_STATE, create_app
from .config import BuiltinServerConfig
from .engine import Engine, Sequence
from .process import ServerProcess, start_server_process
from .sendlog import read_send_log
from .serve import running_server, serve_forever, serve_until_stopped
from .timing import ParametricTiming, TimingModel
from .tokens import count_chat_prompt_tokens, count_completion_prompt_tokens, count_text_tokens

__all__ = [
    "SERVER_STATE",
    "BuiltinServerConfig",
    "Engine",
    "ParametricTiming",
    "Sequence",
    "ServerProcess",
    "TimingModel",
    "add_server_arguments",
    "config_from_args",
    "config_to_argv",
    "count_chat_prompt_tokens",
    "count_completion_prompt_tokens",
    "count_text_tokens",
    "create_app",
    "read_send_log",
    "running_server",
    "serve_forever",
    "serve_until_stopped",
    "start_server_process",
]
