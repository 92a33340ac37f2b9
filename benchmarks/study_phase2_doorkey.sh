#!/usr/bin/env bash
# Phase 2 on MiniGrid-DoorKey-16x16: robustify each seed's Phase 1 run (from
# benchmarks/minigrid_table.py) and the --no-demo control at the same budget, then
# evaluate both from reset under sticky actions 0.25 (100 episodes each).
#   benchmarks/study_phase2_doorkey.sh PHASE1_DIR OUT_DIR [FRAMES] [SEEDS]
# PHASE1_DIR holds MiniGrid-DoorKey-16x16-v0-seed<S> run dirs. Resumable: a finished
# robustify or evaluation is skipped, an interrupted one continues (--resume).
set -euo pipefail
P1=${1:?PHASE1_DIR}; OUT=${2:?OUT_DIR}; FRAMES=${3:-600000}; SEEDS=${4:-"0 1 2"}
GE=${GE:-goexplore}
mkdir -p "$OUT"
for s in $SEEDS; do
  src="$P1/MiniGrid-DoorKey-16x16-v0-seed$s"
  for kind in demo control; do
    dir="$OUT/$kind-seed$s"
    flags=(); [ "$kind" = control ] && flags=(--no-demo)
    resume=(); [ -f "$dir/config.json" ] && resume=(--resume)
    [ -f "$dir/policy.json" ] && [ -f "$dir/eval.json" ] && continue
    /usr/bin/time -f "%e s wall" -o "$dir.time" \
      $GE robustify "$src" --out "$dir" --frames "$FRAMES" --seed "$s" "${flags[@]}" "${resume[@]}" \
      > "$dir.log" 2>&1
    $GE evaluate "$dir" --episodes 100 --json "$dir/eval.json" > "$dir.eval.log" 2>&1
  done
done
