#!/usr/bin/env bash
# A/B comparison with tollgate-bench: runs the benchmark in interleaved rounds
# with setting A and setting B (environment assignments for the gateway), then
# prints the median of each figure per side and the median of the per-round
# differences (b - a within a round, which cancels drift between rounds). One
# run's noise on a small machine is larger than the effects worth measuring;
# interleaving spreads drift over both sides, and each run is still measured
# against the direct mock in the same run.
#
#   tests/bench/ab.sh [--rounds N] A_ENV B_ENV [tollgate-bench options...]
#   (each run measures `--configs default` unless the options name others;
#   the figures are printed per configuration)
#   tests/bench/ab.sh --rounds 5 TOLLGATE_METERING__ENABLED=false TOLLGATE_METERING__ENABLED=true \
#       --concurrency 1,16,64 --duration-secs 4
#   tests/bench/ab.sh TOLLGATE_BENCH_BIN=/old/build/tollgate TOLLGATE_BENCH_BIN=./target/release/tollgate
#       (two builds; each directory needs a tollgate-mock-upstream beside the binary)
#
# Build first: cargo build --release -p tollgate -p tollgate-bench
set -euo pipefail
cd "$(dirname "$0")/../.."

rounds=3
if [ "${1:-}" = "--rounds" ]; then
  rounds=$2
  shift 2
fi
if [ $# -lt 2 ]; then
  sed -n '2,18p' "$0"
  exit 2
fi
a=$1
b=$2
shift 2
bench=./target/release/tollgate-bench
[ -x "$bench" ] || { echo "ab.sh: build $bench first (cargo build --release -p tollgate -p tollgate-bench)" >&2; exit 2; }

# One configuration per run unless asked otherwise: A and B are the comparison.
configs=(--configs default)
for arg in "$@"; do
  case $arg in --configs | --configs=*) configs=() ;; esac
done

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for round in $(seq 1 "$rounds"); do
  # Alternate which side goes first (a b, b a, …), so that whatever one run
  # leaves behind (a warm cache, a deleted database still being freed) does not
  # always land on the same side.
  order="a b"
  [ $((round % 2)) -eq 0 ] && order="b a"
  for side in $order; do
    [ "$side" = a ] && assignment=$a || assignment=$b
    echo "ab.sh: round $round/$rounds, $side: $assignment" >&2
    env "$assignment" "$bench" --json "$out/$side-$round.json" "${configs[@]}" "$@" >/dev/null
  done
done

python3 - "$out" "$a" "$b" <<'EOF'
import json, pathlib, statistics, sys

out, labels = pathlib.Path(sys.argv[1]), {"a": sys.argv[2], "b": sys.argv[3]}
def by_round(path):
    return int(path.stem.split("-")[1])

runs = {side: [json.loads(p.read_text()) for p in sorted(out.glob(f"{side}-*.json"), key=by_round)] for side in "ab"}

def median(values):
    return statistics.median(values) if values else float("nan")

print(f"medians over {len(runs['a'])} interleaved rounds per side")
print(f"  a: {labels['a']}\n  b: {labels['b']}")
def config(run, name):
    return next(c for c in run["configs"] if c["name"] == name)

for name in [c["name"] for c in runs["a"][0]["configs"]]:
    rows = {s: [config(r, name) for r in runs[s]] for s in "ab"}
    print(f"\nconfiguration {name}")
    print(f"{'':>6} {'figure':<24} {'a':>12} {'b':>12} {'b - a':>12} {'paired':>10}")
    levels = [level["concurrency"] for level in rows["a"][0]["load"]]
    for i, c in enumerate(levels):
        for fig, pick in [
            ("added p50 (us)", lambda l: l["added_p50_us"]),
            ("added p99 (us)", lambda l: l["added_p99_us"]),
            ("gateway p50 (us)", lambda l: l["gateway"]["p50_us"]),
            ("gateway req/s", lambda l: l["gateway"]["rps"]),
            ("share of direct req/s", lambda l: l["throughput_ratio"]),
        ]:
            each = {s: [pick(r["load"][i]) for r in rows[s]] for s in "ab"}
            va, vb = median(each["a"]), median(each["b"])
            paired = median([b - a for a, b in zip(each["a"], each["b"])])
            spread = "  runs a: " + " ".join(f"{v:.0f}" for v in each["a"]) + " | b: " + " ".join(f"{v:.0f}" for v in each["b"])
            print(f"{'c=' + str(c):>6} {fig:<24} {va:>12.3f} {vb:>12.3f} {vb - va:>+12.3f} {paired:>+10.1f}{spread if 'share' not in fig else ''}")
    for fig, key in [("added TTFB p50 (us)", "added_ttfb_p50_us"), ("added per chunk (us)", "added_per_chunk_p50_us")]:
        va = median([r["stream"][key] for r in rows["a"]])
        vb = median([r["stream"][key] for r in rows["b"]])
        print(f"{'stream':>6} {fig:<24} {va:>12.3f} {vb:>12.3f} {vb - va:>+12.3f}")
    rss = {s: median([r["peak_rss_kib"] / 1024 for r in rows[s] if r.get("peak_rss_kib")]) for s in "ab"}
    print(f"{'':>6} {'peak RSS (MiB)':<24} {rss['a']:>12.1f} {rss['b']:>12.1f} {rss['b'] - rss['a']:>+12.1f}")
EOF
