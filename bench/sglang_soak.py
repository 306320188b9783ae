"""A soak of SGLang 0.5.23's CPU server with `--enable-torch-compile` (issue 42, item 2): one
server under `dynafold run --report-dir` and one without, started one after the other, then
both served at once for DURATION seconds by CONCURRENCY client threads each, so that load and
drift on the machine fall on both alike.

Recorded for each server:
- failed requests (any HTTP error, timeout or malformed answer) out of all sent;
- greedy outputs of a fixed prompt set (PROMPTS prompts, 16 new tokens, one at a time) at the
  start and at the end, compared across servers and across time;
- every SAMPLE seconds, per process (wrapper, launcher, scheduler, detokenizer): VmRSS, open
  file descriptors, threads; and the report folder's size. The slope of each RSS series is a
  least-squares line over the samples after the first WARMUP seconds, in MiB per hour.

The server is bench/sglang_memory.py's (tiny random Llama, the AMX stand-in). Run with the
SGLang environment's Python (scripts/bench-sglang-soak does); writes OUT/soak.json and
OUT/rss.svg and prints a markdown table.
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from sglang_memory import session_processes, session_rss
from sglang_server import free_port, health, server_env

PROMPTS = [f"{a} {b}" for a in ("The quick brown fox", "A lazy dog", "Seven small birds",
                                 "Under the old bridge") for b in ("jumps", "sleeps", "sings", "waits")]


def generate(port, text, tokens=16, timeout=300):
    body = {"text": text, "sampling_params": {"max_new_tokens": tokens, "temperature": 0}}
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        ids = json.loads(r.read())["output_ids"]
    if not isinstance(ids, list) or not ids:
        raise ValueError(f"malformed answer: {ids!r}")
    return ids


def session_counts(sid):
    """role -> (open file descriptors, threads) over session `sid`'s processes."""
    out = {}
    for role, d in session_processes(sid):
        try:
            fds = len(os.listdir(d / "fd"))
            threads = len(os.listdir(d / "task"))
        except OSError:
            continue
        fd0, th0 = out.get(role, (0, 0))
        out[role] = (fd0 + fds, th0 + threads)
    return out


def folder_bytes(path):
    if path is None:
        return 0
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file())


class Server:
    def __init__(self, kind, args, model, env, work):
        self.kind = kind
        self.port = free_port()
        self.report = work / "reports" if kind == "dynafold" else None
        cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--host",
               "127.0.0.1", "--port", str(self.port), "--device", "cpu", "--attention-backend",
               "intel_amx", "--mem-fraction-static", "0.05", "--max-total-tokens", "4096",
               "--enable-torch-compile", "--torch-compile-max-bs", str(args.compile_max_bs)]
        if kind == "dynafold":
            cmd = [args.dynafold, "run", "--report-dir", str(self.report), "--"] + cmd
        self.log = open(work / f"{kind}.log", "wb")
        t = time.monotonic()
        self.p = subprocess.Popen(cmd, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                  start_new_session=True)
        while health(self.port) != 200:
            if self.p.poll() is not None or time.monotonic() - t > args.timeout:
                self.stop()
                raise RuntimeError(f"{kind} server did not start (exit {self.p.poll()}); see {self.log.name}")
            time.sleep(0.5)
        self.start_s = round(time.monotonic() - t, 1)
        self.sent = self.failed = 0
        self.errors = []
        self.lock = threading.Lock()

    def answers(self):
        return [generate(self.port, text) for text in PROMPTS]

    def client(self, until, index):
        n = index
        while time.monotonic() < until:
            try:
                generate(self.port, PROMPTS[n % len(PROMPTS)])
                ok = True
            except Exception as e:  # every failure counts, whatever it is
                ok = False
                err = f"{type(e).__name__}: {e}"
            with self.lock:
                self.sent += 1
                if not ok:
                    self.failed += 1
                    if len(self.errors) < 5:
                        self.errors.append(err)
            n += 1

    def sample(self, t0):
        rss = session_rss(self.p.pid)
        counts = session_counts(self.p.pid)
        return {"t": round(time.monotonic() - t0, 1), "requests": self.sent, "rss": rss,
                "fds": {k: v[0] for k, v in counts.items()},
                "threads": {k: v[1] for k, v in counts.items()},
                "report_bytes": folder_bytes(self.report)}

    def stop(self):
        try:
            self.p.send_signal(signal.SIGTERM)
            status = self.p.wait(120)
        except (subprocess.TimeoutExpired, ProcessLookupError):
            status = None
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.wait()
        self.log.close()
        return status


def slope(points):
    """Least-squares slope of (t seconds, MiB) points, in MiB per hour."""
    if len(points) < 3:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    if var == 0:
        return None
    return sum((t - mt) * (v - mv) for t, v in points) / var * 3600


