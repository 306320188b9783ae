"""Issue 32, item 1: the seed's own path. SGLang 0.5.9 (the release the seed ran: torch 2.9.1,
FlashInfer 0.6.3, CPython 3.12) starting `--enable-piecewise-cuda-graph` over SGLang's own
`LlamaForCausalLM` with a ModelOpt NVFP4 checkpoint config, on a CPU that answers as SM120 (the
seed's RTX PRO 6000 Blackwell, where `ModelOptFp4LinearMethod.apply` calls FlashInfer's own
`fp4_quantize`) and as SM100 (where SGLang 0.5.9 quantizes with sgl_kernel's op instead).

The environment is scripts/lib/env.sh's `ensure_sglang_release_venv` with the SGLANG059_* pins;
scripts/test runs this file with its pytest. helpers/sglang059_runner.py (0.5.9's data for
helpers/sglang_piecewise.py) drives SGLang's `ModelRunner.init_piecewise_cuda_graphs` ->
`PiecewiseCudaGraphRunner.__init__` (install_torch_compiled, SGLangBackend, compiler "eager",
one compile-warm-up forward per capture size 16, 8, 4); CUDA graph capture itself is the slice
not run (no GPU), and helpers/sglang_piecewise.py's docstring names every stand-in.
GLM-5 (`GlmMoeDsaForCausalLM`, the seed's model) goes through the same start-up whole
(helpers/sglang_glm5.py), with the server arguments 0.5.9 derives for it on Blackwell (the
`nsa` attention backend, an FP8 KV cache, FlashMLA): without dynafold it meets the seed's error
at its first NVFP4 linear; with dynafold Dynamo gets through both NVFP4 linears ahead of the DSA
indexer and stops in SGLang's own indexer (a host `.item()`), no FlashInfer frame in the
failure. Its MoE layer, which that stop leaves untraced, is compiled alone, the same way.
"""
import json
import pathlib
import subprocess

import pytest

from conftest import CACHE, DYNAFOLD, clean_env, results_of, run
from test_fold import BASE_PATH, release_text, toolkit
from test_survey import check_sglang_entry

# The pins of scripts/lib/env.sh (SGLANG059_VERSION, SGLANG059_TORCH_VERSION, SGLANG059_FLASHINFER).
SGLANG, TORCH, FLASHINFER = "0.5.9", "2.9.1", "0.6.3"
PYTHON = CACHE / f"venv-sglang{SGLANG}-torch{TORCH}" / "bin" / "python"
FLASHINFER_DIR = CACHE / "flashinfer" / FLASHINFER
HELPER = pathlib.Path(__file__).parent / "helpers" / "sglang059_runner.py"

LAYERS, LINEARS_PER_LAYER = 2, 4  # qkv_proj, o_proj, gate_up_proj, down_proj
FP4_OP = "dynafold_flashinfer.fp4_quantize_sm100.default"


@pytest.fixture(scope="module")
def inductor_cache(tmp_path_factory):
    """One Inductor cache for the module's runs: SGLang's eager grouped top-k is itself a
    torch.compile'd function, built once instead of once per run."""
    return tmp_path_factory.mktemp("inductor")


@pytest.fixture
def drive(tmp_path, inductor_cache):
    return lambda arch, preload=None, model="llama", **extra: _drive(
        tmp_path, inductor_cache, arch, preload, model, extra)


