"""dynafold's benchmarks (issue 7, 1-4), run by `scripts/bench`. Every figure is a ratio
against the unpatched run measured in this same invocation; variants are interleaved run by run
(in a shuffled order each round) so that drift and other load on the machine fall on all of
them alike. Prints a markdown table.

Run with the Python that has torch; `--preload`, `--dynafold` and `--flashinfer` point at the
built libraries and a FlashInfer release folder (scripts/bench fills them in).
"""
import argparse
import json
import os
import pathlib
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

from child_env import fake_cuda_home, unpatched_env

HERE = pathlib.Path(__file__).resolve().parent
TARGET_FILES = {
    "flashinfer.jit.cpp_ext": "jit/cpp_ext.py",
    "flashinfer.jit.fp4_quantization": "jit/fp4_quantization.py",
    "flashinfer.fp4_quantization": "fp4_quantization.py",
    "flashinfer.quantization.fp4_quantization": "quantization/fp4_quantization.py",
}

STARTUP = """
import time, json, sys, importlib
t0 = time.perf_counter()
import torch
t1 = time.perf_counter()
importlib.import_module(MODULE)
t2 = time.perf_counter()
finder = sys.meta_path[0]
own = finder.overhead() if type(finder).__name__ == "DynafoldFinder" else {}
print("BENCH " + json.dumps({"torch": t1 - t0, "flashinfer": t2 - t1, "own": own}))
"""

IMPORT_HEAVY = """
import sys, time, json
events = [0]
def hook(ev, args):
    events[0] += 1
sys.addaudithook(hook)
t0 = time.perf_counter()
import json, email.parser, http.client, asyncio, decimal, xml.dom.minidom, unittest, argparse
import logging.handlers, sqlite3, csv, zipfile, tarfile, urllib.request, multiprocessing, ssl
t1 = time.perf_counter()
import_events = events[0]
n = 200000
t2 = time.perf_counter()
for _ in range(n):
    sys.audit("dynafold.bench")
t3 = time.perf_counter()
print("BENCH " + json.dumps({"events": import_events, "imports": t1 - t0, "audit_loop": (t3 - t2) / n}))
"""

EMPTY = """
import json, sys
finder = sys.meta_path[0]
own = finder.overhead() if type(finder).__name__ == "DynafoldFinder" else {}
print("BENCH " + json.dumps({"own": own}))
"""

COMPILE = """
import json, sys, time
import torch
import torch._dynamo
import flashinfer.jit.cpp_ext as cpp_ext
from torch._dynamo.utils import counters

popens = []
tracing = [False]
sys.addaudithook(lambda ev, a: popens.append(a[0]) if ev == "subprocess.Popen" and tracing[0] else None)

def f(x):
    if cpp_ext.is_cuda_version_at_least("12.8"):
        return x * 2 + 1
    return x - 1

g = torch.compile(f, fullgraph=False, backend="eager")
x = torch.ones(8)
tracing[0] = True
t0 = time.perf_counter()
g(x)
t1 = time.perf_counter()
tracing[0] = False
breaks = sum(counters["graph_break"].values())
print("BENCH " + json.dumps({"compile": t1 - t0, "breaks": breaks, "popens": len(popens),
                             "folded": hasattr(cpp_ext, "__dynafold__")}))
"""


def child(code, env, timeout=600):
    """Runs `code` in a fresh interpreter; its BENCH line, plus wall time and the CPU time
    (user + system, from the child's own rusage) the whole process took."""
    _children_cpu_delta()  # whatever else was reaped since is not this child's
    start = time.perf_counter()
    p = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise
    # communicate() reaped it: its rusage (grandchildren such as nvcc included) is
    # RUSAGE_CHILDREN's growth since just before it started.
    wall = time.perf_counter() - start
    lines = [line for line in out.decode().splitlines() if line.startswith("BENCH ")]
    if p.returncode != 0 or not lines:
        raise SystemExit(f"benchmark child failed ({p.returncode}):\n{err.decode()[-3000:]}")
    result = json.loads(lines[-1][6:])
    result["wall"] = wall
    result["cpu"] = _children_cpu_delta()
    return result