def svg(series, path, duration):
    """RSS over time, one line per (server, process); no plotting library needed."""
    w, h, left, bottom, top = 760, 380, 60, 40, 20
    lines = [(f"{kind} {role}", [(s["t"], s["rss"].get(role)) for s in samples if role in s["rss"]])
             for kind, samples in series.items()
             for role in sorted({r for s in samples for r in s["rss"]})]
    lines = [(name, pts) for name, pts in lines if pts]
    vmax = max(v for _, pts in lines for _, v in pts) * 1.1
    colours = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]

    def xy(t, v):
        return left + (w - left - 170) * t / duration, h - bottom - (h - bottom - top) * v / vmax

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="11">',
           f'<rect width="{w}" height="{h}" fill="white"/>',
           f'<line x1="{left}" y1="{h - bottom}" x2="{w - 170}" y2="{h - bottom}" stroke="black"/>',
           f'<line x1="{left}" y1="{top}" x2="{left}" y2="{h - bottom}" stroke="black"/>',
           f'<text x="{(w - 170) / 2}" y="{h - 8}">seconds of soak</text>',
           f'<text x="4" y="{top + 4}">MiB</text>']
    for i in range(5):
        v = vmax * i / 4
        _, y = xy(0, v)
        out.append(f'<text x="{left - 4}" y="{y + 4}" text-anchor="end">{v:.0f}</text>')
        t = duration * i / 4
        x, _ = xy(t, 0)
        out.append(f'<text x="{x}" y="{h - bottom + 14}" text-anchor="middle">{t:.0f}</text>')
    for i, (name, pts) in enumerate(lines):
        c = colours[i % len(colours)]
        dash = ' stroke-dasharray="5,3"' if name.startswith("plain") else ""
        d = " ".join(f"{x:.1f},{y:.1f}" for x, y in (xy(t, v) for t, v in pts))
        out.append(f'<polyline fill="none" stroke="{c}" stroke-width="1.5"{dash} points="{d}"/>')
        out.append(f'<line x1="{w - 160}" y1="{top + 14 * i}" x2="{w - 140}" y2="{top + 14 * i}" stroke="{c}"{dash}/>')
        out.append(f'<text x="{w - 136}" y="{top + 14 * i + 4}">{name}</text>')
    out.append("</svg>")
    path.write_text("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dynafold", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("--out", required=True, type=pathlib.Path)
    ap.add_argument("--duration", type=float, default=1200)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--sample", type=float, default=15)
    ap.add_argument("--warmup", type=float, default=120, help="seconds left out of the slopes")
    ap.add_argument("--compile-max-bs", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-bench-sglang-soak-"))
    env, paths = server_env(work, args.flashinfer, "standin_amx")

    servers = {}
    try:
        for kind in ("plain", "dynafold"):
            servers[kind] = Server(kind, args, paths["model"], env, work)
            print(f"{kind}: started in {servers[kind].start_s} s", file=sys.stderr, flush=True)
        first = {k: s.answers() for k, s in servers.items()}
        t0 = time.monotonic()
        until = t0 + args.duration
        threads = [threading.Thread(target=s.client, args=(until, i), daemon=True)
                   for s in servers.values() for i in range(args.concurrency)]
        for th in threads:
            th.start()
        samples = {k: [s.sample(t0)] for k, s in servers.items()}
        while time.monotonic() < until:
            time.sleep(min(args.sample, max(0.0, until - time.monotonic())))
            for k, s in servers.items():
                samples[k].append(s.sample(t0))
            print(f"t={samples['plain'][-1]['t']:.0f} s: " + "; ".join(
                f"{k} {s.sent} sent, {s.failed} failed, RSS {sum(samples[k][-1]['rss'].values()):.0f} MiB"
                for k, s in servers.items()), file=sys.stderr, flush=True)
        for th in threads:
            th.join(360)
        for k, s in servers.items():
            samples[k].append(s.sample(t0))
        last = {k: s.answers() for k, s in servers.items()}
    finally:
        status = {k: s.stop() for k, s in servers.items()}

    result = {"sglang": __import__("sglang").__version__, "nproc": os.cpu_count(),
              "duration_s": args.duration, "concurrency": args.concurrency,
              "compile_max_bs": args.compile_max_bs, "servers": {}}
    for k, s in servers.items():
        roles = sorted({r for x in samples[k] for r in x["rss"]})
        kept = [x for x in samples[k] if x["t"] >= args.warmup]
        result["servers"][k] = {
            "start_s": s.start_s, "sent": s.sent, "failed": s.failed, "errors": s.errors,
            "exit_status": status[k],
            "outputs_same_start_end": first[k] == last[k],
            "slope_mib_per_h": {r: slope([(x["t"], x["rss"][r]) for x in kept if r in x["rss"]]) for r in roles},
            "samples": samples[k]}
    result["outputs_equal_start"] = first["plain"] == first["dynafold"]
    result["outputs_equal_end"] = last["plain"] == last["dynafold"]
    (args.out / "soak.json").write_text(json.dumps(result, indent=1) + "\n")
    svg(samples, args.out / "rss.svg", args.duration)

    print(f"SGLang {result['sglang']} CPU server, --enable-torch-compile, both servers at once for "
          f"{args.duration:.0f} s, {args.concurrency} clients each, `nproc` = {os.cpu_count()}\n")
    print(f"Greedy outputs of {len(PROMPTS)} prompts equal, plain and dynafold: at the start "
          f"{result['outputs_equal_start']}, at the end {result['outputs_equal_end']}\n")
    print("| server | requests | failed | outputs same, start and end | process | RSS at start, MiB "
          "| RSS at end | slope after warm-up, MiB/h | fds start → end | threads start → end |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for k, r in result["servers"].items():
        a, z = r["samples"][0], r["samples"][-1]
        for role, sl in r["slope_mib_per_h"].items():
            print(f"| {k} | {r['sent']} | {r['failed']} | {r['outputs_same_start_end']} | {role} "
                  f"| {a['rss'].get(role, '-')} | {z['rss'].get(role, '-')} "
                  f"| {'-' if sl is None else f'{sl:+.1f}'} | {a['fds'].get(role, '-')} → {z['fds'].get(role, '-')} "
                  f"| {a['threads'].get(role, '-')} → {z['threads'].get(role, '-')} |")
    d = result["servers"]["dynafold"]["samples"]
    print(f"\nReport folder: {d[0]['report_bytes']} bytes at the start, {d[-1]['report_bytes']} at the end.")


if __name__ == "__main__":
    main()
