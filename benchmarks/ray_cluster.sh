#!/usr/bin/env bash
# Steps/s of a local two-node Ray cluster against the process backend on this machine,
# as a ratio taken in one run: ROUNDS alternations of the same Montezuma exploration
# (same seed, 2 workers: one actor per node, or two worker processes), each from a
# fresh run dir; every pair must end with the same final.json.
#
#   sudo benchmarks/ray_cluster.sh [FRAMES] [ROUNDS]     (root: it runs in a private
#                                                        loopback-only network namespace)
set -euo pipefail
FRAMES=${1:-100000}
ROUNDS=${2:-3}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PY:-$ROOT/.venv/bin/python}
RAY=$(dirname "$PY")/ray
if [ -z "${IN_NETNS:-}" ]; then
  # Ray's workers run at niceness 15 unless told otherwise: the nodes run them at 0
  export IN_NETNS=1 RAY_USAGE_STATS_ENABLED=0 RAY_AUTH_MODE=token RAY_worker_niceness=0
  RAY_AUTH_TOKEN=$("$PY" -c "import secrets; print(secrets.token_hex(32))")
  export RAY_AUTH_TOKEN
  exec unshare --net bash -c "ip link set lo up && exec bash '$0' $FRAMES $ROUNDS"
fi
OUT=$(mktemp -d /tmp/raybench.XXXX)
trap '"$RAY" stop --force >/dev/null 2>&1; rm -rf "$OUT"' EXIT
"$RAY" start --head --node-ip-address 127.0.0.1 --port 6391 --num-cpus 1 --include-dashboard false \
  --temp-dir "$OUT/ray" --disable-usage-stats >/dev/null
"$RAY" start --address 127.0.0.1:6391 --node-ip-address 127.0.0.1 --num-cpus 1 \
  --disable-usage-stats >/dev/null

run() {  # name, extra flags
  "$PY" -m goexplore.cli run --env montezuma --seed 0 --total-frames "$FRAMES" --n-workers 2 \
    --ckpt-every 0 --log-every-batches 5 --run-dir "$OUT/$1" "${@:2}" >/dev/null
  # exploration steps/s: the last metrics row's rate (from the first batch, backend started)
  "$PY" - "$OUT/$1/metrics.jsonl" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
print(f"{rows[-1]['steps_per_s']:.1f}")
EOF
}
same() {
  "$PY" - "$OUT/$1/final.json" "$OUT/$2/final.json" <<'EOF'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for f in (a, b):
    f.pop("wall_s")
print("same final.json" if a == b else "DIFFERENT final.json")
EOF
}
for r in $(seq "$ROUNDS"); do
  p=$(run "proc$r")
  c=$(run "ray$r" --backend ray --ray-address 127.0.0.1:6391)
  "$PY" -c "print(f'round $r: processes $p steps/s, two-node Ray cluster $c steps/s, ratio {$c / $p:.3f}')"
  same "proc$r" "ray$r"
done
