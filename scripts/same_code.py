#!/usr/bin/env python3
"""Compare the machine code of two builds, function by function, addresses aside.

    python3 scripts/same_code.py OLD_BINARY NEW_BINARY [--show N]

A move of code between files or modules (a split of a big `impl` block, a renamed module)
must leave every function's instructions as they were. This disassembles both binaries with
`objdump -d`, and for each function writes its instructions with what a move may change taken
out: absolute addresses, RIP-relative displacements and the data addresses they reach, the hash suffix of mangled Rust names
(`::h0123456789abcdef`, `17h...E`), the numbers in anonymous data labels, the module
of an `impl` block (`arena::free::<impl arena::Arena>::f` reads `arena::Arena::f`) and the
type arguments of a generic function (`f<T>` reads `f`). Jump targets
inside a function stay as `<function+offset>`, so any change of layout inside a function shows.

Names that differ only in their module path (a function moved to another module) are
paired up by their last path component. It prints the moves, the functions that differ, the ones only one side has, and exits 0 only when both
binaries hold the same functions with the same instruction sequences.
"""
import re
import subprocess
import sys
from collections import defaultdict

HASH_LEGACY = re.compile(r"17h[0-9a-f]{16}E")
HASH_DEMANGLED = re.compile(r"::h[0-9a-f]{16}")
ANON = re.compile(r"anon\.[0-9a-f]+\.[0-9]+")
# A method of an `impl` block in a child module demangles as `parent::child::<impl Type>::f`.
GENERIC_TAIL = re.compile(r"<[^<>]*>$")
SPLIT_IMPL = re.compile(r"[\w:]+::<impl ([\w:]+(?:<[^<>]*>)?)>::")
ADDR_TARGET = re.compile(r"\b[0-9a-f]+ <")
RIP = re.compile(r"-?0x[0-9a-f]+\(%rip\)")
COMMENT = re.compile(r"\s+# [0-9a-f]+ (<.*>)?$")
HEADER = re.compile(r"^[0-9a-f]+ <(.+)>:$")
LINE = re.compile(r"^\s*[0-9a-f]+:\s+(.*)$")


def normalise_name(name: str) -> str:
    name = HASH_DEMANGLED.sub("", HASH_LEGACY.sub("E", name))
    name = SPLIT_IMPL.sub(r"\1::", ANON.sub("anon", name))
    # A function made generic over a front end's type: `f<front::T>` reads `f`.
    while True:
        stripped = GENERIC_TAIL.sub("", name)
        if stripped == name:
            return name
        name = stripped


def functions(binary: str) -> dict:
    out = subprocess.run(
        ["objdump", "-d", "--no-show-raw-insn", "-C", binary],
        check=True, capture_output=True, text=True,
    ).stdout
    funcs = defaultdict(list)
    body = None
    for line in out.splitlines():
        m = HEADER.match(line)
        if m:
            body = []
            funcs[normalise_name(m.group(1))].append(body)
            continue
        m = LINE.match(line)
        if m and body is not None:
            insn = m.group(1)
            comment = COMMENT.search(insn)
            insn = COMMENT.sub("", insn)
            if comment and comment.group(1):
                # A RIP-relative operand names the nearest symbol: a function (kept), or data
                # at an offset past some label (string literals, panic locations, tables), whose
                # place moves with any change of a file name or a message.
                target = comment.group(1)
                insn += " # " + ("<data>" if "+0x" in target else target)
            insn = RIP.sub("DISP(%rip)", insn)
            insn = ADDR_TARGET.sub("<", insn)
            insn = normalise_name(re.sub(r"\s+", " ", insn.strip()))
            if insn in ("int3", "nop") or insn.startswith(("nopw", "nopl", "cs nopw", "data16", "xchg %ax,%ax")):
                continue  # padding between functions
            body.append(insn)
    # Several functions can share a name once hashes are gone (generic instances): compare
    # them as a sorted multiset.
    return {k: sorted("\n".join(b) for b in v) for k, v in funcs.items()}


def symbols(binary: str) -> set:
    out = subprocess.run(["nm", "-C", "--defined-only", binary],
                         check=True, capture_output=True, text=True).stdout
    return {normalise_name(l.split(" ", 2)[2]) for l in out.splitlines() if l.count(" ") >= 2}


def main() -> int:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    show = 3
    if "--show" in sys.argv:
        show = int(sys.argv[sys.argv.index("--show") + 1])
        args = [a for a in args if a != str(show)]
    if len(args) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    old, new = functions(args[0]), functions(args[1])
    # A free function or a static that moved to another module keeps its last path component:
    # pair each name only one side has with the one name of the other side that ends the same.
    leaf = lambda k: k.rsplit("::", 1)[-1]
    sym_old, sym_new = symbols(args[0]) | set(old), symbols(args[1]) | set(new)
    lone_old = defaultdict(list)
    for k in sym_old - sym_new:
        lone_old[leaf(k)].append(k)
    lone_new = defaultdict(list)
    for k in sym_new - sym_old:
        lone_new[leaf(k)].append(k)
    moved = {}
    for l, olds in lone_old.items():
        news = lone_new.get(l, [])
        if len(olds) == 1 and len(news) == 1:
            moved[news[0]] = olds[0]
            continue
        # Several with the same last component: the move that added one module to the path.
        for n in news:
            parts = n.split("::")
            hits = [o for o in olds if o in ("::".join(parts[:i] + parts[i + 1:]) for i in range(len(parts) - 1))]
            if len(hits) == 1:
                moved[n] = hits[0]
    if moved:
        pat = re.compile(r"<(" + "|".join(re.escape(k) for k in moved) + r")([+>])")
        new = {moved.get(k, k): sorted(pat.sub(lambda m: "<" + moved[m.group(1)] + m.group(2), b)
                                       for b in v) for k, v in new.items()}
    only_old = sorted(set(old) - set(new))
    only_new = sorted(set(new) - set(old))
    differ = sorted(k for k in set(old) & set(new) if old[k] != new[k])
    insns = sum(len(b.splitlines()) for v in old.values() for b in v)
    print(f"{args[0]}: {len(old)} functions, {insns} instructions")
    print(f"{args[1]}: {len(new)} functions")
    for k, v in sorted(moved.items()):
        print(f"moved: {v} -> {k}")
    for k in only_old:
        print(f"only in the first:  {k}")
    for k in only_new:
        print(f"only in the second: {k}")
    for k in differ:
        print(f"differs: {k}")
    for k in differ[:show]:
        import difflib
        a = "\n".join(old[k]).splitlines()
        b = "\n".join(new[k]).splitlines()
        for line in list(difflib.unified_diff(a, b, "first", "second", lineterm="", n=2))[:40]:
            print("    " + line)
    same = not (only_old or only_new or differ)
    print("same code" if same else "DIFFERENT code")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
