"""Issue 5, CPU half: FlashInfer's version checks inside torch.compile(fullgraph=True) with a
piecewise backend shaped like SGLang's, without and with dynafold (through LD_PRELOAD, as a
user would), across FlashInfer releases and fake nvcc releases."""
import concurrent.futures
import json
import pathlib
import subprocess

import pytest

from conftest import DYNAFOLD, ROOT, clean_env, run, result_of
from test_fold import BASE_PATH, PYTHON, RELEASES, flashinfer_path, release_text, toolkit

SEED_ERROR = "Attempted to call function marked as skipped"

# The inline programs' record of the processes started while `compiling[0]` is set.
RECORD_POPENS = """
compiling = [False]
popens = []
sys.addaudithook(lambda ev, a: popens.append(str(a[0])) if ev == "subprocess.Popen" and compiling[0] else None)
"""

BRANCHES = """
import json, sys, torch
sys.path.insert(0, {integration!r})
from piecewise import PiecewiseBackend, split_marker
from flashinfer.jit.cpp_ext import get_cuda_version, is_cuda_version_at_least

def forward(x):
    # The shapes FlashInfer's own code uses: the fp4 flag list, a boolean branch, .major.
    flags = ["-DENABLE_FP4" if is_cuda_version_at_least("12.8") else "", "-DFLASHINFER"]
    y = x * (2 if is_cuda_version_at_least("12.8") else 3)
    y = split_marker(y)
    if get_cuda_version().major >= 13:
        y = y + 100
    return y + 10 * len([f for f in flags if f])
{record_popens}
backend = PiecewiseBackend()
compiled = torch.compile(forward, fullgraph=True, backend=backend)
compiling[0] = True
try:
    out = compiled(torch.ones(2))
    result = {{"ok": True, "value": out.tolist()[0], "pieces": backend.pieces}}
except Exception as e:
    result = {{"ok": False, "error": f"{{type(e).__name__}}: {{e}}"}}
compiling[0] = False
from torch._dynamo.utils import counters
result["graph_breaks"] = sum(counters["graph_break"].values())
result["subprocesses_while_compiling"] = popens
print("RESULT " + json.dumps(result))
"""

# forward() == 2 or 3 (branch on >= 12.8), + 100 when major >= 13, + 10 per non-empty flag.
EXPECTED = {"11.8": 13.0, "12.6": 13.0, "12.8": 22.0, "13.0": 122.0}

JIT_SPEC = """
import json, sys, torch
from flashinfer.jit.fp4_quantization import gen_fp4_quantization_module

def forward(x):
    gen_fp4_quantization_module(["-gencode=arch=compute_90a,code=sm_90a"], "90")
    return x + 1

try:
    torch.compile(forward, fullgraph=True, backend="eager")(torch.ones(2))
    print("RESULT " + json.dumps({"ok": True}))
except Exception as e:
    print("RESULT " + json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
"""


def run_program(source, release, cuda_home, preload=None, extra=None, tmp=None):
    env = clean_env(PATH=BASE_PATH, PYTHONPATH=flashinfer_path(release), CUDA_HOME=cuda_home)
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra or {})
    r = run([str(PYTHON), "-c", source], env, timeout=600, cwd=tmp)
    return result_of(r, tail=4000), r.stderr.decode()


@pytest.mark.parametrize("release", RELEASES)
def test_version_branches_compile_under_fullgraph(preload, release, tmp_path):
    source = BRANCHES.format(integration=str(ROOT / "integration"), record_popens=RECORD_POPENS)
    home = toolkit(tmp_path, "c128", release_text("12.8"))
    homes = {cuda: toolkit(tmp_path, f"c{cuda}", release_text(cuda)) for cuda in EXPECTED}
    # Independent compiling interpreters, two at a time (CI has two cores).
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        plain_run = pool.submit(run_program, source, release, home)
        runs = {cuda: pool.submit(run_program, source, release, homes[cuda], preload)
                for cuda in EXPECTED}
    plain, _ = plain_run.result()
    assert not plain["ok"] and SEED_ERROR in plain["error"], plain
    for cuda, expected in EXPECTED.items():
        ours, err = runs[cuda].result()
        assert ours["ok"], (cuda, ours, err[-3000:])
        assert ours["value"] == expected, (cuda, ours)
        assert ours["graph_breaks"] == 0 and ours["pieces"] == 2, ours
        assert ours["subprocesses_while_compiling"] == [], ours


@pytest.mark.parametrize("release", RELEASES)
def test_jit_spec_generator_next_trap_is_reported(preload, release, tmp_path):
    home = toolkit(tmp_path, "c", release_text("12.8"))
    # No GPU here: tell FlashInfer which architecture to build for, as a GPU-less build box does.
    arch = {"FLASHINFER_CUDA_ARCH_LIST": "9.0a"}
    plain, _ = run_program(JIT_SPEC, release, home, extra=arch)
    assert not plain["ok"] and SEED_ERROR in plain["error"], plain
    reports = tmp_path / "reports"
    ours, err = run_program(JIT_SPEC, release, home, preload, {"DYNAFOLD_REPORT_DIR": str(reports), **arch})
    assert not ours["ok"] and SEED_ERROR not in ours["error"], ours
    merged = json.loads(subprocess.run([str(DYNAFOLD), "report", str(reports), "--json"],
                                       capture_output=True, check=True).stdout)
    sites = merged["sites"] if isinstance(merged, dict) else merged
    text = json.dumps(sites)
    # The remaining trap, named with its FlashInfer file and line: datetime.now() in the
    # JIT-spec registry (flashinfer/jit/core.py).
    core = pathlib.Path(flashinfer_path(release)) / "flashinfer" / "jit" / "core.py"
    now_line = next(i for i, line in enumerate(core.read_text().splitlines(), 1) if "datetime.now()" in line)
    assert f"jit/core.py:{now_line}" in text, text[:3000]
    assert "now" in text


@pytest.mark.parametrize("release", RELEASES)
def test_fp4_kernel_not_built_says_what_to_do(preload, release, tmp_path):
    """A compile that reaches fp4's JIT loader before the module is built builds it outside the
    trace; where that fails (no CUDA here), the compile fails saying what to do, and neither
    ninja nor nvcc ran inside the trace."""
    source = """
import importlib, json, sys, torch
import flashinfer
mod = importlib.import_module(flashinfer.fp4_quantize.__module__)
""" + RECORD_POPENS + """
def forward(x):
    return mod.get_fp4_quantization_module("90").fp4_quantize_sm100(x)[0]
try:
    compiling[0] = True
    torch.compile(forward, fullgraph=True, backend="eager")(torch.ones(4, 32, dtype=torch.bfloat16))
    print("RESULT " + json.dumps({"ok": True}))
except Exception as e:
    print("RESULT " + json.dumps({"ok": False, "error": str(e), "popens": popens}))
"""
    home = toolkit(tmp_path, "c", release_text("12.8"))
    ours, err = run_program(source, release, home, preload)
    assert not ours["ok"], (ours, err[-2000:])
    assert "get_fp4_quantization_module('90'), whose JIT module is not built" in ours["error"], ours
    assert "Call the FlashInfer op once eagerly" in ours["error"], ours
    assert SEED_ERROR not in ours["error"], ours
    assert ours["popens"] == [], ours