def _drive(tmp_path, inductor_cache, arch, preload, model, extra=None):
    for path, what in ((PYTHON, "the SGLang 0.5.9 environment"),
                       (FLASHINFER_DIR / ".complete", f"FlashInfer {FLASHINFER}")):
        assert path.exists(), f"{path} missing ({what}): run scripts/test"
    env = clean_env(
        PATH=BASE_PATH,
        PYTHONPATH=str(FLASHINFER_DIR),
        # FlashInfer's JIT spec generator asks nvcc for the toolkit's release (the seed's
        # is_cuda_version_at_least("12.8")): a toolkit answering 12.8.
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        FLASHINFER_CUDA_ARCH_LIST={"sm120": "12.0a", "sm100": "10.0a"}[arch],
        FLASHINFER_WORKSPACE_BASE=str(tmp_path / "flashinfer-workspace"),
        SGLANG_CACHE_DIR=str(tmp_path / "sglang-cache"),
        # tvm_ffi's JIT build folders (SGLang's Hadamard kernel, stand-in 18), else ~/.cache.
        TVM_FFI_CACHE_DIR=str(tmp_path / "tvm-ffi-cache"),
        # SGLang's own switch for running on a CPU (its CPU server sets it too).
        SGLANG_USE_CPU_ENGINE="1",
        TORCHINDUCTOR_CACHE_DIR=str(inductor_cache),
        TRITON_CACHE_DIR=str(tmp_path / "triton"),
    )
    if preload:
        env["LD_PRELOAD"] = preload
    env.update(extra or {})
    r = run([str(PYTHON), str(HELPER), arch, model], env, timeout=300, cwd=tmp_path)
    (result,) = results_of(r)
    err = r.stderr.decode()
    # The environment the seed ran: SGLang 0.5.9's pins on CPython 3.12.
    assert result["python"].startswith("3.12."), result["python"]
    assert result["torch"].split("+")[0] == TORCH and result["sglang"] == SGLANG
    assert result["flashinfer"] == FLASHINFER
    assert result["dynafold"] is bool(preload)
    return result, err


# The seed's traceback: ModelOptFp4LinearMethod.apply -> fp4_quantize -> the sm120 JIT spec's
# is_cuda_version_at_least("12.8") -> nvcc through subprocess -> _thread.allocate_lock.
SEED_FRAMES = ("modelopt_quant.py", "in apply", "in fp4_quantize",
               "in gen_fp4_quantization_sm120_module", "in is_cuda_version_at_least", "subprocess")


def _seed_error(r):
    # On SM120 SGLang 0.5.9 imports FlashInfer's own quantizer.
    assert r["fp4_quantize"] == "flashinfer.fp4_quantization.fp4_quantize", r
    assert not r["ok"], r
    error = r["error"]
    assert error.startswith("Unsupported: "), error
    assert "_thread.allocate_lock" in error, error
    for frame in SEED_FRAMES:
        assert frame in error, (frame, error)
    # Dynamo died tracing the forward: SGLang's backend never saw a graph.
    assert r["counter"]["num_graphs_seen"] == 0, r


def test_sm120_without_dynafold_dies_with_the_seed_error(drive):
    """(GLM-5's, on the whole model: test_sm120_glm5_without_dynafold_dies_with_the_seed_error.
    Its MoE layer alone meets the same call in its NVFP4 shared expert: `glm5-moe` without the
    preload, measured with this file's runner.)"""
    r, err = drive("sm120")
    _seed_error(r)
    # The eager forward before it built FlashInfer's sm120 module (the stand-in build).
    assert r["built"] == ["fp4_quantization_120"], r


def _compiled(r, pieces=2 * LAYERS + 1, compiled_pieces=LAYERS + 1):
    assert r["ok"], (r.get("error"), r)
    assert r["graph_breaks"] == 0, r
    # SGLang's compilation counter: one graph for every size (the token dimension is dynamic),
    # split at the attention ops, the pieces around them compiled.
    counter = r["counter"]
    assert counter["num_graphs_seen"] == 1, counter
    assert counter["num_piecewise_graphs_seen"] == pieces, counter
    assert counter["num_piecewise_capturable_graphs_seen"] == compiled_pieces, counter
    assert counter["num_cudagraph_captured"] == 0, counter
    # Every capture size compiled, then capture asked for, largest first.
    assert r["captured_sizes"] == [16, 8, 4], r
    assert r["dumped_graphs"] == 1, r
    # Compiled outputs equal eager at every capture size and at 5 (a size not captured).
    assert r["equal_to_eager"] == {n: True for n in ("4", "8", "16", "5")}, r["max_abs_diff"]
    assert all(std > 0 for std in r["output_std"].values()), r["output_std"]
    # Nothing of FlashInfer's JIT toolchain ran while SGLang compiled.
    assert not [p for p in r["processes_while_compiling"] if "nvcc" in p or "ninja" in p], r


