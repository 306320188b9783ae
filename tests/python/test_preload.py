"""Issue 2: the preload library is inert in every non-Python process and installs exactly one
DynafoldFinder, first on sys.meta_path, in every way a Python process can start."""
import json
import shutil
import sys
import textwrap

import pytest

from conftest import clean_env, run

FAKE_NVCC = """#!/bin/sh
echo "nvcc: NVIDIA (R) Cuda compiler driver"
echo "Cuda compilation tools, release 12.8, V12.8.93"
echo "Build cuda_12.8.r12.8/compiler.35583870_0"
"""

# Printed by every probe: the finder's position and how many there are.
PROBE = (
    "import sys, json; mp = sys.meta_path; "
    "print('PROBE', json.dumps([type(mp[0]).__name__, "
    "sum(type(f).__name__ == 'DynafoldFinder' for f in mp)]))"
)


def probes(stdout):
    return [json.loads(line.split(" ", 1)[1]) for line in stdout.decode().splitlines() if line.startswith("PROBE ")]


def non_python_programs(tmp):
    nvcc = tmp / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(FAKE_NVCC)
    nvcc.chmod(0o755)
    cmds = {
        "true": ["/bin/true"],
        "bash": ["bash", "-c", "echo hi; echo err >&2; exit 3"],
        "gcc": ["gcc", "--version"],
        "nvcc": [str(nvcc), "--version"],
        "env": ["env"],
    }
    if shutil.which("ninja"):
        cmds["ninja"] = ["ninja", "--version"]
    return cmds


def assert_programs_untouched(lib, tmp_path):
    """Every non-Python program behaves byte for byte as without `lib` preloaded."""
    for name, cmd in non_python_programs(tmp_path).items():
        base = run(cmd, clean_env())
        pre = run(cmd, clean_env(LD_PRELOAD=lib))
        out = pre.stdout
        if name == "env":
            # `env` prints the environment, which now has one more variable: the preload itself.
            out = b"".join(line for line in out.splitlines(True) if not line.startswith(b"LD_PRELOAD="))
        assert (base.returncode, base.stdout, base.stderr) == (pre.returncode, out, pre.stderr), name


def test_non_python_programs_are_untouched(preload, tmp_path):
    assert_programs_untouched(preload, tmp_path)
    assert shutil.which("ninja"), "ninja is not installed (scripts/test installs ninja-build)"


def launch_modes(python, tmp):
    (tmp / "probe_mod.py").write_text(PROBE + "\n")
    (tmp / "script.py").write_text(PROBE + "\n")
    children = textwrap.dedent(
        f"""
        import multiprocessing, os, subprocess, sys
        def child():
            {PROBE}
        if __name__ == "__main__":
            {PROBE}
            sys.stdout.flush()
            for method in ("spawn", "forkserver", "fork"):
                p = multiprocessing.get_context(method).Process(target=child); p.start(); p.join()
            pid = os.fork()
            if pid == 0:
                {PROBE}
                sys.stdout.flush(); os._exit(0)
            os.waitpid(pid, 0)
            subprocess.run([sys.executable, "-c", {PROBE!r}], check=True)
        """
    )
    (tmp / "children.py").write_text(children)
    return {
        "-c": ([python, "-c", PROBE], None, 1),
        "-m": ([python, "-m", "probe_mod"], None, 1),
        "script": ([python, str(tmp / "script.py")], None, 1),
        "stdin": ([python, "-"], PROBE.encode(), 1),
        "-i": ([python, "-i", "-q"], (PROBE + "\n").encode(), 1),
        "-I": ([python, "-I", "-c", PROBE], None, 1),
        "-S": ([python, "-S", "-c", PROBE], None, 1),
        "-E -s": ([python, "-E", "-s", "-c", PROBE], None, 1),
        "children": ([python, str(tmp / "children.py")], None, 6),
    }


def test_finder_first_and_unique_in_every_launch_mode(preload, python, tmp_path):
    for mode, (cmd, stdin, expected) in launch_modes(python, tmp_path).items():
        r = run(cmd, clean_env(LD_PRELOAD=preload), input=stdin, cwd=tmp_path)
        assert r.returncode == 0, (mode, r.stderr.decode())
        seen = probes(r.stdout)
        assert seen == [["DynafoldFinder", 1]] * expected, (mode, seen, r.stderr.decode())
        assert r.stderr.decode().replace(">>> ", "").strip() == "", (mode, r.stderr.decode())


