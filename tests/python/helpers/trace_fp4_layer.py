"""Traces the FlashInfer calls of SGLang 0.5.23's NVFP4 layer on Blackwell with
torch.compile(fullgraph=True) on fake CUDA tensors (no GPU needed) and prints one JSON line: per
case, whether it compiled, the graph's call targets and the results' shapes and dtypes as
traced, or the error; and the processes started while tracing.

Each case is FlashInfer's public call exactly as SGLang 0.5.23 makes it (argument for argument;
the file:line of each is in tests/python/test_fp4_layer.py). Run by test_fp4_layer.py with and
without dynafold's preload, one FlashInfer release on PYTHONPATH (0.6.16, 0.7.2 and 0.7.4 have
every function called here).

Stand-ins for the Blackwell GPU this machine lacks: helpers/blackwell_standins.py (each named
there: the compute capability, the current device, the fused-MoE modules' JIT build, Dynamo's
trace-time device switch).
"""
import json
import sys

import torch
import flashinfer
import flashinfer.utils
from torch._subclasses.fake_tensor import FakeTensorMode

from fullgraph_trace import trace
from blackwell_standins import module_calls

tracing = [None]
processes = []
sys.addaudithook(lambda ev, a: processes.append(str(a[1])[:200])
                 if ev == "subprocess.Popen" and tracing[0] else None)

# Sizes: tokens, hidden, intermediate, experts, top-k (multiples of 128 as the trtllm-gen
# kernels need; shapes are what they are on an SM100, the sizes are small).
M, H, I, E, TOP_K = 4, 256, 256, 8, 2  # noqa: E741  (I: intermediate, as above)
N = 512


