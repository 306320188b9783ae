"""Reads the `RESULT {...}` line that SGLang 0.5.9's piecewise start-up runner
(tests/python/helpers/sglang059_runner.py) printed, and says what scripts/demo shows of it.

    python seed_story.py crash FILE   # the seed's error: its first lines and the frames to it
    python seed_story.py pass FILE    # compiled: breaks, FlashInfer operators, equal to eager

Exits 1 when the run did not do what the step says (the demo then stops).
"""
import json
import re
import sys

SITE = re.compile(r'File ".*?/(site-packages|flashinfer/[0-9.a-z]+)/')


def result(path):
    with open(path) as f:
        for line in f:
            if line.startswith("RESULT "):
                return json.loads(line[7:])
    sys.exit(f"no RESULT line in {path}")


def crash(r):
    error = r.get("error") or ""
    if r.get("ok") or "_thread.allocate_lock" not in error:
        sys.exit(f"unexpected: not the seed's error: {error[:500]}")
    lines = error.splitlines()
    print(lines[0])
    print(next(ln for ln in lines if "_thread.allocate_lock" in ln))
    print("from user code (SGLang's forward down to FlashInfer's version check):")
    frames = [ln.strip() for ln in lines if ln.strip().startswith('File "')]
    for frame in frames:
        print("  " + SITE.sub('File "', frame))


def passed(r):
    if not r.get("ok") or r.get("graph_breaks") != 0:
        sys.exit(f"unexpected: {r.get('error')}")
    counts = r["graph_op_counts"]
    print(f"compiled: {r['graph_breaks']} graph breaks; SGLang's backend saw "
          f"{r['counter']['num_graphs_seen']} graph, split into "
          f"{r['counter']['num_piecewise_graphs_seen']} pieces")
    print(f"FlashInfer's fp4 kernel as one operator per NVFP4 linear: "
          f"{counts.get('dynafold_flashinfer', 0)} in the graph, beside "
          f"{counts.get('sglang.fp4_gemm', 0)} sglang::fp4_gemm")
    equal = r["equal_to_eager"]
    print("equal to eager at " + ", ".join(f"{n} tokens: {equal[n]}" for n in sorted(equal, key=int)))
    if not all(equal.values()):
        sys.exit(1)


{"crash": crash, "pass": passed}[sys.argv[1]](result(sys.argv[2]))
