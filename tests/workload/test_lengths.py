"""Length distributions: moments and bounds of seeded draws, and the empirical file format."""

from __future__ import annotations

import numpy as np
import pytest

from tokenpace.errors import UsageError
from tokenpace.workload import parse_length

N = 40_000


def draws(spec: str, seed: int = 1) -> np.ndarray:
    return parse_length(spec).sample(np.random.default_rng(seed), N)


def test_fixed_is_fixed():
    assert set(draws("512").tolist()) == {512}


def test_uniform_covers_its_bounds_evenly():
    d = draws("uniform:min=128,max=1024")
    assert d.min() == 128 and d.max() == 1024
    assert d.mean() == pytest.approx(576, rel=0.01)
    assert d.std() == pytest.approx(258.9, rel=0.02)  # (1024 - 128 + 1) / sqrt(12)


def test_normal_moments():
    d = draws("normal:mean=200,std=80,min=1")
    assert d.mean() == pytest.approx(200, rel=0.01)
    assert d.std() == pytest.approx(80, rel=0.03)  # truncation at 1 is 2.5 std away: barely felt
    assert d.min() >= 1


def test_lognormal_mean_is_the_mean_in_tokens():
    d = draws("lognormal:mean=800,sigma=0.6,max=8000")
    assert d.mean() == pytest.approx(800, rel=0.025)
    assert np.median(d) == pytest.approx(668, rel=0.03)  # the median of a lognormal sits below its mean
    assert d.std() == pytest.approx(525, rel=0.05)
    assert d.max() <= 8000


def test_truncation_keeps_the_shape_inside_the_bounds():
    # A normal(100, 50) cut to [80, 150] has mean 112.7 (redrawn), not a pile-up at the bounds.
    d = draws("normal:mean=100,std=50,min=80,max=150")
    assert d.min() == 80 and d.max() == 150
    assert d.mean() == pytest.approx(112.7, abs=1.0)
    assert (d == 80).mean() < 0.02 and (d == 150).mean() < 0.02


def test_same_seed_same_draws():
    assert (draws("lognormal:mean=300,sigma=1", seed=7) == draws("lognormal:mean=300,sigma=1", seed=7)).all()


def test_empirical_from_lines_truncated_to_bounds(tmp_path):
    f = tmp_path / "lengths.txt"
    f.write_text("# observed prompt lengths\n10\n20\n\n30  # trailing comment\n1000\n")
    spec = parse_length(f"empirical:file={f},max=100")
    d = spec.sample(np.random.default_rng(3), N)
    assert set(d.tolist()) == {10, 20, 30}  # 1000 is outside [1, 100]: dropped, not clipped
    assert d.mean() == pytest.approx(20, abs=0.3)
    assert spec.mean == 20


def test_empirical_from_a_json_list(tmp_path):
    f = tmp_path / "lengths.json"
    f.write_text("[5, 5, 5, 50]")
    d = parse_length(f"empirical:file={f}").sample(np.random.default_rng(0), N)
    assert (d == 5).mean() == pytest.approx(0.75, abs=0.01)


@pytest.mark.parametrize("content, where", [("10\nabc\n", ":2:"), ("10\n0\n", ":2:"), ("[1, 2.5]", "item 2"),
                                            ("1\n2\n-4\n", ":3:")])
def test_empirical_bad_values_name_the_line(tmp_path, content, where):
    f = tmp_path / "bad.txt"
    f.write_text(content)
    with pytest.raises(UsageError, match=where):
        parse_length(f"empirical:file={f}", flag="--input-tokens")


def test_empirical_errors(tmp_path):
    with pytest.raises(UsageError, match="cannot read"):
        parse_length(f"empirical:file={tmp_path / 'missing.txt'}")
    with pytest.raises(UsageError, match="needs file"):
        parse_length("empirical:max=5")
    f = tmp_path / "big.txt"
    f.write_text("500\n600\n")
    with pytest.raises(UsageError, match="no length"):
        parse_length(f"empirical:file={f},max=100")
