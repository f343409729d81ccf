#!/usr/bin/env python3
"""Charts for BENCHMARKS.md, as SVG, from the tables the benchmark scripts print.

    python3 scripts/charts.py speed MATRIX_OUTPUT docs/speed.svg "CAPTION"
    python3 scripts/charts.py memory MEM_BENCH_OUTPUT docs/memory.svg "CAPTION"

`speed` reads `scripts/matrix.sh`'s table (ns per allocation) and draws a few cells, one bar
per allocator; `memory` reads the peak-RSS table of `scripts/mem_bench.sh` (MiB). Each
allocator keeps its colour in both charts. Under each chart, a line says what it leaves out,
and the caption (machine, date, version) follows. No dependencies beyond the standard library.
"""
import html
import sys

COLOURS = {
    "glibc": "#4c72b0",
    "mimalloc": "#dd8452",
    "jemalloc": "#55a868",
    "tcmalloc": "#c44e52",
    "resizealloc": "#8172b3",
    "rz-process": "#8172b3",
    "rz-markers": "#b8a9e0",
    "ideal": "#7f7f7f",
}
SPEED_CELLS = ["pairs/s128/1", "lifo/s128/64", "fifo/s128/10000", "random/s128/10000",
               "none/s128/64", "random/big/64", "tree/s48/1023"]


def table(path):
    """The first markdown table of a file: (header, rows as lists of cells)."""
    rows = []
    for line in open(path):
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if set("".join(cells)) <= set("-: "):
                continue
            rows.append(cells)
        elif rows:
            break
    return rows[0], rows[1:]


def number(text):
    try:
        return float(text.split()[0].rstrip("x"))
    except (ValueError, IndexError):
        return None


def bars(title, unit, groups, series, values, caption, out, clip_to=None, note=""):
    """Horizontal grouped bars: for each group, one bar per series (values[g][s] or None)."""
    bar, gap, left, width = 11, 10, 150, 430
    top = 40
    height = top + len(groups) * (len(series) * bar + gap) + 40 + 16 * len(series) + (16 if note else 0)
    vmax = max(v for g in values for v in g if v is not None) or 1
    if clip_to:
        # Bars past `clip_to` times the largest value of the clipped-to series are cut at the
        # right edge (their value is still printed): one slow allocator would flatten the rest.
        ours = [row[series.index(clip_to[0])] for row in values if row[series.index(clip_to[0])]]
        vmax = min(vmax, clip_to[1] * max(ours))
    svg = ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">'
           % (left + width + 80, height),
           '<rect width="100%" height="100%" fill="white"/>',
           '<text x="10" y="20" font-size="14" font-weight="bold">%s</text>' % html.escape(title)]
    y = top
    for g, row in zip(groups, values):
        svg.append('<text x="%d" y="%d" text-anchor="end">%s</text>'
                   % (left - 6, y + len(series) * bar / 2 + 4, html.escape(g)))
        for s, v in zip(series, row):
            if v is not None:
                w = max(1.0, min(v, vmax) / vmax * width)
                svg.append('<rect x="%d" y="%d" width="%.1f" height="%d" fill="%s"/>'
                           % (left, y, w, bar - 2, COLOURS.get(s, "#333333")))
                svg.append('<text x="%.1f" y="%d">%g</text>' % (left + w + 3, y + bar - 3, v))
            y += bar
        y += gap
    svg.append('<text x="%d" y="%d">%s</text>' % (left, y + 4, html.escape(unit)))
    y += 20
    for s in series:
        svg.append('<rect x="%d" y="%d" width="10" height="10" fill="%s"/>' % (left, y - 9, COLOURS.get(s, "#333333")))
        svg.append('<text x="%d" y="%d">%s</text>' % (left + 14, y, html.escape(s)))
        y += 16
    if note:
        svg.append('<text x="10" y="%d" fill="#555555">%s</text>' % (height - 22, html.escape(note)))
    svg.append('<text x="10" y="%d" fill="#555555">%s</text>' % (height - 6, html.escape(caption)))
    svg.append("</svg>")
    open(out, "w").write("\n".join(svg) + "\n")


def main():
    kind, src, out, caption = sys.argv[1:5]
    header, rows = table(src)
    if kind == "speed":
        series = [s for s in ["glibc", "mimalloc", "jemalloc", "tcmalloc", "resizealloc", "ideal"] if s in header]
        by_cell = {r[0]: r for r in rows}
        groups = [c for c in SPEED_CELLS if c in by_cell]
        values = [[number(by_cell[g][header.index(s)]) for s in series] for g in groups]
        note = ("%d of the table's %d cells, one thread; bars past 4x resizealloc's largest are cut "
                "(the value is printed)" % (len(groups), len(rows)))
        bars("Inside regions: ns per allocation (lower is faster)", "ns per allocation and its free",
             groups, series, values, caption, out, clip_to=("resizealloc", 4), note=note)
    elif kind == "memory":
        # rz-process and rz-markers: the library in process mode and in markers mode. Programs
        # whose glibc peak is over 100 MiB are left out (they would flatten the rest).
        series = [s for s in header[1:] if s in COLOURS]
        glibc = header.index("glibc")
        big = [r for r in rows if (number(r[glibc]) or 0) >= 100]
        rows = [r for r in rows if (number(r[glibc]) or 0) < 100]
        groups = [r[0] for r in rows]
        values = [[number(r[header.index(s)]) for s in series] for r in rows]
        note = ""
        if big:
            # The worst of the library's ratios to glibc among the programs left out, so the
            # chart never hides the worst case.
            ours = [s for s in series if s.startswith("rz-") or s == "resizealloc"]
            worst = max(((number(r[header.index(s)]) or 0) / (number(r[glibc]) or 1), r[0], s)
                        for r in big for s in ours)
            note = ("Left out, over 100 MiB under glibc: %s (the library's worst among them: "
                    "%s %s at %.2fx glibc)" % (", ".join(r[0] for r in big), worst[1], worst[2], worst[0]))
        bars("Peak RSS (lower is leaner)", "MiB", groups, series, values, caption, out, note=note)
    else:
        sys.exit("usage: charts.py speed|memory TABLE OUT.svg CAPTION")


if __name__ == "__main__":
    main()
