"""`dynafold run` as an operator uses it: real binary, real child processes, real signals."""
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import DYNAFOLD, FORWARDED, FORWARDED_TOO, PRELOAD, Proc, alive, clean_env, run, signals_as

PY = os.path.realpath(sys.executable)
# The venv's own interpreter (its real path would leave the venv, and torch with it).
TORCH_PY = sys.executable
PROBE = ("import os, sys; print('FIRST', type(sys.meta_path[0]).__name__); "
         "print('LD_PRELOAD', os.environ.get('LD_PRELOAD'))")


@pytest.fixture(scope="module")
def dynafold():
    assert DYNAFOLD.exists(), f"{DYNAFOLD} missing: run cargo build --release first"
    return str(DYNAFOLD)


def lines(r, prefix):
    return [line[len(prefix) + 1:] for line in r.stdout.decode().splitlines() if line.startswith(prefix + " ")]


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


SIGNALS = [pytest.param(s, id=s.name) for s in FORWARDED]
MORE_SIGNALS = [pytest.param(s, id="SIGRTMIN+1" if s == signal.SIGRTMIN + 1 else signal.Signals(s).name)
                for s in FORWARDED_TOO]


def start(dynafold, code, ignored=(), args=()):
    """`dynafold run` as launched by a shell whose only non-default signal settings are
    `ignored` (a test must not depend on what pytest's own launcher ignores)."""
    return Proc([dynafold, "run", *args, "--", PY, "-c", code], clean_env(),
                preexec_fn=signals_as(ignored))


@pytest.mark.parametrize("sig", SIGNALS)
def test_signal_is_forwarded_and_its_exit_code_returned(dynafold, sig):
    child = ("import signal, sys, time\n"
             "def bye(n, f):\n"
             "    print('CHILD got', n, flush=True); sys.exit(5)\n"
             f"signal.signal({int(sig)}, bye)\n"
             "print('READY', flush=True)\n"
             "time.sleep(60)\n")
    with start(dynafold, child) as p:
        p.expect("READY", 60)
        p.send_signal(sig)
        assert p.wait(30) == 5, p.stderr
        assert p.expect("CHILD got", 5) == f"CHILD got {int(sig)}"


@pytest.mark.parametrize("sig", MORE_SIGNALS)
def test_every_other_signal_is_forwarded_unchanged(dynafold, sig):
    """USR1, USR2, WINCH and the rest reach the command as themselves (USR1 used to kill the
    wrapper, and the command got SIGTERM)."""
    child = ("import signal, time\n"
             "got = []\n"
             f"signal.signal({int(sig)}, lambda n, f: got.append(n))\n"
             "print('READY', flush=True)\n"
             "for _ in range(600):\n"
             "    if got: break\n"
             "    time.sleep(0.1)\n"
             "print('CHILD got', got, flush=True)\n")
    with start(dynafold, child) as p:
        p.expect("READY", 60)
        p.send_signal(sig)
        assert p.wait(30) == 0, p.stderr
        assert p.expect("CHILD got", 5) == f"CHILD got [{int(sig)}]"


@pytest.mark.parametrize("sig", SIGNALS + [pytest.param(signal.SIGUSR1, id="SIGUSR1")])
def test_child_killed_by_forwarded_signal_gives_128_plus_n(dynafold, sig):
    # SIGINT too: CPython turns it into KeyboardInterrupt and, unhandled, dies of SIGINT.
    with start(dynafold, "print('READY', flush=True); import time; time.sleep(60)") as p:
        p.expect("READY", 60)
        p.send_signal(sig)
        assert p.wait(30) == 128 + sig, p.stderr


