"""Issue 12, on CPU: FlashInfer's public ops trace under torch.compile(fullgraph=True) once
dynafold wakes FlashInfer's own dormant op declarations for Dynamo, on every installed release.

Real torch, real FlashInfer from PyPI, fake CUDA tensors (`FakeTensorMode`): Dynamo traces the
public functions exactly as on a GPU, and the operators' fakes stand in for the kernels. The
same script runs without the preload as the baseline: there every case fails.
"""

import pytest

from conftest import ROOT, clean_env, run, result_of
from test_fold import PYTHON, RELEASES, flashinfer_path, release_text, toolkit

HELPER = ROOT / "tests" / "python" / "helpers" / "trace_ops.py"
TRACED = ["rmsnorm", "gemma_rmsnorm", "fused_add_rmsnorm", "gemma_fused_add_rmsnorm",
          "apply_rope_with_cos_sin_cache", "apply_rope_with_cos_sin_cache_inplace"]
# The operator each public op must reach in the graph (FlashInfer's declared name).
OPS = {
    "rmsnorm": "rmsnorm", "gemma_rmsnorm": "gemma_rmsnorm",
    "fused_add_rmsnorm": "fused_add_rmsnorm",
    "gemma_fused_add_rmsnorm": "gemma_fused_add_rmsnorm",
    "apply_rope_with_cos_sin_cache": "apply_rope_pos_ids_cos_sin_cache",
    "apply_rope_with_cos_sin_cache_inplace": "apply_rope_pos_ids_cos_sin_cache",
}


def trace(release, tmp_path, preload=None, **extra):
    env = clean_env(
        PYTHONPATH=flashinfer_path(release),
        CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
        FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"),
        **extra,
    )
    if preload:
        env["LD_PRELOAD"] = preload
    r = run([str(PYTHON), str(HELPER)], env, timeout=600)
    result = result_of(r)
    result["stdout"] = r.stdout.decode()
    return result, r.stderr.decode()


@pytest.mark.parametrize("release", RELEASES)
def test_public_ops_trace_with_flashinfers_own_declarations(preload, release, tmp_path):
    plain, _ = trace(release, tmp_path / "plain")
    for name in TRACED:
        assert not plain["cases"][name]["ok"], f"{name} traced without dynafold: {plain}"

    ours, err = trace(release, tmp_path / "ours", preload)
    for name in TRACED:
        case = ours["cases"][name]
        assert case["ok"], f"{name}: {case.get('error')}\n{err[-2000:]}"
        assert f"dynafold_flashinfer.{OPS[name]}.default" in case["targets"], case
        # Nothing of FlashInfer's JIT machinery ran while tracing: no process, no JIT file.
        assert ours["events"][name] == {"processes": [], "jit_files": []}, name
    # The eager path is FlashInfer's own: declarations return FlashInfer's function itself.
    assert ours["declared_is_own"] is True
    # A boundary FlashInfer forgot, from dynafold's own declarations: bmm_fp8's autotuned gemm.
    assert "flashinfer::fp8_gemm_sm100" in ours["woken"], ours["woken"]
    runs = ours["rmsnorm_op_runs"]
    assert runs["module_holds_it"] is True and "/flashinfer/" in runs["file"], runs


@pytest.mark.parametrize("release", RELEASES)
def test_compile_before_the_jit_module_exists_says_what_to_do(preload, release, tmp_path):
    ours, _ = trace(release, tmp_path, preload)
    case = ours["cases"]["silu_and_mul"]
    assert not case["ok"]
    assert "dynafold: torch.compile reached FlashInfer's get_act_and_mul_module" in case["error"]
    assert "Call the FlashInfer op once eagerly" in case["error"]


# FlashInfer's API logging arrived in 0.6; 0.5.3 has none to keep out of the trace.
@pytest.mark.parametrize("release", [r for r in RELEASES if r != "0.5.3"])
def test_flashinfer_api_logging_stays_out_of_the_trace(preload, release, tmp_path):
    ours, err = trace(release, tmp_path, preload, FLASHINFER_LOGLEVEL="1")
    for name in TRACED:
        case = ours["cases"][name]
        assert case["ok"], f"{name}: {case.get('error')}\n{err[-2000:]}"
        assert f"dynafold_flashinfer.{OPS[name]}.default" in case["targets"], case
    # Eager calls are still logged by FlashInfer.
    assert "FlashInfer API Call: rmsnorm" in ours["stdout"] + err


