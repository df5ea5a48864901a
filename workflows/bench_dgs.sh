#!/usr/bin/env bash
# The DGS benchmark of issue 5: Deep Greedy Switching against dlap's exact solver on one device,
# GEOM benefit (the paper's case), geometric and uniform instances, n = 1000..20000, with the gap
# reached at deadlines of 10, 100 and 1000 ms. Writes JSON lines, the markdown table and the log
# under workflows/results/ (or $OUT). Usage: workflows/bench_dgs.sh [gpu|cpu] [sizes...]
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-workflows/results}
mkdir -p "$out"
stamp=${STAMP:-$(date +%Y%m%d)}
device=${1:-gpu}
shift || true
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(1000 2000 5000 10000 20000)
python3 -m dlap bench --method dgs --device "$device" --n "${sizes[@]}" \
  --json "$out/dgs-$device-$stamp.jsonl" --markdown "$out/dgs-$device-$stamp.md" | tee "$out/dgs-$device-$stamp.log"
