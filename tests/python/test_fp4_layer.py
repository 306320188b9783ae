"""Issue 20, item 1, on CPU: the FlashInfer calls of SGLang 0.5.23's NVFP4 layer on Blackwell
trace under torch.compile(fullgraph=True) with dynafold, each FlashInfer kernel one operator
in the graph, on fake CUDA tensors with an SM100 answered by named stand-ins
(helpers/blackwell_standins.py); without dynafold every one fails. Never run on a Blackwell GPU.

What SGLang 0.5.23 calls, read line by line (python/sglang/srt/ in its cp312 wheel):

Linear, `ModelOptFp4LinearMethod.apply` (layers/quantization/modelopt_quant.py:2076), w4a4:
  - :2107 `fp4_quantize(x, layer.input_scale_inv)`: SGLang's own operator
    `sglang::flashinfer_fp4_quantize` (layers/quantization/fp4_utils.py:84,
    `register_custom_op_from_extern`), whose body calls `flashinfer.fp4_quantize(...,
    backend="cute-dsl")` on SM100, "cuda" otherwise (fp4_utils.py:26, :40).
  - :2130 `fp4_gemm(x_fp4, w.T, x_scale_interleaved, w_scale_interleaved.T, alpha, dtype, n)`:
    SGLang's own operator `sglang::fp4_gemm` (modelopt_quant.py:136), whose body calls
    `flashinfer.mm_fp4(..., backend=b)` (:169), b from `--fp4-gemm-backend`: cudnn, cutlass,
    trtllm or cute-dsl, and "auto" picks cute-dsl on SM100 (fp4_utils.py:156).
  So in SGLang 0.5.23 Dynamo never enters FlashInfer on the linear path: both calls sit inside
  SGLang's operators, which run eagerly. The cases here trace those bodies' FlashInfer calls
  (`linear_<backend>`): what a caller that does not wrap them (SGLang before it did, vLLM's
  unwrapped paths) has Dynamo trace.
MoE experts, `ModelOptNvFp4FusedMoEMethod.apply` (modelopt_quant.py:3184) -> SGLang's runner:
  - `FusedMoE.forward` (layers/moe/fused_moe_triton/layer.py:1660) under SGLang's piecewise
    CUDA graphs hands the whole layer to SGLang's operators
    (`moe_forward_piecewise_cuda_graph_impl`, :1680/:1962; the bypassed one, :1688), except a
    bypassed top-k carrying expert placement or padding metadata (:1676) and any compile
    outside piecewise mode (:1705): there `forward_impl` is traced, and with it FlashInfer.
  - flashinfer_trtllm (layers/moe/moe_runner/flashinfer_trtllm.py:1430): SGLang's fp4 quantize
    operator (:1386, linear scale layout), then with `output=` a buffer (:1592, :1646)
    `trtllm_fp4_block_scale_routed_moe(**kwargs)` (:1593, routed top-k) or
    `trtllm_fp4_block_scale_moe(**kwargs)` (:1648, routing from logits), `do_finalize=True`
    outside deferred finalize: cases `moe_trtllm_fp4_routed`, `moe_trtllm_fp4`.
  - flashinfer_cutlass (layers/moe/moe_runner/flashinfer_cutlass.py:297): `output` allocated
    by SGLang, then `cutlass_fused_moe(output=..., input=x, ...)[0]` (:371): `moe_cutlass_fp4`.
Allreduce fusion: `flashinfer_allreduce_residual_rmsnorm` (layers/flashinfer_comm_fusion.py:829,
  called from layers/layernorm.py:248) and `flashinfer_allreduce` (distributed/
  parallel_state.py:205, called at :718 under compile) are SGLang's own operators around
  `flashinfer.comm.allreduce_fusion` (flashinfer_comm_fusion.py:921, :1043): Dynamo never
  reaches FlashInfer there, so no case traces it (it needs a process group and workspace).

The cases are FlashInfer's public calls with SGLang's arguments (helpers/trace_fp4_layer.py),
run in the torch 2.15 environment on each release; SGLang's runner functions themselves read
SGLang's runtime context (forward batch, parallel groups, symmetric memory) and are not driven
here. helpers/fp4_layer_shapes.py checks every new fake and result form against FlashInfer's
own Python on fake tensors.
"""
import pytest

from conftest import ROOT, clean_env, run, result_of
from test_fold import PYTHON, flashinfer_path, release_text, toolkit