FAKE_CHECK = r"""
import importlib, json, sys, torch, flashinfer, flashinfer.rope
m = sys.modules["_dynafold_ops.engine.wake"]
check = importlib.import_module("_dynafold_ops.engine.fake_check")
x = torch.randn(4, 8)
out = {
    "agrees": check.compare(lambda a: torch.empty_like(a), (x,), {}, x * 2),
    "shape": check.compare(lambda a: a.new_empty(8, 4), (x,), {}, x * 2),
    "stride": check.compare(lambda a: a.new_empty(8, 4).t(), (x,), {}, x * 2),
    "dtype": check.compare(lambda a: a.new_empty(4, 8, dtype=torch.int32), (x,), {}, x),
    "structure": check.compare(lambda a: (a, a), (x,), {}, x),
    "nothing": check.compare(lambda a: None, (x,), {}, None),
}
# FlashInfer's own rotted fake, called with what its kernel takes.
rotted = m.declared_fake("flashinfer::apply_rope_pos_ids_cos_sin_cache")
q = torch.randn(2, 8)
out["flashinfer_rope_fake"] = check.compare(
    rotted, (q, q, q.clone(), q.clone(), torch.randn(16, 8), torch.arange(2)), {"interleave": True},
    None)
kernel = check.checked("flashinfer::probe", lambda a: a * 2, lambda a: a.new_empty(8, 4))
try:
    kernel(x)
    out["raised"] = None
except RuntimeError as e:
    out["raised"] = str(e)
out["kept"] = m.status().get("fake checks")
print("RESULT " + json.dumps(out))
"""


def test_each_fake_is_checked_against_its_kernel_before_its_result_is_used(preload, tmp_path):
    """The check a woken operator makes at its first real run, on CPU tensors: what it accepts,
    what it catches (FlashInfer's own rotted rope fake among them), and that a mismatch raises
    with what to do rather than letting a graph planned on a wrong fake run on."""
    env = clean_env(PYTHONPATH=flashinfer_path("0.6.16"),
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                    LD_PRELOAD=preload)
    r = run([str(PYTHON), "-c", FAKE_CHECK], env, timeout=300)
    got = result_of(r)
    assert got["agrees"] == "agrees" and got["nothing"] == "agrees"
    assert got["shape"] == "output 0: shape (8, 4) predicted, (4, 8) returned"
    assert got["stride"] == "output 0: stride (1, 4) predicted, (8, 1) returned"
    assert got["dtype"] == "output 0: dtype torch.int32 predicted, torch.float32 returned"
    assert got["structure"].startswith("structure ")
    assert got["flashinfer_rope_fake"].startswith("the fake raised TypeError"), got
    # (0.6.16's fake splits the cache into cos and sin: the kernel's arguments do not fit it.)
    assert "missing 1 required positional argument" in got["flashinfer_rope_fake"]
    assert got["raised"].startswith("dynafold: the declaration of flashinfer::probe does not describe")
    assert "DYNAFOLD_OPS=0" in got["raised"]
    assert got["kept"] == {"flashinfer::probe": "output 0: shape (8, 4) predicted, (4, 8) returned"}


SAMPLING = ROOT / "tests" / "python" / "helpers" / "trace_sampling.py"
# What each release's sampling functions can be called with (0.5.3 has no seed/offset, and its
# min_p path creates a Generator inside the traced function).
SAMPLED = {
    "0.5.3": ["sampling_from_probs", "top_p_sampling_from_probs", "top_k_sampling_from_probs"],
}
ALL_SAMPLED = ["sampling_from_probs", "sampling_from_probs_seeded", "top_p_sampling_from_probs",
               "top_k_sampling_from_probs", "min_p_sampling_from_probs"]


