"""The host path of a serving step with and without dynafold (issue 40): FlashInfer's attention
wrappers' plan() and run() and the KV append, on CPU with stand-in kernels that do almost
nothing (bench/host_path_child.py), so that the Python around the kernels is what is timed.

Each round runs one process without dynafold and one with it, in a shuffled order; each process
measures every call in a process that has not compiled, then again after a compile. Per call,
the ratio with / without is taken per round (the two processes of a round ran back to back, so
drift on the machine falls on both); printed: the median of those ratios and their range, and
the median microseconds per call of each side. A markdown table.

    python bench/host_path.py --preload target/release/libdynafold.so \
        --flashinfer ~/.cache/dynafold-dev/flashinfer/0.6.16 [-n ROUNDS] [--calls CALLS]

Run with the Python that has torch (scripts/bench-host-path fills the paths in).
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

HERE = pathlib.Path(__file__).resolve().parent
CHILD = HERE / "host_path_child.py"
HELPERS = HERE.parent / "tests" / "python" / "helpers"


def child(env, calls, cuda):
    r = subprocess.run([sys.executable, str(CHILD), str(calls)] + ["--cuda"] * cuda, env=env,
                       capture_output=True, timeout=600)
    lines = [line for line in r.stdout.decode().splitlines() if line.startswith("BENCH ")]
    if r.returncode != 0 or not lines:
        raise SystemExit(f"benchmark child failed ({r.returncode}):\n{r.stderr.decode()[-3000:]}")
    return json.loads(lines[-1][6:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("-n", type=int, default=5, help="rounds (one process of each kind a round)")
    ap.add_argument("--calls", type=int, default=400, help="timed calls of each, per process")
    ap.add_argument("--cuda", action="store_true",
                    help="FlashInfer's real kernels on the GPU (its nvcc, its JIT cache)")
    ap.add_argument("--raw", help="also write every process's medians here (JSON)")
    args = ap.parse_args()

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-host-path-"))
    base = unpatched_env()
    base.update(PYTHONPATH=f"{args.flashinfer}:{HELPERS}")
    if not args.cuda:
        base.update(CUDA_HOME=str(fake_cuda_home(work)),
                    FLASHINFER_WORKSPACE_BASE=str(work / "fi-workspace"))
    variants = {"without": base,
                "with": dict(base, LD_PRELOAD=args.preload,
                             DYNAFOLD_CACHE_DIR=str(work / "dynafold-cache"))}
    for env in variants.values():  # warm-up: CPython's pycs, dynafold's cache
        child(env, 20, args.cuda)
    runs = {name: [] for name in variants}
    for _ in range(args.n):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            runs[name].append(child(variants[name], args.calls, args.cuda))
    if args.raw:
        pathlib.Path(args.raw).write_text(json.dumps(runs))
    assert all(r["dynafold"] for r in runs["with"]) and not any(
        r["dynafold"] for r in runs["without"])

    kernels = "FlashInfer's kernels on the GPU" if args.cuda else "CPU stand-in kernels"
    print(f"# host path, {kernels}, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, Python "
          f"{sys.version.split()[0]}, FlashInfer at {args.flashinfer}, {args.n} rounds, "
          f"{args.calls} calls a process\n")
    print("| call | process | without (us) | with (us) | with / without, per round: median "
          "(range) |")
    print("|---|---|---|---|---|")
    for state in ("fresh", "compiled"):
        for call in runs["without"][0][state]:
            without = [r[state][call] for r in runs["without"]]
            with_ = [r[state][call] for r in runs["with"]]
            ratios = sorted(w / b for w, b in zip(with_, without))
            print(f"| {call} | {'never compiled' if state == 'fresh' else 'has compiled'} | "
                  f"{statistics.median(without):.2f} | {statistics.median(with_):.2f} | "
                  f"**{statistics.median(ratios):.3f}x** ({ratios[0]:.3f}-{ratios[-1]:.3f}) |")
    inside = [r["in_process"] for r in runs["with"]]
    blocks = len(inside[0]["dispatched"][next(iter(inside[0]["dispatched"]))])
    print(f"\nIn one process that has compiled, blocks alternating dynafold's dispatchers "
          f"({inside[0]['methods']} methods) with FlashInfer's methods as shipped, "
          f"{blocks} blocks a process, {len(inside)} processes:\n")
    print("| call | shipped (us) | dispatched (us) | dispatched / shipped, per block: median "
          "(interquartile range; range) |")
    print("|---|---|---|---|")
    for call in inside[0]["dispatched"]:
        theirs = [us for r in inside for us in r["shipped"][call]]
        ours = [us for r in inside for us in r["dispatched"][call]]
        ratios = sorted(o / t for o, t in zip(ours, theirs))
        q = statistics.quantiles(ratios, n=4)
        print(f"| {call} | {statistics.median(theirs):.2f} | {statistics.median(ours):.2f} | "
              f"**{statistics.median(ratios):.3f}x** ({q[0]:.3f}-{q[2]:.3f}; "
              f"{ratios[0]:.3f}-{ratios[-1]:.3f}) |")


if __name__ == "__main__":
    main()