HELPERS = ROOT / "tests" / "python" / "helpers"
TRACE = HELPERS / "trace_fp4_layer.py"
SHAPES = HELPERS / "fp4_layer_shapes.py"
# The releases with every function SGLang's FP4 layer calls; 0.7.2 is SGLang 0.5.23's pin.
FP4_RELEASES = ["0.6.16", "0.7.2", "0.7.4"]

QUANT, GEMM = "dynafold_flashinfer.fp4_quantize_cute_dsl.default", \
    "dynafold_flashinfer.mm_fp4_fresh.default"
TRTLLM_MOE = "dynafold_flashinfer.trtllm_fp4_block_scale_moe.default"
CUTLASS_MOE = "dynafold_flashinfer.cutlass_fused_moe.default"
# Per case, the FlashInfer operators the graph must hold (each once) and the result's shape.
CASES = {
    **{f"linear_{b}": ([QUANT, GEMM], [[4, 512], "torch.bfloat16"])
       for b in ("cudnn", "cutlass", "trtllm", "cute-dsl")},
    "moe_trtllm_fp4": ([TRTLLM_MOE], [[4, 256], "torch.bfloat16"]),
    "moe_trtllm_fp4_routed": ([TRTLLM_MOE], [[4, 256], "torch.bfloat16"]),
    "moe_cutlass_fp4": ([CUTLASS_MOE], [[4, 256], "torch.bfloat16"]),
}


# flashinfer.fused_moe.core's declarations a compile of the layer wakes, per release.
MOE_WOKEN = {"0.6.16": 6, "0.7.2": 8, "0.7.4": 8}


def traced(release, tmp_path, preload=None):
    env = clean_env(PYTHONPATH=f"{flashinfer_path(release)}:{HELPERS}",
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                    FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"))
    if preload:
        env["LD_PRELOAD"] = preload
    r = run([str(PYTHON), str(TRACE)], env, timeout=600)
    return result_of(r), r.stderr.decode()


def test_fp4_layer_fails_without_dynafold(tmp_path):
    """SGLang's pin: every FP4 forward stops Dynamo without dynafold (the autotuner's lock, the
    CuTe DSL and cuDNN availability checks, the MoE module's class definitions)."""
    plain, _ = traced("0.7.2", tmp_path)
    assert set(plain["cases"]) == set(CASES), plain["cases"].keys()
    for name, case in plain["cases"].items():
        assert not case["ok"], (name, case)
        assert case["error"].startswith(("Unsupported", "InternalTorchDynamoError")), case


@pytest.mark.parametrize("release", FP4_RELEASES)
def test_fp4_layer_traces_whole_with_dynafold(preload, release, tmp_path):
    ours, err = traced(release, tmp_path / "ours", preload)
    assert set(ours["cases"]) == set(CASES), ours["cases"].keys()
    for name, (ops, result) in CASES.items():
        case = ours["cases"][name]
        assert case["ok"], (name, case.get("error"), err[-3000:])
        flashinfer_ops = [t for t in case["targets"] if "flashinfer" in t]
        assert flashinfer_ops == ops, (name, case["targets"])
        assert case["results"] == [result], (name, case["results"])
    # Nothing of FlashInfer's JIT machinery, autotuner or cuDNN ran while tracing: no process;
    # the MoE modules' (stand-in) builds ran outside the trace, in FlashInfer's own loaders.
    assert ours["processes"] == [], ours["processes"]
    # The trtllm-gen MoE declarations of the module the layer loads (NVFP4, BF16, FP8
    # per-tensor, block-scale, MXINT4; 0.7.x adds routed per-tensor and per-channel FP8) and
    # cutlass_fused_moe: every one woken.
    core = ours["status"].get("flashinfer.fused_moe.core", {})
    assert core.get("woken") == MOE_WOKEN[release], core
    assert not core.get("skipped"), core
    assert "flashinfer::mm_fp4" in ours["status"]["woken"], ours["status"]["woken"]


@pytest.mark.parametrize("release", FP4_RELEASES)
def test_fp4_layer_fakes_match_flashinfers_own_shapes(release, tmp_path):
    env = clean_env(PYTHONPATH=f"{flashinfer_path(release)}:{HELPERS}",
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                    FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"))
    got = result_of(run([str(PYTHON), str(SHAPES)], env, timeout=600))
    assert got["flashinfer"] == release
    assert got["cases"] == {"mm_fp4": 28, "trtllm_fp4_block_scale_moe": 6,
                            "cutlass_fused_moe": 3}, got["cases"]
    assert got["differ"] == [], got["differ"][:5]
