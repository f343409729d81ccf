#!/usr/bin/env bash
# The async service (examples/workloads/service.rs) on tokio's multi-thread runtime, with 1 and
# 2 worker threads: 256 handler tasks receive JSON bodies over channels, parse typed orders,
# await a backend call, build and send replies; 100,000 requests a run. Columns: System and the
# mimalloc crate (no regions), ResizeAlloc without regions, with each handler future in
# InRegion (adapter) and as a #[resizealloc::region] async fn (attribute), and
# ResizeAlloc::wrap(MiMalloc) with the adapter; and the adapter again with each worker's arena
# planned at 8 MiB at least (RESIZEALLOC_INITIAL_ARENA=8M, docs/tuning.md). Interleaved rounds (scripts/round_order.sh),
# each run its own process; medians of time per request and of per-round ratios; peak RSS is
# each process's VmHWM. Every run's checksum must equal System's.
#   ROUNDS=5 (default)
# Writes target/async/results.md (and prints it).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
source scripts/round_order.sh
ROUNDS=${ROUNDS:-5}
OUT=target/async
RAW=$OUT/raw
mkdir -p "$RAW"
rm -f "$RAW"/*
cargo build -q --release --example workloads_system --example workloads_mimalloc \
    --example workloads_resize --example workloads_resize_mimalloc
# binary:mode[:environment]
CONFIGS=(system:plain mimalloc:plain resize:plain resize:adapter resize:attribute resize_mimalloc:adapter
    resize:adapter:RESIZEALLOC_INITIAL_ARENA=8M)
for ((r = 1; r <= ROUNDS; r++)); do
    round_order "$r" "${CONFIGS[@]}"
    for c in "${ORDER[@]}"; do
        IFS=: read -r b mode envs <<<"$c"
        label=$b-$mode${envs:+-8M}
        for t in 1 2; do
            env WORKLOAD_RSS=1 $envs "target/release/examples/workloads_$b" --service "$mode" --threads "$t" \
                >"$RAW/$label.$t.$r.txt"
        done
    done
    echo "round $r of $ROUNDS done" >&2
done
python3 - "$RAW" "$ROUNDS" >"$OUT/results.md" <<'PY'
import statistics, sys
raw, rounds = sys.argv[1], int(sys.argv[2])
configs = ["system-plain", "mimalloc-plain", "resize-plain", "resize-adapter", "resize-attribute",
           "resize_mimalloc-adapter", "resize-adapter-8M"]
def read(c, t, r):
    ns = check = rss = None
    for line in open("%s/%s.%d.%d.txt" % (raw, c, t, r)):
        p = line.split()
        if p[0] == "RESULT":
            ns, check = float(p[2]), p[4]
        elif p[0] == "PEAK_RSS":
            rss = int(p[1]) / 1024
    return ns, check, rss
data = {(c, t, r): read(c, t, r) for c in configs for t in (1, 2) for r in range(1, rounds + 1)}
for (c, t, r), (ns, check, rss) in data.items():
    if check != data[("system-plain", t, r)][1]:
        sys.exit("ERROR: %s with %d workers, round %d: checksum %s, System's %s" % (c, t, r, check, data[("system-plain", t, r)][1]))
med = lambda c, t, i: statistics.median(data[(c, t, r)][i] for r in range(1, rounds + 1))
ratio = lambda a, b, t: statistics.median(data[(a, t, r)][0] / data[(b, t, r)][0] for r in range(1, rounds + 1))
names = {"system-plain": "System", "mimalloc-plain": "mimalloc", "resize-plain": "ResizeAlloc, no regions",
         "resize-adapter": "ResizeAlloc, InRegion", "resize-attribute": "ResizeAlloc, #[region]",
         "resize_mimalloc-adapter": "wrap(MiMalloc), InRegion",
         "resize-adapter-8M": "ResizeAlloc, InRegion, INITIAL_ARENA=8M"}
print("Median of %d interleaved rounds; ns per request (requests per second), peak RSS MiB; ratios are medians of per-round ratios." % rounds)
print()
print("| workers | " + " | ".join(names[c] for c in configs) + " |")
print("|---|" + "---:|" * len(configs))
for t in (1, 2):
    cells = ["%.0f (%.0f k/s), %.1f MiB" % (med(c, t, 0), 1e6 / med(c, t, 0), med(c, t, 2)) for c in configs]
    print("| %d | %s |" % (t, " | ".join(cells)))
print()
print("| workers | InRegion / System (target <= 1.00) | #[region] / System | no regions / System | InRegion, 8M / System | wrap(MiMalloc), InRegion / mimalloc (target <= 0.95) | peak RSS against max(1.25x, +8 MiB) of the allocator underneath |")
print("|---|---:|---:|---:|---:|---:|---|")
def within(cs, base, t):
    b = med(base, t, 2)
    bound = max(1.25 * b, b + 8)
    worst = max(med(c, t, 2) for c in cs)
    return "%s (%.1f MiB, bound %.1f)" % ("within" if worst <= bound else "OVER", worst, bound)
for t in (1, 2):
    print("| %d | %.2f | %.2f | %.2f | %.2f | %.2f | ResizeAlloc: %s; 8 MiB plan: %s; wrap(MiMalloc): %s |" % (
        t, ratio("resize-adapter", "system-plain", t), ratio("resize-attribute", "system-plain", t),
        ratio("resize-plain", "system-plain", t), ratio("resize-adapter-8M", "system-plain", t),
        ratio("resize_mimalloc-adapter", "mimalloc-plain", t),
        within(["resize-plain", "resize-adapter", "resize-attribute"], "system-plain", t),
        within(["resize-adapter-8M"], "system-plain", t),
        within(["resize_mimalloc-adapter"], "mimalloc-plain", t)))
PY
cat "$OUT/results.md"
