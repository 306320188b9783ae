"""Issue 42, reports under pressure, through the real preload path with real torch: eight ranks
and their restarts writing one report folder at once; a disk that fills up between two lines
and empties again; the report folder removed while the process runs. In every case the host
process goes on, every line already written reads, and `dynafold report` says what is missing.

The full disk is a real one: a 64 KiB tmpfs mounted for the test (these tests run as root, as
test_faults.py's do), filled by the workload itself, as another process on the host would."""
import json
import re
import shutil
import subprocess
import textwrap

import pytest

from conftest import DYNAFOLD, Proc, clean_env, run
from test_faults import lines
from test_fold import PYTHON

SITE = textwrap.dedent(
    """
    import torch, torch._dynamo
    def noisy(x):
        x = x + 1
        print("step")  # a graph break under fullgraph=False
        return x * 2
    def other(x):
        print("other")
        return x - 1
    def breaks(n, fn=noisy):
        for _ in range(n):
            torch._dynamo.reset()
            torch.compile(fn, backend="eager")(torch.ones(2))
    """
)


def report(folder, *extra):
    r = subprocess.run([str(DYNAFOLD), "report", str(folder), *extra], capture_output=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    return r.stdout.decode()


def merged(folder):
    return json.loads(report(folder, "--json"))


def every_line_reads(folder):
    files = sorted(folder.glob("*.jsonl"))
    for f in files:
        text = f.read_text()
        assert text.endswith("\n"), f
        for line in text.splitlines():
            json.loads(line)
    return files


RANKS = SITE + textwrap.dedent(
    """
    import multiprocessing, os, signal, sys

    def rank(r, crash, barrier):
        os.environ["RANK"] = str(r)
        barrier.wait()  # all eight write at once
        breaks(3)
        if crash:
            os.kill(os.getpid(), signal.SIGKILL)

    if __name__ == "__main__":
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(8)
        first = [ctx.Process(target=rank, args=(r, r < 4, barrier)) for r in range(8)]
        for p in first: p.start()
        # Ranks 0-3 die; each is restarted as soon as it is gone, while 4-7 still write.
        again = ctx.Barrier(4)
        restarted = []
        for p in first[:4]:
            p.join()
            assert p.exitcode == -signal.SIGKILL, p.exitcode
            q = ctx.Process(target=rank, args=(first.index(p), False, again))
            q.start()
            restarted.append(q)
        for p in first[4:] + restarted: p.join()
        sys.exit(max(p.exitcode for p in first[4:] + restarted))
    """
)


def test_eight_ranks_and_their_restarts_share_one_folder(preload, tmp_path):
    script = tmp_path / "ranks.py"
    script.write_text(RANKS)
    reports = tmp_path / "reports"
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))
    r = run([str(PYTHON), str(script)], env, timeout=900, cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert lines(r.stderr.decode()) == [], r.stderr.decode()[-3000:]
    # Twelve ranks' files and the launcher's (it imported torch: a process that watched and
    # never broke).
    assert len(every_line_reads(reports)) == 13
    m = merged(reports)
    assert (m["torn_lines"], m["bad_lines"], m["skipped"], m["missing"]) == (0, 0, [], []), m
    assert len(m["files"]) == 13
    [site] = m["sites"]
    assert site["count"] == 12 * 3 and site["ranks"] == list(range(8)) and len(site["pids"]) == 12, site
    assert "36 graph breaks at 1 site from 13 processes (ranks 0-7)" in report(reports)


FILLS = SITE + textwrap.dedent(
    """
    import errno, os, sys
    disk = sys.argv[1]

    def fill():
        with open(os.path.join(disk, "filler"), "ab", buffering=0) as f:
            for size in (4096, 1):
                while True:
                    try:
                        f.write(b"x" * size)
                    except OSError as e:
                        assert e.errno == errno.ENOSPC, e
                        break

    breaks(3)
    fill()
    breaks(10)  # more than the pages the file already holds: some lines cannot go out
    os.remove(os.path.join(disk, "filler"))
    breaks(2)
    fill()
    breaks(10)
    print("OK", flush=True)
    """
)


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True)
    assert r.returncode == 0, f"mounting a 64 KiB tmpfs needs root: {r.stderr.decode()}"
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=True)


def test_full_disk_between_two_lines(preload, tmp_path, small_disk):
    script = tmp_path / "fills.py"
    script.write_text(FILLS)
    reports = small_disk / "reports"
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_REPORT_DIR=str(reports))
    r = run([str(PYTHON), str(script), str(small_disk)], env, timeout=600, cwd=tmp_path)
    err = r.stderr.decode()
    assert r.returncode == 0 and "OK" in r.stdout.decode(), err[-3000:]
    warns = lines(err)
    assert len(warns) == 1 and "No space left on device" in warns[0][1], err[-3000:]
    # Whole lines only, however the disk filled.
    [_] = every_line_reads(reports)
    m = merged(reports)
    assert (m["torn_lines"], m["bad_lines"], m["skipped"]) == (0, 0, []), m
    # Each line carries its site's running count: once writing resumed, the count is exact.
    [site] = m["sites"]
    assert 15 <= site["count"] < 25, site
    resumed, still = m["missing"]
    lost = int(re.search(r": (\d+) break lines? not written \(No space left on device", resumed).group(1))
    assert 1 <= lost <= 10, resumed
    assert re.search(r"break lines not written from .* UTC on \(No space left on device.*lower bound", still), still
    table = report(reports)
    assert f"  missing {m['files'][0]}: {lost} break line" in table, table


REMOVED = SITE + textwrap.dedent(
    """
    import os, time
    folder = os.environ["DYNAFOLD_REPORT_DIR"]
    breaks(3)
    breaks(2, other)
    print("READY", flush=True)
    deadline = time.monotonic() + 120
    while os.path.exists(folder) and time.monotonic() < deadline:
        time.sleep(0.1)
    breaks(2)
    print("OK", flush=True)
    """
)


def test_report_folder_removed_while_the_process_runs(preload, tmp_path):
    script = tmp_path / "removed.py"
    script.write_text(REMOVED)
    reports = tmp_path / "reports"
    env = clean_env(DYNAFOLD_LIB=preload)
    with Proc([str(DYNAFOLD), "run", "--report-dir", str(reports), "--", str(PYTHON), str(script)], env,
              cwd=tmp_path) as p:
        p.expect("READY", 300)
        shutil.rmtree(reports)
        assert p.wait(300) == 0, p.stderr[-3000:]
        out, err = p.stdout, p.stderr
    assert "OK" in out, err[-3000:]
    warns = lines(err)
    assert len(warns) == 1 and "was removed while this process ran" in warns[0][1], err[-3000:]
    # The run's folder is back, with one file that says what it lost.
    [run_dir] = reports.iterdir()
    [_] = every_line_reads(run_dir)
    m = merged(reports)
    assert (m["torn_lines"], m["bad_lines"], m["skipped"]) == (0, 0, []), m
    # The site met again counts all five; the one met only before the removal is gone, and
    # the report says so.
    [site] = m["sites"]
    assert site["count"] == 5 and "print" in site["key"]["reason"], site
    [gone] = m["missing"]
    assert "opened anew at" in gone and "was removed while the process ran" in gone, gone
    # `dynafold run`'s own summary says it too.
    assert "  missing " in err and "5 graph breaks at 1 site from 1 process" in err, err[-3000:]