def _llama_graph(r):
    counts = r["graph_op_counts"]
    assert counts["sglang.unified_attention_with_output"] == LAYERS, counts
    assert counts["sglang.fp4_gemm"] == LAYERS * LINEARS_PER_LAYER, counts


def test_sm120_with_dynafold(drive, preload):
    r, err = drive("sm120", preload)
    _compiled(r)
    _llama_graph(r)
    # FlashInfer's fp4 kernel is one operator per NVFP4 linear in SGLang's graph.
    assert FP4_OP in r["graph_ops"], r["graph_ops"]
    assert r["graph_op_counts"]["dynafold_flashinfer"] == LAYERS * LINEARS_PER_LAYER, r
    assert r["built"] == ["fp4_quantization_120"], r
    assert "Traceback" not in err, err[-4000:]


def test_sm100_quantizes_outside_flashinfer(drive, preload):
    """On SM100 SGLang 0.5.9 quantizes with sgl_kernel's operator and multiplies with its own
    `sglang::fp4_gemm` operator: Dynamo never enters FlashInfer on the linear path (measured by
    hand: it compiles without dynafold too, 0 breaks, equal to eager)."""
    r, err = drive("sm100", preload)
    assert r["fp4_quantize"] == "sgl_kernel.scaled_fp4_quant", r
    _compiled(r)
    _llama_graph(r)
    assert r["graph_op_counts"]["sgl_kernel.scaled_fp4_quant"] == LAYERS * LINEARS_PER_LAYER, r
    assert r["graph_op_counts"]["dynafold_flashinfer"] == 0, r
    assert r["built"] == [], r


def test_sm120_glm5_moe_layer_with_dynafold(drive, preload):
    """GLM-5's MoE layer (GlmMoeDsaForCausalLM's DeepseekV2MoE: router, grouped top-k, NVFP4
    experts through ModelOptNvFp4FusedMoEMethod, an NVFP4 shared expert). In piecewise mode
    SGLang 0.5.9 runs the experts inside its own operator (Dynamo never enters the MoE method
    or FlashInfer's fused MoE there); the shared expert's two NVFP4 linears are the seed's
    path, each quantizer one FlashInfer operator with dynafold."""
    r, err = drive("sm120", preload, model="glm5-moe")
    _compiled(r, pieces=1, compiled_pieces=1)
    counts = r["graph_op_counts"]
    assert counts["sglang.moe_forward_piecewise_cuda_graph_impl"] == 1, counts
    assert counts["dynafold_flashinfer"] == 2 and counts["sglang.fp4_gemm"] == 2, counts
    assert FP4_OP in r["graph_ops"], r["graph_ops"]
    assert r["built"] == ["fp4_quantization_120"], r


# What SGLang 0.5.9 derives for GLM-5 on Blackwell (ServerArgs._handle_model_specific_adjustments
# with the GPU answering SM120): DeepSeek sparse attention on an FP8 KV cache through FlashMLA.
GLM5_SERVER_ARGS = {"attention_backend": "nsa", "page_size": 64, "kv_cache_dtype": "fp8_e4m3",
                    "nsa_prefill_backend": "flashmla_auto", "nsa_decode_backend": "flashmla_kv",
                    "nsa_force_mla": True}
# Where Dynamo stops with dynafold: SGLang's own DSA indexer asks for the longest sequence on
# the host (nsa_indexer.py, Indexer.forward_cuda), a graph break fullgraph=True refuses.
INDEXER_FRAMES = ("nsa_indexer.py", "in forward_cuda", "seq_lens_cpu.max().item()")
FP4_GEMM_OP = "sglang.fp4_gemm"


