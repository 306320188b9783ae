"""Issue 33, item 4: no file of dynafold's inside another package's tree. FlashInfer installed
by pip into an environment, a program run under `dynafold run` importing its folded modules with
bytecode writing on, then `pip uninstall -y flashinfer-python`: nothing of FlashInfer is left
(before, dynafold's rewritten bytecode in FlashInfer's own `__pycache__` kept a `flashinfer/`
folder alive, and `import flashinfer` then found a namespace package)."""
import pathlib
import subprocess

from conftest import DYNAFOLD, clean_env, run
from test_fold import CACHE, PYTHON, release_text, toolkit

RELEASE = "0.5.3"
# Downloaded once by scripts/test (scripts/lib/env.sh ensure_flashinfer_wheel).
WHEEL = CACHE / "flashinfer-wheels" / f"flashinfer_python-{RELEASE}-py3-none-any.whl"
FOLDED = ["flashinfer.fp4_quantization", "flashinfer.jit.cpp_ext"]

PROGRAM = """
import flashinfer.fp4_quantization as fp4, flashinfer.jit.cpp_ext as cpp_ext
print("FOLDED", "__dynafold__" in vars(fp4), "__dynafold__" in vars(cpp_ext), flush=True)
"""


def purelib(python):
    out = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, check=True, timeout=60)
    return pathlib.Path(out.stdout.decode().strip())


def pip(venv, *args):
    """The torch environment's pip acting on `venv` (which has none of its own)."""
    r = run([str(PYTHON), "-m", "pip", "--python", str(venv / "bin" / "python"), *args],
            clean_env(), timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]


def test_pip_uninstall_leaves_no_flashinfer_folder(tmp_path):
    assert WHEEL.exists(), f"{WHEEL} missing: run scripts/test (ensure_flashinfer_wheel)"
    venv = tmp_path / "venv"
    subprocess.run([str(PYTHON), "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site = purelib(venv / "bin" / "python")
    # torch and FlashInfer's dependencies from the torch environment, as ensure_cutlass_venv
    # layers its environment.
    (site / "dynafold-torch-venv.pth").write_text(f"{purelib(PYTHON)}\n")
    pip(venv, "install", "-q", "--no-deps", "--no-index", str(WHEEL))
    assert (site / "flashinfer" / "__init__.py").exists()

    xdg = tmp_path / "xdg"
    env = clean_env(DYNAFOLD_CACHE_DIR=None, XDG_CACHE_HOME=str(xdg), PYTHONDONTWRITEBYTECODE=None,
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")))
    r = run([str(DYNAFOLD), "run", str(venv / "bin" / "python"), "-c", PROGRAM], env, timeout=300)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert r.stdout.decode().split() == ["FOLDED", "True", "True"], r.stderr.decode()[-3000:]
    # The rewritten modules' bytecode is in dynafold's own cache, one entry each.
    cached = sorted(p.name.split(".cpython-")[0] for p in (xdg / "dynafold" / "bytecode").iterdir()
                    if p.name.startswith("flashinfer."))
    assert cached == FOLDED, cached
    ours = [str(p) for p in (site / "flashinfer").rglob("*") if "dynafold" in p.name]
    assert ours == [], ours

    pip(venv, "uninstall", "-y", "flashinfer-python")
    left = sorted(str(p.relative_to(site)) for p in site.rglob("*") if "flashinfer" in str(p.relative_to(site)))
    assert left == [], left
    assert not (site / "flashinfer").exists()
    r = run([str(venv / "bin" / "python"), "-c", "import flashinfer"], clean_env(), timeout=120)
    assert r.returncode != 0 and b"ModuleNotFoundError" in r.stderr, (r.returncode, r.stderr[-2000:])