def test_ignored_sighup_stays_ignored_for_the_child(dynafold):
    """nohup semantics, on purpose: a launcher that ignores SIGHUP gets a child that ignores
    it, both when sent to the wrapper and when the hang-up reaches the child directly."""
    child = ("import os, signal, time\n"
             "print('HUP', signal.getsignal(signal.SIGHUP) == signal.SIG_IGN, flush=True)\n"
             "print('READY', os.getpid(), flush=True)\n"
             "time.sleep(60)\n")
    with start(dynafold, child, ignored=(signal.SIGHUP,)) as p:
        assert p.expect("HUP", 60) == "HUP True"
        pid = int(p.expect("READY", 60).split()[1])
        p.send_signal(signal.SIGHUP)
        os.kill(pid, signal.SIGHUP)
        time.sleep(1)
        assert p.poll() is None and alive(pid), p.stderr
        # The signals it does handle are still forwarded.
        p.send_signal(signal.SIGTERM)
        assert p.wait(30) == 128 + signal.SIGTERM, p.stderr


# Fills the stderr pipe the wrapper shares, then exits: the wrapper's summary line then blocks
# in write() until someone reads the pipe, which the test never does.
FILL_STDERR = """
import fcntl, os, sys
flags = fcntl.fcntl(2, fcntl.F_GETFL)
fcntl.fcntl(2, fcntl.F_SETFL, flags | os.O_NONBLOCK)
try:
    while True:
        os.write(2, b"x" * 4096)
except BlockingIOError:
    pass
# The flag belongs to the pipe's open file, shared with the wrapper: it must block again.
fcntl.fcntl(2, fcntl.F_SETFL, flags)
open(sys.argv[1], "w").write(str(os.getpid()))
"""


def pid_from(pidfile, wrapper, deadline, what):
    """The pid the child writes to `pidfile`, waiting while the wrapper runs, until `deadline`."""
    while not (pidfile.exists() and pidfile.read_text()):
        assert time.monotonic() < deadline and wrapper.poll() is None, what
        time.sleep(0.05)
    return int(pidfile.read_text())


@pytest.mark.parametrize("sig", [pytest.param(s, id=s.name) for s in (signal.SIGTERM, signal.SIGINT)])
def test_wrapper_can_be_stopped_after_the_child_exited(dynafold, tmp_path, sig):
    pidfile = tmp_path / "pid"
    p = subprocess.Popen([dynafold, "run", "--report-dir", str(tmp_path / "rep"), "--",
                          PY, "-c", FILL_STDERR, str(pidfile)],
                         env=clean_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=signals_as())
    try:
        deadline = time.monotonic() + 60
        child = pid_from(pidfile, p, deadline, "the child never filled the pipe")
        # Gone from /proc once the wrapper's wait() has reaped it.
        while os.path.exists(f"/proc/{child}"):
            assert time.monotonic() < deadline, "the wrapper did not reap its child"
            time.sleep(0.05)
        time.sleep(0.5)
        assert p.poll() is None, "the wrapper was expected to block writing its summary"
        p.send_signal(sig)
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{sig.name} did not stop dynafold run after its child had exited")
        assert p.returncode == -sig
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(30)
        p.stderr.close()


@pytest.mark.parametrize("existing", [False, True])
def test_report_folder_is_private(dynafold, tmp_path, existing):
    rep = tmp_path / "runs" / "rep"
    if existing:
        rep.mkdir(parents=True)
        rep.chmod(0o755)
    r = run([dynafold, "run", "--report-dir", str(rep), "--", "/bin/true"], clean_env(),
            preexec_fn=lambda: os.umask(0))
    assert r.returncode == 0, r.stderr.decode()
    mode = lambda p: p.stat().st_mode & 0o777  # noqa: E731
    if existing:
        # A folder its owner made keeps the owner's mode.
        assert mode(rep) == 0o755
    else:
        # Even under umask 0: the files in it are 0600 and name the user's sources.
        assert mode(rep) == 0o700 and mode(rep.parent) == 0o700


def test_killing_dynafold_run_does_not_orphan_the_child(dynafold, tmp_path):
    pidfile = tmp_path / "pid"
    child = (f"import os, time; open({str(pidfile)!r}, 'w').write(str(os.getpid())); "
             "time.sleep(60)")
    p = subprocess.Popen([dynafold, "run", "--", PY, "-c", child], env=clean_env())
    try:
        deadline = time.monotonic() + 60
        pid = pid_from(pidfile, p, deadline, "the child never started")
        p.kill()
        p.wait(10)
        deadline = time.monotonic() + 10
        # Orphaned, the child is reaped by init or a subreaper, or lingers as a zombie where
        # that reaper does not reap: either way it has stopped running.
        while alive(pid):
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                pytest.fail("the child outlived a SIGKILLed dynafold run")
            time.sleep(0.05)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait(10)


