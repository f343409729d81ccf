#!/usr/bin/env bash
# Allocation-pattern probe: every mode of scripts/probe/probe.c under plain glibc, resizealloc in
# process mode, resizealloc's markers (the probe's plain mode: no regions) and markers with one
# region per iteration (r_MODE); REPS interleaved repetitions (default 3), medians printed.
# It looks for patterns where the library is pathologically slower than glibc (> 2x) or holds
# more memory (> max(1.25 x glibc, glibc + 8 MiB) peak RSS): see BENCHMARKS.md.
#
#   bash scripts/probe/run.sh [MODE ...]        (REPS=1 for a quick pass)
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$ROOT"
OUT=target/probe
mkdir -p "$OUT"
cargo build -q --release -p resizealloc-preload
L=$ROOT/target/release/libresizealloc.so
gcc -O2 -fno-builtin -pthread -o "$OUT/probe" scripts/probe/probe.c -ldl
MODES=("$@")
[[ ${#MODES[@]} -eq 0 ]] && mapfile -t MODES < <("$OUT/probe")
RES=$OUT/results.txt
: >"$RES"
for rep in $(seq "${REPS:-3}"); do
  for m in "${MODES[@]}"; do
    for cfg in glibc process markers region; do
      case $cfg in
        glibc) out=$(timeout 60 "$OUT/probe" "$m" 2>&1) && rc=0 || rc=$? ;;
        process) out=$(RESIZEALLOC_REGION=process LD_PRELOAD=$L timeout 60 "$OUT/probe" "$m" 2>&1) && rc=0 || rc=$? ;;
        markers) out=$(LD_PRELOAD=$L timeout 60 "$OUT/probe" "$m" 2>&1) && rc=0 || rc=$? ;;
        region) out=$(LD_PRELOAD=$L timeout 60 "$OUT/probe" "r_$m" 2>&1) && rc=0 || rc=$? ;;
      esac
      echo "$m $cfg rc=$rc $(echo "$out" | tr '\n' ' ')" >>"$RES"
    done
  done
done
python3 - "$RES" <<'PY'
import re, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    m, cfg, rc = line.split()[:3]
    t = re.search(r"time_ms=([\d.]+)", line); h = re.search(r"hwm_kb=(\d+)", line)
    runs.setdefault((m, cfg), []).append((rc, float(t.group(1)) if t else None, int(h.group(1)) if h else None))
modes = list(dict.fromkeys(k[0] for k in runs))
cfgs = ["glibc", "process", "markers", "region"]
print("| mode | " + " | ".join(f"{c} ms / MiB" for c in cfgs) + " | flags |")
print("|---|" + "---:|" * len(cfgs) + "---|")
for m in modes:
    cells, flags, base = [], [], None
    for c in cfgs:
        rs = runs.get((m, c), [])
        bad = [r for r in rs if r[0] != "rc=0"]
        ts = [r[1] for r in rs if r[1] is not None]; hs = [r[2] for r in rs if r[2] is not None]
        if not ts or not hs:
            cells.append("failed"); flags.append(f"{c}: {bad[0][0] if bad else 'no output'}"); continue
        t, h = statistics.median(ts), statistics.median(hs) / 1024
        cells.append(f"{t:.0f} / {h:.0f}")
        if c == "glibc":
            base = (t, h)
        elif base:
            if t > 2 * base[0] and t - base[0] > 20: flags.append(f"{c} time {t / base[0]:.1f}x")
            if h > max(1.25 * base[1], base[1] + 8): flags.append(f"{c} RSS {h / base[1]:.1f}x")
        if bad: flags.append(f"{c}: {bad[0][0]}")
    print(f"| {m} | " + " | ".join(cells) + " | " + ", ".join(flags) + " |")
PY
