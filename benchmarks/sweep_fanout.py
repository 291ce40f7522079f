"""A simulated sweep grid run serially, in N local processes (`--jobs N`) and, when Ray is
installed, as Ray tasks on a local cluster: wall time, CPU time, and whether the files are the same.

    .venv/bin/python benchmarks/sweep_fanout.py                  # 2 x 6 steps, serial vs --jobs 2 vs Ray
    .venv/bin/python benchmarks/sweep_fanout.py --jobs 4 --no-ray --duration 600

Every run writes into its own folder with the same relative --out, so the step files can be
compared byte for byte (the sweep file differs only in config.fan_out). CPU time is this process's
and its children's (the processes of --jobs); Ray's workers are not children of the driver, so
with Ray only the driver's CPU is counted and the wall time is the figure to read.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import resource
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tokenpace.config import BenchConfig  # noqa: E402
from tokenpace.simulator.config import SimConfig  # noqa: E402
from tokenpace.sweep import SweepConfig, run_sweep  # noqa: E402


def cpu_s() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def run(folder: Path, args: argparse.Namespace, **fan_out) -> tuple[float, float]:
    folder.mkdir(parents=True)
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        c0, t0 = cpu_s(), time.perf_counter()
        run_sweep(SweepConfig(
            base=BenchConfig(duration_s=args.duration, input_tokens="lognormal:mean=800,sigma=0.6,max=4000",
                             output_tokens="lognormal:mean=200,sigma=0.5,max=1000", slo="chat", progress=False),
            axis="concurrency", loads=[1, 4, 16, 32, 64, 128], vary=[("quant", ["bf16", "fp8"])],
            sim=SimConfig(), out="sweep.json", progress=False, **fan_out))
        return time.perf_counter() - t0, cpu_s() - c0
    finally:
        os.chdir(cwd)


def same_steps(a: Path, b: Path) -> bool:
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    if names != sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file()):
        return False
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    return not mismatch and not errors


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=2, metavar="N")
    ap.add_argument("--duration", type=float, default=300.0, metavar="S", help="virtual seconds a step")
    ap.add_argument("--no-ray", action="store_true")
    args = ap.parse_args()
    print(f"Command: .venv/bin/python benchmarks/sweep_fanout.py {shlex.join(sys.argv[1:])}")
    print(f"{os.cpu_count()} CPUs; load average {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    root = Path(tempfile.mkdtemp(prefix="tp-fanout-"))
    try:
        return compare(root, args)
    finally:
        shutil.rmtree(root, ignore_errors=True)  # the three sweeps' files: gigabytes with long steps


def compare(root: Path, args: argparse.Namespace) -> int:
    rows = [("serial", *run(root / "serial", args))]
    rows.append((f"--jobs {args.jobs}", *run(root / "jobs", args, jobs=args.jobs)))
    same = {"--jobs": same_steps(root / "serial" / "sweep.steps", root / "jobs" / "sweep.steps")}
    if not args.no_ray:
        try:
            import ray
        except ImportError:
            print("Ray not installed (pip install 'tokenpace[ray]'): its row is left out")
        else:
            os.environ.setdefault("RAY_AUTH_MODE", "disabled")
            ray.init(address="local", num_cpus=args.jobs, include_dashboard=False,
                     _node_ip_address="127.0.0.1", log_to_driver=False)
            try:
                rows.append((f"--ray (local, {args.jobs} CPUs)", *run(root / "ray", args, ray="auto")))
            finally:
                ray.shutdown()
            same["--ray"] = same_steps(root / "serial" / "sweep.steps", root / "ray" / "sweep.steps")
    print(f"load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}\n")
    print("| run | wall s | CPU s | wall vs serial |")
    print("|---|---:|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} | {wall / rows[0][1]:.2f}x |")
    print("\nstep files byte for byte the serial sweep's: " + ", ".join(f"{k} {v}" for k, v in same.items()))
    return 0 if all(same.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
