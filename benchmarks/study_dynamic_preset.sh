#!/usr/bin/env bash
# The current downscale-dynamic preset (with the chosen-since-new weight) where the
# dynamic-downscaling study needs it beyond the Montezuma runs of study_variants.sh
# (sincenew1, seeds 0 and 1 to 5M; seed 0 on to 20M with two workers):
#   * Pitfall, Venture and Private Eye, seed 0, to 2M agent steps (against the reference
#     runs of study_dynamic.sh);
#   * Montezuma seeds 0 and 1 to 2M with episodes ending only at game over (the paper's rule);
#   * Montezuma seeds 0 and 1 to 2M with --dynamic-keep 0.1;
# then the compare pages. Two lanes of one-worker runs (a 2-core machine); results do
# not depend on the number of workers. Resumable: run it again and each run continues
# from its latest checkpoint.
#
#   benchmarks/study_dynamic_preset.sh OUT_DIR   (keep OUT_DIR outside the repo)
set -euo pipefail
OUT=${1:?usage: study_dynamic_preset.sh OUT_DIR}
GE=${GE:-goexplore}
mkdir -p "$OUT"

run() {  # run NAME ENV SEED BUDGET [FLAG ...]
  local name=$1 env=$2 seed=$3 budget=$4
  shift 4
  $GE run --env "$env" --preset downscale-dynamic --seed "$seed" --total-frames "$budget" \
    "$@" --ckpt-every 500000 --n-workers "${GE_WORKERS:-1}" --run-dir "$OUT/$name" \
    --resume auto >> "$OUT/$name.log" 2>&1
}

( run pitfall-downscale-dynamic-sincenew1-seed0 pitfall 0 2000000
  run venture-downscale-dynamic-sincenew1-seed0 venture 0 2000000
  run downscale-dynamic-sincenew1-keep0.1-seed0 montezuma 0 2000000 --dynamic-keep 0.1 ) &
( run private_eye-downscale-dynamic-sincenew1-seed0 private_eye 0 2000000
  run downscale-dynamic-sincenew1-gameover-seed0 montezuma 0 2000000 --episode-end game
  run downscale-dynamic-sincenew1-keep0.1-seed1 montezuma 1 2000000 --dynamic-keep 0.1 ) &
wait
run downscale-dynamic-sincenew1-gameover-seed1 montezuma 1 2000000 --episode-end game

for game in pitfall venture private_eye; do
  $GE compare "$OUT/$game-reference-seed0" "$OUT/$game-downscale-dynamic-seed0" \
    "$OUT/$game-downscale-dynamic-sincenew1-seed0" --out "$OUT/compare-$game-dynamic"
done
$GE compare "$OUT"/downscale-dynamic-sincenew1-seed[01]/ \
  "$OUT"/downscale-dynamic-sincenew1-keep0.1-seed*/ \
  "$OUT"/downscale-dynamic-sincenew1-gameover-seed*/ --out "$OUT/compare-preset-variants"
