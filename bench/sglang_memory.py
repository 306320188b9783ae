"""Memory of SGLang 0.5.23's CPU server with `--enable-torch-compile`, per process, with and
without dynafold (issue 42, item 1): the resident set of each of the server's processes after
start-up (first 200 on /health) and after REQUESTS greedy 16-token /generate requests.

The server is tests/python/test_sglang_server.py's compile server: SGLang's CPU engine on a tiny
random Llama, the AMX stand-in (helpers/sglang_server_model.py), `--enable-torch-compile
--torch-compile-max-bs 1`. One server of each kind, one after the other (plain first). Run with
the SGLang environment's Python:

    python bench/sglang_memory.py --dynafold target/release/dynafold --flashinfer FI [--requests 1000]
"""
import argparse
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile
import time

from sglang_server import free_port, generate, health, server_env

ROLES = (("sglang::scheduler", "scheduler"), ("sglang::detokenizer", "detokenizer"))


def role_of(args):
    """The role of a process of the server from its command line, split at NULs (SGLang names
    its children by rewriting their command line)."""
    first = args[0].decode(errors="replace")
    role = next((name for prefix, name in ROLES if first.startswith(prefix)), None)
    if role is None:
        role = "wrapper" if first.endswith("dynafold") else (
            "launcher" if b"sglang.launch_server" in args else "other")
    return role


def session_processes(sid):
    """(role, /proc folder) of each process of session `sid` (the wrapper, the launcher, the
    scheduler, the detokenizer; SGLang names its children by their command line)."""
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            if os.getsid(int(d.name)) != sid:
                continue
            args = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        yield role_of(args), d


def session_rss(sid):
    """role -> VmRSS in MiB over session `sid`'s processes."""
    out = {}
    for role, d in session_processes(sid):
        try:
            rss = next(int(line.split()[1]) for line in (d / "status").read_text().splitlines()
                       if line.startswith("VmRSS:"))
        except (OSError, StopIteration, ValueError):
            continue
        out[role] = round(out.get(role, 0) + rss / 1024, 1)
    return out


def serve(kind, args, model, env):
    port = free_port()
    cmd = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--host",
           "127.0.0.1", "--port", str(port), "--device", "cpu", "--attention-backend", "intel_amx",
           "--mem-fraction-static", "0.05", "--max-total-tokens", "4096", "--enable-torch-compile",
           "--torch-compile-max-bs", "1"]
    if kind == "dynafold":
        cmd = [args.dynafold, "run", "--"] + cmd
    t = time.monotonic()
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    try:
        while health(port) != 200:
            if p.poll() is not None or time.monotonic() - t > args.timeout:
                raise RuntimeError(f"{kind} server did not start (exit {p.poll()})")
            time.sleep(0.2)
        started = session_rss(p.pid)
        print(f"{kind}: started in {time.monotonic() - t:.0f} s: {started}", file=sys.stderr, flush=True)
        first = generate(port)[1]
        last = first
        for n in range(2, args.requests + 1):
            last = generate(port)[1]
            if n % 100 == 0:  # on the way, so that a run cut short still shows the trend
                print(f"{kind}: after {n} requests: {session_rss(p.pid)}", file=sys.stderr, flush=True)
        served = session_rss(p.pid)
        p.send_signal(signal.SIGTERM)
        status = p.wait(120)
        return {"start_s": round(time.monotonic() - t, 1), "after_start": started,
                "after_requests": served, "same_answer": first == last, "status": status}
    finally:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dynafold", required=True)
    ap.add_argument("--flashinfer", required=True)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--timeout", type=float, default=900)
    args = ap.parse_args()

    work = pathlib.Path(tempfile.mkdtemp(prefix="dynafold-bench-sglang-memory-"))
    env, paths = server_env(work, args.flashinfer, "standin_amx")
    got = {kind: serve(kind, args, paths["model"], env) for kind in ("plain", "dynafold")}
    print("RESULT " + json.dumps(got))
    print(f"\nSGLang {__import__('sglang').__version__} CPU server, --enable-torch-compile, "
          f"{args.requests} requests, `nproc` = {os.cpu_count()}; VmRSS in MiB\n")
    print("| process | plain, after start-up | dynafold | plain, after requests | dynafold |")
    print("|---|---|---|---|---|")
    roles = sorted(set(got["plain"]["after_start"]) | set(got["dynafold"]["after_start"]))
    for role in roles:
        cells = [got[k][when].get(role, "-") for when in ("after_start", "after_requests")
                 for k in ("plain", "dynafold")]
        print(f"| {role} | " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    main()
