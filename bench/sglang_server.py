"""SGLang 0.5.23's real server with and without dynafold (issue 21), run by
`scripts/bench-sglang-server`: per round, one server of each kind, in a shuffled order, each
timed from its start to its first 200 on /health, then asked the same greedy 16-token /generate
REQUESTS times (after one unmeasured request), then stopped with SIGTERM. The figures are
per-round ratios (dynafold over plain), so drift and other load on the machine fall on both
alike. One unmeasured round first warms the page cache and dynafold's bytecode cache.

The server is the one tests/python/test_sglang_server.py runs: SGLang's CPU engine on a tiny
random Llama, with the test's stand-in `sgl_kernel` (helpers/sglang_server_model.py).
Run with the SGLang environment's Python; prints a markdown table.
"""
import argparse
import json
import os
import pathlib
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

ROOT = pathlib.Path(__file__).resolve().parents[1]
HELPER = ROOT / "tests" / "python" / "helpers" / "sglang_server_model.py"
BODY = {"text": "The quick brown fox", "sampling_params": {"max_new_tokens": 16, "temperature": 0}}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def health(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=10) as r:
            return r.status
    except (urllib.error.URLError, OSError):
        return None


def generate(port):
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=json.dumps(BODY).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.perf_counter()
    with urllib.request.urlopen(req, timeout=120) as r:
        out = json.loads(r.read())
    return time.perf_counter() - t, out["output_ids"]


def server_env(work, flashinfer, standin):
    """The server's model and stand-in `sgl_kernel` made in `work` (HELPER), and the environment
    it runs in: no dynafold setting of the caller's, FlashInfer from `flashinfer`, the stand-in
    `standin` ("standin", or "standin_amx" for the server that compiles, whose inductor cache
    is kept in `work`). Returns (env, HELPER's paths)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAFOLD_") and k != "LD_PRELOAD"}
    env.update(HF_HUB_OFFLINE="1", DYNAFOLD_CACHE_DIR=str(work / "dynafold-cache"))
    made = subprocess.run([sys.executable, str(HELPER), str(work)], env=env, capture_output=True,
                          text=True, timeout=600, check=True)
    paths = json.loads([line for line in made.stdout.splitlines() if line.startswith("RESULT ")][0][7:])
    env.update(PYTHONPATH=f"{paths[standin]}:{flashinfer}", SGLANG_USE_CPU_ENGINE="1")
    if standin == "standin_amx":
        env.update(TORCHINDUCTOR_CACHE_DIR=str(work / "inductor"))
    return env, paths


def serve(kind, args, model, env, requests, timeout):
    port = free_port()
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--host",
           "127.0.0.1", "--port", str(port), "--device", "cpu", "--attention-backend",
           "torch_native", "--mem-fraction-static", "0.05", "--max-total-tokens", "4096"]
    if kind == "dynafold":
        cmd = [args.dynafold, "run", "--"] + cmd
    t = time.perf_counter()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        while health(port) != 200:
            if p.poll() is not None or time.perf_counter() - t > timeout:
                raise RuntimeError(f"{kind} server did not start (exit {p.poll()})")
            time.sleep(0.05)
        start = time.perf_counter() - t
        _, ids = generate(port)
        latencies = [generate(port)[0] for _ in range(requests)]
        p.send_signal(signal.SIGTERM)
        status = p.wait(120)
        return {"start": start, "latency": statistics.median(latencies), "ids": ids, "status": status}
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def quartiles(xs):
    xs = sorted(xs)
    if len(xs) < 4:
        return xs[0], xs[-1]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dynafold", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("-n", type=int, default=4, help="measured rounds")
    ap.add_argument("--requests", type=int, default=20, help="measured requests per server")
    ap.add_argument("--timeout", type=float, default=600)
    args = ap.parse_args()

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-bench-sglang-"))
    env, paths = server_env(work, args.flashinfer, "standin")

    rounds = []
    for i in range(args.n + 1):
        kinds = ["plain", "dynafold"]
        random.shuffle(kinds)
        got = {k: serve(k, args, paths["model"], env, args.requests, args.timeout) for k in kinds}
        assert got["plain"]["ids"] == got["dynafold"]["ids"], got
        assert got["plain"]["status"] == got["dynafold"]["status"] == 0, got
        print(f"round {i}{' (warm-up, not counted)' if i == 0 else ''}: " + ", ".join(
            f"{k} start {got[k]['start']:.2f} s, request {got[k]['latency'] * 1e3:.1f} ms"
            for k in kinds), file=sys.stderr, flush=True)
        if i:
            rounds.append(got)

    print(f"SGLang {__import__('sglang').__version__} server, CPU engine, tiny Llama; "
          f"{args.n} rounds, {args.requests} requests per server, `nproc` = {os.cpu_count()}\n")
    spread = "IQR" if args.n >= 4 else "range"
    print(f"| measure | plain (median) | dynafold (median) | dynafold / plain, per round: median ({spread}) |")
    print("|---|---|---|---|")
    for key, unit, scale in (("start", "s", 1), ("latency", "ms", 1e3)):
        plain = [r["plain"][key] * scale for r in rounds]
        dyn = [r["dynafold"][key] * scale for r in rounds]
        ratios = [d / p for d, p in zip(dyn, plain)]
        lo, hi = quartiles(ratios)
        name = "start-up to /health 200" if key == "start" else "greedy 16-token /generate"
        print(f"| {name} | {statistics.median(plain):.2f} {unit} | {statistics.median(dyn):.2f} {unit} "
              f"| **{statistics.median(ratios):.3f}x** ({lo:.3f}-{hi:.3f}) |")


if __name__ == "__main__":
    main()
