"""Issue 13, items 1-4: what the preload must never do to its host process.

1. A rewritten module's own exception (KeyboardInterrupt, SystemExit, any error) propagates
   after one run of its body, exactly as without dynafold.
2. A daemon thread still importing a rewritten module, or torch._dynamo, when the interpreter
   exits does not turn the exit into SIGABRT (CPython 3.9-3.13 end such threads with
   pthread_exit, whose unwinding aborts at a Rust frame).
3. Subinterpreters are left alone: no hang (3.9-3.11), no cross-interpreter finder (3.12+).
4. A hung nvcc does not hold the GIL: other threads keep running while the probe waits.

Every case runs the same script without the preload too, as the baseline it must equal.
"""
import os
import pathlib
import subprocess

import pytest

from conftest import clean_env, pyenv_python, run
from test_fold import PYTHON, flashinfer_path, nvcc_script, release_text, toolkit

def shadow_with_cpp_ext_tail(tmp_path, tail, release="0.6.16"):
    """The release as a tree of symlinks, except `flashinfer/jit/cpp_ext.py`: a real copy with
    `tail` appended (the rules match by shape, so the fold still applies)."""
    dst = tmp_path / "site"
    subprocess.run(["cp", "-rs", flashinfer_path(release), str(dst)], check=True)
    target = dst / "flashinfer" / "jit" / "cpp_ext.py"
    text = pathlib.Path(os.path.realpath(target)).read_text()
    target.unlink()
    target.write_text(text + "\n" + tail)
    return dst


def env_for(tmp_path, site, **extra):
    env = clean_env(
        PYTHONPATH=str(site),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        DYNAFOLD_CACHE_DIR=str(tmp_path / "dfcache"),
    )
    env.update(extra)
    return env


def both(cmd, env, preload, **kw):
    """(without the preload, with it)."""
    with_preload = dict(env, LD_PRELOAD=preload)
    return run(cmd, env, **kw), run(cmd, with_preload, **kw)


BODY_MARK = (
    "print('BODY RUN folded=%s' % ('__dynafold__' in globals()), flush=True)\n"
)


@pytest.mark.parametrize("raised", ["KeyboardInterrupt", "SystemExit(7)", "ValueError('boom')"])
def test_exception_in_rewritten_module_propagates_after_one_run(preload, tmp_path, raised):
    site = shadow_with_cpp_ext_tail(tmp_path, BODY_MARK + f"raise {raised}\n")
    script = (
        "import sys\n"
        "try:\n"
        "    import flashinfer.jit.cpp_ext\n"
        "except BaseException as e:\n"
        "    print('RAISED', type(e).__name__, flush=True)\n"
        "    print('IN_MODULES', 'flashinfer.jit.cpp_ext' in sys.modules, flush=True)\n"
        "else:\n"
        "    print('RETURNED', flush=True)\n"
    )
    plain, ours = both([str(PYTHON), "-c", script], env_for(tmp_path, site), preload)
    name = raised.split("(")[0]
    assert plain.stdout.decode().splitlines() == [
        "BODY RUN folded=False", f"RAISED {name}", "IN_MODULES False"]
    # The same, from the rewritten code: one run, the same exception, no half module left.
    assert ours.stdout.decode().splitlines() == [
        "BODY RUN folded=True", f"RAISED {name}", "IN_MODULES False"], ours.stderr.decode()
    assert ours.returncode == plain.returncode == 0
    assert "falling back" not in ours.stderr.decode()


def test_uncaught_interrupt_in_rewritten_module_ends_the_process_as_without(preload, tmp_path):
    site = shadow_with_cpp_ext_tail(tmp_path, BODY_MARK + "raise KeyboardInterrupt\n")
    plain, ours = both([str(PYTHON), "-c", "import flashinfer.jit.cpp_ext"],
                       env_for(tmp_path, site), preload)
    assert ours.returncode == plain.returncode != 0
    assert ours.stdout.decode().count("BODY RUN") == 1
    assert "KeyboardInterrupt" in ours.stderr.decode()


DAEMON_IMPORT = """
import builtins, sys, threading, time
import torch
builtins.in_body = threading.Event()
def work():
    import {module}
threading.Thread(target=work, daemon=True).start()
{wait}
print("MAIN EXITS", flush=True)
"""


def test_exit_while_a_daemon_thread_runs_a_rewritten_module(preload, tmp_path):
    # The body says it has started, then keeps giving the GIL up and taking it back; the
    # interpreter finalises meanwhile and the thread meets pthread_exit the next time it
    # wants the GIL.
    tail = ("import builtins, time\n"
            "getattr(builtins, 'in_body', None) and builtins.in_body.set()\n"
            "for _ in range(1000):\n"
            "    time.sleep(0.01)\n")
    site = shadow_with_cpp_ext_tail(tmp_path, tail)
    script = DAEMON_IMPORT.format(module="flashinfer.jit.cpp_ext",
                                  wait="assert builtins.in_body.wait(120)")
    plain, ours = both([str(PYTHON), "-c", script], env_for(tmp_path, site), preload)
    assert plain.returncode == 0, plain.stderr.decode()[-2000:]
    assert ours.returncode == 0, ours.stderr.decode()[-2000:]
    assert b"MAIN EXITS" in ours.stdout


