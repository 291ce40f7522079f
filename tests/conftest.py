"""Session-wide test settings."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

# CI (.ci/run) sets HYPOTHESIS_PROFILE=ci: the property tests draw the same examples on every run,
# so that a landing is never decided by a new random draw; elsewhere each run draws afresh.
settings.register_profile("ci", derandomize=True, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


@pytest.fixture(scope="session", autouse=True)
def _private_tokenpace_cache(tmp_path_factory):
    """Tokenizers built from GGUF files (tokenpace.workload.tokenizer) and the kernel tables'
    columns (tokenpace.simulator.kernels.table_cache) are cached; the tests keep theirs in folders
    of their own, not in the user's cache. CLI subprocesses inherit them."""
    names = ("TOKENPACE_TOKENIZER_CACHE", "TOKENPACE_KERNEL_CACHE")
    old = {name: os.environ.get(name) for name in names}
    for name in names:
        os.environ[name] = str(tmp_path_factory.mktemp(name.lower()))
    yield
    for name, value in old.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(scope="module")
def server_url():
    """A fast built-in server (2 ms decode steps) in its own process, for the tests that drive a
    client through it: the instrumented SDK, the proxy."""
    from tokenpace.servers import BuiltinServerConfig, start_server_process

    server = start_server_process(BuiltinServerConfig(decode_base_s=0.002, prefill_base_s=0.001))
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture(scope="module")
def ray_cluster():
    """A Ray cluster of the test module's own: two CPUs on 127.0.0.1 (the `ray` extra)."""
    ray = pytest.importorskip("ray")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a loopback-only test cluster
    # address="local": always a new cluster of its own, never one `ray start` left on this machine
    ray.init(address="local", num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="session")
def kernel_tables():
    """``tokenpace.simulator.kernels.tables``, where aiconfigurator-core's measured tables are
    installed (``pip install 'tokenpace[kernels]'``, also in the ``test`` extra); the test skips,
    saying so, where they are missing, and fails instead with TOKENPACE_REQUIRE_KERNELS=1 (set by
    .ci/run)."""
    from tokenpace.simulator.kernels import tables

    if not tables.tables_available():
        why = "aiconfigurator-core is not installed (pip install 'tokenpace[kernels]')"
        if os.environ.get("TOKENPACE_REQUIRE_KERNELS") == "1":
            pytest.fail(f"TOKENPACE_REQUIRE_KERNELS=1 but {why}")
        pytest.skip(f"{why}; set TOKENPACE_REQUIRE_KERNELS=1 to fail instead")
    return tables
