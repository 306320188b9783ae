"""Issue 32, item 2: SGLang 0.5.12's default path. Piecewise CUDA graphs are on by default there
(`--disable-piecewise-cuda-graph` turns them off); its pins are torch 2.11.0 and FlashInfer
0.6.11.post1 on CPython 3.12. SGLang's own `LlamaForCausalLM`, with a ModelOpt NVFP4 checkpoint
config and in bf16, started through `ModelRunner.init_piecewise_cuda_graphs` ->
`PiecewiseCudaGraphRunner` with 0.5.12's default server arguments, on a CPU answering as SM120
(helpers/sglang0512_runner.py; CUDA graph capture itself is the slice not run).

The environment is scripts/lib/env.sh's `ensure_sglang_release_venv` with the SGLANG0512_* pins
(a torch of its own, about 5 GB); scripts/test makes it and runs this file with its pytest
unless DYNAFOLD_SGLANG0512=0. Without the environment, each test fails saying so.

What it shows: 0.5.12 reaches FlashInfer's fp4 kernel only through its own operator
(`sglang::flashinfer_fp4_quantize`), so Dynamo never enters FlashInfer on this path: the forward
compiles with zero breaks with or without dynafold, and dynafold changes nothing in the graph.
"""
import pathlib

import pytest

from conftest import CACHE, clean_env, results_of, run
from test_fold import BASE_PATH, release_text, toolkit
from test_survey import check_sglang_entry

# The pins of scripts/lib/env.sh (SGLANG0512_VERSION, SGLANG0512_TORCH_VERSION,
# SGLANG0512_FLASHINFER).
SGLANG, TORCH, FLASHINFER = "0.5.12", "2.11.0", "0.6.11.post1"
PYTHON = CACHE / f"venv-sglang{SGLANG}-torch{TORCH}" / "bin" / "python"
FLASHINFER_DIR = CACHE / "flashinfer" / FLASHINFER
HELPER = pathlib.Path(__file__).parent / "helpers" / "sglang0512_runner.py"

LAYERS, LINEARS_PER_LAYER = 2, 4  # qkv_proj, o_proj, gate_up_proj, down_proj


def drive(tmp_path, model, preload=None):
    for path, what in ((PYTHON, "the SGLang 0.5.12 environment"),
                       (FLASHINFER_DIR / ".complete", f"FlashInfer {FLASHINFER}")):
        assert path.exists(), f"{path} missing ({what}): run scripts/test"
    env = clean_env(
        PATH=BASE_PATH,
        PYTHONPATH=str(FLASHINFER_DIR),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        FLASHINFER_CUDA_ARCH_LIST="12.0a",
        FLASHINFER_WORKSPACE_BASE=str(tmp_path / "flashinfer-workspace"),
        SGLANG_CACHE_DIR=str(tmp_path / "sglang-cache"),
        SGLANG_USE_CPU_ENGINE="1",
        TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"),
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
    )
    if preload:
        env["LD_PRELOAD"] = preload
    r = run([str(PYTHON), str(HELPER), "sm120", model], env, timeout=300, cwd=tmp_path)
    (result,) = results_of(r)
    err = r.stderr.decode()
    assert result["python"].startswith("3.12."), result["python"]
    assert result["torch"].split("+")[0] == TORCH and result["sglang"] == SGLANG
    assert result["flashinfer"] == FLASHINFER
    assert result["dynafold"] is bool(preload)
    return result, err


@pytest.mark.parametrize("with_dynafold", [False, True])
@pytest.mark.parametrize("model", ["fp4", "bf16"])
def test_default_piecewise_start_up(preload, tmp_path, model, with_dynafold):
    r, err = drive(tmp_path, model, preload if with_dynafold else None)
    assert r["ok"], (r.get("error"), r.get("traceback"))
    assert r["graph_breaks"] == 0, r["graph_break_reasons"]
    # SGLang's compilation counter: one graph for every size, split at the two attention ops
    # into 5 pieces, the 3 around them compiled; every capture size compiled, then asked to
    # capture, largest first.
    counter = r["counter"]
    assert counter["num_graphs_seen"] == 1, counter
    assert counter["num_piecewise_graphs_seen"] == 2 * LAYERS + 1, counter
    assert counter["num_piecewise_capturable_graphs_seen"] == LAYERS + 1, counter
    assert r["captured_sizes"] == [16, 8, 4], r
    assert r["equal_to_eager"] == {n: True for n in ("4", "8", "16", "5")}, r["max_abs_diff"]
    assert all(std > 0 for std in r["output_std"].values()), r["output_std"]
    counts = r["graph_op_counts"]
    assert counts["sglang.unified_attention_with_output"] == LAYERS, counts
    # FlashInfer is never an operator of its own here, with dynafold or without.
    assert counts["flashinfer"] == counts["dynafold_flashinfer"] == 0, r["graph_ops"]
    fp4 = LAYERS * LINEARS_PER_LAYER if model == "fp4" else 0
    assert counts["sglang.flashinfer_fp4_quantize"] == counts["sglang.fp4_gemm"] == fp4, counts
    # The eager forward built FlashInfer's SM120 fp4 module (the stand-in build) for NVFP4 only.
    assert r["built"] == (["fp4_quantization_120f"] if model == "fp4" else []), r["built"]
    assert not [p for p in r["processes_while_compiling"] if "nvcc" in p or "ninja" in p], r
    assert "Traceback" not in err, err[-4000:]


MODEL_CONFIG_HELPER = pathlib.Path(__file__).parent / "helpers" / "sglang0512_model_config.py"


def test_glm5_is_left_out_of_the_default_path(tmp_path):
    """0.5.12's default path is Llama's, not GLM-5's: SGLang's own ModelConfig marks GLM-5
    (`GlmMoeDsaForCausalLM`, DeepSeek sparse attention) as a model piecewise CUDA graphs are
    disabled for, and ServerArgs then turns the runner off for it; Llama keeps the default."""
    assert PYTHON.exists(), f"{PYTHON} missing (the SGLang 0.5.12 environment): run scripts/test"
    env = clean_env(PATH=BASE_PATH, PYTHONPATH=str(FLASHINFER_DIR),
                    SGLANG_CACHE_DIR=str(tmp_path / "sglang-cache"))
    r = run([str(PYTHON), str(MODEL_CONFIG_HELPER)], env, timeout=300, cwd=tmp_path)
    (result,) = results_of(r)
    assert result["sglang"] == SGLANG, result
    glm5, llama = result["GlmMoeDsaForCausalLM"], result["LlamaForCausalLM"]
    assert glm5["model_type"] == "glm_moe_dsa", glm5
    assert glm5["disabled_model"] is True and llama["disabled_model"] is False, result
    # On by default for both; SGLang's own check turns it off for GLM-5 only.
    assert glm5["disable_default"] is False and llama["disable_default"] is False, result
    assert glm5["disable_piecewise_cuda_graph"] is True, glm5
    assert llama["disable_piecewise_cuda_graph"] is False, llama


def test_sglang0512_compile_entry_under_survey(preload, tmp_path):
    """SGLang 0.5.12's `install_torch_compiled` asks for fullgraph=True: survey mode carries it
    on (torch 2.11.0)."""
    check_sglang_entry(PYTHON, preload, tmp_path, SGLANG)
