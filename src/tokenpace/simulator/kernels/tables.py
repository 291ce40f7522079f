"""aiconfigurator-core's measured kernel tables: where they are, and lookups that interpolate them.

The package (``pip install 'tokenpace[kernels]'``, Apache-2.0) ships, under
``aiconfigurator_core/systems/data/<system>/<op>/<backend>/<version>/``, Parquet tables of
latencies in milliseconds measured on the silicon, one row per kernel call:

- ``gemm/.../gemm_perf.parquet``: ``gemm_dtype``, ``kernel_source``, ``m`` (rows: tokens), ``n``,
  ``k`` (the weight's output and input sizes) → ``latency``;
- ``attention/.../context_attention_perf.parquet``: prefill attention of ``batch_size`` prompts of
  ``isl`` tokens each (no cached prefix), per ``num_heads``, ``num_key_value_heads``, ``head_dim``,
  ``kv_cache_dtype``, ``kernel_source``, ``window_size`` → ``latency`` (one layer);
- ``attention/.../generation_attention_perf.parquet``: one decode step of ``batch_size`` sequences
  with ``step`` tokens of KV each, same keys → ``latency`` (one layer);
- ``comm/<backend>/.../custom_allreduce_perf.parquet`` (the engine's own all-reduce) and
  ``comm/nccl/.../nccl_perf.parquet``: ``num_gpus``, ``message_size`` (bytes) → ``latency``.

A lookup returns the table's value exactly at a grid point and interpolates linearly between grid
points (bilinearly over two keys; GEMMs also over ``n`` and ``k``, which makes a latency that grows
as ``n·k`` exact); past the last grid point it extends the last segment's slope. The tables are read
with pyarrow (a dependency of aiconfigurator-core) once per machine, then from a NumPy copy
(``table_cache``), and held as numpy arrays.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from tokenpace.errors import UsageError
from tokenpace.simulator.kernels.interp import interp, interp_array, interp_exact
from tokenpace.simulator.kernels.table_cache import table_columns

INSTALL = "pip install 'tokenpace[kernels]'"
# Our GPU catalog ids → aiconfigurator's system names (A100 40 GB runs the same kernels as 80 GB).
GPU_SYSTEMS = {"h100-sxm": "h100_sxm", "h200": "h200_sxm", "a100-80gb": "a100_sxm", "a100-40gb": "a100_sxm",
               "l40s": "l40s", "b200": "b200_sxm", "gb200": "gb200"}
# The GPUs that take another part's tables (the same SMs and clocks, less memory bandwidth): the
# GPU the tables were measured on, and this part's measured device-memory copy rate (1e12 bytes/s),
# the most its HBM streams whatever the kernel. A memory-bound kernel that the measured part's SMs
# run faster than this is priced at this rate on the borrowing part (``borrowed_s``).
BORROWED = {
    "a100-40gb": ("a100-80gb", 1.355,
                  "A100 40GB memcopy measured at 1,355 GB/s, 87% of its 1,555 GB/s "
                  "(PTsolvers gpu-workshop-JuliaCon23 perftest.jl's reference, issue #7)"),
}
BACKENDS = ("vllm", "sglang", "trtllm")


def kernel_backend(engine: str | None) -> str:
    """The engine whose tables price a step under the ``engine`` preset: its own, vLLM's without one."""
    return engine if engine in BACKENDS else "vllm"


# Our weight precisions → the tables' gemm_dtype.
GEMM_DTYPES = {"bf16": "bfloat16", "fp16": "bfloat16", "fp8": "fp8", "int8": "int8_wo", "int4": "int4_wo",
               "nvfp4": "nvfp4"}
