#!/usr/bin/env bash
# The question "what limits downscale-dynamic?", one setting at a time: the
# paper's downscale-dynamic (the preset with the paper's seen-only selection,
# --since-new-weight 0) with extra flags, Montezuma seeds 0 and 1 to 5M agent steps,
# side by side with downscale-dynamic and reference (benchmarks/study_dynamic.sh,
# benchmarks/study_presets.sh), then a compare page. Resumable: run it again (or after
# a kill) and each run continues from its latest checkpoint.
#
#   benchmarks/study_variants.sh OUT_DIR NAME [FLAG ...]
#   e.g. benchmarks/study_variants.sh ~/study-runs split0.5 --split-factor 0.5
#        benchmarks/study_variants.sh ~/study-runs sincenew1 --since-new-weight 1
#
# Runs go to OUT_DIR/downscale-dynamic-NAME-seedS (keep OUT_DIR outside the repo).
# One worker per run, two runs at a time (a 2-core machine): results do not depend on it.
set -euo pipefail
OUT=${1:?usage: study_variants.sh OUT_DIR NAME [FLAG ...]}
NAME=${2:?usage: study_variants.sh OUT_DIR NAME [FLAG ...]}
shift 2
BUDGET=${BUDGET:-5000000}
SEEDS=${SEEDS:-0 1}
GE=${GE:-goexplore}
mkdir -p "$OUT"

run() {  # run SEED FLAG...
  local rd="$OUT/downscale-dynamic-$NAME-seed$1"
  $GE run --env montezuma --preset downscale-dynamic --since-new-weight 0 --seed "$@" \
    --total-frames "$BUDGET" \
    --ckpt-every 500000 --n-workers "${GE_WORKERS:-1}" --run-dir "$rd" --resume auto \
    >> "$rd.log" 2>&1
}

for s in $SEEDS; do
  run "$s" "$@" &
done
wait
$GE compare "$OUT"/reference-seed*/ "$OUT"/downscale-dynamic-seed*/ \
  "$OUT"/downscale-dynamic-"$NAME"-seed*/ --out "$OUT/compare-$NAME"
