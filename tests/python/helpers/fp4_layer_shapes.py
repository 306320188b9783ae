"""dynafold's fakes and result forms for the FP4 layer's boundaries (their records in
hooks/ops/registry/: fakes, corrections' `result_is_given`) against FlashInfer's own Python,
run for real on fake CUDA tensors (`FakeTensorMode`) with the kernels and the autotuner's choice
stood in:

- `mm_fp4` (dynafold's own boundary), every backend SGLang selects, a grid of sizes and both
  output dtypes: without `out`, FlashInfer's body allocates the result that `_mm_fp4` must
  describe; with `out`, it must return `out` itself (the operator then returns nothing).
- `trtllm_fp4_block_scale_moe_op` (FlashInfer's declaration) with `output` given and
  finalized: it must return `[output]`, the caller's tensor (the operator returns nothing).
- `cutlass_fused_moe` (FlashInfer's declaration) with `output`: `[output, *scratch]`, whose
  scratch tensors `_cutlass_fused_moe_scratch` must describe.

Prints one JSON line: the cases run and every one whose result differs. Stand-ins, only for
what needs a GPU: helpers/blackwell_standins.py (an SM100, the fused-MoE modules' build as
no-op modules), plus here the runners mm_fp4 builds per backend (cuDNN graph, JIT modules, the
CuTe DSL kernel: a runner that launches nothing) and the autotuner's `choose_one` (FlashInfer's
first runner, tactic -1: no profiling) and 0.7.4's per-stream workspace for mm_fp4 (a CUDA memory
pool; a plain buffer here); mm_fp4 is called with `skip_check=True`, as its backend
checks ask whether cuDNN and the CuTe DSL are installed. Every allocation and return is
FlashInfer's.
"""
import inspect
import json
import os
import sys

import torch
from torch._subclasses.fake_tensor import FakeTensorMode

import flashinfer
import blackwell_standins
from flashinfer.autotuner import AutoTuner
from flashinfer.fused_moe import core
from flashinfer.gemm import gemm_base

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engine_source import engine

op_fakes = engine("engine.fakes")


class _Runner:
    """A runner that launches nothing (what each backend's factory would build on a GPU)."""

    def __call__(self, *args, **kwargs):
        return None

    def __getattr__(self, name):
        return lambda *args, **kwargs: _Runner()


def _first_runner(self, custom_op, runners, *args, **kwargs):
    return runners[0], -1


AutoTuner.choose_one = _first_runner
# 0.7.4's per-stream workspace (a CUDA memory pool; not a result): a plain buffer.
if hasattr(gemm_base, "_get_stream_cache_buf"):
    gemm_base._get_stream_cache_buf = lambda name, size, device, *args, **kwargs: torch.empty(
        size, dtype=torch.uint8, device=device)
for name in ("_cudnn_gemm_fp4_runner", "_cute_dsl_gemm_fp4_runner"):
    if hasattr(gemm_base, name):
        setattr(gemm_base, name, lambda *args, **kwargs: _Runner())
for name in ("get_trtllm_gemm_module", "get_cutlass_fp4_gemm_module"):
    if hasattr(gemm_base, name):
        setattr(gemm_base, name, lambda *args, **kwargs: _Runner())
blackwell_standins.install()


def describe(tensors):
    return [[list(t.shape), str(t.dtype), list(t.stride())] for t in tensors]


def t(*shape, dtype):
    return torch.empty(*shape, device="cuda", dtype=dtype)


