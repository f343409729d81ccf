"""py_churn.py: allocation-heavy Python for the memory suite (scripts/mem_bench.sh).

    python3 py_churn.py [scale]

A table of records (dicts holding strings and lists, many over pymalloc's 512-byte limit so they
reach malloc) is built, then churned: random records are replaced, grown, serialised and
dropped, with temporary strings and lists built and thrown away on the way. Prints a digest
of the final table and of every intermediate result: it must be the same under every
allocator.
"""
import hashlib
import json
import random
import sys

scale = float(sys.argv[1]) if len(sys.argv) > 1 else 1.0
n_records = max(1000, int(20000 * scale))
steps = max(5000, int(40000 * scale))
rng = random.Random(1234)
digest = hashlib.sha256()


def make_record(i, rng):
    width = int(2 ** rng.uniform(3, 12))  # 8 B .. 4 KiB strings, log-uniform
    return {
        "id": i,
        "name": ("%08x" % rng.getrandbits(32)) * (width // 8 + 1),
        "tags": [str(rng.random()) for _ in range(rng.randint(0, 12))],
        "scores": list(range(rng.randint(0, 200))),
    }


table = {i: make_record(i, rng) for i in range(n_records)}
for step in range(steps):
    k = rng.randrange(n_records)
    op = rng.random()
    if op < 0.4:
        table[k] = make_record(k, rng)
    elif op < 0.6:
        rec = table[k]
        rec["scores"].extend(range(rng.randint(1, 50)))
        if len(rec["scores"]) > 2000:
            del rec["scores"][: len(rec["scores"]) // 2]
        rec["name"] = rec["name"][1:] + rec["name"][:1]
    elif op < 0.8:
        blob = json.dumps(table[k], sort_keys=True)
        if step % 97 == 0:
            digest.update(blob.encode())
        back = json.loads(blob)
        assert back["id"] == k
    else:
        tmp = " ".join(t.upper() for t in table[k]["tags"]) * rng.randint(1, 30)
        words = sorted(set(tmp.split()))
        if step % 89 == 0:
            digest.update(("|".join(words)).encode())

summary = [(k, len(v["name"]), len(v["tags"]), sum(v["scores"])) for k, v in sorted(table.items())]
digest.update(repr(summary).encode())
print("records", len(table), "steps", steps)
print("digest", digest.hexdigest())
