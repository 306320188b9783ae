"""Issue 7, concurrency: many threads importing the target modules at once, and os.fork while
an import is under way. No deadlock (every process ends within its timeout), and each target
module is rewritten exactly once per process (counted from the pid-tagged "folded" log lines).
Real processes, real torch, real FlashInfer releases."""
import collections
import re
import textwrap

import pytest

from conftest import clean_env, run
from test_fold import PYTHON, flashinfer_path, release_text, toolkit

TARGETS = [
    "flashinfer.jit.cpp_ext",
    "flashinfer.jit.fp4_quantization",
    "flashinfer.quantization.fp4_quantization",
]
FOLDED = re.compile(r"^dynafold\[(\d+)\] INFO: ([\w.]+): folded ", re.M)


def folded_counts(stderr):
    """(pid, module) -> how many times that process logged folding that module."""
    return collections.Counter((int(p), m) for p, m in FOLDED.findall(stderr))


def env_for(release, tmp_path, **extra):
    return clean_env(
        PYTHONPATH=flashinfer_path(release),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        DYNAFOLD_LOG="info",
        DYNAFOLD_CACHE_DIR=str(tmp_path / "cache"),
        **extra,
    )


THREADS = textwrap.dedent(
    """
    import importlib, os, sys, threading
    targets = sys.argv[1:]
    barrier = threading.Barrier(16)
    errors = []
    def work(i):
        barrier.wait()
        try:
            # One order for all: in different orders FlashInfer's own circular imports make
            # CPython raise _DeadlockError between threads, with or without dynafold.
            for name in targets:
                m = importlib.import_module(name)
                assert "__dynafold__" in vars(m), name
        except BaseException as e:
            errors.append(repr(e))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads: t.start()
    for t in threads: t.join()
    print("ERRORS", errors)
    print("PID", os.getpid())
    """
)


@pytest.mark.parametrize("release", ["0.6.16", "0.7.4"])
@pytest.mark.parametrize("cache", ["cold", "warm"])
def test_sixteen_threads_import_at_once(preload, release, cache, tmp_path):
    env = env_for(release, tmp_path, LD_PRELOAD=preload)
    if cache == "warm":
        first = run([str(PYTHON), "-c", THREADS, *TARGETS], env, timeout=300)
        assert first.returncode == 0, first.stderr.decode()[-3000:]
    r = run([str(PYTHON), "-c", THREADS, *TARGETS], env, timeout=300)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err[-3000:]
    assert "ERRORS []" in out, out + err[-3000:]
    pid = int(re.search(r"PID (\d+)", out).group(1))
    counts = folded_counts(err)
    assert {m: counts[(pid, m)] for m in TARGETS} == {m: 1 for m in TARGETS}, err[-3000:]
    assert "WARN" not in err, err[-3000:]


FORK = textwrap.dedent(
    """
    import os, sys
    targets = sys.argv[1:]
    forked = []

    def hook(event, args):
        # Fork once, inside dynafold's loader, as it hands the rewritten code of the 80 KB
        # fp4 module to exec(): both processes then finish that import on their own.
        if forked or event != "exec":
            return
        name = getattr(args[0], "co_filename", "")
        if name.endswith("quantization/fp4_quantization.py") and "/jit/" not in name:
            forked.append(os.fork())

    sys.addaudithook(hook)
    for name in targets:
        __import__(name)
    ok = all("__dynafold__" in vars(sys.modules[n]) for n in targets)
    if forked and forked[0] == 0:
        os._exit(0 if ok else 3)
    pid = forked[0] if forked else None
    status = os.waitpid(pid, 0)[1] if pid else None
    print("PARENT", os.getpid(), "CHILD", pid, "STATUS", status, "OK", ok)
    """
)


def test_fork_during_import(preload, tmp_path):
    env = env_for("0.6.16", tmp_path, LD_PRELOAD=preload)
    r = run([str(PYTHON), "-c", FORK, *TARGETS], env, timeout=300)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err[-3000:]
    m = re.search(r"PARENT (\d+) CHILD (\d+) STATUS (\d+) OK True", out)
    assert m, out + err[-3000:]
    parent, child, status = map(int, m.groups())
    assert status == 0, (status, err[-3000:])
    counts = folded_counts(err)
    # Folded before the fork: logged once, by the parent, inherited by the child. The module
    # being executed and those after it: folded once by each process.
    assert {t: counts[(parent, t)] for t in TARGETS} == {t: 1 for t in TARGETS}, err[-3000:]
    assert counts[(child, "flashinfer.jit.cpp_ext")] == 0, err[-3000:]
    assert counts[(child, "flashinfer.quantization.fp4_quantization")] == 1, err[-3000:]
    assert counts[(child, "flashinfer.jit.fp4_quantization")] <= 1, err[-3000:]
    assert "panic" not in err and "WARN" not in err, err[-3000:]


SMALL_STACK = textwrap.dedent(
    """
    import sys, threading
    threading.stack_size(256 * 1024)
    targets, done = sys.argv[1:], []

    def go():
        for name in targets:
            __import__(name)
        done.append(all("__dynafold__" in vars(sys.modules[n]) for n in targets))

    t = threading.Thread(target=go)
    t.start()
    t.join()
    print("OK", done)
    """
)


def test_import_on_a_thread_with_a_small_stack(preload, tmp_path):
    """The parse runs on the importing thread only when it has the stack for it: a 256 KiB
    thread (threading.stack_size) must still fold every target, on the helper thread."""
    env = env_for("0.6.16", tmp_path, LD_PRELOAD=preload)
    r = run([str(PYTHON), "-c", SMALL_STACK, *TARGETS], env, timeout=300)
    out, err = r.stdout.decode(), r.stderr.decode()
    assert r.returncode == 0, err[-3000:]
    assert "OK [True]" in out, out + err[-3000:]
    assert "panic" not in err and "WARN" not in err, err[-3000:]