def _glm5(r, built):
    server_args = r["server_args"]
    assert {k: server_args[k] for k in GLM5_SERVER_ARGS} == GLM5_SERVER_ARGS, server_args
    # Built from them by SGLang's ModelRunner: the NSA backend over its FP8 NSA pool, and one
    # DSA indexer per layer.
    assert server_args["attn_backend"] == "NativeSparseAttnBackend", server_args
    assert server_args["kv_pool"] == "NSATokenToKVPool torch.float8_e4m3fn", server_args
    assert server_args["indexers"] == 2, server_args
    assert r["fp4_quantize"] == "flashinfer.fp4_quantization.fp4_quantize", r
    # Nothing of FlashInfer's JIT toolchain ran while SGLang compiled; the fp4 module was built
    # (the stand-in build) only where dynafold's operator asked for it while Dynamo traced (no
    # eager forward runs before the piecewise runner here).
    assert not [p for p in r["processes_while_compiling"] if "nvcc" in p or "ninja" in p], r
    assert r["built"] == built, r
    assert not r["ok"] and r["counter"]["num_graphs_seen"] == 0, r


def test_sm120_glm5_without_dynafold_dies_with_the_seed_error(drive):
    """GLM-5 itself (GlmMoeDsaForCausalLM, the seed's model) through the piecewise runner as
    `--enable-piecewise-cuda-graph` starts it: the first NVFP4 linear of layer 0's attention
    (`fused_qkv_a_proj_with_mqa`) meets the seed's error."""
    r, err = drive("sm120", model="glm5")
    _glm5(r, built=[])
    _seed_error(r)
    assert r["traced_ops"] == [], r["traced_ops"]


def test_sm120_glm5_with_dynafold_stops_in_sglangs_dsa_indexer(drive, preload):
    """With dynafold, Dynamo gets through both NVFP4 linears ahead of the DSA indexer
    (`fused_qkv_a_proj_with_mqa`, `q_b_proj`: FlashInfer's quantizer as dynafold's operator,
    then SGLang's fp4 GEMM operator, each twice) and stops in SGLang's own indexer, where no
    FlashInfer frame is on the stack: what is left for GLM-5 under piecewise CUDA graphs is
    SGLang's."""
    r, err = drive("sm120", preload, model="glm5")
    _glm5(r, built=["fp4_quantization_120"])
    error = r["error"]
    assert error.startswith("Unsupported: "), error
    assert "Tensor.item()" in error and "capture_scalar_outputs" in error, error
    for frame in INDEXER_FRAMES:
        assert frame in error, (frame, error)
    assert "flashinfer" not in error.lower(), error
    assert [op.rsplit(".default", 1)[0] for op in r["traced_ops"]] == [
        FP4_OP.rsplit(".default", 1)[0], FP4_GEMM_OP] * 2, r["traced_ops"]



# Issue 38: GLM-5 under survey mode (`dynafold run --survey`): the same start-up, one run.
HADAMARD = "sglang/jit_kernel/hadamard.py"


def _survey(drive, preload, tmp_path, **settings):
    reports = tmp_path / "reports"
    r, err = drive("sm120", preload, model="glm5", DYNAFOLD_SURVEY="1",
                   DYNAFOLD_REPORT_DIR=str(reports), **settings)
    # One warning line from the one process that compiled, saying what survey mode did.
    assert err.count("survey mode (DYNAFOLD_SURVEY): a compile that asked for fullgraph=True "
                     "carries on past its graph breaks") == 1, err[-3000:]
    report = subprocess.run([str(DYNAFOLD), "report", str(reports), "--json"],
                            capture_output=True, check=True)
    sites = json.loads(report.stdout)["sites"]
    table = subprocess.run([str(DYNAFOLD), "report", str(reports)], capture_output=True,
                           check=True).stdout.decode()
    (tmp_path.parent / f"{tmp_path.name}.table.txt").write_text(table)
    # Every site was met by the fullgraph=True compile survey mode carried on, and names its
    # owner.
    assert sites and all(s["survey"] and s["owner"] for s in sites), sites
    return r, err, sites, table


