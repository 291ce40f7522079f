"""Fit the roofline's efficiencies and overheads to observed engine steps, by least squares.

The model of a step is ``step_overhead + sequences × seq_overhead + tokens × token_overhead +
Σ_groups max(compute_s / MFU, memory_s / MBU)`` (plus TP all-reduces, not fitted), where each
operator group's work at the hardware's full peak comes from ``RooflinePredictor.work`` with the
GEMM rows priced in row groups: the fit sees exactly the model the simulator runs. One MFU and one
MBU replace the efficiency catalog's per-class figures (a run's steps cannot separate them). The
row group (1, 2, 4, …, 32: ggml's CPU kernels work in groups of rows, so a decode step of 1 to 4
sequences can cost alike) is searched by fitting each in turn; the simplest model (no per-token
term, the smallest row group) within the ranges' limit of the best is kept, so that a term the
steps do not call for is not claimed (a per-token cost is the same line as the FLOPs on
compute-bound steps, and would blur MFU). The objective is the weighted mean of squared *relative* residuals: a 250 ms prefill and a
20 ms decode step count alike, and the two kinds of step (any with prompt tokens; decode only)
weigh half each, whatever their numbers (a run has some thirty decode steps per prompt, and TTFT
depends on the few). Relative to what: dividing by the measured time favours predicting low (a
step measured long counts less), so after a first pass the residuals are divided by the previous
pass's prediction instead (iteratively reweighted least squares): the fit then matches the mean
step time, which is what TPOT and throughput add up.

Where the steps cannot tell the per-sequence overhead from the rest, it is held at a prior
(``priors.sequence_prior_s``: the sampler's passes over the vocabulary at the hardware file's
bandwidth): every structure is fitted with it free and with it held there, and the held fit counts
as the simpler. A closed loop at one concurrency needs it: on llama.cpp a decode step of k < 4
sequences is k GEMV passes over the weights, so there a cost per sequence is the same line as the
passes, and a fit free to choose put it on the sequences, which then cost 4 to 8 times too much at
8 sequences (all through one GEMM) and at 1 (one pass).

Why a per-sequence overhead beside the per-step one: a CPU engine (llama.cpp) samples each
sequence's token over the whole vocabulary (262k entries for Gemma 3) on the same core that runs
the model, so its decode step grows by a fixed time per sequence that neither FLOPs nor bytes
explain; GPU engines batch that work and fit it near 0. It is told apart from the compute term
by prefill steps (many tokens, one sequence) and from the step overhead by steps of different
batch sizes; a run where every step held one sequence leaves it at 0 (reported).

A request's arrival is a linear term too (``arrival_s``, per request sent during the step, the
step's ``ObservedStep.arrivals``): on llama-server pinned to one core, the HTTP thread that takes a
request in runs on the core that computes the step. Without it, a closed loop's steps of c − 1
sequences (a request just ended, its client's next one arriving) carry that host time, and the
fit put it on the rows, which then cost too much at batch 1. Where the steps cannot tell it from
the other terms it is left at 0 and reported undetermined.

So is the scan of one shared KV buffer (``kv_scan_s``, per query row and KV cell of another sequence
in the step, ``StepWork.scan``), where the caller says the engine has one (``shared_kv``): on
llama.cpp with ``--kv-unified`` a prompt computed beside
decoding sequences costs more the longer their contexts, as every row's attention visits every
cell in use. Without it the fit priced prompts beside decodes some 5% low and lone prompts 4% high,
and the steps of 7-8 decodes low (RESULTS 7p). An engine with attention per sequence has no such
cost, and there the term stays 0.

How (numpy only, no scipy): for fixed MFU and MBU the model is linear in the two overheads, so
their best non-negative values are closed-form (weighted least squares on a 2×2 system, with the
constrained corners tried). MFU and MBU are searched on a log-spaced grid over their bounds,
vectorized over all steps, then refined around the best point a few times. The max() makes the
objective piecewise smooth with kinks where a group changes bound; a grid cannot be trapped by a
kink or a flat valley the way a gradient method can. To find a narrow valley between grid
points, the search starts from the profile: for each grid value of MBU, MFU refined (the best of
these starts the final 2-D refinement); the refinements of all grid values run together, and each
distinct step is priced once (``Problem``): a closed loop repeats the same steps, so a fit of a
48-request run takes 7-20 s over its 43 structures (RESULTS 25).

The report says how well each parameter is determined: the range over which the best achievable
RMS relative error stays within 10% of the minimum, or within one percentage point of it when the
minimum is near zero (from the grid's profiles for MFU and MBU, closed-form for the overheads). A
wide range means the run did not exercise that term (e.g. MBU and the overhead trade off when
every decode step streams the same bytes).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from tokenpace.simulator.calibrate.problem import Problem, around, profile_range
from tokenpace.simulator.calibrate.steps import ObservedStep
from tokenpace.simulator.roofline import RooflinePredictor
from tokenpace.simulator.step_price import GEMV_REMAINDERS, MBU_MAX, RooflineParams

BOUNDS = (1e-3, 1.0)  # MFU: fraction of the hardware's peak FLOP/s
# MBU: fraction of the hardware file's bandwidth. Above 1 where weights stream faster than the file's
# DRAM figure: a CPU whose last-level cache holds part of the model (the 2-core VM's file says so).
MBU_BOUNDS = (1e-3, MBU_MAX)
GRID = 61  # points per axis of the first grid (12% apart over three decades)
REFINE = (15, 6)  # points per axis of each refinement, refinements
PASSES = 3  # residuals relative to the measured time, then twice to the previous pass's prediction
RANGE_RMS = (1.1, 0.01)
# The decode MFU's profile: a log grid from this value to 1 with this many points, refined once.
DECODE_PROFILE = (0.01, 13)  # a parameter's range: RMS relative error within 10% of the best, or 1 point
ROW_GROUPS = (1, 2, 4, 8, 16, 32)  # GEMM row groups tried
# The remainders tried, simplest first (parsimony keeps the first within the ranges' limit of the best).
REMAINDERS = ("pad", "gemv-pass", "gemv", "gemv-ubatch")
# Remainders as simple as each other (the same terms; only where a step's prompts run differs): of two
# such fits the better is kept, and where they are within the ranges' limit the step composition is
# reported undetermined ("row_remainder").
SIBLINGS = {"gemv-pass": "gemv-ubatch", "gemv-ubatch": "gemv-pass"}
# Linear terms, fitted >= 0: per step, sequence, token; under a "gemv" remainder, per row outside the
# full row groups and per step that runs the GEMM kernel; per request that arrived during the step; per
# query row and KV cell of the step's batch (one KV buffer: ``StepWork.scan``), and per step of 2+ sequences.
OVERHEADS = ("step_overhead_s", "seq_overhead_s", "token_overhead_s", "gemv_row_s", "gemm_step_s", "arrival_s",
             "kv_scan_s", "head_step_s")


@dataclass(frozen=True)
class Fit:
    params: RooflineParams
    rms_rel: float  # weighted RMS relative residual at the best point
    predicted_s: np.ndarray  # per step, with the fitted params
    ranges: dict[str, tuple[float, float]]  # parameter → (low, high) within 10% of the best RMS
    at_bound: tuple[str, ...]  # parameters that ended on a bound of their search range
    undetermined: tuple[str, ...] = ()  # parameters the steps could not tell apart: left at 0


def fit_roofline(predictor: RooflinePredictor, steps: list[ObservedStep], base: RooflineParams,
                 row_groups: tuple[int, ...] = ROW_GROUPS, seq_prior_s: float | None = None,
                 decode_mfu: float | None = None, shared_kv: bool = False) -> Fit:
    """Best MFU, MBU, row group and its remainder, and step, sequence, token and kernel-path
    overheads for ``steps`` priced by ``predictor``'s work model; ``base`` supplies what is not
    fitted (the all-reduce latency). Each row group in ``row_groups`` is fitted in turn, with its
    remainder padded and (above 1) computed row by row ("gemv-pass", "gemv"), then a per-token term
    at the best of them; the simplest model within the ranges' limit of the best is kept, and the
    row group's range lists those whose RMS stays within that limit.

    ``seq_prior_s``: what a sequence costs the host per step where the steps cannot tell (see
    ``sequence_prior_s``). Each structure is then also fitted with the per-sequence overhead held
    there, and that fit counts as the simpler: where its RMS error is within 10% of the best, the
    per-sequence cost is reported undetermined, at its prior. A closed loop
    at one concurrency needs it: its decode steps of 1 to 3 sequences cost one weight pass per
    sequence under ggml's GEMV, and a per-sequence cost is the same line there.

    ``decode_mfu``: the prior of the decode tokens' GEMM efficiency under ggml's remainders
    ("gemv-pass", "gemv"): every such structure is fitted with it there; a profile over it then
    keeps the prior or fits the structure again at a value the steps call for (``_fit_decode_mfu``:
    a closed loop at one concurrency runs one row-group count per batch size, and cannot tell).

    ``shared_kv``: one KV buffer for all sequences (llama.cpp's ``--kv-unified``): ``kv_scan_s`` is
    fitted (off, it stays 0: without such a cost the free term takes up other curves of a run, as a
    test with a non-monotone decode curve caught), and "gemv-ubatch" left out (llama.cpp then cuts a
    batch in batch order, ``split_simple``: a step's prompts share the decode tokens' ubatch)."""
    # (per token, sequence overhead fitted, remainder's rank in REMAINDERS, row group): the
    # simplest first, by the order of the tuple.
    fits: dict[tuple[bool, bool, int, int], Fit] = {}
    seq_options = (False, True) if seq_prior_s is not None else (True,)

    def fit_at(rg: int, per_token: bool, remainder: int, seq_free: bool) -> Fit:
        gemv = REMAINDERS[remainder] in GEMV_REMAINDERS
        params = replace(base, row_group=rg, row_remainder=REMAINDERS[remainder],
                         decode_mfu=decode_mfu if gemv else None)
        p = RooflinePredictor(predictor.model, predictor.gpu, predictor.weights, predictor.kv, predictor.tp,
                              params, predictor.efficiency_file, predictor.engine)
        return _fit_one(p, steps, params, per_token, None if seq_free else seq_prior_s, shared_kv)

    for seq_free in seq_options:
        for rg in row_groups:
            for r in range(len(REMAINDERS) if rg > 1 else 1):
                if shared_kv and REMAINDERS[r] == "gemv-ubatch":  # one KV buffer: prompts share the ubatch
                    continue
                fits[False, seq_free, r, rg] = fit_at(rg, False, r, seq_free)
    # The per-token term is tried at the best row group only (it does not move the row-group kinks).
    best = min(fits, key=lambda k: (fits[k].rms_rel, k))
    fits[(True, *best[1:])] = fit_at(best[3], True, best[2], best[1])
    # Parsimony: a per-token term, a per-sequence cost off its prior, a row-by-row remainder or a
    # larger row group is kept only where it explains the steps clearly better (beyond the ranges'
    # limit) than the simpler model; on a GPU's compute-bound prefills a per-token cost is the same
    # line as the FLOPs, and would blur MFU.
    best_rms = min(f.rms_rel for f in fits.values())
    limit = max(best_rms * RANGE_RMS[0], best_rms + RANGE_RMS[1])
    # The per-sequence overhead stays at its prior only within 10% of the best, relative: the ranges'
    # absolute slack (1 point, for fits near 0) would hold it there on any low-noise run.
    # Where the freely fitted structure cannot tell it at all (one sequence in every step), the prior
    # is kept within the usual limit.
    prior_limit = best_rms * RANGE_RMS[0]

    def eligible(k: tuple[bool, bool, int, int]) -> bool:
        rms = fits[k].rms_rel
        if k[1]:
            return rms <= limit
        free = fits.get((k[0], True, *k[2:]))
        return rms <= prior_limit or (rms <= limit and free is not None and "seq_overhead_s" in free.undetermined)

    key = min(k for k in fits if eligible(k))
    sibling = SIBLINGS.get(REMAINDERS[key[2]])
    alt = (*key[:2], REMAINDERS.index(sibling), key[3]) if sibling else None
    composition_unknown = False
    if alt in fits and eligible(alt):
        composition_unknown = True  # both explain the steps within the limit: the better is kept
        if fits[alt].rms_rel < fits[key].rms_rel:
            key = alt
    fit = fits[key]
    within = [k[3] for k, f in fits.items() if k[:3] == key[:3] and f.rms_rel <= limit]
    ranges = {**fit.ranges, "row_group": (float(min(within)), float(max(within)))}
    undetermined = fit.undetermined + (() if key[0] else ("token_overhead_s",)) \
        + (() if key[2] else ("gemv_row_s", "gemm_step_s")) + (("row_remainder",) if composition_unknown else ())
    if not key[1]:
        # Held at its prior: its range is the freely fitted one's of the same structure.
        free = fits.get((key[0], True, *key[2:]))
        ranges["seq_overhead_s"] = free.ranges["seq_overhead_s"] if free else (seq_prior_s, seq_prior_s)
        undetermined = tuple(u for u in undetermined if u != "seq_overhead_s") + ("seq_overhead_s",)
    if fit.params.decode_mfu is not None:
        fit, ranges["decode_mfu"], held = _fit_decode_mfu(predictor, steps, fit, key[0],
                                                          None if key[1] else seq_prior_s, shared_kv)
        if held:
            undetermined += ("decode_mfu",)
        else:  # fitted again at the decode MFU found: MFU's, MBU's and the fitted overheads' ranges are its
            ranges.update({k: v for k, v in fit.ranges.items() if k in ("mfu", "mbu", *OVERHEADS)
                           and (k != "seq_overhead_s" or key[1])})
    return replace(fit, ranges=ranges, undetermined=undetermined)


def _fit_decode_mfu(predictor: RooflinePredictor, steps: list[ObservedStep], fit: Fit, per_token: bool,
                    seq_fixed_s: float | None, shared_kv: bool = False) -> tuple[Fit, tuple[float, float], bool]:
    """The decode MFU where the steps tell it, else its prior (``fit``'s): the fit, the range of
    decode MFUs the steps allow, and whether it stayed at its prior.

    Along a profile (the structure held; MFU, MBU and the linear overheads searched again at each
    decode MFU) the prior is kept where its RMS error is within 10% of the profile's best, as the
    per-sequence cost's is: a closed loop at one concurrency runs one row-group count per batch
    size, and its steps cannot tell. Else (decode steps past the first group: a sweep) the
    structure is fitted again at the profile's best."""
    prior = fit.params.decode_mfu
    profile = _DecodeProfile(predictor, steps, fit, seq_fixed_s, shared_kv)
    values = list(np.geomspace(DECODE_PROFILE[0], BOUNDS[1], DECODE_PROFILE[1]))
    rms = [profile.rms(float(v)) for v in values]
    i = int(np.argmin(rms))
    for v in np.geomspace(values[max(0, i - 1)], values[min(len(values) - 1, i + 1)], 5)[1:-1]:
        values.append(float(v))
        rms.append(profile.rms(float(v)))
    order = np.argsort(values)
    values, rms = np.asarray(values)[order], np.asarray(rms)[order]
    at_prior = float(rms[np.argmin(np.abs(values - prior))]) if prior in values else profile.rms(prior)
    if at_prior <= float(rms.min()) * RANGE_RMS[0]:
        return fit, _decode_range(values, rms, float(rms.min()), prior), True
    best = float(values[int(np.argmin(rms))])
    params = replace(fit.params, decode_mfu=best)
    p = RooflinePredictor(predictor.model, predictor.gpu, predictor.weights, predictor.kv, predictor.tp,
                          params, predictor.efficiency_file, predictor.engine)
    refit = _fit_one(p, steps, params, per_token, seq_fixed_s, shared_kv)
    fit = replace(refit, ranges={**fit.ranges, **{k: v for k, v in refit.ranges.items() if k in fit.ranges}},
                  undetermined=fit.undetermined)
    return fit, _decode_range(values, rms, float(rms.min()), best), False


def _decode_range(values: np.ndarray, rms: np.ndarray, best: float, value: float) -> tuple[float, float]:
    limit = max(best * RANGE_RMS[0], best + RANGE_RMS[1])
    inside = [float(v) for v, r in zip(values, rms) if r <= limit] + [value]
    return min(inside), max(inside)


class _DecodeProfile:
    """The best weighted RMS relative error at a given decode MFU (the decode tokens' GEMM FLOPs at
    it), ``fit``'s structure and per-sequence cost held, MFU, MBU and the other linear overheads
    searched again (one pass, residuals relative to ``fit``'s prediction)."""

    def __init__(self, predictor: RooflinePredictor, steps: list[ObservedStep], fit: Fit,
                 seq_fixed_s: float | None, shared_kv: bool = False) -> None:
        self.base = params = fit.params
        p = RooflinePredictor(predictor.model, predictor.gpu, predictor.weights, predictor.kv, predictor.tp,
                              params, predictor.efficiency_file, predictor.engine)
        works = [p.work(s.batch) for s in steps]
        groups = max(len(w.compute_s) for w in works)
        compute, memory, decode = (np.zeros((len(steps), groups)) for _ in range(3))
        for i, w in enumerate(works):
            compute[i, :len(w.compute_s)] = w.compute_s
            memory[i, :len(w.memory_s)] = w.memory_s
            decode[i, :len(w.decode_compute_s)] = w.decode_compute_s
        self.compute, self.memory, self.decode = compute - decode, memory, decode
        self.fixed = np.array([w.link_s + w.allreduces * w.allreduce_latency_s for w in works])
        if seq_fixed_s is not None:
            self.fixed = self.fixed + seq_fixed_s * np.array([w.sequences for w in works], dtype=float)
        columns = _columns(works, steps, params.row_group, seq_fixed_s is None, bool(params.token_overhead_s),
                           True, shared_kv)
        self.upper = scan_bound(predictor)
        self.counts = np.array(list(columns.values()), dtype=float)
        self.names = ("step_overhead_s", *columns)
        self.y = np.array([s.duration_s for s in steps])
        self.weights, self.ref = step_weights(steps), fit.predicted_s

    def rms(self, decode_mfu: float) -> float:
        problem = Problem(self.compute, self.memory, self.fixed, self.y, self.weights, self.counts, self.ref,
                          self.names, self.decode / decode_mfu, upper=self.upper)
        return _search(problem, replace(self.base, decode_mfu=decode_mfu), ranges=False).rms_rel


def _fit_one(predictor: RooflinePredictor, steps: list[ObservedStep], base: RooflineParams, per_token: bool,
             seq_fixed_s: float | None = None, shared_kv: bool = False) -> Fit:
    works = [predictor.work(s.batch) for s in steps]
    groups = max(len(w.compute_s) for w in works)
    compute = np.zeros((len(steps), groups))
    memory = np.zeros((len(steps), groups))
    # The decode tokens' GEMM FLOPs at ``decode_mfu`` where it is held (not searched): seconds fixed
    # per step and group, added to the rest's compute at each MFU tried.
    decode = np.zeros((len(steps), groups))
    for i, w in enumerate(works):
        compute[i, :len(w.compute_s)] = w.compute_s
        memory[i, :len(w.memory_s)] = w.memory_s
        if base.decode_mfu is not None and w.decode_compute_s:
            decode[i, :len(w.decode_compute_s)] = w.decode_compute_s
    compute -= decode
    decode /= base.decode_mfu or 1.0
    fixed = np.array([w.link_s + w.allreduces * (w.allreduce_latency_s if base.allreduce_latency_s is None
                                                 else base.allreduce_latency_s) for w in works])
    if seq_fixed_s is not None:
        fixed = fixed + seq_fixed_s * np.array([w.sequences for w in works], dtype=float)
    columns = _columns(works, steps, base.row_group, seq_fixed_s is None, per_token,
                       base.row_remainder in GEMV_REMAINDERS, shared_kv)
    counts = np.array(list(columns.values()), dtype=float).reshape(len(columns), len(steps))
    names = ("step_overhead_s", *columns)
    y = np.array([s.duration_s for s in steps])
    weights = step_weights(steps)
    ref, upper = y, scan_bound(predictor)
    for _ in range(PASSES):
        problem = Problem(compute, memory, fixed, y, weights, counts, ref, names, decode, upper=upper)
        fit = _search(problem, base)
        ref = fit.predicted_s
    if seq_fixed_s is not None:
        fit = replace(fit, params=replace(fit.params, seq_overhead_s=seq_fixed_s))
    return fit


def _columns(works: list, steps: list[ObservedStep], row_group: int, seq: bool, per_token: bool, gemv: bool,
             shared_kv: bool) -> dict[str, list[float]]:
    """Each fitted linear term's count per step (``OVERHEADS``), for the terms the structure has."""
    columns: dict[str, list[float]] = {}
    if seq:
        columns["seq_overhead_s"] = [w.sequences for w in works]
    if per_token:
        columns["token_overhead_s"] = [w.tokens for w in works]
    if gemv:
        columns["gemv_row_s"] = [w.kernel_rows % row_group for w in works]
        columns["gemm_step_s"] = [float(w.kernel_rows >= row_group) for w in works]
    columns["arrival_s"] = [s.arrivals for s in steps]
    if shared_kv:
        columns["kv_scan_s"] = [w.scan for w in works]
        if gemv:  # an LM head over two or more output rows (see ``RooflineParams``)
            columns["head_step_s"] = [float(w.sequences >= 2) for w in works]
    return columns


def scan_bound(predictor: RooflinePredictor) -> tuple[str, float]:
    """``kv_scan_s`` at most a computed attention pair's price (``Problem``'s bound, seconds at MFU 1):
    a visited cell costs no more than a computed one. Unbounded, a c=4 fit put 5.4 µs on the scan
    and twice the MFU, pricing lone prompts 46% low (RESULTS 7zh)."""
    return "kv_scan_s", predictor.attention_pair_s


def _search(problem: Problem, base: RooflineParams, ranges: bool = True) -> Fit:
    grid = np.geomspace(BOUNDS[0], BOUNDS[1], GRID)  # MFU
    bgrid = np.geomspace(MBU_BOUNDS[0], MBU_BOUNDS[1], int(GRID * np.log(MBU_BOUNDS[1] / MBU_BOUNDS[0])
                                                             / np.log(BOUNDS[1] / BOUNDS[0])))
    loss = problem.grid(grid, bgrid)[0]
    # Profiles: the best loss at each grid value of one parameter, the other refined around its
    # best grid value. They give the ranges, and the start of the final search (a coarse grid alone
    # can miss a narrow valley between its points).
    profile_mfu = problem.refine_mbus(grid, bgrid, np.argmin(loss, axis=1))[0]
    profile_mbu, mfu_at_mbu = problem.refine_mfus(grid, bgrid, np.argmin(loss, axis=0))
    j = int(np.argmin(profile_mbu))
    mfu, mbu = float(mfu_at_mbu[j]), float(bgrid[j])
    points, rounds = REFINE
    span = grid[1] / grid[0]
    f_lo, f_hi, b_lo, b_hi = mfu / span, mfu * span, mbu / span, mbu * span
    for _ in range(rounds):
        mfus = np.geomspace(max(f_lo, BOUNDS[0]), min(f_hi, BOUNDS[1]), points)
        mbus = np.geomspace(max(b_lo, MBU_BOUNDS[0]), min(b_hi, MBU_BOUNDS[1]), points)
        loss, theta = problem.grid(mfus, mbus)
        best = np.unravel_index(np.argmin(loss), loss.shape)
        f_lo, f_hi, b_lo, b_hi = around(mfus, best[0]) + around(mbus, best[1])
    mfu, mbu = float(mfus[best[0]]), float(mbus[best[1]])
    th = [float(v) for v in theta[best]]
    params = replace(base, mfu=mfu, mbu=mbu, **{**dict.fromkeys(OVERHEADS, 0.0), **dict(zip(problem.names, th))})
    rms = float(np.sqrt(loss[best]))
    limit = max(rms * RANGE_RMS[0], rms + RANGE_RMS[1]) ** 2
    ranges = {"mfu": profile_range(grid, profile_mfu, limit, mfu, lambda x: problem.refine_mbu(x, grid, None)[0]),
              "mbu": profile_range(bgrid, profile_mbu, limit, mbu, lambda x: problem.refine_mfu(grid, x, None)[0]),
              **problem.overhead_ranges(th, float(loss[best]), limit)} if ranges else {}
    at_bound = tuple(name for name, v, (lo, hi) in (("mfu", mfu, BOUNDS), ("mbu", mbu, MBU_BOUNDS))
                     if v <= lo * 1.0001 or v >= hi * 0.9999)
    at_bound += tuple(name for name, v in zip(problem.names, th) if v == 0.0)
    undetermined = tuple(problem.names[j] for j in range(1, len(problem.x)) if j not in problem.cols)
    return Fit(params=params, rms_rel=rms, predicted_s=problem.predict(mfu, mbu, th),
               ranges=ranges, at_bound=at_bound, undetermined=undetermined)


def step_weights(steps: list[ObservedStep]) -> np.ndarray:
    """Steps with prompt tokens and decode-only steps weigh half each (all of it if one is absent);
    within the decode half each batch size seen weighs alike, however many steps it has: a closed
    loop at c spends most steps at c sequences, and the smaller batches it passes through are what
    tell the per-sequence and per-row costs apart."""
    has_prefill = np.array([bool(s.batch.prefill) for s in steps])
    sizes = np.array([s.batch.num_decode for s in steps])
    w = np.zeros(len(steps))
    kinds = [k for k in (has_prefill, ~has_prefill) if k.any()]
    for k in kinds:
        w[k] = 1.0 / (k.sum() * len(kinds))
    decode = ~has_prefill
    if decode.any():
        seen = np.unique(sizes[decode])
        for b in seen:
            pick = decode & (sizes == b)
            w[pick] = 1.0 / (pick.sum() * len(seen) * len(kinds))
    return w