_KV_FLAG = {"bfloat16": "bf16"}  # the tables' kv_cache_dtype as --kv-dtype names it
# Kernels each engine runs by default on these GPUs, best first; otherwise the kernel with most rows.
_PREFERRED_KERNELS = (
    "torch.nn.functional.linear", "CutlassFP8ScaledMMLinearKernel", "sglang_torch_linear",
    "sglang_sgl_kernel_fp8_scaled_mm", "vllm_default", "sglang", "torch_flow",
    "FlashInferCuteDslNvFp4LinearKernel", "sglang_flashinfer_cutedsl_nvfp4",
    "vllm_flash_attn_fa3", "fa3", "vllm_flash_attn", "vllm_flash_attn_fa2", "flash_attention",
    "vllm_flashinfer_trtllmdecode", "vllm_flashinfer_trtllmprefill", "flashinfer",
    "vLLM_custom_graph", "SGLang_CustomAllReduce_graph", "TRTLLM", "NCCL",
)


def _aic_root() -> Path | None:
    try:
        import aiconfigurator_core
    except ImportError:
        return None
    root = Path(aiconfigurator_core.__file__).parent / "systems" / "data"
    return root if root.is_dir() else None


def tables_available() -> bool:
    return _aic_root() is not None


def require_root() -> Path:
    root = _aic_root()
    if root is None:
        raise UsageError(f"--predictor kernels needs NVIDIA's measured kernel tables: {INSTALL}")
    return root


def _version_key(v: str) -> tuple:
    """Sort key for versions like 0.5.6.post2, 1.3.0rc20: numbers compare as numbers."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.findall(r"\d+|[a-z]+", v))


@dataclass(frozen=True, slots=True)
class TableSet:
    gpu: str  # our GPU id
    system: str  # aiconfigurator's
    backend: str
    version: str  # the newest version with both GEMM and attention tables


def kernel_table_sets() -> list[TableSet]:
    """Every (GPU of our catalog, engine) with measured GEMM and attention tables, at its newest
    version; empty without the extra."""
    root = _aic_root()
    if root is None:
        return []
    out = []
    for gpu, system in GPU_SYSTEMS.items():
        for backend in BACKENDS:
            version = _newest(root / system, backend)
            if version:
                out.append(TableSet(gpu, system, backend, version))
    return out


def _newest(system_dir: Path, backend: str) -> str | None:
    gemm, attn = system_dir / "gemm" / backend, system_dir / "attention" / backend
    if not gemm.is_dir() or not attn.is_dir():
        return None
    both = {p.name for p in gemm.iterdir() if (p / "gemm_perf.parquet").is_file()} & {
        p.name for p in attn.iterdir() if (p / "generation_attention_perf.parquet").is_file()
        and (p / "context_attention_perf.parquet").is_file()}
    return max(both, key=_version_key) if both else None


def _read(path: Path, columns: list[str], optional: dict[str, object] | None = None) -> dict[str, np.ndarray]:
    """The columns of a table (through ``table_cache``); an ``optional`` column the table lacks
    reads as its default."""
    table = table_columns(path)
    optional = optional or {}
    out = {c: table[c] for c in columns if c in table}
    rows = len(next(iter(table.values()))) if table else 0
    for c in columns:
        if c not in table:
            if c not in optional:
                raise UsageError(f"kernel table {path.name} has no column {c!r}")
            out[c] = np.full(rows, optional[c])
    return out


def _pick_kernel(kernels: np.ndarray) -> str:
    names, counts = np.unique(kernels.astype(str), return_counts=True)
    for k in _PREFERRED_KERNELS:
        if k in names:
            return k
    return str(names[int(np.argmax(counts))])


class Grid2D:
    """Latencies on a rectangular (a, b) grid, bilinear between grid points; cells the table lacks
    are filled along b (then a) by the same interpolation."""

    def __init__(self, a: np.ndarray, b: np.ndarray, lat: np.ndarray) -> None:
        self.a = np.unique(a).astype(float)
        self.b = np.unique(b).astype(float)
        grid = np.full((len(self.a), len(self.b)), np.nan)
        grid[np.searchsorted(self.a, a), np.searchsorted(self.b, b)] = lat
        for i in range(len(self.a)):  # fill gaps along b
            row, ok = grid[i], ~np.isnan(grid[i])
            if ok.any() and not ok.all():
                grid[i, ~ok] = interp_array(self.b[ok], row[ok], self.b[~ok])
        for j in range(len(self.b)):  # rows with nothing at all: along a
            col, ok = grid[:, j], ~np.isnan(grid[:, j])
            if ok.any() and not ok.all():
                grid[~ok, j] = interp_array(self.a[ok], col[ok], self.a[~ok])
        self.lat = grid
        self._a, self._b = self.a.tolist(), self.b.tolist()
        self._rows = grid.tolist()

    def at(self, a: float, b: float) -> float:
        xs, n = self._a, len(self._a)
        i = bisect.bisect_left(xs, a)
        if i < n and xs[i] == a:
            return interp(self._b, self._rows[i], b)
        i = min(max(i, 1), n - 1) if n > 1 else 0
        if n == 1:
            return interp(self._b, self._rows[0], b)
        y0, y1 = interp(self._b, self._rows[i - 1], b), interp(self._b, self._rows[i], b)
        return y0 + (y1 - y0) * (a - xs[i - 1]) / (xs[i] - xs[i - 1])


    def at_many(self, a: float, b: np.ndarray) -> np.ndarray:
        """``at(a, x)`` for every x in ``b``: the same floats."""
        xs, n = self._a, len(self._a)
        i = bisect.bisect_left(xs, a)
        if i < n and xs[i] == a:
            return interp_exact(self.b, self.lat[i], b)
        if n == 1:
            return interp_exact(self.b, self.lat[0], b)
        i = min(max(i, 1), n - 1)
        y0, y1 = interp_exact(self.b, self.lat[i - 1], b), interp_exact(self.b, self.lat[i], b)
        return y0 + (y1 - y0) * (a - xs[i - 1]) / (xs[i] - xs[i - 1])


@dataclass(frozen=True, slots=True)
class AttentionTable:
    """One attention shape's latencies (ms, one layer) and where they came from."""

    grid: Grid2D  # (batch size, tokens: the prompt's for context, the KV's for generation)
    kernel: str
    shape: tuple[int, int, int]  # (heads, KV heads, head dim) of the rows used
    scale: float  # applied to the rows' latencies (1 for the exact shape)

    def ms(self, batch: float, tokens: float) -> float:
        return self.grid.at(batch, tokens) * self.scale

    def ms_many(self, batch: float, tokens: np.ndarray) -> np.ndarray:
        """``ms(batch, x)`` for every x in ``tokens``: the same floats."""
        return self.grid.at_many(batch, tokens) * self.scale