@pytest.mark.parametrize("release", RELEASES)
def test_sampling_ops_trace_through_their_narrowed_declarations(preload, release, tmp_path):
    """FlashInfer's sampling declarations take a Generator and Union[int, Tensor] seeds and
    return Union[Tensor, tuple]: no torch schema says that. dynafold wakes them narrowed to how
    servers call them (no generator object, int seeds, one tensor back), with operators of
    their own for a caller's generator and for `return_valid=True` (issue 30; values:
    test_sampling_draws.py); other calls are traced as FlashInfer ships them."""
    cuda_home = toolkit(tmp_path, "cuda", release_text("12.8"))

    def traced(preload_path):
        env = clean_env(PYTHONPATH=flashinfer_path(release), CUDA_HOME=cuda_home)
        if preload_path:
            env["LD_PRELOAD"] = preload_path
        r = run([str(PYTHON), str(SAMPLING)], env, timeout=600)
        return result_of(r)

    plain = traced(None)
    assert not any(case["ok"] for case in plain.values()), plain
    ours = traced(preload)
    for name in SAMPLED.get(release, ALL_SAMPLED):
        case = ours[name]
        op = name.removesuffix("_seeded")
        assert case["ok"], f"{name}: {case.get('error')}"
        assert case["targets"] == [f"dynafold_flashinfer.{op}.default"], case
        assert case["shape"] == [4] and case["dtype"] == "torch.int32", case
    if release != "0.5.3":  # (0.5.3 has no return_valid)
        valid = ours["return_valid"]
        assert valid["ok"], valid
        assert valid["targets"][0] == "dynafold_flashinfer.sampling_from_probs_valid.default", \
            valid


PLANS = r"""
import json, sys, torch, tvm_ffi, flashinfer.decode as decode, flashinfer.prefill as prefill
import standin_kernels
CLASSES = (decode.BatchDecodeWithPagedKVCacheWrapper, prefill.BatchPrefillWithPagedKVCacheWrapper,
           prefill.BatchPrefillWithRaggedKVCacheWrapper)


def properties():
    return {cls.__name__: isinstance(vars(cls).get("_plan_info"), property) for cls in CLASSES}


out = {"at import": properties()}
# A wrapper planned before any compile, by whatever sets its plan (plan() itself needs a GPU;
# SGLang's fast_decode_plan sets the attribute the same way).
with standin_kernels.unpinned():
    w = decode.BatchDecodeWithPagedKVCacheWrapper(torch.empty(1 << 20, dtype=torch.uint8), "NHD")
w._plan_info = tvm_ffi.convert([3, 1, 4, 1, 5])
out["before"] = type(w._plan_info).__name__
torch.compile(lambda x: x + 1, fullgraph=True, backend="eager")(torch.ones(2))
out["compiled"] = properties()
if "--fallback" in sys.argv:
    # A call the run operator cannot hold (an argument of a custom JIT variant, neither a tensor
    # nor a constant): Dynamo traces FlashInfer's run() itself, which reads the plan.
    variant = object()
    q = torch.ones(2, 8, 64, dtype=torch.float16)
    try:
        torch.compile(lambda q: w.run(q, (q, q), variant), backend="eager")(q)
    except Exception as e:  # run() fails past the trace: no kernel on this machine
        out["run"] = type(e).__name__
    out["fell back"] = properties()
    seen = []

    @torch.compile(fullgraph=True, backend="eager")
    def read(x):
        seen.append(torch.compiler.is_compiling())
        return w._plan_info
    traced = read(torch.ones(1))
    out["traced"] = [type(traced).__name__, traced.dtype.__repr__(), traced.tolist()]
    w._plan_info = tvm_ffi.convert([2, 7])
    out["replanned"] = read(torch.ones(1)).tolist()
out["eager"] = type(w._plan_info).__name__
out["values"] = list(w._plan_info)
print("RESULT " + json.dumps(out))
"""


