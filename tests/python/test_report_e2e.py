"""Issue 4 end to end, through the real preload path: two spawned ranks sharing a report
folder merge into one row per site with the right counts and ranks; a process killed mid-run
leaves lines that still read and merge."""
import json
import signal
import subprocess

from conftest import DYNAFOLD, Proc, clean_env, run
from test_fold import PYTHON

WORKLOAD = r'''
import multiprocessing, os, sys, torch

def noisy(x):
    x = x + 1
    print("step")  # a graph break under fullgraph=False
    return x * 2

def strict(x):
    return x + os.getpid()  # getpid: Unsupported under fullgraph=True

def worker(rank):
    os.environ["RANK"] = str(rank)
    import torch._dynamo
    for _ in range(3):
        torch._dynamo.reset()
        torch.compile(noisy, backend="eager")(torch.ones(2))
    try:
        torch.compile(strict, backend="eager", fullgraph=True)(torch.ones(2))
    except Exception as e:
        print("caught", type(e).__name__)

if __name__ == "__main__":
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=worker, args=(r,)) for r in (0, 1)]
    for p in procs: p.start()
    for p in procs: p.join()
    sys.exit(max(p.exitcode for p in procs))
'''

FOREVER = r'''
import itertools, torch, torch._dynamo, sys
for i in itertools.count():
    def f(x):
        print("tick")
        return x + 1
    torch._dynamo.reset()
    torch.compile(f, backend="eager")(torch.ones(2))
    if i == 2:
        print("READY", flush=True)
'''


def merged(folder):
    out = subprocess.run([str(DYNAFOLD), "report", str(folder), "--json"], capture_output=True, check=True)
    return json.loads(out.stdout)["sites"]


def test_two_ranks_merge_into_one_row_per_site(preload, tmp_path):
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    reports = tmp_path / "reports"
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))
    r = run([str(PYTHON), str(script)], env, timeout=600, cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert len(list(reports.glob("*.jsonl"))) == 2
    sites = merged(reports)
    by_reason = {}
    for s in sites:
        assert s["key"]["user_frame"].startswith(str(script)), s["key"]
        by_reason.setdefault(s["record"]["break_type"], []).append(s)
    prints = [s for s in sites if "print" in s["key"]["reason"]]
    assert len(prints) == 1, [s["key"] for s in sites]
    assert prints[0]["count"] == 6 and prints[0]["ranks"] == [0, 1], prints[0]
    assert prints[0]["key"]["user_frame"] == f"{script}:6"
    strict = [s for s in sites if s["fullgraph"] == [True]]
    assert len(strict) == 1 and strict[0]["count"] == 2 and strict[0]["ranks"] == [0, 1], sites
    assert strict[0]["key"]["user_frame"] == f"{script}:10"
    # The table people read names both.
    table = subprocess.run([str(DYNAFOLD), "report", str(reports)], capture_output=True, check=True).stdout.decode()
    assert f"{script}:6" in table and f"{script}:10" in table and "0-1" in table


def test_killed_process_leaves_readable_lines(preload, tmp_path):
    script = tmp_path / "forever.py"
    script.write_text(FOREVER)
    reports = tmp_path / "reports"
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))
    with Proc([str(PYTHON), str(script)], env) as p:
        p.expect("READY", 300)
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
    files = list(reports.glob("*.jsonl"))
    assert len(files) == 1
    lines = files[0].read_text().splitlines()
    assert len(lines) >= 3
    for line in lines[:-1]:
        json.loads(line)  # every complete line reads
    sites = merged(reports)
    assert len(sites) == 1 and sites[0]["count"] >= 3, sites
