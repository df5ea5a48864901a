#!/usr/bin/env bash
# The CPU benchmark of issue 2: dlap's default side by side with lap.lapjv and scipy at n = 1000,
# 2000, 4000 (uniform f=1, f=10, float U[0,1)), then each variant on the harder families.
# Writes JSON lines and the printed tables under workflows/results/. Run on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out=workflows/results
mkdir -p "$out"
stamp=${STAMP:-$(date +%Y%m%d)}
dlap bench --n 1000 2000 4000 --families uniform:1 uniform:10 float --solvers dlap lap scipy \
  --repeat 3 --json "$out/cpu-$stamp-main.jsonl" | tee "$out/cpu-$stamp-main.txt"
dlap bench --n 1000 2000 --families uniform:0.1 geometric ties \
  --solvers dlap dlap-tree dlap-classical lap scipy --repeat 3 \
  --json "$out/cpu-$stamp-families.jsonl" | tee "$out/cpu-$stamp-families.txt"
# Machol-Wien without the classical variant: its O(n^2) dual updates take minutes at n = 1000
dlap bench --n 1000 --families machol-wien --solvers dlap lap scipy --repeat 3 \
  --json "$out/cpu-$stamp-machol-wien.jsonl" | tee "$out/cpu-$stamp-machol-wien.txt"
