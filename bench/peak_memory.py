"""Peak memory of a command and every process it starts (issue 42, item 3).

    python bench/peak_memory.py [--interval 0.5] [--out samples.csv] -- COMMAND...

Every `--interval` seconds it sums the resident set (VmRSS) and the proportional set (Pss, from
/proc/PID/smaps_rollup: shared pages split between the processes sharing them, so the sum is
what the tree really holds) over the command's process tree, and reads the machine's
MemAvailable. As root on a cgroup-v1 memory hierarchy it also runs the command in a memory
cgroup of its own and reports the kernel's own peak (`memory.max_usage_in_bytes`, page cache
included) and the peak of its `rss` (anonymous memory). Prints one summary line, exits with
the command's status.
"""
import argparse
import os
import pathlib
import subprocess
import sys
import time

V1 = pathlib.Path("/sys/fs/cgroup/memory")


def children_of():
    kids = {}
    for d in pathlib.Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        kids.setdefault(ppid, []).append(int(d.name))
    return kids


def tree(root):
    kids, out, todo = children_of(), [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(kids.get(pid, []))
    return out


def kib(path, key):
    try:
        for line in pathlib.Path(path).read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def cgroup_stat(cg, key):
    for line in (cg / "memory.stat").read_text().splitlines():
        k, v = line.split()
        if k == key:
            return int(v)
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--out", help="a CSV of every sample")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    args = ap.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    cg = None
    if os.geteuid() == 0 and (V1 / "memory.max_usage_in_bytes").exists():
        cg = V1 / f"dynafold-peak-{os.getpid()}"
        cg.mkdir()

    def enter():
        if cg is not None:
            (cg / "cgroup.procs").write_text(str(os.getpid()))

    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, preexec_fn=enter)
    peak = {"rss": 0, "pss": 0, "avail_drop": 0, "cg_rss": 0, "procs": 0}
    avail0 = kib("/proc/meminfo", "MemAvailable")
    rows = []
    while proc.poll() is None:
        pids = tree(proc.pid)
        rss = sum(kib(f"/proc/{p}/status", "VmRSS") for p in pids)
        pss = sum(kib(f"/proc/{p}/smaps_rollup", "Pss") for p in pids)
        drop = avail0 - kib("/proc/meminfo", "MemAvailable")
        cg_rss = cgroup_stat(cg, "rss") // 1024 if cg is not None else 0
        for k, v in (("rss", rss), ("pss", pss), ("avail_drop", drop), ("cg_rss", cg_rss),
                     ("procs", len(pids))):
            peak[k] = max(peak[k], v)
        rows.append((round(time.monotonic() - t0, 1), len(pids), rss, pss, drop, cg_rss))
        time.sleep(args.interval)
    code = proc.wait()
    cg_max = int((cg / "memory.max_usage_in_bytes").read_text()) // 1024 if cg is not None else 0
    if args.out:
        with open(args.out, "w") as f:
            f.write("seconds,processes,rss_kib,pss_kib,memavailable_drop_kib,cgroup_rss_kib\n")
            f.writelines(",".join(map(str, r)) + "\n" for r in rows)
    mib = lambda k: k / 1024  # noqa: E731
    print(f"peak_memory: exit {code} after {time.monotonic() - t0:.0f} s; peak over the tree: "
          f"RSS sum {mib(peak['rss']):.0f} MiB, PSS sum {mib(peak['pss']):.0f} MiB, "
          f"{peak['procs']} processes at most; MemAvailable fell by {mib(peak['avail_drop']):.0f} MiB "
          f"at most (the whole machine); cgroup: rss peak {mib(peak['cg_rss']):.0f} MiB, "
          f"max_usage (page cache included) {mib(cg_max):.0f} MiB", file=sys.stderr)
    if cg is not None:
        try:
            cg.rmdir()
        except OSError:
            pass
    sys.exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main()
