"""Shared fixtures: the built libraries and the interpreters the tests drive.

Every test here starts real processes with `LD_PRELOAD` set exactly as a user would.
"""
import functools
import json
import os
import pathlib
import queue
import resource
import signal
import subprocess
import sys
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TARGET = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release"
PRELOAD = TARGET / "libdynafold.so"
DYNAFOLD = TARGET / "dynafold"
# Where scripts/test keeps the venvs and the FlashInfer releases (scripts/lib/env.sh).
CACHE = pathlib.Path(os.environ.get("DYNAFOLD_CACHE", pathlib.Path.home() / ".cache/dynafold-dev"))

# A CPython with a shared libpython (pyenv's) and one with a static one (Debian's
# /usr/bin/python3.11, which exports its symbols from the executable).
SHARED_PYTHON = os.environ.get("DYNAFOLD_SHARED_PYTHON") or os.path.realpath(sys.executable)
STATIC_PYTHON = os.environ.get("DYNAFOLD_STATIC_PYTHON", "/usr/bin/python3.11")

# Skips that may leave a test unproven without failing the run. A skip is a claim of the
# README or docs/testing.md quietly not checked (a missing release, tool or interpreter), so it
# fails the test; add a reason here only with docs/testing.md saying what is then not proven.
# The one: SGLang's CPU --enable-torch-compile server dying without dynafold as it did with it
# (test_sglang_server.py), a fault outside dynafold that would otherwise fail the run.
NOT_DYNAFOLDS = "server died without dynafold too"
ALLOWED_SKIPS = (NOT_DYNAFOLDS,)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        if not any(allowed in reason for allowed in ALLOWED_SKIPS):
            rep.outcome = "failed"
            rep.longrepr = f"unexpected skip (conftest.ALLOWED_SKIPS): {reason}"


@functools.lru_cache(maxsize=None)
def _interpreter_problem(label, exe):
    if not exe or not os.path.exists(exe):
        return f"{label} interpreter {exe!r} missing (scripts/lib/system.sh installs python3.11)"
    r = subprocess.run([exe, "-c", "import sysconfig; print(sysconfig.get_config_var('Py_ENABLE_SHARED'))"],
                       capture_output=True, timeout=60)
    shared = r.stdout.decode().strip() == "1"
    linked = b"libpython" in subprocess.run(["ldd", exe], capture_output=True, timeout=60).stdout
    if label == "shared" and not (shared and linked):
        return f"{exe} is not a shared-libpython CPython (Py_ENABLE_SHARED={shared}, ldd libpython={linked})"
    # Debian's build says Py_ENABLE_SHARED=1 (it ships a libpython for embedders) but its
    # executable carries the interpreter itself: only what it links tells the kinds apart.
    if label == "static" and linked:
        return f"{exe} links libpython: not the static kind"
    return None


PYENV = pathlib.Path(os.environ.get("PYENV_ROOT", pathlib.Path.home() / ".pyenv")) / "versions"
# The other CPython minors SGLang users run (SGLang's images are 3.12), from pyenv's builds,
# which every machine of this kind has: shared-libpython builds, like the default one.
OTHER_MINORS = ["3.9", "3.10", "3.12", "3.13"]


def pyenv_python(minor):
    found = sorted(PYENV.glob(f"{minor}.*/bin/python{minor}"))
    return str(found[-1]) if found else f"{PYENV}/{minor}.*/bin/python{minor}"


@pytest.fixture(params=["shared", "static"] + [f"cpython{m}" for m in OTHER_MINORS])
def python(request):
    """Each kind and minor of CPython the preload must work in; a missing or wrong one fails."""
    if request.param.startswith("cpython"):
        label, exe = "shared", pyenv_python(request.param[len("cpython"):])
    else:
        label = request.param
        exe = {"shared": SHARED_PYTHON, "static": STATIC_PYTHON}[label]
    problem = _interpreter_problem(label, exe)
    if problem:
        pytest.fail(problem, pytrace=False)
    return os.path.realpath(exe)


@pytest.fixture(scope="session")
def preload():
    assert PRELOAD.exists(), f"{PRELOAD} missing: run cargo build --release first (scripts/test does)"
    return str(PRELOAD)


_caches = {}


@pytest.fixture(scope="session", autouse=True)
def _session_caches(tmp_path_factory):
    root = tmp_path_factory.mktemp("session-caches")
    _caches["session"] = {"DYNAFOLD_CACHE_DIR": str(root / "dynafold"), "XDG_CACHE_HOME": str(root / "xdg")}


@pytest.fixture(autouse=True)
def _test_caches(tmp_path_factory):
    # dynafold's bytecode otherwise lands in ~/.cache: every run after a machine's first would
    # test only the warm path.
    root = tmp_path_factory.mktemp("caches")
    _caches["test"] = {"DYNAFOLD_CACHE_DIR": str(root / "dynafold"), "XDG_CACHE_HOME": str(root / "xdg")}
    yield
    del _caches["test"]


