"""integration/server under `dynafold run`: a multi-process (spawn) HTTP server on loopback
whose workers compile FlashInfer's CUDA-version branch with fullgraph=True at start-up, the
way SGLang's scheduler processes do. Real torch, real FlashInfer 0.6.16, a fake nvcc."""
import json
import signal
import sys
import time
import urllib.request

import pytest

from conftest import CACHE, DYNAFOLD, ROOT, Proc, alive, clean_env, run, signals_as

FLASHINFER = CACHE / "flashinfer" / "0.6.16"
SERVER = ROOT / "integration" / "server" / "server.py"
START = 400  # two cold torch imports + compiles on a shared 2-core machine
STOP = 60


@pytest.fixture
def env(tmp_path):
    assert (FLASHINFER / ".complete").exists(), "run scripts/test first"
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text('#!/bin/sh\necho "Cuda compilation tools, release 12.8, V12.8.93"\n')
    nvcc.chmod(0o755)
    return clean_env(CUDA_HOME=str(tmp_path / "cuda"), PYTHONPATH=str(FLASHINFER),
                     PATH="/usr/bin:/bin", SERVER_START_TIMEOUT=str(START))


def get(port, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=30) as r:
        return json.loads(r.read())


def test_workers_fold_compile_answer_and_stop_cleanly(env, tmp_path):
    report = tmp_path / "report"
    port_file = tmp_path / "port"
    pids = []
    with Proc([str(DYNAFOLD), "run", "--report-dir", str(report), "--",
               sys.executable, str(SERVER), "--workers", "2", "--port-file", str(port_file)],
              env, preexec_fn=signals_as()) as p:
        deadline = time.monotonic() + START + 30
        while not port_file.exists():
            assert p.poll() is None, p.stderr[-4000:]
            assert time.monotonic() < deadline, "server did not start in time"
            time.sleep(0.2)
        port = int(port_file.read_text())

        workers = get(port, "/status")["workers"]
        pids = [w["pid"] for w in workers]
        assert len(set(pids)) == 2
        for w in workers:
            assert w["ok"], w
            assert w["first_finder"] == "DynafoldFinder"
            assert w["dynafold"] is True
            assert w["warmup"] == [12.0, 12.0]  # 12.8 >= 12.8: x * major

        answered = {get(port, f"/compute?x={i}")["pid"] for i in range(6)}
        assert answered == set(pids)
        assert get(port, "/compute?x=2")["y"] == [24.0]

        t = time.monotonic()
        p.send_signal(signal.SIGTERM)
        # Two torch processes exiting and the merge, on a loaded 2-core machine: seconds
        # unloaded, and the server itself gives each worker up to 10 s.
        assert p.wait(STOP) == 0, p.stderr[-3000:]
        stopped_in = time.monotonic() - t
    out, err = p.stdout, p.stderr
    assert "STOPPED" in out
    deadline = time.monotonic() + 5
    while any(alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in pids if alive(pid)], f"orphaned workers (stopped in {stopped_in:.1f} s)"

    # The run's summary and the report: one graph break site (fp4's datetime.now) seen by
    # both workers; the fullgraph=True compile left nothing.
    summary = err
    assert "from 2 processes" in summary, summary[-3000:]
    r = run([str(DYNAFOLD), "report", "--json", str(report)], env)
    merged = json.loads(r.stdout)
    assert len(merged["files"]) == 2
    assert all(any(str(pid) in f for pid in pids) for f in merged["files"]), merged["files"]
    (site,) = merged["sites"]
    assert "`now`" in site["key"]["reason"]
    assert site["count"] == 2 and sorted(site["pids"]) == sorted(pids)


def test_without_dynafold_the_workers_fail_to_compile(env, tmp_path):
    t = time.time()
    r = run([sys.executable, str(SERVER), "--workers", "2"], env, timeout=START + 60)
    assert time.time() - t < START + 60
    assert r.returncode == 1
    err = r.stderr.decode()
    failed = [line for line in err.splitlines() if line.startswith("worker ") and " failed: " in line]
    assert len(failed) == 2, err[-3000:]
    assert all("Attempted to call function marked as skipped" in line for line in failed)
    assert b"READY" not in r.stdout