DYNAMO_IMPORT_AT_EXIT = """
import atexit, sys, threading, time
import torch
def work():
    import torch._dynamo
thread = threading.Thread(target=work, daemon=True)

def stack():
    frame = sys._current_frames().get(thread.ident)
    files = []
    while frame is not None:
        files.append(frame.f_code.co_filename)
        frame = frame.f_back
    return files

def inside_dynamo():
    return any("/torch/_dynamo/" in f for f in stack())

def at_exit():
    # atexit runs after threading's shutdown, which leaves daemon threads running: what the
    # thread is doing here is what it is doing when the interpreter finalises.
    files = stack()
    print("AT EXIT", type(sys.meta_path[0]).__name__, thread.is_alive(),
          any("/torch/_dynamo/" in f for f in files),
          any(f == "<dynafold>/hooks/glue/loaders.py" for f in files), flush=True)

atexit.register(at_exit)
thread.start()
deadline = time.monotonic() + 120
while not inside_dynamo() and time.monotonic() < deadline:
    time.sleep(0.002)
print("MAIN EXITS", flush=True)
"""


def test_exit_while_a_daemon_thread_imports_torch_dynamo(preload, tmp_path):
    """The thread is inside torch._dynamo's body, beneath dynafold's loader, when the
    interpreter exits: the case whose pthread_exit unwinding must meet no Rust frame."""
    for _ in range(3):
        plain, ours = both([str(PYTHON), "-c", DYNAMO_IMPORT_AT_EXIT], clean_env(), preload)
        assert plain.returncode == 0, plain.stderr.decode()[-2000:]
        assert ours.returncode == 0, ours.stderr.decode()[-2000:]
        # Without the preload the same race, with the ordinary loader.
        main, at_exit = plain.stdout.decode().splitlines()
        assert main == "MAIN EXITS" and at_exit.split()[3:] == ["True", "True", "False"], at_exit
        assert at_exit.split()[2] != "DynafoldFinder", at_exit
        # The preload was active and its loader was importing torch._dynamo at exit.
        assert ours.stdout.decode().splitlines() == [
            "MAIN EXITS", "AT EXIT DynafoldFinder True True True"], ours.stderr.decode()[-2000:]


SUBINTERPRETER = """
import sys
try:
    import _xxsubinterpreters as interpreters
except ImportError:
    import _interpreters as interpreters
first = type(sys.meta_path[0]).__name__
interp = interpreters.create()
interpreters.run_string(interp, '''
import json, sys, email.message
assert not any(type(f).__name__ == "DynafoldFinder" for f in sys.meta_path), sys.meta_path
''')
interpreters.destroy(interp)
import decimal
print("FIRST", first, type(sys.meta_path[0]).__name__, flush=True)
"""


@pytest.mark.parametrize("version", ["3.9", "3.10", "3.11", "3.12", "3.13"])
def test_subinterpreters_are_left_alone(preload, version):
    python = pyenv_python(version)
    assert os.path.exists(python), f"pyenv's CPython {version} is missing: {python}"
    r = run([python, "-c", SUBINTERPRETER], clean_env(LD_PRELOAD=preload), timeout=60)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout.decode().split() == ["FIRST", "DynafoldFinder", "DynafoldFinder"]


HUNG_NVCC = """
import threading, time
ticks = 0
stop = False
def tick():
    global ticks
    while not stop:
        time.sleep(0.01)
        ticks += 1
threading.Thread(target=tick, daemon=True).start()
time.sleep(0.2)
t0, before = time.monotonic(), ticks
import flashinfer.jit.cpp_ext as c
took, during = time.monotonic() - t0, ticks - before
stop = True
print("TOOK %.2f TICKS %d FOLDED %s" % (took, during, "__dynafold__" in vars(c)), flush=True)
"""


def test_hung_nvcc_does_not_hold_the_gil(preload, tmp_path):
    home = toolkit(tmp_path, "hung", nvcc_script("sleep 30"))
    env = clean_env(PYTHONPATH=flashinfer_path("0.6.16"), CUDA_HOME=home, LD_PRELOAD=preload,
                    DYNAFOLD_NVCC_TIMEOUT="3", DYNAFOLD_CACHE_DIR=str(tmp_path / "dfcache"))
    r = run([str(PYTHON), "-c", HUNG_NVCC], env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    words = r.stdout.decode().split()
    took, ticks, folded = float(words[1]), int(words[3]), words[5]
    assert took >= 3, words
    assert folded == "False"  # a timeout leaves the module as FlashInfer ships it
    # 10 ms ticks for 3+ s: with the GIL held by the probe there would be next to none; a
    # quarter of the ideal count leaves room for a loaded machine.
    assert ticks >= took / 0.01 / 4, words


MANY_FDS = """
import os, resource
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
held = [os.open("/dev/null", os.O_RDONLY) for _ in range(1100)]
import flashinfer.jit.cpp_ext as c
print("FOLDED", "__dynafold__" in vars(c), max(held) >= 1024, flush=True)
"""


def test_import_in_a_process_holding_more_than_1024_descriptors(preload, tmp_path):
    # A server holds many sockets; the wait for the fold must not be select()'s FD_SETSIZE.
    env = clean_env(PYTHONPATH=flashinfer_path("0.6.16"), LD_PRELOAD=preload,
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")))
    r = run([str(PYTHON), "-c", MANY_FDS], env, timeout=120)
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert r.stdout.decode().split() == ["FOLDED", "True", "True"], r.stderr.decode()[-2000:]
