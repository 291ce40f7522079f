"""Dependencies point one way: ``tokenpace.results`` sits below the runner, the sweep and the
reports, so none of its modules import them; and the runner, sweep and reports no longer import
each other for what a run leaves behind (the result document, records, paths, schema version)."""

from __future__ import annotations

import ast
from pathlib import Path

import tokenpace

SRC = Path(tokenpace.__file__).parent


def _imports(package: str) -> set[tuple[str, str]]:
    """(file, imported module) for every import in a package, including those inside functions."""
    found = set()
    for path in (SRC / package).rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module:
                found.add((path.name, node.module))
            elif isinstance(node, ast.Import):
                found.update((path.name, alias.name) for alias in node.names)
    return found


def _into(package: str, above: tuple[str, ...]) -> list[tuple[str, str]]:
    return sorted((f, m) for f, m in _imports(package)
                  if any(m == f"tokenpace.{a}" or m.startswith(f"tokenpace.{a}.") for a in above))


COMPAT = {"sink.py", "paths.py", "result_file.py", "reload.py", "run_data.py"}  # re-export shims


def test_results_imports_nothing_above_it():
    assert _into("results", ("runner", "sweep", "reports", "cli", "servers", "client")) == []


def test_no_upward_imports_between_runner_sweep_and_reports():
    assert [x for x in _into("runner", ("reports", "sweep", "cli")) if x[0] not in COMPAT] == []
    assert [x for x in _into("reports", ("runner",)) if x[0] not in COMPAT] == []
    assert _into("sweep", ("reports",)) == []


def test_the_gguf_reader_is_below_the_simulator_and_the_workload():
    for package in ("simulator", "workload"):
        assert [m for f, m in _imports(package) if "gguf_vocab" in m] == []
    assert not [m for f, m in _imports("simulator") if m.startswith("tokenpace.workload.gguf")]