def one_error_line(r):
    err = [line for line in r.stderr.decode().splitlines() if line.strip()]
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
    assert r.returncode == 125
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
             "--report-dir", "rep", "--cache-dir", "cache", "--disable", "--",
             PY, "-c", code], clean_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr.decode()
    got = dict(eval(lines(r, "VARS")[0]))
    # Each run writes into its own folder inside the report folder.
    run_dir = pathlib.Path(got.pop("DYNAFOLD_REPORT_DIR"))
    assert run_dir.parent == tmp_path / "rep" and run_dir.name.startswith("run-"), run_dir
    assert got == {"DYNAFOLD_LOG": "info", "DYNAFOLD_CUDA_VERSION": "12.8",
                   "DYNAFOLD_NVCC_TIMEOUT": "5",
                   "DYNAFOLD_CACHE_DIR": str(tmp_path / "cache"), "DYNAFOLD_DISABLE": "1"}


def test_bad_option_values_are_refused(dynafold):
    for args in (["--cuda-version", "12.8\"); x"], ["--nvcc-timeout", "0"]):
        r = run([dynafold, "run", *args, "--", PY, "-c", "print('RAN')"], clean_env())
        # 125, dynafold's own: not a code the command itself could have exited with.
        assert r.returncode == 125 and b"RAN" not in r.stdout, r.stderr.decode()


def test_help_lists_every_variable(dynafold):
    r = run([dynafold, "run", "--help"], clean_env())
    text = r.stdout.decode()
    for var in ("DYNAFOLD_LOG", "DYNAFOLD_CUDA_VERSION", "DYNAFOLD_NVCC_TIMEOUT",
                "DYNAFOLD_REPORT_DIR", "DYNAFOLD_CACHE_DIR", "DYNAFOLD_DISABLE", "DYNAFOLD_LIB",
                "DYNAFOLD_FP4_OPAQUE", "DYNAFOLD_OPS"):
        assert f"[env: {var}" in text, var


def as_unprivileged():
    """A preexec_fn for a process that mode bits apply to: root writes anywhere, so as root
    the process becomes nobody; otherwise it runs as the test's own user."""
    if os.geteuid() != 0:
        return None

    def drop():
        os.setgroups([])
        os.setgid(65534)
        os.setuid(65534)
    return drop


@pytest.fixture
def shared_tmp():
    """A folder nobody can traverse too (pytest's tmp_path is private to its user)."""
    d = tempfile.mkdtemp(prefix="dynafold-test-", dir="/tmp")
    os.chmod(d, 0o755)
    yield pathlib.Path(d)
    for root, dirs, _ in os.walk(d):
        for name in dirs:
            os.chmod(os.path.join(root, name), 0o755)
    shutil.rmtree(d)


@pytest.mark.parametrize("made", ["existing", "to-create"])
def test_read_only_report_folder_is_refused_before_the_command(dynafold, shared_tmp, made):
    """A folder the processes cannot write would read as "no graph breaks": refused with one
    line and dynafold's own exit code, and the command never starts."""
    ro = shared_tmp / "ro"
    ro.mkdir()
    rep = ro if made == "existing" else ro / "rep"
    ro.chmod(0o555)
    marker = shared_tmp / "ran"
    shared_tmp.chmod(0o777)
    r = run([dynafold, "run", "--report-dir", str(rep), "--", "/bin/sh", "-c", f"echo RAN > {marker}"],
            clean_env(), preexec_fn=as_unprivileged())
    assert r.returncode == 125, r.stderr.decode()
    line = one_error_line(r)
    assert str(rep) in line and ("not writable" in line or "cannot create" in line), line
    assert not marker.exists() and b"RAN" not in r.stdout


BREAKS = """
import torch
def f(x):
    print("tick")
    return x + 1
torch.compile(f, backend="eager")(torch.ones(2))
"""