def clean_env(**extra):
    """The test process's environment without any dynafold or preload setting, with dynafold's
    caches in folders of this test's own (pass DYNAFOLD_CACHE_DIR=None for the default)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("DYNAFOLD_") and k != "LD_PRELOAD"}
    env.update(_caches.get("test") or _caches["session"])
    env.update(extra)
    return {k: v for k, v in env.items() if v is not None}


def run(cmd, env, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, timeout=kw.pop("timeout", 120), **kw)


def result_of(r, tail=3000):
    """The JSON of a helper's first `RESULT {...}` line on stdout; the test fails with the end
    of its stderr when there is none."""
    lines = [line for line in r.stdout.decode().splitlines() if line.startswith("RESULT ")]
    assert lines, r.stderr.decode()[-tail:]
    return json.loads(lines[0][7:])


def each_outcome(got, count, operator):
    """The (case, mode, outcome) of a value helper's RESULT (helpers/value_compare.py), once
    the checks they all share hold: `count` cases, each compiled in every mode to the one
    operator `operator`."""
    assert len(got["cases"]) == count, got
    for name, modes in got["cases"].items():
        for mode, outcome in modes.items():
            assert outcome["ok"], (name, mode, outcome)
            assert outcome["operators"] == [operator], (name, mode, outcome)
            yield name, mode, outcome


def results_of(r, count=1):
    """The JSON of every `RESULT {...}` line a helper printed; the test fails, with the ends of
    its stdout and stderr, unless it exited 0 having printed exactly `count` of them."""
    out = r.stdout.decode()
    results = [json.loads(line[7:]) for line in out.splitlines() if line.startswith("RESULT ")]
    assert r.returncode == 0 and len(results) == count, (r.returncode, out[-3000:],
                                                         r.stderr.decode()[-5000:])
    return results


FORWARDED = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGTERM)
# More of what `dynafold run` forwards (every catchable signal but faults, job control, CHLD
# and PIPE): those servers act on besides the four above.
FORWARDED_TOO = (signal.SIGUSR1, signal.SIGUSR2, signal.SIGWINCH, signal.SIGALRM, signal.SIGURG,
                 signal.SIGRTMIN + 1, signal.SIGRTMAX)


def signals_as(ignored=()):
    """A preexec_fn: the signals `dynafold run` forwards start at their default action (or
    ignored, for those in `ignored`) and unblocked, whatever the launcher of pytest chose
    (nohup, `trap '' HUP`, a CI runner), so a test decides what the wrapper inherits. Core
    dumps are off: SIGQUIT's default action writes one."""
    def apply():
        for sig in FORWARDED + FORWARDED_TOO:
            signal.signal(sig, signal.SIG_IGN if sig in ignored else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED + FORWARDED_TOO)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    return apply


class Proc:
    """A child whose stdout and stderr are drained by threads from the start, so it never
    blocks on a full pipe, and whose every read and wait has a deadline."""

    def __init__(self, cmd, env, **kw):
        self.p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)
        self.pid = self.p.pid
        self._out, self._err = [], []
        self._lines = queue.Queue()
        self._threads = [threading.Thread(target=self._drain, args=(self.p.stdout, self._out, self._lines), daemon=True),
                         threading.Thread(target=self._drain, args=(self.p.stderr, self._err, None), daemon=True)]
        for t in self._threads:
            t.start()

    @staticmethod
    def _drain(pipe, into, lines):
        for line in iter(pipe.readline, b""):
            into.append(line)
            if lines is not None:
                lines.put(line)
        if lines is not None:
            lines.put(None)

    @property
    def stdout(self):
        return b"".join(self._out).decode(errors="replace")

    @property
    def stderr(self):
        return b"".join(self._err).decode(errors="replace")

    def expect(self, prefix, timeout):
        """The first stdout line starting with `prefix`; fails at EOF or after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            try:
                line = self._lines.get(timeout=max(left, 0))
            except queue.Empty:
                pytest.fail(f"no {prefix!r} line within {timeout} s; stderr: {self.stderr[-3000:]}")
            if line is None:
                self.p.wait(10)
                pytest.fail(f"no {prefix!r} line: stdout closed (exit {self.p.returncode}); "
                            f"stderr: {self.stderr[-3000:]}")
            if line.decode(errors="replace").startswith(prefix):
                return line.decode(errors="replace").rstrip("\n")

    def wait(self, timeout):
        """The exit status, waiting at most `timeout` s for it (then fails); the pipes are read
        to their end unless a process that inherited them outlives this one."""
        try:
            self.p.wait(timeout)
        except subprocess.TimeoutExpired:
            pytest.fail(f"still running after {timeout} s; stderr: {self.stderr[-3000:]}")
        for t in self._threads:
            t.join(5)
        return self.p.returncode

    def poll(self):
        return self.p.poll()

    def send_signal(self, sig):
        self.p.send_signal(sig)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait(30)


def alive(pid):
    """Whether `pid` still runs: a zombie has exited and only waits to be reaped (by its
    parent, or by init once orphaned), so it counts as gone."""
    try:
        stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    # The state follows the command name, which may itself contain ") ".
    return stat[stat.rindex(")") + 2] not in "ZX"
