#!/usr/bin/env bash
# The search-quality study of the presets (docs/studies/): montezuma-dk against
# reference on Montezuma (seeds 0 and 1), pitfall-dk against reference on Pitfall (seed 0),
# then one compare page. Every run is resumable: run this again (or after a kill) and each
# run continues from its latest checkpoint; raise BUDGET to extend the Montezuma runs.
#
#   benchmarks/study_presets.sh OUT_DIR      (keep OUT_DIR outside the repo)
#
# One worker per run, all runs at once: on 2 cores the six runs share the machine, which
# changes only how long they take, never what they find (results do not depend on timing).
set -euo pipefail
OUT=${1:?usage: study_presets.sh OUT_DIR}
BUDGET=${BUDGET:-5000000}
PITFALL_BUDGET=${PITFALL_BUDGET:-2000000}
GE=${GE:-goexplore}
mkdir -p "$OUT"

for seed in 0 1; do
  for preset in reference montezuma-dk; do
    $GE run --env montezuma --preset "$preset" --seed "$seed" --total-frames "$BUDGET" \
      --ckpt-every 500000 --n-workers 1 --run-dir "$OUT/$preset-seed$seed" --resume auto \
      > "$OUT/$preset-seed$seed.log" 2>&1 &
  done
done
for preset in reference pitfall-dk; do
  $GE run --env pitfall --preset "$preset" --seed 0 --total-frames "$PITFALL_BUDGET" \
    --ckpt-every 500000 --n-workers 1 --run-dir "$OUT/pitfall-$preset-seed0" --resume auto \
    > "$OUT/pitfall-$preset-seed0.log" 2>&1 &
done
wait

$GE compare "$OUT"/reference-seed* "$OUT"/montezuma-dk-seed* --out "$OUT/compare-montezuma"
$GE compare "$OUT"/pitfall-*-seed0 --out "$OUT/compare-pitfall"
