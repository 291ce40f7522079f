"""Memory the process has freed, given back to the operating system (below every package)."""

from __future__ import annotations


def release_freed_memory() -> None:
    """Give the pages of memory freed so far back to the operating system, where the C library can
    (glibc's ``malloc_trim``; elsewhere nothing). Python frees a large run's records into the C
    heap, which keeps them resident: arrays allocated next would then add to the peak rather than
    reuse those pages."""
    import ctypes
    import ctypes.util
    import sys

    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):  # not glibc (musl has no malloc_trim)
        return
    trim(0)