@pytest.mark.parametrize("release", [r for r in RELEASES if r != "0.5.3"])
def test_attention_plans_become_graph_data_when_a_trace_reads_them(preload, release, tmp_path):
    """FlashInfer's wrappers keep their plan as a tvm_ffi Array, which Dynamo cannot pass to the
    woken run operator (and a list of ints would be guarded constants: a recompile per plan).
    SGLang's wrappers' run methods are operators, so no trace reads their plan, and their plan
    attribute stays FlashInfer's own (a property would cost every eager plan() and run(),
    issue 40). Once a trace does read it (a call the operator cannot hold), the attribute
    becomes a property: eager reads get FlashInfer's value, set before or after, and traced
    reads an int64 tensor of the same ints; a new plan reuses the compiled graph. (0.5.3
    kept lists: no tvm_ffi.)"""
    env = clean_env(PYTHONPATH=f"{flashinfer_path(release)}:{ROOT / 'tests' / 'python' / 'helpers'}",
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")), LD_PRELOAD=preload)

    def result(*flags):
        r = run([str(PYTHON), "-c", PLANS, *flags], env, timeout=300)
        return result_of(r)

    names = ("BatchDecodeWithPagedKVCacheWrapper", "BatchPrefillWithPagedKVCacheWrapper",
             "BatchPrefillWithRaggedKVCacheWrapper")
    quiet = result()
    for state in ("at import", "compiled"):
        assert quiet[state] == dict.fromkeys(names, False), quiet
    assert quiet["before"] == quiet["eager"] == "Array" and quiet["values"] == [3, 1, 4, 1, 5]
    read = result("--fallback")
    assert read["fell back"]["BatchDecodeWithPagedKVCacheWrapper"] is True, read
    assert read["before"] == read["eager"] == "Array", read
    assert read["traced"] == ["Tensor", "torch.int64", [3, 1, 4, 1, 5]], read
    # Graph data, not constants: the same compiled function reads the new plan.
    assert read["replanned"] == [2, 7], read
    assert read["values"] == [2, 7], read


CUTE_DSL = ROOT / "tests" / "python" / "helpers" / "trace_cute_dsl.py"
# Input (5, 64) (and (2, 3, 64)): FlashInfer's CuTe DSL wrappers' own arithmetic
# (quantization/kernels/nvfp4_quantize.py, mxfp4_quantize.py): values (M, K/2); scale factors
# K/sf_vec_size columns, padded to 4 and rows to 128 (8x4: 8) when swizzled.
CUTE_DSL_RESULTS = {
    "nvfp4_128x4": [[5, 32], [128, 4]],
    "nvfp4_8x4": [[5, 32], [8, 4]],
    "nvfp4_linear": [[5, 32], [5, 4]],
    "nvfp4_3d": [[6, 32], [128, 4]],
    "mxfp4_128x4": [[5, 32], [128, 4]],
    "mxfp4_linear": [[5, 32], [5, 2]],
}


# The cute-dsl backend arrived in 0.6.16 (after 0.6.0).
@pytest.mark.parametrize("release", [r for r in RELEASES if r != "0.5.3"])
def test_cute_dsl_fp4_gets_a_boundary_flashinfer_did_not_declare(preload, release, tmp_path):
    """fp4_quantize(..., backend="cute-dsl") imports and compiles a CuTe DSL kernel at call time
    (SGLang's choice on SM100). With dynafold's own declaration of `_fp4_quantize_cute_dsl`, it
    traces to one operator whose fake gives FlashInfer's shapes for NVFP4 and MXFP4, every
    layout; without, every case fails."""
    env = clean_env(PYTHONPATH=f"{flashinfer_path(release)}:{CUTE_DSL.parent}",
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")),
                    FLASHINFER_WORKSPACE_BASE=str(tmp_path / "fi-workspace"))
    plain = result_of(run([str(PYTHON), str(CUTE_DSL)], env, timeout=600))
    assert not any(c["ok"] for c in plain["cases"].values()), plain
    r = run([str(PYTHON), str(CUTE_DSL)], dict(env, LD_PRELOAD=preload), timeout=600)
    ours = result_of(r)
    for name, shapes in CUTE_DSL_RESULTS.items():
        case = ours["cases"][name]
        assert case["ok"], (name, case.get("error"), r.stderr.decode()[-2000:])
        assert "dynafold_flashinfer.fp4_quantize_cute_dsl.default" in case["targets"], case
        assert [res[0] for res in case["results"]] == shapes, (name, case["results"])
        assert all(dtype == "torch.uint8" and stride == [shape[1], 1]
                   for shape, dtype, stride in case["results"]), case["results"]
    assert ours["processes"] == [], ours["processes"]


DECLARED_TWICE = r"""
import json, torch, flashinfer.utils as utils

def build(scale, repeat):
    # As FlashInfer's JIT loaders do (fp4_quantize_sm100 per SM backend): the same declared
    # name, a new function closing over what that build loaded, and a fake of its own.
    @utils.register_custom_op("flashinfer::dynafold_twice", mutates_args=())
    def twice(x: torch.Tensor) -> torch.Tensor:
        return (x * scale).repeat(repeat)

    @utils.register_fake_op("flashinfer::dynafold_twice")
    def _(x: torch.Tensor) -> torch.Tensor:
        return x.new_empty(x.shape[0] * repeat)
    return twice

first, second = build(2.0, 1), build(3.0, 2)
targets = []

def backend(gm, inputs):
    targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
    return gm.forward

x = torch.ones(3)
out = torch.compile(lambda x: (first(x), second(x)), fullgraph=True, backend=backend)(x)
checks = __import__("sys").modules["_dynafold_ops.engine.wake"].status()["fake checks"]
print("RESULT " + json.dumps({"targets": targets, "values": [t.tolist() for t in out],
                             "checks": checks}))
"""


def test_a_declaration_made_again_by_another_build_gets_an_operator_of_its_own(preload, tmp_path):
    """FlashInfer declares some ops inside its JIT loaders, once per build (fp4_quantize_sm100
    per SM backend): each build's function becomes an operator of its own, running that
    build's kernel with that build's fake, each checked on its own (main reused the first
    build's fake and verdict for the second)."""
    env = clean_env(PYTHONPATH=flashinfer_path("0.6.16"),
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")), LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", DECLARED_TWICE], env, timeout=300))
    assert got["targets"] == ["dynafold_flashinfer.dynafold_twice.default",
                              "dynafold_flashinfer.dynafold_twice_1.default"], got
    assert got["values"] == [[2.0, 2.0, 2.0], [3.0] * 6], got
    assert got["checks"] == {"flashinfer::dynafold_twice": "agrees",
                             "flashinfer::dynafold_twice (build 2)": "agrees"}, got