_cpu_seen = [0.0]


def _children_cpu_delta():
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = ru.ru_utime + ru.ru_stime
    delta, _cpu_seen[0] = total - _cpu_seen[0], total
    return delta


def interleave(variants, n, code):
    """variants: name -> (env or callable returning env). Returns name -> list of results."""
    results = {k: [] for k in variants}
    for _ in range(n):
        order = list(variants)
        random.shuffle(order)
        for name in order:
            env = variants[name]
            results[name].append(child(code, env() if callable(env) else env))
    return results


def stats(xs):
    xs = sorted(xs)
    med = statistics.median(xs)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 4 else [xs[0], med, xs[-1]]
    return med, q[0], q[2], xs[0], xs[-1]


def fmt_ms(xs):
    med, q1, q3, lo, hi = stats(xs)
    return f"{med * 1e3:.1f} ms (IQR {q1 * 1e3:.1f}-{q3 * 1e3:.1f}, range {lo * 1e3:.1f}-{hi * 1e3:.1f})"


def ratio(xs, base):
    return statistics.median(xs) / statistics.median(base)


def paired(xs, base):
    """Median and IQR of the per-round ratios: variants run back to back in each round, so
    drift on the machine falls on both sides of a ratio."""
    rs = sorted(x / b for x, b in zip(xs, base))
    q = statistics.quantiles(rs, n=4) if len(rs) >= 4 else [rs[0], 0, rs[-1]]
    return f"{statistics.median(rs):.3f}x (IQR {q[0]:.3f}-{q[2]:.3f})"


def own_time(runs):
    """dynafold's own time per process, as its finder accounts for it (overhead.rs)."""
    parts = ("loader_ms", "install_ms", "observer_ms", "ops_ms")
    med = {k: statistics.median([r["own"].get(k, 0.0) for r in runs]) for k in parts + ("total_ms",)}
    return med["total_ms"], ", ".join(f"{k[:-3]} {med[k]:.1f}" for k in parts if med[k] > 0.05)


