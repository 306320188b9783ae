"""`dynafold rewrite --diff`: the dry run honours the same settings as the preload library.

Issue 19: it waited a hard-coded 10 s for `nvcc --version`, whatever DYNAFOLD_NVCC_TIMEOUT
said. Issue 41: what the README and docs/usage.md say of `rewrite`, as it does it."""
import time

import pytest

from conftest import DYNAFOLD, clean_env, run
from test_fold import flashinfer_path, nvcc_script, toolkit


def test_rewrite_honours_the_nvcc_timeout(tmp_path):
    # An nvcc that hangs: only the timeout ends the probe.
    cuda = toolkit(tmp_path, "cuda", nvcc_script("sleep 30"))
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    env = clean_env(CUDA_HOME=cuda, DYNAFOLD_NVCC_TIMEOUT="1", PATH="/usr/bin:/bin")
    started = time.monotonic()
    r = run([str(DYNAFOLD), "rewrite", "--diff", source, "--module", "flashinfer.jit.cpp_ext"],
            env, timeout=60)
    took = time.monotonic() - started
    assert r.returncode == 0, r.stderr.decode()
    assert took < 8, f"took {took:.1f} s: DYNAFOLD_NVCC_TIMEOUT=1 not honoured"


def test_rewrite_file_is_the_plain_form_with_a_hint_when_no_version_is_known(tmp_path):
    """`rewrite FILE`: the module read from the path, the diff named as a package path (not
    `a//abs/path`), and, when nothing folds for want of a CUDA version, what to pass."""
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    env = clean_env(PATH="/usr/bin:/bin", CUDA_HOME=str(tmp_path / "none"))
    r = run([str(DYNAFOLD), "rewrite", source, "--cuda-version", "12.8"], env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode().splitlines()
    assert out[:2] == ["--- a/flashinfer/jit/cpp_ext.py", "+++ b/flashinfer/jit/cpp_ext.py"], out[:2]
    r = run([str(DYNAFOLD), "rewrite", source], env, timeout=60)
    assert r.returncode == 0, r.stderr.decode()
    out = r.stdout.decode()
    assert "would be loaded unchanged" in out and "hint: " in out and "--cuda-version" in out, out


def rewrite(*args, **env):
    e = clean_env(PATH="/usr/bin:/bin", **env)
    e.pop("CUDA_HOME", None)
    r = run([str(DYNAFOLD), "rewrite", *args], e, timeout=60)
    return r.returncode, r.stdout.decode(), r.stderr.decode()


@pytest.mark.parametrize("value", ["", "twelve"])
def test_an_empty_or_bad_variable_is_the_default(value):
    """Issue 41, items 1 and 2: DYNAFOLD_CUDA_VERSION empty is unset, invalid is one warning
    and the default (nvcc's answer), as the README promises and every process does; the same
    invalid value as an option is refused."""
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    code, out, err = rewrite(source, DYNAFOLD_CUDA_VERSION=value)
    assert code == 0, err
    assert "would be loaded unchanged" in out and "hint: " in out, out
    warned = [line for line in err.splitlines() if line.strip()]
    if value:
        assert len(warned) == 1 and warned[0].startswith('dynafold: DYNAFOLD_CUDA_VERSION="twelve" '), warned
        assert "using the default" in warned[0], warned
    else:
        assert warned == [], warned
    code, _, err = rewrite(source, "--cuda-version", "twelve")
    assert code == 125 and '--cuda-version="twelve"' in err, err


def test_help_shows_file_as_required():
    """Issue 41, item 7: FILE is required, and --help says so (`<FILE>`, not `[FILE]`)."""
    r = run([str(DYNAFOLD), "rewrite", "--help"], clean_env())
    text = r.stdout.decode()
    assert r.returncode == 0 and "Usage: dynafold rewrite [OPTIONS] <FILE>" in text, text
    assert "[FILE]" not in text, text
    code, _, err = rewrite()
    assert code == 125 and "<FILE>" in err, err


@pytest.mark.parametrize("given", ["option", "variable"])
def test_the_version_names_where_it_was_given(given):
    """Issue 41, item 7: `--cuda-version 13.0` was shown as `(DYNAFOLD_CUDA_VERSION)`."""
    source = f"{flashinfer_path('0.6.16')}/flashinfer/jit/cpp_ext.py"
    args, env = ((["--cuda-version", "13.0"], {}) if given == "option"
                 else ([], {"DYNAFOLD_CUDA_VERSION": "13.0"}))
    code, out, err = rewrite(source, *args, **env)
    assert code == 0, err
    folded = [line for line in out.splitlines() if line.strip().startswith("__dynafold_cuda_version__")]
    source_of = "--cuda-version" if given == "option" else "DYNAFOLD_CUDA_VERSION"
    assert len(folded) == 1 and folded[0].endswith(f'Version("13.0")  ({source_of})'), folded


def test_a_folder_is_named_as_a_folder():
    """Issue 41, item 7: a folder inside flashinfer was "not under a flashinfer folder"."""
    folder = f"{flashinfer_path('0.6.16')}/flashinfer/jit"
    code, _, err = rewrite(folder)
    assert code == 125 and f"{folder} is a folder" in err and "not under" not in err, err


def test_a_module_dynafold_does_not_rewrite_is_loaded_unchanged():
    """Issue 41, item 7: `page.py` (a module the rules do not touch) and a re-export stub with
    nothing to fold get the same answer, exit 0, each naming its module once."""
    for name in ("page.py", "fp4_quantization.py"):
        code, out, err = rewrite(f"{flashinfer_path('0.7.4')}/flashinfer/{name}", "--cuda-version", "12.8")
        module = "flashinfer." + name[:-3]
        assert code == 0, err
        first = out.splitlines()[0]
        assert first.startswith(f"{module}: would be loaded unchanged: "), out
        assert first.count(module) == 1, first
        assert "hint: " not in out, out
