"""Issue 11, items 1 and 3: SGLang's own compile path, unmodified, on the Python, torch and
FlashInfer its users run, without and with dynafold (through LD_PRELOAD, as a user would).

The environment is scripts/lib/env.sh's `ensure_sglang_venv`: pyenv's CPython 3.12, torch 2.14.1
from PyPI (SGLang 0.5.23's pin), FlashInfer 0.7.2 (its pin, `--no-deps --target` like the other
releases), and sglang 0.5.23 from its cp312 wheel installed with `--no-deps` plus the nine
pure-Python packages that importing `sglang.srt.compilation` needs (orjson, psutil, pybase64,
pillow, starlette, msgspec, pydantic, pyzmq, aiohttp). scripts/test runs this file with that
environment's pytest.

helpers/sglang_compile.py drives SGLang's `TcPiecewiseCudaGraphBackend._run_compile_pass`
sequence (`enable_tc_piecewise_cuda_graph()`, one eager dummy forward, `install_torch_compiled(
..., fullgraph=True)` with `CompilationConfig(sizes, compiler)`, one forward per size inside
`enable_torch_compile_warmup()`) with SGLang's `SGLangBackend`, `CUDAPiecewiseBackend` and
compilers "eager" and "inductor", over two forwards: one calling `flashinfer.fp4_quantize`
directly as SGLang's kvfp4_tensor.py SM90 branch does, one also calling `flashinfer.rmsnorm`,
`flashinfer.fused_add_rmsnorm` and `flashinfer.silu_and_mul`. The graph is split at an op
registered through SGLang's `register_custom_op` / `register_split_op`.

There is no GPU here: the helper names its five stand-ins (IPython.display, SGLang's
weak_ref_tensor module, the compute capability of a CPU tensor, FlashInfer's JIT build and load
of the fp4/norm/activation modules as CPU modules with the built modules' signatures, the split
op's CPU kernel). Nothing of SGLang, FlashInfer's version checks or dynafold is changed. CUDA
graph capture itself is not exercised (it needs a GPU: integration/gpu/).
"""
import pathlib

import pytest

from conftest import CACHE, clean_env, results_of, run
from test_fold import BASE_PATH, release_text, toolkit
from test_survey import check_sglang_entry

# The pins of scripts/lib/env.sh (SGLANG_VERSION, SGLANG_TORCH_VERSION, SGLANG_FLASHINFER).
SGLANG, TORCH, FLASHINFER = "0.5.23", "2.14.1", "0.7.2"
SGLANG_PYTHON = CACHE / f"venv-sglang{SGLANG}-torch{TORCH}" / "bin" / "python"
FLASHINFER_DIR = CACHE / "flashinfer" / FLASHINFER
HELPER = pathlib.Path(__file__).parent / "helpers" / "sglang_compile.py"

SEED_ERROR = "Attempted to call function marked as skipped"
MODELS = ["fp4", "ops"]
SIZES = ["4", "8", "16"]
SPLIT_OP = "sglang.dynafold_test_attention"
# The operators each forward must reach in SGLang's dumped graph: FlashInfer's own op
# declarations woken by dynafold, fp4_quantize's kernel among them.
GRAPH_OPS = {
    "fp4": ["dynafold_flashinfer.fp4_quantize_sm100.default", SPLIT_OP],
    "ops": ["dynafold_flashinfer.fp4_quantize_sm100.default", "dynafold_flashinfer.rmsnorm.default",
            "dynafold_flashinfer.fused_add_rmsnorm.default",
            "dynafold_flashinfer.silu_and_mul.default", SPLIT_OP],
}
INDUCTOR_OPS = {
    "fp4": ["dynafold_flashinfer.fp4_quantize_sm100"],
    "ops": ["dynafold_flashinfer.fp4_quantize_sm100", "dynafold_flashinfer.fused_add_rmsnorm",
            "dynafold_flashinfer.rmsnorm", "dynafold_flashinfer.silu_and_mul"],
}


def drive(tmp_path, compilers, preload=None, **settings):
    for path, what in ((SGLANG_PYTHON, "the SGLang environment"), (FLASHINFER_DIR / ".complete",
                                                                   f"FlashInfer {FLASHINFER}")):
        assert path.exists(), f"{path} missing ({what}): run scripts/test"
    env = clean_env(
        PATH=BASE_PATH,
        PYTHONPATH=str(FLASHINFER_DIR),
        # FlashInfer's JIT spec generators ask nvcc and the target architecture: a toolkit
        # answering 12.8 and the architecture list a GPU-less build box sets.
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        FLASHINFER_CUDA_ARCH_LIST="9.0a",
        FLASHINFER_WORKSPACE_BASE=str(tmp_path / "flashinfer-workspace"),
        SGLANG_CACHE_DIR=str(tmp_path / "sglang-cache"),
        DYNAFOLD_TEST_SGLANG_CACHE=str(tmp_path / "sglang-compile"),
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
        **settings,
    )
    if preload:
        env["LD_PRELOAD"] = preload
    r = run([str(SGLANG_PYTHON), str(HELPER), ",".join(MODELS), ",".join(compilers)], env,
            timeout=480, cwd=tmp_path)
    results = results_of(r, len(MODELS) * len(compilers))
    err = r.stderr.decode()
    for result in results:
        # The environment SGLang's users run, and SGLang's pins.
        assert result["python"].startswith("3.12."), result["python"]
        assert result["torch"].split("+")[0] == TORCH and result["sglang"] == SGLANG
        assert result["flashinfer"] == FLASHINFER
        assert result["dynafold"] is bool(preload)
    return {(r["model"], r["compiler"]): r for r in results}, err