class KernelTables:
    """The tables of one system, engine and version, read on demand."""

    def __init__(self, system: str, backend: str, version: str, root: Path) -> None:
        self.system, self.backend, self.version = system, backend, version
        self.dir = root / system
        self._gemm: dict[str, tuple[str, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]] = {}

    # -- GEMM --------------------------------------------------------------------------------------

    def gemm_dtypes(self) -> list[str]:
        d = _read(self.dir / "gemm" / self.backend / self.version / "gemm_perf.parquet", ["gemm_dtype"])
        return sorted(set(d["gemm_dtype"].astype(str)))

    def _gemm_table(self, dtype: str) -> tuple[str, dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]]:
        if dtype not in self._gemm:
            d = _read(self.dir / "gemm" / self.backend / self.version / "gemm_perf.parquet",
                      ["gemm_dtype", "kernel_source", "m", "n", "k", "latency"])
            sel = d["gemm_dtype"].astype(str) == dtype
            if not sel.any():
                raise UsageError(f"no measured {dtype} GEMMs for {self.backend} {self.version} on {self.system} "
                                 f"(it has {', '.join(self.gemm_dtypes())}); use --predictor roofline")
            kernel = _pick_kernel(d["kernel_source"][sel])
            sel &= d["kernel_source"].astype(str) == kernel
            m, n, k, lat = (d[c][sel] for c in ("m", "n", "k", "latency"))
            curves: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
            order = np.lexsort((m, k, n))
            m, n, k, lat = m[order], n[order], k[order], lat[order].astype(float)
            keys = np.stack([n, k], axis=1)
            starts = np.flatnonzero(np.r_[True, np.any(keys[1:] != keys[:-1], axis=1)])
            ends = np.r_[starts[1:], len(m)]
            for s, e in zip(starts, ends):
                ms_, ls = m[s:e], lat[s:e]
                uniq, idx = np.unique(ms_, return_index=True)  # duplicate rows: the first
                curves[(int(n[s]), int(k[s]))] = (uniq.astype(float), ls[idx])
            self._gemm[dtype] = (kernel, curves)
        return self._gemm[dtype]

    def gemm_kernel(self, dtype: str) -> str:
        return self._gemm_table(dtype)[0]

    def gemm_rows(self, dtype: str) -> np.ndarray:
        """Every row count (m) measured for this dtype, ascending."""
        return np.unique(np.concatenate([c[0] for c in self._gemm_table(dtype)[1].values()]))

    def gemm_ms(self, dtype: str, m: float, n: int, k: int) -> float:
        """One GEMM's latency (ms): ``m`` rows × the (``n`` × ``k``) weight."""
        return float(self.gemm_curve(dtype, n, k, np.array([m], dtype=float))[0])

    def gemm_curve(self, dtype: str, n: int, k: int, ms: np.ndarray) -> np.ndarray:
        """Latencies (ms) of the (n × k) GEMM at each row count in ``ms``: bilinear over the measured
        (n, k) around it, each corner interpolated over m; past the grid's largest n or k, the
        latency grows in proportion."""
        _, curves = self._gemm_table(dtype)
        ns = sorted({key[0] for key in curves})
        ks = sorted({key[1] for key in curves})
        n0, n1, wn, sn = _bracket(ns, n)
        k0, k1, wk, sk = _bracket(ks, k)

        def corner(nn: int, kk: int) -> np.ndarray:
            c = curves.get((nn, kk))
            if c is None:
                c = _nearest_curve(curves, nn, kk)
                return interp_array(c[1][0], c[1][1], ms) * (nn * kk) / (c[0][0] * c[0][1])
            return interp_array(c[0], c[1], ms)

        lo = corner(n0, k0) * (1 - wk) + (corner(n0, k1) * wk if wk else 0.0)
        if wn:
            hi = corner(n1, k0) * (1 - wk) + (corner(n1, k1) * wk if wk else 0.0)
            lo = lo * (1 - wn) + hi * wn
        return lo * sn * sk

    # -- attention -------------------------------------------------------------------------------

    def attention(self, phase: str, heads: int, kv_heads: int, head_dim: int, kv_dtype: str) -> AttentionTable:
        """``phase``: "context" or "generation". Rows of the exact (heads, KV heads, head dim) when
        measured; else the nearest measured shape with this head dim, scaled by the ratio of heads
        (context: compute grows with heads) or of KV heads (generation: KV reads do)."""
        path = self.dir / "attention" / self.backend / self.version / f"{phase}_attention_perf.parquet"
        cols = ["kernel_source", "batch_size", "isl", "step", "num_heads", "num_key_value_heads", "head_dim",
                "kv_cache_dtype", "attn_dtype", "window_size", "latency"]
        d = _read(path, cols, {"window_size": 0, "attn_dtype": "bfloat16"})
        shape = (d["window_size"] == 0) & (d["attn_dtype"].astype(str) == "bfloat16") & (d["head_dim"] == head_dim)
        sel = shape & (d["kv_cache_dtype"].astype(str) == kv_dtype)
        if not sel.any():  # name the KV dtypes it measured at this head dim, as --kv-dtype spells them
            have = sorted({_KV_FLAG.get(k, k) for k in d["kv_cache_dtype"][shape].astype(str)})
            raise UsageError(f"no measured {phase} attention with head dim {head_dim} and a {kv_dtype} KV cache for "
                             f"{self.backend} {self.version} on {self.system}; " + (f"give --kv-dtype {' or '.join(have)}"
                             f" (measured), or use --predictor roofline" if have else "use --predictor roofline"))
        kernel = _pick_kernel(d["kernel_source"][sel])
        sel &= d["kernel_source"].astype(str) == kernel
        shapes = sorted({(int(h), int(kv)) for h, kv in zip(d["num_heads"][sel], d["num_key_value_heads"][sel])})
        if (heads, kv_heads) in shapes:
            h, kv, scale = heads, kv_heads, 1.0
        else:
            h, kv = min(shapes, key=lambda s: (abs(np.log(s[1] / kv_heads)), abs(np.log(s[0] / heads))))
            scale = heads / h if phase == "context" else kv_heads / kv
        sel &= (d["num_heads"] == h) & (d["num_key_value_heads"] == kv)
        tokens = d["isl"][sel] if phase == "context" else d["step"][sel]
        return AttentionTable(Grid2D(d["batch_size"][sel], tokens, d["latency"][sel].astype(float)),
                              kernel, (h, kv, head_dim), scale)

    # -- all-reduce ------------------------------------------------------------------------------

    def allreduce(self, tp: int) -> tuple[np.ndarray, np.ndarray, str]:
        """(message bytes, ms, source) of a 16-bit all-reduce over ``tp`` GPUs: the engine's own
        (custom, CUDA-graph) all-reduce where measured, else NCCL's."""
        comm = self.dir / "comm"
        for base, fname, dcol, dval in ((comm / self.backend, "custom_allreduce_perf.parquet", "allreduce_dtype",
                                         "bfloat16"), (comm / "nccl", "nccl_perf.parquet", "nccl_dtype", "half")):
            if not base.is_dir():
                continue
            versions = sorted((p.name for p in base.iterdir() if (p / fname).is_file()), key=_version_key)
            for version in reversed(versions):
                d = _read(base / version / fname, ["op_name", "kernel_source", "num_gpus", "message_size",
                                                   dcol, "latency"])
                sel = ((d["op_name"].astype(str) == "all_reduce") & (d["num_gpus"] == tp)
                       & (d[dcol].astype(str) == dval))
                if not sel.any():
                    continue
                kernel = _pick_kernel(d["kernel_source"][sel])
                sel &= d["kernel_source"].astype(str) == kernel
                size, idx = np.unique(d["message_size"][sel], return_index=True)
                return size.astype(float), d["latency"][sel][idx].astype(float), f"{base.name} {version} {kernel}"
        raise UsageError(f"no measured all-reduce over {tp} GPUs on {self.system}; use --predictor roofline")


