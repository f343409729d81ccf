# An unmodified Python program: parses, transforms and summarises records, creating and
# dropping many temporary objects. Run plainly, then with
# LD_PRELOAD=libresizealloc.so RESIZEALLOC_REGION=process: the output must be the same.
import collections, json, time

t = time.perf_counter()
records = [{"id": i, "tags": [str(i % 7), str(i % 11)], "value": (i * 7919) % 10007} for i in range(200000)]
text = json.dumps(records)
parsed = json.loads(text)
by_tag = collections.defaultdict(int)
for r in parsed:
    for tag in r["tags"]:
        by_tag[tag] += r["value"]
top = sorted(by_tag.items(), key=lambda kv: (-kv[1], kv[0]))[:5]
print("demo_py: records", len(parsed), "json bytes", len(text), "top", top)
print("demo_py: %.0f ms" % ((time.perf_counter() - t) * 1000), flush=True)
