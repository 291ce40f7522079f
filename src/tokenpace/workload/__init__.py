"""Workloads: what requests look like (lengths, prompts) and when they arrive."""

from tokenpace.workload.lengths import LengthSpec, parse_length
from tokenpace.workload.plan import PlannedRequest, WorkloadSpec, plan_requests
from tokenpace.workload.prompts import APPROXIMATION, synthetic_prompt

__all__ = ["APPROXIMATION", "LengthSpec", "PlannedRequest", "WorkloadSpec", "parse_length",
           "plan_requests", "synthetic_prompt"]
