"""The one documented error hierarchy. Each error carries the process exit code the CLI uses.

Library code raises these; the CLI prints ``str(error)`` on one line and exits with
``error.exit_code`` (a traceback only with ``--traceback``). Exit codes are listed in the README.
"""

from __future__ import annotations


class ExitCode:
    OK = 0
    INTERNAL = 1  # a bug: an unexpected exception
    USAGE = 2  # invalid flag, value, spec or file
    TARGET = 3  # the target could not be reached or refused the preflight request
    RUN_FAILED = 4  # the run completed but every measured request failed
    INVALID_RUN = 5  # the run completed but its numbers cannot be trusted (load generator bottleneck)
    NOT_SAVED = 7  # a result or records file could not be written (disk full); the summary was printed
    FINDINGS = 8  # `lint --fail-on`: the lint found what the user asked it to fail on
    CLUSTER = 9  # --ray: no Ray, no cluster, or a node's clock too far off; nothing was sent
    INTERRUPTED = 130  # SIGINT or SIGTERM; partial results were saved


class TokenpaceError(Exception):
    """Base of every error tokenpace raises on purpose."""

    exit_code = ExitCode.INTERNAL


class UsageError(TokenpaceError, ValueError):
    """A flag value, spec, SLO expression or input file is invalid."""

    exit_code = ExitCode.USAGE


class TargetError(TokenpaceError):
    """The endpoint is unreachable, or answered the preflight request with an error."""

    exit_code = ExitCode.TARGET


class ClusterError(TokenpaceError):
    """--ray: Ray is not installed, the cluster cannot be reached, an actor could not start, or a
    node's clock is further off than --max-clock-offset. Raised before any request is sent."""

    exit_code = ExitCode.CLUSTER


class RunInterrupted(TokenpaceError):
    """A signal ended the run where no summary could be shown: before its first request (nothing
    to save), or after the load while the result was written (it is written whole first, and is
    ``result``)."""

    exit_code = ExitCode.INTERRUPTED

    def __init__(self, message: str, *, result: object = None):
        super().__init__(message)
        self.result = result


class NotSaved(TokenpaceError):
    """A result or records file could not be written whole (disk full, file too large, read-only
    file system). What was written is whole (no torn line); ``result``, when there is one, holds
    everything measured, for the caller to show."""

    exit_code = ExitCode.NOT_SAVED

    def __init__(self, message: str, *, result: object = None):
        super().__init__(message)
        self.result = result