def test_reused_report_folder_reports_only_this_run(dynafold, tmp_path):
    """An earlier run's break is never reported for a later run, and `dynafold report` says
    which run it read."""
    rep = tmp_path / "rep"
    first = run([dynafold, "run", "--report-dir", str(rep), "--", TORCH_PY, "-c", BREAKS], clean_env(),
                timeout=300)
    assert first.returncode == 0, first.stderr.decode()
    assert "1 graph break at 1 site from 1 process" in first.stderr.decode(), first.stderr.decode()
    # A program that never imports torch, with the same folder.
    second = run([dynafold, "run", "--report-dir", str(rep), "--", PY, "-c", "pass"], clean_env())
    assert second.returncode == 0, second.stderr.decode()
    assert "no process watched for graph breaks" in second.stderr.decode(), second.stderr.decode()
    runs = sorted(p.name for p in rep.iterdir())
    assert len(runs) == 2 and all(n.startswith("run-") for n in runs), runs
    report = run([dynafold, "report", "--json", str(rep)], clean_env())
    merged = json.loads(report.stdout)
    assert (merged["total"], merged["run"], merged["other_runs"]) == (0, runs[1], [runs[0]]), merged
    table = run([dynafold, "report", str(rep / runs[0])], clean_env()).stdout.decode()
    assert table.startswith("dynafold: 1 graph break at 1 site from 1 process"), table
    assert f"run {runs[0]}" in table, table


def test_report_names_junk_and_fails_when_it_read_nothing(dynafold, tmp_path):
    (tmp_path / "a.jsonl").write_text("not json\n")
    r = run([dynafold, "report", str(tmp_path)], clean_env())
    assert r.returncode == 1 and r.stdout == b"", r
    assert "a.jsonl: not a report" in r.stderr.decode() and "process" not in r.stderr.decode()
    r = run([dynafold, "report", "--json", str(tmp_path)], clean_env())
    assert r.returncode == 1 and r.stdout.endswith(b"}\n"), r
    assert json.loads(r.stdout)["files"] == []
    # Its layout is versioned.
    assert json.loads(r.stdout)["schema"] == 1
    empty = tmp_path / "empty"
    empty.mkdir()
    r = run([dynafold, "report", str(empty)], clean_env())
    assert r.returncode == 1 and r.stdout == b"" and b"no report files" in r.stderr, r


VARS = ("import os; print('VARS', sorted((k, v) for k, v in os.environ.items() "
        "if k.startswith('DYNAFOLD_') and k != 'DYNAFOLD_CACHE_DIR'))")


@pytest.mark.parametrize("var,value", [("DYNAFOLD_DISABLE", "maybe"), ("DYNAFOLD_OPS", "2"),
                                       ("DYNAFOLD_LOG", "loud"), ("DYNAFOLD_NVCC_TIMEOUT", "0"),
                                       ("DYNAFOLD_CUDA_VERSION", "12")])
def test_a_bad_variable_is_one_warning_and_the_default(dynafold, var, value):
    """As every process treats it, said once by `run`, not a usage error naming an option."""
    r = run([dynafold, "run", "--", PY, "-c", VARS], clean_env(**{var: value}))
    assert r.returncode == 0, r.stderr.decode()
    line = one_error_line(r)
    assert line.startswith(f"dynafold: {var}=\"{value}\" ") and "using the default" in line, line
    assert "--" not in line, line
    # Taken out of the command's environment: no process says it again.
    assert eval(lines(r, "VARS")[0]) == []


@pytest.mark.parametrize("value,passed", [("TRUE", "1"), ("Off", "0"), ("", None)])
def test_yes_no_variables_in_any_case_empty_is_unset(dynafold, value, passed):
    r = run([dynafold, "run", "--", PY, "-c", VARS], clean_env(DYNAFOLD_DISABLE=value))
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    got = dict(eval(lines(r, "VARS")[0]))
    assert got.get("DYNAFOLD_DISABLE") == (passed if passed is not None else value)


