"""`dynafold run` as an operator uses it: real binary, real child processes, real signals."""
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import DYNAFOLD, PRELOAD, clean_env, run

PY = os.path.realpath(sys.executable)
PROBE = ("import os, sys; print('FIRST', type(sys.meta_path[0]).__name__); "
         "print('LD_PRELOAD', os.environ.get('LD_PRELOAD'))")


@pytest.fixture(scope="module")
def dynafold():
    assert DYNAFOLD.exists(), f"{DYNAFOLD} missing: run cargo build --release first"
    return str(DYNAFOLD)


def lines(r, prefix):
    return [l[len(prefix) + 1:] for l in r.stdout.decode().splitlines() if l.startswith(prefix + " ")]


@pytest.mark.parametrize("code,expected", [("0", 0), ("3", 3),
                                           ("os.kill(os.getpid(), 9)", 137)])
def test_exit_codes(dynafold, code, expected):
    stmt = code if code.startswith("os.") else f"sys.exit({code})"
    r = run([dynafold, "run", "--", PY, "-c", f"import os, sys; {stmt}"], clean_env())
    assert r.returncode == expected, r.stderr.decode()


def test_child_is_activated_and_preload_is_absolute(dynafold):
    r = run([dynafold, "run", "--", PY, "-c", PROBE], clean_env())
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]
    assert lines(r, "LD_PRELOAD") == [str(PRELOAD.resolve())]


def test_existing_preload_entries_are_kept_once(dynafold, tmp_path):
    libm = next(p for p in ("/lib/x86_64-linux-gnu/libm.so.6", "/usr/lib64/libm.so.6",
                            "/lib64/libm.so.6", "/usr/lib/x86_64-linux-gnu/libm.so.6")
                if os.path.exists(p))
    mine = str(PRELOAD.resolve())
    env = clean_env(LD_PRELOAD=f"{libm} {mine}:{libm}")
    r = run([dynafold, "run", "--", PY, "-c", PROBE], env)
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "LD_PRELOAD") == [f"{mine}:{libm}"]
    assert lines(r, "FIRST") == ["DynafoldFinder"]