def test_sglang_compile_without_dynafold_dies_with_the_seed_error(tmp_path):
    results, err = drive(tmp_path, ["eager", "inductor"])
    for (model, compiler), r in results.items():
        assert not r["ok"], (model, compiler, r)
        error = r["error"]
        assert error.startswith("Unsupported: ") and SEED_ERROR in error, (model, compiler, error)
        # SGLang's backend is never reached: Dynamo dies while tracing the forward.
        assert r["counter"]["num_graphs_seen"] == 0, r
        # The eager warm-up ran FlashInfer's own JIT path (through the stand-in build).
        assert "fp4_quantization_90" in r["built"], r
    for compiler in ("eager", "inductor"):
        # The seed's traceback: fp4_quantize -> get_fp4_quantization_module -> the JIT spec's
        # is_cuda_version_at_least("12.8") -> nvcc through subprocess -> _thread.allocate_lock.
        fp4 = results[("fp4", compiler)]["error"]
        assert "`_thread.allocate_lock.`" in fp4, fp4
        for frame in ("in get_fp4_quantization_module", "in is_cuda_version_at_least",
                      "subprocess.check_output"):
            assert frame in fp4, (frame, fp4)
        # FlashInfer's norm, reached first in the second forward, dies in its JIT loader.
        ops = results[("ops", compiler)]["error"]
        assert "`posix.stat.`" in ops, ops
        for frame in ("flashinfer.rmsnorm", "in get_norm_module", "in build_and_load", "in try_load"):
            assert frame in ops, (frame, ops)


@pytest.mark.parametrize("compiler", ["eager", "inductor"])
def test_sglang_compile_with_dynafold(preload, compiler, tmp_path):
    results, err = drive(tmp_path, [compiler], preload)
    for model in MODELS:
        r = results[(model, compiler)]
        assert r["ok"], (model, r.get("error"), err[-4000:])
        assert r["graph_breaks"] == 0, r
        # SGLang's compilation_counter: its backend saw one graph (one for all three sizes: the
        # token dimension is dynamic), split it at the split op into three pieces, and compiled
        # the two pieces around it with the chosen compiler.
        counter = r["counter"]
        assert counter["num_graphs_seen"] == 1, counter
        assert counter["num_piecewise_graphs_seen"] == 3, counter
        assert counter["num_piecewise_capturable_graphs_seen"] == 2, counter
        assert counter["num_backend_compilations"] == 2, counter
        assert counter["num_inductor_compiles"] == (2 if compiler == "inductor" else 0), counter
        assert counter["num_cudagraph_captured"] == 0, counter
        # SGLang's dumped graph holds the FlashInfer calls as single operators.
        assert r["dumped_graphs"] == 1, r
        for op in GRAPH_OPS[model]:
            assert any(g.startswith(op) for g in r["graph_ops"]), (op, r["graph_ops"])
        if compiler == "inductor":
            # ... and so does the code Inductor generated for the pieces.
            assert r["inductor_code_ops"] == INDUCTOR_OPS[model], r["inductor_code_ops"]
        # Compiled outputs (packed FP4 values, scale factors, the rest) equal eager, bit for
        # bit, at every size; the quantizer really ran.
        assert r["equal_to_eager"] == {n: True for n in SIZES}, r["equal_to_eager"]
        assert all(r["nonzero_fp4"][n] > 0 for n in SIZES), r["nonzero_fp4"]
        # Nothing of FlashInfer's JIT toolchain ran while SGLang compiled.
        procs = r["processes_while_compiling"]
        assert not [p for p in procs if "nvcc" in p or "ninja" in p], procs
        if compiler == "eager":
            assert procs == [], procs
    assert results[("ops", compiler)]["built"] == ["fp4_quantization_90", "norm", "silu_and_mul"]
    assert "Traceback" not in err, err[-4000:]


def test_fp4_opaque_off_leaves_fp4s_declaration_dormant(preload, tmp_path):
    """DYNAFOLD_FP4_OPAQUE=0: the version checks are still folded (no seed error), but
    fp4_quantize's kernel is traced as FlashInfer ships it and stops the compile at the built
    module's FFI call."""
    results, err = drive(tmp_path, ["eager"], preload, DYNAFOLD_FP4_OPAQUE="0")
    r = results[("fp4", "eager")]
    assert not r["ok"], r
    assert "_thread.allocate_lock" not in r["error"], r["error"]
    # Dynamo reached the built module's kernel call (the stand-in's opaque function), inside
    # FlashInfer's fp4_quantize_sm100 as shipped.
    assert "CpuFp4Module.fp4_quantize" in r["error"], r["error"]


def test_sglang_compile_entry_under_survey(preload, tmp_path):
    """SGLang 0.5.23's `install_torch_compiled` (tc_piecewise's) asks for fullgraph=True: survey
    mode carries it on (torch 2.14.1)."""
    check_sglang_entry(SGLANG_PYTHON, preload, tmp_path, SGLANG)
