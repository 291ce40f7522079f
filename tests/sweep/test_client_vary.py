"""`--vary` with client keys: checked before any step runs; each step asks the way its combination
says (measured against the built-in server in test_sweep_measured.py)."""

from __future__ import annotations

import pytest

from tests.e2e.helpers import run_cli
from tokenpace.config import BenchConfig
from tokenpace.errors import ExitCode, UsageError
from tokenpace.simulator.config import SimConfig
from tokenpace.sweep import SweepConfig
from tokenpace.sweep.spec import combinations, parse_vary


def _config(vary, sim=None):
    return SweepConfig(base=BenchConfig(requests=8), axis="concurrency", loads=[1, 2],
                       vary=parse_vary(vary), sim=sim).validate()


def test_each_step_asks_as_its_combination_says():
    config = _config(["stream=on,off", "max-tokens=24", "api=completions"])
    steps = [config.step_config(concurrency=1, combo=c) for c in combinations(config.vary)]
    assert [(s.stream, s.api, s.output_tokens, s.ignore_eos) for s in steps] == [
        (True, "completions", "24", False), (False, "completions", "24", False)]
    exact = _config(["output-tokens=uniform:min=8,max=32;64"])  # a spec with commas: values split at ';'
    steps = [exact.step_config(concurrency=1, combo=c) for c in combinations(exact.vary)]
    assert [(s.output_tokens, s.ignore_eos) for s in steps] == [("uniform:min=8,max=32", True), ("64", True)]
    # Output lengths are client-side on the simulator too; engine keys still need it.
    _config(["output-tokens=16,64", "policy=prefill-first,chunked-prefill"], sim=SimConfig())


@pytest.mark.parametrize("vary, sim, said", [
    (["stream=on,off"], SimConfig(), "--vary stream is measured against an endpoint"),
    (["api=chat,completions"], SimConfig(), "--vary api is measured against an endpoint"),
    (["policy=prefill-first,chunked-prefill"], None, "--vary policy is an engine parameter: it needs --sim"),
    (["stream=on,sometimes"], None, "--vary stream=sometimes: expected on or off"),
    (["api=chat,embeddings"], None, "--vary api=embeddings: known APIs"),
    (["max-tokens=0"], None, "--vary max-tokens=0: must be >= 1"),
    (["output-tokens=uniform:min=8;64"], None, "--vary output-tokens=uniform:min=8"),
])
def test_a_bad_grid_is_refused_before_any_step(vary, sim, said):
    with pytest.raises(UsageError, match=said.replace("(", r"\(")):
        _config(vary, sim=sim)


def test_the_cli_refuses_a_bad_grid_in_one_line(tmp_path):
    proc = run_cli("sweep", "--sim", "--concurrency", "1,2", "--vary", "stream=on,off",
                   "--out", str(tmp_path / "s.json"))
    assert proc.returncode == ExitCode.USAGE
    assert proc.stderr.count("\n") == 1 and "--vary stream is measured against an endpoint" in proc.stderr
    assert not (tmp_path / "s.json").exists()