def test_sigterm_is_forwarded_and_its_exit_code_returned(dynafold):
    child = ("import signal, sys, time\n"
             "def bye(n, f):\n"
             "    print('CHILD got', n, flush=True); sys.exit(5)\n"
             "signal.signal(signal.SIGTERM, bye)\n"
             "print('READY', flush=True)\n"
             "time.sleep(60)\n")
    p = subprocess.Popen([dynafold, "run", "--", PY, "-c", child], env=clean_env(),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().decode().strip() == "READY"
        t = time.time()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        assert time.time() - t < 10
    finally:
        if p.poll() is None:
            p.kill()
    assert f"CHILD got {int(signal.SIGTERM)}" in out.decode()
    assert p.returncode == 5, err.decode()


def test_child_killed_by_forwarded_signal_gives_128_plus_n(dynafold):
    p = subprocess.Popen([dynafold, "run", "--", PY, "-c", "print('READY', flush=True); import time; time.sleep(60)"],
                         env=clean_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert p.stdout.readline().decode().strip() == "READY"
        p.send_signal(signal.SIGHUP)
        p.communicate(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGHUP


def test_killing_dynafold_run_does_not_orphan_the_child(dynafold, tmp_path):
    pidfile = tmp_path / "pid"
    child = (f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
             "time.sleep(60)")
    p = subprocess.Popen([dynafold, "run", "--", PY, "-c", child], env=clean_env())
    deadline = time.time() + 30
    while not (pidfile.exists() and pidfile.read_text()) and time.time() < deadline:
        time.sleep(0.05)
    pid = int(pidfile.read_text())
    p.kill()
    p.wait(timeout=10)
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail("the child outlived a SIGKILLed dynafold run")


def one_error_line(r):
    err = [l for l in r.stderr.decode().splitlines() if l.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("dynafold: "), err
    return err[0]


def test_missing_command(dynafold):
    r = run([dynafold, "run", "--", "/nonexistent/dynafold-cmd"], clean_env())
    assert r.returncode == 127
    assert "/nonexistent/dynafold-cmd" in one_error_line(r)


def test_not_executable_command(dynafold, tmp_path):
    f = tmp_path / "script"
    f.write_text("#!/bin/sh\n")
    r = run([dynafold, "run", "--", str(f)], clean_env())
    assert r.returncode == 126
    assert "ermission denied" in one_error_line(r)


def test_no_command(dynafold):
    r = run([dynafold, "run"], clean_env())
    assert r.returncode != 0
    assert "COMMAND" in r.stderr.decode()


@pytest.mark.parametrize("how", ["flag", "variable"])
def test_missing_library(dynafold, how):
    cmd, env = [dynafold, "run"], clean_env()
    if how == "flag":
        cmd += ["--lib", "/nonexistent/libdynafold.so"]
    else:
        env["DYNAFOLD_LIB"] = "/nonexistent/libdynafold.so"
    r = run(cmd + ["--", PY, "-c", "print('RAN')"], env)
    assert r.returncode != 0
    assert "RAN" not in r.stdout.decode()
    assert "/nonexistent/libdynafold.so not found" in one_error_line(r)


def test_library_that_is_not_elf(dynafold, tmp_path):
    bad = tmp_path / "libdynafold.so"
    bad.write_text("not a library\n")
    r = run([dynafold, "run", "--lib", str(bad), "--", PY, "-c", "print('RAN')"], clean_env())
    assert r.returncode != 0 and b"RAN" not in r.stdout
    assert "cannot load" in one_error_line(r)


def test_library_without_its_python_sibling(dynafold, tmp_path):
    lone = tmp_path / "libdynafold.so"
    shutil.copy(PRELOAD, lone)
    r = run([dynafold, "run", "--lib", str(lone), "--", PY, "-c", "print('RAN')"], clean_env())
    assert r.returncode != 0 and b"RAN" not in r.stdout
    assert "libdynafold_python.so must sit beside" in one_error_line(r)


def test_library_copied_with_sibling_elsewhere_works(dynafold, tmp_path):
    for name in ("libdynafold.so", "libdynafold_python.so"):
        shutil.copy(PRELOAD.parent / name, tmp_path / name)
    r = run([dynafold, "run", "--lib", str(tmp_path / "libdynafold.so"), "--", PY, "-c", PROBE],
            clean_env())
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]
    assert lines(r, "LD_PRELOAD") == [str(tmp_path / "libdynafold.so")]


def test_options_reach_the_child_as_variables(dynafold, tmp_path):
    code = ("import os; print('VARS', sorted((k, v) for k, v in os.environ.items() "
            "if k.startswith('DYNAFOLD_')))")
    r = run([dynafold, "run", "--log", "info", "--cuda-version", "12.8", "--nvcc-timeout", "5",
             "--report-dir", "rep", "--cache-dir", "cache", "--disable", "true", "--",
             PY, "-c", code], clean_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    got = dict(eval(lines(r, "VARS")[0]))
    assert got == {"DYNAFOLD_LOG": "info", "DYNAFOLD_CUDA_VERSION": "12.8",
                   "DYNAFOLD_NVCC_TIMEOUT": "5", "DYNAFOLD_REPORT_DIR": str(tmp_path / "rep"),
                   "DYNAFOLD_CACHE_DIR": str(tmp_path / "cache"), "DYNAFOLD_DISABLE": "1"}


def test_bad_option_values_are_refused(dynafold):
    for args in (["--cuda-version", "12.8\"); x"], ["--nvcc-timeout", "0"]):
        r = run([dynafold, "run", *args, "--", PY, "-c", "print('RAN')"], clean_env())
        assert r.returncode != 0 and b"RAN" not in r.stdout


def test_help_lists_every_variable(dynafold):
    r = run([dynafold, "run", "--help"], clean_env())
    text = r.stdout.decode()
    for var in ("DYNAFOLD_LOG", "DYNAFOLD_CUDA_VERSION", "DYNAFOLD_NVCC_TIMEOUT",
                "DYNAFOLD_REPORT_DIR", "DYNAFOLD_CACHE_DIR", "DYNAFOLD_DISABLE", "DYNAFOLD_LIB"):
        assert f"[env: {var}" in text, var