def test_stays_first_after_other_finders_insert_themselves(preload, python):
    code = (
        "import sys\n"
        "class Other:\n"
        "    def find_spec(self, *a): return None\n"
        "sys.meta_path.insert(0, Other())\n"
        "import json\n"  # the next import puts dynafold back in front
        + PROBE
    )
    r = run([python, "-c", code], clean_env(LD_PRELOAD=preload))
    assert probes(r.stdout) == [["DynafoldFinder", 1]], r.stderr.decode()


def test_disable_means_no_finder(preload, python):
    r = run([python, "-c", PROBE], clean_env(LD_PRELOAD=preload, DYNAFOLD_DISABLE="1"))
    assert probes(r.stdout)[0][1] == 0
    assert r.stderr == b""


@pytest.mark.parametrize("value", ["1", "TRUE", "Yes", "ON", "true"])
def test_disable_in_any_case(preload, value):
    r = run([sys.executable, "-c", PROBE], clean_env(LD_PRELOAD=preload, DYNAFOLD_DISABLE=value))
    assert probes(r.stdout)[0][1] == 0, r.stderr.decode()
    assert r.stderr == b""


@pytest.mark.parametrize("value", ["0", "FALSE", "Off", ""])
def test_enabled_in_any_case_and_when_empty(preload, value):
    r = run([sys.executable, "-c", PROBE], clean_env(LD_PRELOAD=preload, DYNAFOLD_DISABLE=value))
    assert probes(r.stdout) == [["DynafoldFinder", 1]]
    assert r.stderr == b"", r.stderr.decode()


@pytest.mark.parametrize("level", ["off", "OFF", "Error"])
def test_a_quiet_log_level_in_any_case_silences_the_preload(preload, level):
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_DISABLE="maybe", DYNAFOLD_LOG=level)
    r = run([sys.executable, "-c", PROBE], env)
    assert probes(r.stdout) == [["DynafoldFinder", 1]]
    assert r.stderr == b"", r.stderr.decode()


def test_invalid_settings_get_one_line_and_the_default(preload):
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_DISABLE="maybe", DYNAFOLD_LOG="loud")
    r = run([sys.executable, "-c", PROBE], env)
    assert probes(r.stdout) == [["DynafoldFinder", 1]]
    lines = r.stderr.decode().splitlines()
    assert len(lines) == 2, lines
    assert "DYNAFOLD_DISABLE='maybe'" in lines[0] or "DYNAFOLD_DISABLE=\"maybe\"" in lines[0]
    assert "DYNAFOLD_LOG=\"loud\"" in lines[1]
    assert all(line.startswith("dynafold[") and " WARN: " in line for line in lines)


def test_log_lines_carry_name_pid_and_level(preload):
    r = run([sys.executable, "-c", "import os; print(os.getpid())"], clean_env(LD_PRELOAD=preload, DYNAFOLD_LOG="debug"))
    pid = r.stdout.decode().strip()
    assert f"dynafold[{pid}] DEBUG: finder installed at sys.meta_path[0]" in r.stderr.decode()


@pytest.mark.parametrize("fault", ["find_spec", "exec_module"])
def test_internal_error_falls_back_to_the_normal_import(preload, tmp_path, fault):
    # A stand-in package at a target name: the fault fires inside dynafold's own code.
    pkg = tmp_path / "flashinfer" / "jit"
    pkg.mkdir(parents=True)
    (tmp_path / "flashinfer" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "cpp_ext.py").write_text("VALUE = 42\n")
    env = clean_env(LD_PRELOAD=preload, DYNAFOLD_TEST_FAULT=fault, PYTHONPATH=str(tmp_path))
    r = run([sys.executable, "-c", "import flashinfer.jit.cpp_ext as m; print(m.VALUE)"], env)
    assert r.returncode == 0, r.stderr.decode()
    assert r.stdout.decode().strip() == "42"
    lines = r.stderr.decode().splitlines()
    # Compiled in only with the test feature (scripts/test builds it so).
    assert lines, ("no fault: build with cargo build --release --workspace "
                   "--features dynafold-python/test-fault")
    assert len(lines) == 1 and "fault injected by DYNAFOLD_TEST_FAULT" in lines[0], lines
    assert "falling back to the normal import" in lines[0]
