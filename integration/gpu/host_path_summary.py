"""The summary of integration/gpu/host_path.sh's calls (issue 40), by hand:
    python3 integration/gpu/host_path_summary.py docs/gpu-runs/2026-12-05-host-path/call-*

The decoder layer: every pair of processes (one with dynafold, one without, run back to back)
over all the calls given; per measure (the eager forward, the replayed CUDA graph, plan()) the
geometric mean of the pairs' ratios with a 95% bootstrap interval, the medians and ranges of
each side and how many pairs had dynafold slower. The host path (bench/host_path.py --raw): the
same per call, from each call's host-path.json. The layer's in-process blocks (its
SGLANG_TC in-process lines): each block's ratio, dispatched over shipped, pooled over the
processes with dynafold."""
import json
import math
import pathlib
import random
import re
import statistics
import sys

LAYER = re.compile(r"eager_us=([\d.]+) graph_us=([\d.]+).*plan_us=(\d+)")
INSIDE = re.compile(r"(eager|plan)_x=[\d.]+ \1_blocks=([\d.,]+)")


def interval(logs):
    """Geometric mean of exp(logs) and its 95% bootstrap interval (fixed seed)."""
    rng = random.Random(0)
    boots = sorted(math.exp(statistics.mean(rng.choices(logs, k=len(logs))))
                   for _ in range(4000))
    return math.exp(statistics.mean(logs)), boots[100], boots[3899]


def row(name, with_, without):
    logs = [math.log(w / b) for w, b in zip(with_, without)]
    g, lo, hi = interval(logs)
    return (f"| {name} | {len(logs)} | {statistics.median(without):.0f} "
            f"({min(without):.0f}-{max(without):.0f}) | {statistics.median(with_):.0f} "
            f"({min(with_):.0f}-{max(with_):.0f}) | **{g:.3f}x** ({lo:.3f}-{hi:.3f}) | "
            f"{sum(x > 0 for x in logs)} of {len(logs)} |")


def main(calls):
    header = ("| measure | pairs | without: median (range), us | with: median (range), us | "
              "with / without: geometric mean (95% interval) | pairs with dynafold slower |\n"
              "|---|---|---|---|---|---|")
    pairs = []
    inside = {"eager": [], "plan": []}  # the layer's in-process blocks, over every process
    for call in map(pathlib.Path, calls):
        for with_log in sorted(call.glob("*-with.txt")):
            text = with_log.read_text()
            for m in INSIDE.finditer(text):
                inside[m.group(1)] += [float(r) for r in m.group(2).split(",")]
            without_log = with_log.with_name(with_log.name.replace("-with", "-without"))
            if not without_log.exists():  # host_path.sh's deadline fell between the two
                continue
            found = [LAYER.search(t) for t in (text, without_log.read_text())]
            if all(found):
                pairs.append([tuple(map(float, m.groups())) for m in found])
    if pairs:
        print("Decoder layer (integration/gpu/decoder_layer.py --sglang-tc)\n")
        print(header)
        for k, name in enumerate(("eager forward", "CUDA graph replay", "plan (fast_decode_plan)")):
            print(row(name, [w[k] for w, _ in pairs], [b[k] for _, b in pairs]))
    if inside["eager"]:
        print("\nDecoder layer in one process that has compiled, blocks alternating dynafold's "
              "dispatchers with FlashInfer's methods as shipped\n")
        print("| measure | blocks | dispatched / shipped, per block: median (interquartile "
              "range; range) | geometric mean (95% interval) |\n|---|---|---|---|")
        for name, label in (("eager", "eager forward"), ("plan", "plan (fast_decode_plan)")):
            rs = sorted(inside[name])
            q = statistics.quantiles(rs, n=4)
            g, lo, hi = interval([math.log(r) for r in rs])
            print(f"| {label} | {len(rs)} | **{statistics.median(rs):.3f}x** ({q[0]:.3f}-"
                  f"{q[2]:.3f}; {rs[0]:.3f}-{rs[-1]:.3f}) | {g:.4f}x ({lo:.4f}-{hi:.4f}) |")
    for call in map(pathlib.Path, calls):
        raw = call / "host-path.json"
        if not raw.exists():
            continue
        runs = json.loads(raw.read_text())
        print(f"\nHost path, {call} (bench/host_path.py --cuda)\n")
        print(header)
        for state in ("fresh", "compiled"):
            for name in runs["without"][0][state]:
                label = f"{name}, {'never compiled' if state == 'fresh' else 'has compiled'}"
                print(row(label, [r[state][name] for r in runs["with"]],
                          [r[state][name] for r in runs["without"]]))


if __name__ == "__main__":
    main(sys.argv[1:])