def _bracket(grid: list[int], x: int) -> tuple[int, int, float, float]:
    """(lo, hi, weight of hi, scale) for x on a sorted grid: past its end, the last point scaled."""
    if x >= grid[-1]:
        return grid[-1], grid[-1], 0.0, x / grid[-1]
    if x <= grid[0]:
        return grid[0], grid[0], 0.0, 1.0
    i = bisect.bisect_left(grid, x)
    if grid[i] == x:
        return x, x, 0.0, 1.0
    lo, hi = grid[i - 1], grid[i]
    return lo, hi, (x - lo) / (hi - lo), 1.0


def _nearest_curve(curves: dict, n: int, k: int) -> tuple[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    key = min(curves, key=lambda c: abs(np.log(c[0] / n)) + abs(np.log(c[1] / k)))
    return key, curves[key]


@lru_cache(maxsize=8)
def load_tables(gpu: str, backend: str) -> KernelTables:
    """The tables for our GPU id and an engine (vllm, sglang, trtllm), at its newest version."""
    root = require_root()
    system = GPU_SYSTEMS.get(gpu)
    if system is None:
        measured = sorted({s.gpu for s in kernel_table_sets()})
        raise UsageError(f"no measured kernel tables for GPU {gpu!r} (measured: {', '.join(measured)}); "
                         "use --predictor roofline")
    version = _newest(root / system, backend)
    if version is None:
        raise UsageError(f"no measured kernel tables for {backend} on {gpu}; use --predictor roofline")
    return KernelTables(system, backend, version, root)
