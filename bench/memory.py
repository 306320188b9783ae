"""Memory per process (issue 42, item 1): the resident set of a process that imports torch,
FlashInfer and its fp4, sampling, decode and prefill modules, with and without dynafold
preloaded. Run by `scripts/bench-memory`.

Each round starts one process of each kind in a shuffled order; each reads its own
/proc/self/status after the imports (VmRSS now, VmHWM its peak, RssAnon the private part that
dynafold's state would show in). Medians over the rounds, the difference in MiB and the ratio;
dynafold's cache is warm (one unmeasured start of each kind first), as on a server's every
start after its first.
"""
import argparse
import json
import os
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile
import time

from child_env import fake_cuda_home, unpatched_env

MODULES = ("flashinfer.fp4_quantization", "flashinfer.sampling", "flashinfer.decode", "flashinfer.prefill")

WORKLOAD = f"""
import gc, importlib, json, sys
import torch, flashinfer
for name in {MODULES!r}:
    importlib.import_module(name)
gc.collect()
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
kb = {{k: int(status[k].split()[0]) for k in ("VmRSS", "VmHWM", "RssAnon", "RssFile")}}
active = type(sys.meta_path[0]).__name__ == "DynafoldFinder"
print("BENCH " + json.dumps(dict(kb, dynafold=active)))
"""

FIELDS = ("VmRSS", "VmHWM", "RssAnon", "RssFile")


def child(env):
    r = subprocess.run([sys.executable, "-c", WORKLOAD], env=env, capture_output=True, timeout=600)
    lines = [x for x in r.stdout.decode().splitlines() if x.startswith("BENCH ")]
    if r.returncode != 0 or not lines:
        sys.exit(f"workload failed ({r.returncode}):\n{r.stderr.decode()[-3000:]}")
    return json.loads(lines[0][6:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--flashinfer", required=True, help="a FlashInfer release folder for PYTHONPATH")
    ap.add_argument("-n", type=int, default=8, help="rounds")
    args = ap.parse_args()

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-bench-memory-"))
    base = unpatched_env()
    base.update(PYTHONPATH=args.flashinfer)
    base.update(CUDA_HOME=str(fake_cuda_home(work)))
    kinds = {"without": base,
             "with": dict(base, LD_PRELOAD=args.preload, DYNAFOLD_CACHE_DIR=str(work / "cache"))}
    for name, env in kinds.items():  # warm-up: CPython's pycs and dynafold's cache
        got = child(env)
        if got["dynafold"] != (name == "with"):
            sys.exit(f"the {name!r} process has dynafold active: {got['dynafold']}")
    runs = {name: [] for name in kinds}
    for _ in range(args.n):
        order = list(kinds)
        random.shuffle(order)
        for name in order:
            runs[name].append(child(kinds[name]))

    print(f"# RSS per process, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, torch and FlashInfer at {args.flashinfer}, N={args.n}\n")
    print("| measure | without (median) | with dynafold (median) | overhead | ratio | paired, per round: median (min-max) |")
    print("|---|---|---|---|---|---|")
    for field in FIELDS:
        a = [r[field] / 1024 for r in runs["without"]]
        b = [r[field] / 1024 for r in runs["with"]]
        per_round = sorted(y - x for x, y in zip(a, b))
        ma, mb = statistics.median(a), statistics.median(b)
        print(f"| {field} | {ma:.1f} MiB | {mb:.1f} MiB | {mb - ma:+.1f} MiB | {mb / ma:.3f}x | "
              f"{statistics.median(per_round):+.1f} MiB ({per_round[0]:+.1f} to {per_round[-1]:+.1f}) |")


if __name__ == "__main__":
    main()