TWO_UNIONS = r"""
import json, torch, flashinfer.utils as utils
from typing import Union

# As xqa's declaration (0.7.4): two scales, each a float or a device tensor.
@utils.register_custom_op("flashinfer::dynafold_two_scales", mutates_args=("out",))
def two_scales(x: torch.Tensor, q_scale: Union[float, torch.Tensor],
               kv_scale: Union[float, torch.Tensor], out: torch.Tensor) -> None:
    out.copy_(x * q_scale * kv_scale)

@utils.register_fake_op("flashinfer::dynafold_two_scales")
def _(x: torch.Tensor, q_scale: Union[float, torch.Tensor],
      kv_scale: Union[float, torch.Tensor], out: torch.Tensor) -> None:
    pass

targets = []

def backend(gm, inputs):
    targets.extend(str(n.target) for n in gm.graph.nodes
                   if n.op == "call_function" and "dynafold_flashinfer" in str(n.target))
    return gm.forward

def f(x, s):
    a, b = torch.empty_like(x), torch.empty_like(x)
    two_scales(x, 2.0, 3.0, a)
    two_scales(x, s, 0.5, b)
    return a, b

out = torch.compile(f, fullgraph=True, backend=backend)(torch.ones(3), torch.full((3,), 4.0))
print("RESULT " + json.dumps({"targets": targets, "values": [t.tolist() for t in out]}))
"""


def test_a_declaration_with_two_union_scales_gets_an_operator_per_combination(preload, tmp_path):
    """xqa (0.7.4) declares two `Union[float, Tensor]` scales: it stays dormant while only one
    Union could be narrowed, so Dynamo met the bare kernel. Each combination of members is an
    operator; a call reaches the one its arguments fit, and computes what FlashInfer's does."""
    env = clean_env(PYTHONPATH=flashinfer_path("0.7.4"),
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")), LD_PRELOAD=preload)
    got = result_of(run([str(PYTHON), "-c", TWO_UNIONS], env, timeout=300))
    prefix = "dynafold_flashinfer.dynafold_two_scales"
    assert got["targets"] == [f"{prefix}_q_scale_float_kv_scale_float.default",
                              f"{prefix}_kv_scale_float.default"], got
    assert got["values"] == [[6.0] * 3, [2.0] * 3], got


QWEN_BLOCK = """
import torch
import flashinfer.experimental.qwen_3_5_block._cudnn_frost  # noqa: F401  (a vendored stand-in)
import flashinfer.norm

@torch.compile(fullgraph=True, backend="eager")
def f(x):
    return x * 2

print("RESULT", __import__("json").dumps({"out": f(torch.ones(2)).tolist()}))
"""


def test_a_module_whose_attributes_raise_on_lookup_breaks_no_compile(preload, tmp_path):
    """0.7.4's flashinfer.experimental.qwen_3_5_block vendors a cuDNN stand-in whose every
    attribute lookup raises NotImplementedError; the engine's scan for JIT loaders at compile
    start let it out of `hasattr`, and every compile of the process failed."""
    env = clean_env(PYTHONPATH=flashinfer_path("0.7.4"), LD_PRELOAD=preload,
                    CUDA_HOME=toolkit(tmp_path, "cuda", release_text("12.8")))
    r = run([str(PYTHON), "-c", QWEN_BLOCK], env, timeout=600)
    assert result_of(r) == {"out": [2.0, 2.0]}
