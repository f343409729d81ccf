#!/usr/bin/env python3
"""The table of a side-by-side benchmark run (scripts/matrix.sh, scripts/workloads.sh).

    ratio_table.py RAW ROUNDS --target T[,T2] --peers P,... --refs R,... [--unit TEXT] NAME...

RAW holds NAME.ROUND.txt files of "RESULT <cell> <value> ..." lines. Prints a Markdown table:
each allocator's median per cell, then for each target its ratio to each reference, to the
fastest peer of the round, and to mimalloc: every ratio is taken within a round (the same
machine state) and the table gives the median of the per-round ratios.
"""
import statistics
import sys


def main() -> int:
    args = sys.argv[1:]
    opts = {}
    names = []
    i = 2
    while i < len(args):
        if args[i].startswith("--"):
            opts[args[i][2:]] = args[i + 1]
            i += 2
        else:
            names.append(args[i])
            i += 1
    raw, rounds = args[0], int(args[1])
    targets = opts.get("target", "").split(",")
    peers = [p for p in opts.get("peers", "").split(",") if p in names]
    refs = [r for r in opts.get("refs", "").split(",") if r in names]
    data, cells = {}, []
    for n in names:
        for r in range(1, rounds + 1):
            d = {}
            try:
                for line in open(f"{raw}/{n}.{r}.txt"):
                    p = line.split()
                    if len(p) >= 3 and p[0] == "RESULT":
                        d[p[1]] = float(p[2])
                        if p[1] not in cells:
                            cells.append(p[1])
            except FileNotFoundError:
                pass
            data[n, r] = d

    def ratio(cell, num, den):
        xs = []
        for r in range(1, rounds + 1):
            a = data[num, r].get(cell)
            if isinstance(den, list):
                b = min((data[p, r][cell] for p in den if cell in data[p, r]), default=None)
            else:
                b = data[den, r].get(cell)
            if a and b:
                xs.append(a / b)
        return statistics.median(xs) if xs else None

    def f(x, fmt="{:.2f}"):
        return "" if x is None else fmt.format(x)

    ratio_cols = []
    for t in targets:
        for ref in refs:
            ratio_cols.append((t, ref, f"{t} / {ref}"))
        if peers:
            ratio_cols.append((t, peers, f"{t} / fastest peer"))
        if "mimalloc" in names and "mimalloc" not in refs:
            ratio_cols.append((t, "mimalloc", f"{t} / mimalloc"))
    print(f"Median of {rounds} interleaved rounds; {opts.get('unit', 'values')}; ratios are "
          "medians of per-round ratios; the fastest peer is the fastest of "
          f"{', '.join(peers)} in each round.\n")
    print("| cell | " + " | ".join(names) + " | " + " | ".join(c[2] for c in ratio_cols) + " |")
    print("|---|" + "---:|" * (len(names) + len(ratio_cols)))
    for c in cells:
        vals = []
        for n in names:
            xs = [data[n, r][c] for r in range(1, rounds + 1) if c in data[n, r]]
            vals.append(f(statistics.median(xs) if xs else None, "{:.1f}" if not xs or statistics.median(xs) < 1e4 else "{:.0f}"))
        vals += [f(ratio(c, t, ref)) for t, ref, _ in ratio_cols]
        print(f"| {c} | " + " | ".join(vals) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
