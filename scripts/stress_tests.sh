#!/usr/bin/env bash
# Run the test suite N times in a row and list every test that failed at least once.
#
#   scripts/stress_tests.sh N [--load K] [--keep DIR] [-- PYTEST_ARGS...]
#
#   N            how many runs of the suite (default 5)
#   --load K     keep K CPU-bound `tokenpace sim` loops running beside the suite (default 0: an
#                idle machine); a busy machine is where timing-shaped assertions show themselves
#   --keep DIR   keep each run's JUnit XML and log in DIR (default: a temporary folder, printed)
#   PYTEST_ARGS  passed to pytest (default: none, the whole suite as the README runs it)
#
# Uses .venv/bin/python (the README's test command creates it). Exit status: 0 when no test ever
# failed, 1 otherwise. Run it before resolving any issue that adds timing-related tests.
set -uo pipefail
cd "$(dirname "$0")/.."

runs=5
load=0
keep=""
if [[ $# -gt 0 && $1 != -* ]]; then runs=$1; shift; fi
while [[ $# -gt 0 ]]; do
  case $1 in
    --load) load=$2; shift 2 ;;
    --keep) keep=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "stress_tests: unknown argument '$1' (usage: scripts/stress_tests.sh N [--load K] [--keep DIR] [-- PYTEST_ARGS])" >&2; exit 2 ;;
  esac
done
if ! [[ $runs =~ ^[1-9][0-9]*$ && $load =~ ^[0-9]+$ ]]; then
  echo "stress_tests: N must be a positive whole number and --load K a whole number" >&2; exit 2
fi
py=.venv/bin/python
if [[ ! -x $py ]]; then
  echo "stress_tests: $py not found: run the README's test command once first" >&2; exit 2
fi
out=${keep:-$(mktemp -d -t tokenpace-stress.XXXXXX)}
mkdir -p "$out"

loaders=()
stop_load() {
  for pid in "${loaders[@]}"; do kill -- "-$pid" 2>/dev/null || kill "$pid" 2>/dev/null; done
  loaders=()
}
trap 'stop_load; exit 130' INT TERM
for ((k = 0; k < load; k++)); do
  # A simulation of 20,000 requests takes seconds of one core; run them back to back.
  setsid bash -c "while :; do $py -m tokenpace sim --requests 20000 --concurrency 64 --seed $k \
      --out '$out/load-$k.json' >/dev/null 2>&1; done" &
  loaders+=($!)
done

echo "stress_tests: $runs run(s), $load load loop(s) beside; results in $out"
for ((i = 1; i <= runs; i++)); do
  start=$(date +%s)
  "$py" -m pytest -q -p no:cacheprovider --junitxml="$out/run-$i.xml" "$@" >"$out/run-$i.log" 2>&1
  rc=$?
  echo "run $i: exit $rc in $(($(date +%s) - start)) s: $(tail -n 1 "$out/run-$i.log")"
done
stop_load

"$py" - "$out" "$runs" <<'PY'
import glob
import sys
import xml.etree.ElementTree as ET

out, runs = sys.argv[1], int(sys.argv[2])
failed = {}  # test id -> [(run, first line of the failure)]
for path in sorted(glob.glob(f"{out}/run-*.xml")):
    run = path.rsplit("-", 1)[1].split(".")[0]
    for case in ET.parse(path).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            node = case.find(outcome)
            if node is not None:
                test = f"{case.get('classname')}::{case.get('name')}"
                message = (node.get("message") or node.text or "").strip().splitlines()
                failed.setdefault(test, []).append((run, outcome, message[0][:200] if message else ""))
if not failed:
    print(f"stress_tests: no test failed in {runs} run(s)")
    sys.exit(0)
print(f"stress_tests: {len(failed)} test(s) failed at least once in {runs} run(s):")
for test, failures in sorted(failed.items()):
    print(f"  {test}: {len(failures)}/{runs}")
    for run, outcome, message in failures:
        print(f"      run {run} ({outcome}): {message}")
sys.exit(1)
PY
