#!/usr/bin/env bash
# The dynamic-downscaling study (docs/studies/, "No domain knowledge: dynamic downscaling"):
# downscale-dynamic on Montezuma (seeds 0 and 1 to 5M agent steps, seed 0 on to 20M), and
# on Pitfall, Venture and Private Eye to 2M, each against the reference preset; then the
# compare pages. Every run is resumable: run this again (or after a kill) and each run
# continues from its latest checkpoint.
#
#   benchmarks/study_dynamic.sh OUT_DIR      (keep OUT_DIR outside the repo)
#
# One worker per run, two runs at a time (a 2-core machine), the long run alone on two
# workers: results do not depend on the number of workers.
# The reference Montezuma runs (seeds 0, 1 to 5M) are benchmarks/study_presets.sh's.
set -euo pipefail
OUT=${1:?usage: study_dynamic.sh OUT_DIR}
LONG=${LONG:-20000000}
GE=${GE:-goexplore}
mkdir -p "$OUT"

run() {  # run NAME ENV PRESET SEED BUDGET
  # these runs predate the preset's chosen-since-new weight: the paper's seen-only selection
  local extra=()
  [ "$3" = downscale-dynamic ] && extra=(--since-new-weight 0)
  $GE run --env "$2" --preset "$3" "${extra[@]}" --seed "$4" --total-frames "$5" --ckpt-every 500000 \
    --n-workers "${GE_WORKERS:-1}" --run-dir "$OUT/$1" --resume auto >> "$OUT/$1.log" 2>&1
}

# two runs at a time: the Montezuma seeds to 5M, then the other games, then seed 0 on to LONG
( run downscale-dynamic-seed0 montezuma downscale-dynamic 0 5000000
  for game in pitfall venture private_eye; do
    run "$game-downscale-dynamic-seed0" "$game" downscale-dynamic 0 2000000
  done ) &
( run downscale-dynamic-seed1 montezuma downscale-dynamic 1 5000000
  for game in pitfall venture private_eye; do
    run "$game-reference-seed0" "$game" reference 0 2000000
  done ) &
wait
GE_WORKERS=2 run downscale-dynamic-seed0 montezuma downscale-dynamic 0 "$LONG"

$GE compare "$OUT"/reference-seed*/ "$OUT"/downscale-dynamic-seed*/ --out "$OUT/compare-dynamic"
for game in pitfall venture private_eye; do
  $GE compare "$OUT/$game-reference-seed0" "$OUT/$game-downscale-dynamic-seed0" \
    --out "$OUT/compare-$game-dynamic"
done