def test_yes_no_options_work_bare_or_with_equals(dynafold):
    for args, name, expected in ((["--disable"], "DYNAFOLD_DISABLE", "1"),
                                 (["--disable=no"], "DYNAFOLD_DISABLE", "0"),
                                 (["--ops=OFF"], "DYNAFOLD_OPS", "0"),
                                 (["--survey"], "DYNAFOLD_SURVEY", "1"),
                                 (["--survey=no"], "DYNAFOLD_SURVEY", "0")):
        r = run([dynafold, "run", *args, "--", PY, "-c", VARS], clean_env())
        assert r.returncode == 0, r.stderr.decode()
        assert dict(eval(lines(r, "VARS")[0])).get(name) == expected, (args, r.stdout)
    r = run([dynafold, "run", "--disable=maybe", "--", PY, "-c", VARS], clean_env())
    assert r.returncode == 125 and b"VARS" not in r.stdout
    assert "--disable=\"maybe\" is not one of" in one_error_line(r)
    # The old spelling is refused, not run as the command `true`.
    r = run([dynafold, "run", "--disable", "true", "--", PY, "-c", VARS], clean_env())
    assert r.returncode == 125 and b"VARS" not in r.stdout
    assert "--disable=true" in one_error_line(r)
    r = run([dynafold, "run", "--survey", "yes", "--", PY, "-c", VARS], clean_env())
    assert r.returncode == 125 and "--survey=yes" in one_error_line(r)


def test_the_command_needs_no_double_dash(dynafold):
    r = run([dynafold, "run", "--log", "warn", PY, "-c", "import sys; print('ARGS', sys.argv[1:])",
             "--disable", "-x"], clean_env())
    assert r.returncode == 0, r.stderr.decode()
    # Options after the command are the command's.
    assert lines(r, "ARGS") == ["['--disable', '-x']"]


@pytest.mark.parametrize("option", ["--bogus", "--report_dir", "--report_dir=x", "-x"])
def test_an_unknown_option_before_the_command_is_a_usage_error(dynafold, option):
    """Not read as the command ("cannot run --bogus", 127): 125, naming the valid options."""
    r = run([dynafold, "run", option, PY, "-c", "print('RAN')"], clean_env())
    assert r.returncode == 125 and b"RAN" not in r.stdout, r.stderr.decode()
    line = one_error_line(r)
    assert f"unknown option {option.split('=')[0]}" in line, line
    assert "--report-dir" in line and "--cache-dir" in line, line
    # After --, a command may start with '-' (it is then not found, as it is not).
    r = run([dynafold, "run", "--", option], clean_env())
    assert r.returncode == 127, r.stderr.decode()


# Counts each delivery of the signals it gets (the wakeup fd gets a byte per delivery, where
# Python's handlers would run once for two that come close together; the real-time one is
# queued, never merged); its INT and QUIT as it started them, before its own handlers.
COUNTING_CHILD = """
import os, signal, sys, time
ign = [signal.getsignal(s) == signal.SIG_IGN for s in (signal.SIGINT, signal.SIGQUIT)]
print('IGNORED', ign, flush=True)
r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w)
for s in (signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGRTMIN + 2):
    signal.signal(s, lambda n, f: None)
open(sys.argv[1], 'w').write(str(os.getpid()))
got = b''
os.set_blocking(r, False)
deadline = time.monotonic() + 10
while len(set(got)) < 4 and time.monotonic() < deadline:
    time.sleep(0.05)
    try:
        got += os.read(r, 100)
    except BlockingIOError:
        pass
time.sleep(1)  # a second, forwarded copy would have come by now
try:
    got += os.read(r, 100)
except BlockingIOError:
    pass
print('GOT', sorted(got), flush=True)
"""

# A script that starts the command in the background (bash then ignores INT and QUIT in it),
# sends INT and QUIT to the pid `$!` names, and USR1 and RTMIN+2 to its whole process group.
BACKGROUND_SCRIPT = """
trap 'true' USR1 RTMIN+2
"$@" &
pid=$!
while [ ! -s "$PIDFILE" ]; do sleep 0.05; done
kill -INT $pid; kill -QUIT $pid
kill -USR1 0; kill -s RTMIN+2 -- -$$
wait $pid
"""