def mm_fp4_cases(differ):
    fake = op_fakes.override("flashinfer::mm_fp4", gemm_base.mm_fp4)
    cases = 0
    for backend in ("cudnn", "cutlass", "trtllm", "cute-dsl"):
        for m, n, k in ((1, 128, 128), (4, 512, 256), (129, 256, 512), (1000, 4096, 1024)):
            for out_dtype in (torch.bfloat16, torch.float16):
                if backend == "trtllm" and out_dtype != torch.bfloat16:
                    continue  # mm_fp4's own check: trtllm writes bf16 only
                with FakeTensorMode(allow_non_fake_inputs=True):
                    a = t(m, k // 2, dtype=torch.uint8)
                    b = t(n, k // 2, dtype=torch.uint8).T
                    a_sf = t((m + 127) // 128 * 128, k // 16, dtype=torch.float8_e4m3fn)
                    b_sf = t(n, k // 16, dtype=torch.float8_e4m3fn).T
                    alpha = t((), dtype=torch.float32)
                    args = (a, b, a_sf, b_sf, alpha, out_dtype)
                    # skip_check: the backend checks ask whether cuDNN and the CuTe DSL are
                    # installed (they are not here) and never change the result's size.
                    real = gemm_base.mm_fp4(*args, backend=backend, skip_check=True)
                    ours = fake(*args, None, 16, False, backend)
                    out = t(m, n, dtype=out_dtype)
                    given = gemm_base.mm_fp4(*args, out=out, backend=backend, skip_check=True)
                cases += 1
                case = {"op": "mm_fp4", "backend": backend, "mnk": [m, n, k],
                        "dtype": str(out_dtype)}
                if describe([real]) != describe([ours]):
                    differ.append({**case, "real": describe([real]), "fake": describe([ours])})
                if given is not out:
                    differ.append({**case, "given": "the result is not the given out"})
    return cases


def moe_weights(m, h, i, e):
    return dict(
        hidden_states=t(m, h // 2, dtype=torch.uint8),
        hidden_states_scale=t(m, h // 16, dtype=torch.float8_e4m3fn),
        gemm1_weights=t(e, 2 * i, h // 2, dtype=torch.uint8),
        gemm1_weights_scale=t(e, 2 * i, h // 16, dtype=torch.float8_e4m3fn),
        gemm2_weights=t(e, h, i // 2, dtype=torch.uint8),
        gemm2_weights_scale=t(e, h, i // 16, dtype=torch.float8_e4m3fn),
        output1_scale_scalar=t(e, dtype=torch.float32),
        output1_scale_gate_scalar=t(e, dtype=torch.float32),
        output2_scale_scalar=t(e, dtype=torch.float32))


def trtllm_cases(differ):
    """FlashInfer's declared kernel, from its loader (built by the stand-in), called as the
    public trtllm_fp4_block_scale_moe (routing from logits) and _routed_moe (packed ids) do."""
    kernel = core.get_trtllm_moe_sm100_module().trtllm_fp4_block_scale_moe
    names = list(inspect.signature(kernel).parameters)
    cases = 0
    for m, h, i, e, top_k in ((1, 256, 256, 8, 2), (4, 512, 256, 16, 4), (300, 1024, 512, 64, 8)):
        for mode in (core.RoutingInputMode.FromLogits, core.RoutingInputMode.PackedPrecomputed):
            logits = mode == core.RoutingInputMode.FromLogits
            with FakeTensorMode(allow_non_fake_inputs=True):
                values = dict.fromkeys(names)
                values.update(moe_weights(m, h, i, e))
                values.update(
                    routing_input_mode=mode,
                    routing_logits=t(m, e, dtype=torch.float32) if logits else None,
                    topk_ids=None if logits else t(m, top_k, dtype=torch.int32),
                    num_experts=e, top_k=top_k, num_fused_shared_experts=0, n_group=0,
                    topk_group=0, intermediate_size=i, local_expert_offset=0,
                    num_local_experts=e, routing_method_type=1, do_finalize=True,
                    enable_pdl=False, activation_type=3, tune_max_num_tokens=8192,
                    norm_topk_prob=True, output=t(m, h, dtype=torch.bfloat16))
                values = {k: v for k, v in values.items() if k in names}
                for name, p in inspect.signature(kernel).parameters.items():
                    if values.get(name) is None and p.default is not p.empty:
                        values[name] = p.default
                result = kernel(**values)
            cases += 1
            if not (isinstance(result, list) and len(result) == 1
                    and result[0] is values["output"]):
                differ.append({"op": "trtllm_fp4_block_scale_moe", "mode": int(mode),
                               "sizes": [m, h, i, e, top_k],
                               "result": f"{type(result).__name__} of {len(result)}"})
    return cases


def cutlass_cases(differ):
    kernel = core.get_cutlass_fused_moe_module("100").cutlass_fused_moe
    fake = op_fakes.override("flashinfer::cutlass_fused_moe:scratch", kernel)
    cases = 0
    for m, h, i, e, top_k in ((1, 256, 256, 8, 2), (4, 512, 256, 16, 4), (300, 1024, 512, 64, 8)):
        with FakeTensorMode(allow_non_fake_inputs=True):
            output = t(m, h, dtype=torch.bfloat16)
            args = (output, t(m, h, dtype=torch.bfloat16), t(m, top_k, dtype=torch.int32),
                    t(m, top_k, dtype=torch.float32), t(e, 2 * i, h // 16, dtype=torch.long),
                    None, t(e, h, i // 16, dtype=torch.long), None, torch.bfloat16,
                    [t(1, dtype=torch.float32)])
            result = kernel(*args)
            ours = fake(*args)
        cases += 1
        if not (isinstance(result, list) and result[0] is output
                and describe(result[1:]) == describe(ours)):
            differ.append({"op": "cutlass_fused_moe", "sizes": [m, h, i, e, top_k],
                           "real": describe(result[1:]) if isinstance(result, list) else
                           str(type(result)), "fake": describe(ours),
                           "output_first": isinstance(result, list) and result[0] is output})
    return cases


def main():
    differ = []
    cases = {"mm_fp4": mm_fp4_cases(differ), "trtllm_fp4_block_scale_moe": trtllm_cases(differ),
             "cutlass_fused_moe": cutlass_cases(differ)}
    print("RESULT " + json.dumps({"cases": cases, "differ": differ,
                                  "flashinfer": flashinfer.__version__}), flush=True)


main()
sys.exit(0)
