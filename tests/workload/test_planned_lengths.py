"""``planned_lengths``: a synthetic workload's lengths and arrivals without planning its requests,
for the simulator; the same draws as ``plan_requests``."""

from __future__ import annotations

from itertools import islice

import pytest

from tokenpace.workload import WorkloadSpec, plan_requests
from tokenpace.workload.lengths import parse_length
from tokenpace.workload.plan import planned_lengths
from tokenpace.workload.shared_prefix import parse_shared_prefix


def _spec(**kw) -> WorkloadSpec:
    base = dict(input_tokens=parse_length("uniform:min=10,max=3000"),
                output_tokens=parse_length("lognormal:mean=200,sigma=0.7"), seed=11)
    return WorkloadSpec(**{**base, **kw})


@pytest.mark.parametrize("kw", [
    {},                                                     # closed loop
    {"rate": 25.0},                                         # open loop, Poisson
    {"rate": 4.0, "arrival": "gamma", "burstiness": 0.3, "seed": 2**40},
    {"input_tokens": parse_length("700"), "output_tokens": parse_length("64")},
])
def test_the_lengths_and_arrivals_are_the_plans(kw):
    spec = _spec(**kw)
    n = 700  # across a block of 256 draws
    planned = [(p.input_tokens, p.output_tokens, p.offset_s) for p in islice(plan_requests(spec, text=False), n)]
    assert list(islice(planned_lengths(spec), n)) == planned
    assert len({p[0] for p in planned}) > 1 or "input_tokens" in kw  # not one repeated draw


def test_other_workloads_are_left_to_the_plan():
    assert planned_lengths(_spec(tools=2)) is None  # the invitation's tokens are counted on text
    assert planned_lengths(_spec(shared_prefix=parse_shared_prefix("groups=2,prefix-tokens=64"))) is None