@pytest.mark.parametrize("wrapped", [True, False], ids=["dynafold", "plain"])
def test_background_start_and_group_signals_reach_the_child_once(dynafold, tmp_path, wrapped):
    """As without the wrapper: INT and QUIT start ignored in the child, and each signal, sent
    to the wrapper or to the whole process group, reaches the child exactly once."""
    pidfile = tmp_path / "pid"
    cmd = [PY, "-c", COUNTING_CHILD, str(pidfile)]
    if wrapped:
        cmd = [dynafold, "run", *cmd]
    r = run(["bash", "-c", BACKGROUND_SCRIPT, "script", *cmd], clean_env(PIDFILE=str(pidfile)),
            preexec_fn=signals_as(), start_new_session=True, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    assert lines(r, "IGNORED") == ["[True, True]"], r.stdout.decode()
    expected = sorted([signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGRTMIN + 2])
    assert lines(r, "GOT") == [str([int(s) for s in expected])], r.stdout.decode() + r.stderr.decode()


@pytest.mark.parametrize("how", ["option", "variable"])
def test_a_cache_folder_that_is_a_file_warns(dynafold, tmp_path, how):
    f = tmp_path / "file"
    f.write_text("")
    args, env = (["--cache-dir", str(f)], clean_env()) if how == "option" else ([], clean_env(DYNAFOLD_CACHE_DIR=str(f)))
    r = run([dynafold, "run", *args, "--", PY, "-c", VARS.replace(" and k != 'DYNAFOLD_CACHE_DIR'", "")], env)
    assert r.returncode == 0, r.stderr.decode()
    line = one_error_line(r)
    assert str(f) in line and "not a folder" in line, line
    assert "DYNAFOLD_CACHE_DIR" not in dict(eval(lines(r, "VARS")[0])), r.stdout


@pytest.mark.parametrize("var", ["DYNAFOLD_LIB", "DYNAFOLD_REPORT_DIR", "DYNAFOLD_CACHE_DIR"])
def test_an_empty_path_variable_is_unset(dynafold, var):
    """Issue 41, item 1: not "a value is required for '--lib <PATH>'" (exit 125), naming an
    option nobody passed: the run goes on as without the variable."""
    r = run([dynafold, "run", "--", PY, "-c", PROBE], clean_env(**{var: ""}))
    assert r.returncode == 0 and r.stderr == b"", r.stderr.decode()
    assert lines(r, "FIRST") == ["DynafoldFinder"]


def test_a_disabled_run_with_a_report_folder_says_it_was_disabled(dynafold, tmp_path):
    """Issue 41, item 3: a program that compiles and breaks, run with dynafold disabled, is not
    "no process watched ... (none loaded torch's Dynamo)", nor "no graph breaks" to `report`."""
    rep = tmp_path / "rep"
    r = run([dynafold, "run", "--disable", "--report-dir", str(rep), "--", TORCH_PY, "-c", BREAKS],
            clean_env(), timeout=300)
    err = r.stderr.decode()
    assert r.returncode == 0, err
    assert "dynafold was disabled for this run" in err and "none loaded torch's Dynamo" not in err, err
    for args in ([], ["--json"]):
        report = run([dynafold, "report", *args, str(rep)], clean_env())
        said = report.stderr.decode()
        assert report.returncode == 1, said
        assert "dynafold was disabled for run run-" in said, said
        assert b"no graph breaks" not in report.stdout, report.stdout
    # The variable is the same switch.
    r = run([dynafold, "run", "--report-dir", str(rep), "--", PY, "-c", "pass"],
            clean_env(DYNAFOLD_DISABLE="1"))
    assert "dynafold was disabled for this run" in r.stderr.decode(), r.stderr.decode()


def test_report_on_a_missing_folder_read_nothing(dynafold, tmp_path):
    """Issue 41, item 5: exit 1, as docs/usage.md gives for reading no report at all (it was
    125, dynafold's own error), with one line on stderr."""
    for args in ([], ["--json"]):
        r = run([dynafold, "report", *args, str(tmp_path / "nope")], clean_env())
        assert r.returncode == 1 and r.stdout == b"", r
        assert f"cannot read {tmp_path / 'nope'}" in one_error_line(r)
