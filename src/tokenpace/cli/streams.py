"""Standard output (and error) that outlives its reader: `tokenpace bench | head -1` must not turn a finished
run into an internal error (or make rich exit 1). Once the reader has gone, what is left to print
goes nowhere and the command ends with its own exit code."""

from __future__ import annotations

import errno
import os
import sys
from typing import Any, TextIO


class ClosedPipeSafe:
    """Wraps a text stream; a write or flush that finds the pipe closed points the descriptor at
    /dev/null (so the interpreter's final flush is quiet too) and drops the rest."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self.closed_pipe = False

    def write(self, text: str) -> int:
        if not self.closed_pipe:
            try:
                return self._stream.write(text)
            except OSError as exc:
                self._on_error(exc)
        return len(text)

    def flush(self) -> None:
        if not self.closed_pipe:
            try:
                self._stream.flush()
            except OSError as exc:
                self._on_error(exc)

    def _on_error(self, exc: OSError) -> None:
        if not isinstance(exc, BrokenPipeError) and exc.errno != errno.EPIPE:
            raise exc
        self.closed_pipe = True
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):  # no descriptor behind the stream (tests capture it)
            pass

    def __getattr__(self, name: str) -> Any:  # isatty, fileno, encoding...: the real stream's
        return getattr(self._stream, name)


def guard_stdout() -> None:
    """Standard output and error both (`2>&1 | head -1` closes the pipe under the error line too)."""
    if not isinstance(sys.stdout, ClosedPipeSafe) and sys.stdout is not None:
        sys.stdout = ClosedPipeSafe(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, ClosedPipeSafe) and sys.stderr is not None:
        sys.stderr = ClosedPipeSafe(sys.stderr)  # type: ignore[assignment]


_PIPE_WIDTH = 400  # wide enough for any table we print; lines themselves are not wrapped


def stdout_console() -> Any:
    """The console for a command's output. In a terminal (or with COLUMNS set) rich fits it to the
    width; into a pipe or a file it would wrap at 80 columns, cutting phrases in the middle for a
    log or a grep: there lines are not wrapped and tables take the width they need."""
    from rich.console import Console

    if sys.stdout.isatty() or os.environ.get("COLUMNS"):
        return Console()
    return Console(width=_PIPE_WIDTH, soft_wrap=True)