def linear_cases(t):
    """ModelOptFp4LinearMethod.apply (w4a4): fp4_quantize then mm_fp4, as SGLang's op bodies
    call them (fp4_utils.py `_flashinfer_fp4_quantize_impl`, modelopt_quant.py `fp4_gemm`)."""
    mm_fp4 = getattr(flashinfer, "mm_fp4", None)
    if mm_fp4 is None:
        return {}
    x = t(M, H, dtype=torch.bfloat16)
    input_scale_inv = t(1, dtype=torch.float32)
    # The layer's weights after process_weights_after_loading: packed (N, K/2) uint8, the
    # swizzled fp8 block scales (N, K/16), alpha a float32 scalar; mm_fp4 gets their .T.
    weight = t(N, H // 2, dtype=torch.uint8)
    weight_scale_interleaved = t(N, H // 16, dtype=torch.float8_e4m3fn)
    alpha = t((), dtype=torch.float32)

    def linear(backend):
        def forward(x):
            x_fp4, x_scale_interleaved = flashinfer.fp4_quantize(
                input=x, global_scale=input_scale_inv, sf_vec_size=16, sf_use_ue8m0=False,
                is_sf_swizzled_layout=True, is_sf_8x4_layout=False, enable_pdl=None,
                backend="cute-dsl")
            return mm_fp4(x_fp4, weight.T, x_scale_interleaved, weight_scale_interleaved.T,
                          alpha, x.dtype, backend=backend)
        return forward, (x,)

    # Fp4GemmRunnerBackend.get_flashinfer_backend(): flashinfer_cudnn/cutlass/trtllm/cutedsl;
    # SGLang's auto picks flashinfer_cutedsl on SM100.
    return {f"linear_{b}": linear(b) for b in ("cudnn", "cutlass", "trtllm", "cute-dsl")}


def moe_cases(t):
    """The NVFP4 MoE experts as SGLang's runners call FlashInfer (flashinfer_trtllm.py
    `fused_experts_none_to_flashinfer_trtllm_fp4`, flashinfer_cutlass.py
    `_run_flashinfer_cutlass`), after SGLang's own fp4 quantize op (linear scale layout)."""
    try:
        from flashinfer import fused_moe
    except Exception:
        return {}
    hs_fp4 = t(M, H // 2, dtype=torch.uint8)
    hs_scale = t(M, H // 16, dtype=torch.float8_e4m3fn)
    w13 = t(E, 2 * I, H // 2, dtype=torch.uint8)
    w13_scale = t(E, 2 * I, H // 16, dtype=torch.float8_e4m3fn)
    w2 = t(E, H, I // 2, dtype=torch.uint8)
    w2_scale = t(E, H, I // 16, dtype=torch.float8_e4m3fn)
    g1_scale_c, g1_alphas, g2_alphas = (t(E, dtype=torch.float32) for _ in range(3))
    router_logits = t(M, E, dtype=torch.float32)
    weights = dict(
        hidden_states=hs_fp4, hidden_states_scale=hs_scale,
        gemm1_weights=w13, gemm1_weights_scale=w13_scale, gemm1_bias=None, gemm1_alpha=None,
        gemm1_beta=None, gemm1_clamp_limit=None, gemm2_weights=w2, gemm2_weights_scale=w2_scale,
        gemm2_bias=None, output1_scale_scalar=g1_scale_c, output1_scale_gate_scalar=g1_alphas,
        output2_scale_scalar=g2_alphas, per_token_scale=None, num_experts=E, top_k=TOP_K,
        n_group=0, topk_group=0, intermediate_size=I, local_expert_offset=0,
        local_num_experts=E, do_finalize=True, activation_type=3,  # Swiglu
        tune_max_num_tokens=4, enable_pdl=False)
    out = {}

    bypassed = getattr(fused_moe, "trtllm_fp4_block_scale_moe", None)
    if bypassed is not None:
        def moe(router_logits):
            output = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
            result = bypassed(routing_logits=router_logits, routing_bias=None,
                              routed_scaling_factor=None, routing_method_type=1,  # Renormalize
                              output=output, **weights)
            return result[0]
        out["moe_trtllm_fp4"] = (moe, (router_logits,))

    routed = getattr(fused_moe, "trtllm_fp4_block_scale_routed_moe", None)
    if routed is not None:
        topk_ids = t(M, TOP_K, dtype=torch.int32)  # packed (expert id << 16 | bf16 weight)

        def moe_routed(topk_ids):
            output = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
            result = routed(topk_ids=topk_ids, routing_bias=None, routed_scaling_factor=None,
                            routing_method_type=1, output=output, **weights)
            return result[0]
        out["moe_trtllm_fp4_routed"] = (moe_routed, (topk_ids,))

    cutlass = getattr(fused_moe, "cutlass_fused_moe", None)
    if cutlass is not None:
        x = t(M, H, dtype=torch.bfloat16)
        topk_weights = t(M, TOP_K, dtype=torch.float32)
        topk_ids = t(M, TOP_K, dtype=torch.int32)
        quant_scales = [t(1, dtype=torch.float32), t(E, 2 * I, H // 16, dtype=torch.int32),
                        t(E, dtype=torch.float32), t(1, dtype=torch.float32),
                        t(E, H, I // 16, dtype=torch.int32), t(E, dtype=torch.float32)]
        fc1 = t(E, 2 * I, H // 16, dtype=torch.long)
        fc2 = t(E, H, I // 16, dtype=torch.long)

        def moe_cutlass(x):
            output = torch.empty(M, H, dtype=torch.bfloat16, device="cuda")
            return cutlass(output=output, input=x, token_selected_experts=topk_ids,
                           token_final_scales=topk_weights, fc1_expert_weights=fc1,
                           fc2_expert_weights=fc2, output_dtype=torch.bfloat16, input_sf=None,
                           quant_scales=quant_scales, swiglu_alpha=None, swiglu_beta=None,
                           swiglu_limit=None, ep_size=1, ep_rank=0, tp_size=1, tp_rank=0,
                           tune_max_num_tokens=4, activation_type=fused_moe.ActivationType.Swiglu,
                           enable_alltoall=False, use_fused_finalize=True)[0]
        out["moe_cutlass_fp4"] = (moe_cutlass, (x,))
    return out


def describe(result):
    if isinstance(result, torch.Tensor):
        return [[list(result.shape), str(result.dtype)]]
    return [[list(r.shape), str(r.dtype)] for r in result]


def main():
    only = sys.argv[1].split(",") if len(sys.argv) > 1 else None
    out = {}
    with FakeTensorMode(allow_non_fake_inputs=True):
        def t(*shape, dtype):
            return torch.empty(*shape, device="cuda", dtype=dtype)

        cases = {**linear_cases(t), **moe_cases(t)}
        for name, (fn, args) in cases.items():
            if only and name not in only:
                continue
            tracing[0] = name
            try:
                result, out[name] = trace(fn, *args, error_chars=int(__import__("os").environ.get("ERR_CHARS", "3000")))
            finally:
                tracing[0] = None
            if result is not None:
                out[name]["results"] = describe(result)
    hooks = sys.modules.get("_dynafold_ops.engine.wake")
    status = {m: s for m, s in (hooks.status() if hooks else {}).items()
              if m.startswith(("flashinfer.gemm", "flashinfer.fused_moe"))}
    status["woken"] = sorted(getattr(hooks, "_ops", {}))
    print("RESULT " + json.dumps({"cases": out, "processes": processes, "status": status,
                                  "module_calls": sorted(set(module_calls)),
                                  "flashinfer": flashinfer.__version__}), flush=True)


main()