def _where(site):
    """Where a site broke: its innermost frame."""
    frame = site["record"]["library_frame"] or site["record"]["user_frame"]
    return f"{frame['file']}:{frame['line']}"


def test_sm120_glm5_survey_lists_every_stop_in_one_run(drive, preload, tmp_path):
    """With dynafold and survey mode, the trace goes on past the DSA indexer's host `.item()`
    (nsa_indexer.py:962), met once from each frame Dynamo compiles on the way down to it, and
    on through the indexer's Hadamard transform, SGLang's own JIT kernel
    (sglang/jit_kernel/hadamard.py: its `is_cuda` check passes and its built module runs on the
    CPU, stand-ins 16-18), listing its stops: the kernel folder's `Path.resolve()` in
    `_jit_hadamard_module` (posix.lstat) and the built module's call. The run ends at the
    indexer's next kernel, SGLang's triton `act_quant`, which this CPU cannot launch: the
    triton sites before it are this CPU's (without a GPU, Dynamo does not treat a triton kernel
    as one). None is FlashInfer's."""
    r, err, sites, table = _survey(drive, preload, tmp_path)
    assert {s["owner"] for s in sites} == {"sglang", "triton"}, table
    item = [s for s in sites if _where(s).endswith("nsa_indexer.py:962")]
    assert item and all(s["record"]["break_type"] == "gb0124" for s in item), table
    # The Hadamard JIT module, built once (no toolkit ran: stand-in 18), after the loader's
    # file-system stop, met from each frame Dynamo compiled on the way down to it.
    assert len(r["hadamard_built"]) == 1, r
    assert r["hadamard_built"][0].startswith("sgl_kernel_jit_hadamard_bf16_t_"), r
    resolve = [s for s in sites if "posix.lstat" in s["record"]["reason"]]
    assert len(resolve) >= 2 and all(
        HADAMARD in s["record"]["user_frame"]["file"]
        or HADAMARD in (s["record"]["via_frame"] or {}).get("file", "") for s in resolve), table
    kernel_call = f"{HADAMARD}:48"  # module.hadamard_transform(x, out, scale)
    assert any(_where(s).endswith(kernel_call) for s in sites), table
    # SGLang's JIT loader reads the current device as Dynamo folds it: no stop there.
    assert "_get_cuda_arch_list" not in table, table
    # Where the CPU run ends: triton's launcher for act_quant finds no GPU driver.
    assert "0 active drivers" in r["error"], r["error"]
    assert all("triton/" in _where(s) for s in sites if s["owner"] == "triton"), table
    assert "by owner: sglang" in table and "Tensor.item()" in table, table


def test_sm120_glm5_survey_with_ops_off_shows_flashinfers_stops_too(drive, preload, tmp_path):
    """With FlashInfer's declarations left dormant (`--ops=no`), the same run first meets
    FlashInfer's own stops inside `fp4_quantize` (its JIT loader), then SGLang's."""
    r, err, sites, table = _survey(drive, preload, tmp_path, DYNAFOLD_OPS="0")
    owners = {s["owner"] for s in sites}
    assert {"flashinfer", "sglang"} <= owners, table
    flashinfer = [s for s in sites if s["owner"] == "flashinfer"]
    assert all("/flashinfer/" in _where(s) or s["record"]["via_frame"] for s in flashinfer), table
    assert any(_where(s).endswith("nsa_indexer.py:962") for s in sites), table


def test_sglang059_compile_entry_under_survey(preload, tmp_path):
    """SGLang 0.5.9's `install_torch_compiled` asks for fullgraph=True: survey mode carries it
    on (torch 2.9.1)."""
    check_sglang_entry(PYTHON, preload, tmp_path, SGLANG)
