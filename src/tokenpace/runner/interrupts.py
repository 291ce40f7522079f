"""SIGINT and SIGTERM over one benchmark run, from its first line until its result is on disk.

What a signal does depends on where the run is:

- before the load (built-in server start, preflight, planning): the run is cancelled; nothing was
  sent, so there is nothing to save (`RunInterrupted`);
- during the load: the first signal stops sending (requests in flight get the grace period), a
  second cancels them at once;
- after the load, while the summary is computed and written: the signal is remembered and the
  result is written whole first; the run then ends as interrupted.

Handlers are installed only in the main thread (elsewhere signals keep their previous meaning),
and the previous handlers are put back at the end.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Callable, Iterator
from typing import Any

from tokenpace.runner.loadgen import LoadGenerator

SIGNALS = (signal.SIGINT, signal.SIGTERM)


class Interrupts:
    def __init__(self) -> None:
        self.cancelled = False  # a signal came before the load: the run was cancelled
        self.after_load = False  # a signal came after the load, before the result was on disk
        self._phase = "before"
        self._loadgen: LoadGenerator | None = None
        self._on_stop: Callable[[str], None] | None = None
        self._on_cancel: Callable[[], None] | None = None
        self._load_signals = 0
        self._task: asyncio.Task | None = None
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> Interrupts:
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        for sig in SIGNALS:
            previous = signal.getsignal(sig)
            try:
                loop.add_signal_handler(sig, self._on_signal, sig)
            except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, or Windows
                continue
            self._previous[sig] = previous
        return self

    def __exit__(self, *exc: object) -> None:
        if self._phase != "after":
            self._leave_loop()
        for sig, previous in self._previous.items():
            signal.signal(sig, previous if previous is not None else signal.SIG_DFL)

    @contextlib.contextmanager
    def load(self, loadgen: LoadGenerator, *, on_stop: Callable[[str], None] | None = None,
             on_cancel: Callable[[], None] | None = None) -> Iterator[None]:
        """The load phase: signals stop `loadgen` (first) or cancel its requests (second).
        ``on_stop(signal_name)`` and ``on_cancel()`` are told after each (the live view says it)."""
        self._loadgen, self._phase = loadgen, "load"
        self._on_stop, self._on_cancel = on_stop, on_cancel
        try:
            yield
        finally:
            # The summary is computed without giving the event loop a turn, so a signal handled
            # by the loop would only be seen after the result is written (or never): from here
            # on, plain handlers remember it wherever it lands.
            self._phase = "after"
            self._leave_loop()
            for sig in self._previous:
                signal.signal(sig, lambda *_: self._on_signal())
            self._on_stop = self._on_cancel = None

    def _leave_loop(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self._previous:
            loop.remove_signal_handler(sig)

    def _on_signal(self, sig: int | None = None) -> None:
        if self._phase == "before":
            if not self.cancelled and self._task is not None:
                self.cancelled = True
                self._task.cancel()
        elif self._phase == "load" and self._loadgen is not None:
            self._load_signals += 1
            if self._load_signals == 1:
                self._loadgen.stop()
                if self._on_stop is not None:
                    self._on_stop("Ctrl-C" if sig in (None, signal.SIGINT) else signal.Signals(sig).name)
            else:
                self._loadgen.cancel_now()
                if self._on_cancel is not None:
                    self._on_cancel()
        else:
            self.after_load = True
