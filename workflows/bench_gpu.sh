#!/usr/bin/env bash
# The GPU benchmark of issue 3 on one GPU: the ANCHORS.md grid (uniform int32, n = 5000..40000)
# plus geometric and float instances, dlap's GPU methods timed from a host matrix and from a
# matrix already on the GPU, lap and scipy on the same machine's CPU where they finish in about a
# minute; then where the time goes (per phase) and one n = 100000 instance with its certificate.
# Writes JSON lines, the markdown table, the plot and the logs under workflows/results/ (or $OUT).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-workflows/results}
mkdir -p "$out"
stamp=${STAMP:-$(date +%Y%m%d)}
what=${1:-all}
if [[ $what == all || $what == bench ]]; then
  python3 -m dlap bench --device gpu --repeat 3 --peer-budget 40 --json "$out/gpu-$stamp-grid.jsonl" \
    --markdown "$out/gpu-$stamp-grid.md" --plot "$out/gpu-$stamp-grid.png" | tee "$out/gpu-$stamp-grid.txt"
fi
if [[ $what == all || $what == large ]]; then
  python3 workflows/gpu_phases.py --n 5000 10000 20000 --f 0.1 1 10 --json "$out/gpu-$stamp-phases.jsonl" \
    | tee "$out/gpu-$stamp-phases.log"
  python3 workflows/gpu_large.py --n 100000 --f 1 --host --json "$out/gpu-$stamp-large.jsonl" \
    | tee "$out/gpu-$stamp-large.log"
fi