def ratio_spread(xs, base):
    """Median ratio, and the ratio of the quartiles (a rough spread)."""
    m, q1, q3, _, _ = stats(xs)
    bm, bq1, bq3, _, _ = stats(base)
    return f"{m / bm:.3f}x (quartiles {q1 / bq3:.3f}-{q3 / bq1:.3f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preload", required=True)
    ap.add_argument("--dynafold", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("-n", type=int, default=12, help="runs per variant (start-up, imports)")
    ap.add_argument("--compile-n", type=int, default=6)
    ap.add_argument("--only", default="1234",
                    help="1 start-up, 2 rewrite, 3 audit hook, 4 compile")
    ap.add_argument("--startup-import", default="flashinfer.jit.fp4_quantization",
                    help="what benchmark 1 imports after torch (e.g. flashinfer: the whole package)")
    ap.add_argument("--real-cuda", action="store_true",
                    help="use this machine's CUDA_HOME/nvcc instead of a fake nvcc 12.8")
    args = ap.parse_args()

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-bench-"))
    base = unpatched_env()
    # The warm variant needs its cache written, and CPython's own pycs are warm for all.
    base.pop("PYTHONDONTWRITEBYTECODE", None)
    base.update(PYTHONPATH=args.flashinfer)
    if not args.real_cuda:
        base.update(CUDA_HOME=str(fake_cuda_home(work)))
    # A cache of the run's own, so cold and warm starts are measured as such.
    pre = dict(base, LD_PRELOAD=args.preload, DYNAFOLD_CACHE_DIR=str(work / "cache"))
    warm_dir = work / "warm-cache"
    warm = dict(pre, DYNAFOLD_CACHE_DIR=str(warm_dir))
    cold_n = [0]

    def cold():
        cold_n[0] += 1
        return dict(pre, DYNAFOLD_CACHE_DIR=str(work / f"cold-{cold_n[0]}"))

    rows = []
    print(f"# dynafold benchmarks, {time.strftime('%Y-%m-%d %H:%M')}, {os.cpu_count()} CPUs, "
          f"Python {sys.version.split()[0]}, FlashInfer at {args.flashinfer}\n")

    base_wall = None
    if "1" in args.only:
        startup = STARTUP.replace("MODULE", repr(args.startup_import))
        for env in (base, warm, cold()):  # warm-up: CPython's pycs and dynafold's warm cache
            child(startup, env)
        r = interleave({"unpatched": base, "cold": cold, "warm": warm}, args.n, startup)
        b = r["unpatched"]
        base_wall = statistics.median([x["wall"] for x in b])
        for name in ("cold", "warm"):
            own_ms, own_parts = own_time(r[name])
            rows.append((f"1. start-up, import torch + {args.startup_import}, {name} cache (N={args.n})",
                         f"whole process {fmt_ms([x['wall'] for x in r[name]])}, CPU {fmt_ms([x['cpu'] for x in r[name]])}; flashinfer part {fmt_ms([x['flashinfer'] for x in r[name]])}; "
                         f"dynafold's own time {own_ms:.1f} ms ({own_parts})",
                         f"unpatched {fmt_ms([x['wall'] for x in b])}, CPU {fmt_ms([x['cpu'] for x in b])}; flashinfer part {fmt_ms([x['flashinfer'] for x in b])}",
                         f"process, paired {paired([x['wall'] for x in r[name]], [x['wall'] for x in b])}; "
                         f"CPU time, paired {paired([x['cpu'] for x in r[name]], [x['cpu'] for x in b])}; "
                         f"medians {ratio([x['wall'] for x in r[name]], [x['wall'] for x in b]):.3f}x; "
                         f"own time {1 + own_ms / 1e3 / base_wall:.4f}x",
                         "<= 1.02x" if name == "cold" else "<= 1.01x"))

    if "2" in args.only:
        sys.path.insert(0, str(HERE))
        import ast_fold  # the Python prototype beside this file; only section 2 times it
        pkg = pathlib.Path(args.flashinfer) / "flashinfer"
        targets = [(m, pkg / f) for m, f in TARGET_FILES.items() if (pkg / f).exists()]
        out = subprocess.run([args.dynafold, "bench-rewrite", "--iterations", "200"]
                             + [f"{m}={p}" for m, p in targets], capture_output=True, check=True)
        rust = {json.loads(line)["module"]: json.loads(line) for line in out.stdout.decode().splitlines()}
        for module, path in targets:
            src = path.read_text()
            comp, proto, proto_c = [], [], []
            for _ in range(30):
                t0 = time.perf_counter()
                compile(src, str(path), "exec", dont_inherit=True)
                t1 = time.perf_counter()
                tree, _ = ast_fold.fold(src, str(path))
                t2 = time.perf_counter()
                compile(tree, str(path), "exec", dont_inherit=True)
                t3 = time.perf_counter()
                comp.append(t1 - t0)
                proto.append(t2 - t1)
                proto_c.append(t3 - t1)
            rm = rust[module]["median_us"] / 1e6
            cm = statistics.median(comp)
            rows.append((f"2. rewrite {module} ({len(src) // 1024} KB, {rust[module]['edits']} edits)",
                         f"Rust rewrite {rm * 1e3:.2f} ms (range {rust[module]['min_us'] / 1e3:.2f}-{rust[module]['max_us'] / 1e3:.2f}, N=200)",
                         f"compile() {fmt_ms(comp)}; ast prototype parse+fold {fmt_ms(proto)}, +compile {statistics.median(proto_c) * 1e3:.1f} ms (N=30)",
                         f"{rm / cm:.3f}x of compile(); {rm / statistics.median(proto):.3f}x of the ast fold",
                         "<= 0.10x of compile()"))

    if "3" in args.only:
        r = interleave({"unpatched": base, "preload": pre}, args.n * 2, IMPORT_HEAVY)
        b, p = r["unpatched"], r["preload"]
        ev = statistics.median([x["events"] for x in p])
        per_event = statistics.median([x["audit_loop"] for x in p]) - statistics.median([x["audit_loop"] for x in b])
        delta = statistics.median([x["wall"] for x in p]) - statistics.median([x["wall"] for x in b])
        rows.append((f"3. audit hook, per event (sys.audit loop, 200k events, N={args.n * 2})",
                     f"{statistics.median([x['audit_loop'] for x in p]) * 1e9:.0f} ns/event with preload",
                     f"{statistics.median([x['audit_loop'] for x in b]) * 1e9:.0f} ns/event unpatched",
                     f"+{per_event * 1e9:.0f} ns/event ({ratio([x['audit_loop'] for x in p], [x['audit_loop'] for x in b]):.3f}x)",
                     "-"))
        rows.append((f"3. import-heavy stdlib script (~{ev:.0f} audit events), whole process (N={args.n * 2})",
                     f"{fmt_ms([x['wall'] for x in p])}; the imports alone {fmt_ms([x['imports'] for x in p])}",
                     f"{fmt_ms([x['wall'] for x in b])}; the imports alone {fmt_ms([x['imports'] for x in b])}",
                     f"process, paired {paired([x['wall'] for x in p], [x['wall'] for x in b])}; "
                     f"CPU time, paired {paired([x['cpu'] for x in p], [x['cpu'] for x in b])}; "
                     f"the imports alone, paired {paired([x['imports'] for x in p], [x['imports'] for x in b])}",
                     "-"))
        # The fixed price of every Python process under the preload: the C hook, loading the
        # pyo3 library and installing the finder, with nothing else to hide it.
        n_empty = args.n * 8
        r = interleave({"unpatched": base, "preload": pre}, n_empty, EMPTY)
        b, p = r["unpatched"], r["preload"]
        delta = statistics.median([x["wall"] for x in p]) - statistics.median([x["wall"] for x in b])
        rows.append((f"3. empty interpreter start, python -c (N={n_empty})",
                     f"{fmt_ms([x['wall'] for x in p])}, CPU {fmt_ms([x['cpu'] for x in p])}; "
                     f"dynafold's own time {statistics.median([x['own'].get('total_ms', 0.0) for x in p]):.2f} ms",
                     f"{fmt_ms([x['wall'] for x in b])}, CPU {fmt_ms([x['cpu'] for x in b])}",
                     f"process, paired {paired([x['wall'] for x in p], [x['wall'] for x in b])}; "
                     f"CPU time, paired {paired([x['cpu'] for x in p], [x['cpu'] for x in b])}; +{delta * 1e3:.1f} ms median",
                     "-"))

    if "4" in args.only:
        r = interleave({"unpatched": base, "dynafold": pre}, args.compile_n, COMPILE)
        b, p = r["unpatched"], r["dynafold"]

        def desc(xs):
            return (f"{fmt_ms([x['compile'] for x in xs])}; graph breaks {sorted(set(x['breaks'] for x in xs))}; "
                    f"subprocesses while tracing {sorted(set(x['popens'] for x in xs))}")

        assert all(x["folded"] for x in p) and not any(x["folded"] for x in b)
        rows.append((f"4. first call of torch.compile(fullgraph=False, backend='eager') reaching is_cuda_version_at_least('12.8') (N={args.compile_n})",
                     desc(p), desc(b),
                     f"compile time {ratio_spread([x['compile'] for x in p], [x['compile'] for x in b])}",
                     "0 subprocesses with dynafold"))

    print("| benchmark | with dynafold | unpatched / reference | ratio | target |")
    print("|---|---|---|---|---|")
    for row in rows:
        print("| " + " | ".join(row) + " |")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
