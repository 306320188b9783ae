"""Compiled equals eager, on values, for the MoE entry points SGLang's Blackwell backends call
(flashinfer_trtllm: NVFP4 from logits and routed, FP8 block-scale and per-tensor;
flashinfer_cutlass: NVFP4): FlashInfer's public functions, declarations and loaders as shipped,
the kernel modules stood in by CPU functions that write what the kernels write
(moe_standins.py), SGLang's call compiled with inductor and `fullgraph=True`.

Each call is made as the SGLang release that pins this FlashInfer release makes it (SGLang
0.5.9 pins 0.6.3, 0.5.12 pins 0.6.11.post1, 0.5.23 pins 0.7.2; 0.7.4 gets 0.5.23's), each
file:line in tests/python/test_moe_values.py. An entry point the pinned SGLang does not call is
made as SGLang 0.5.23 makes it where this release takes those arguments; otherwise it is
reported skipped, with the reason. SGLang 0.5.12 and 0.5.23 wrap their FP8 calls in operators
of their own (layers/moe/flashinfer_trtllm_moe.py); here the wrappers' bodies, the FlashInfer
calls, are what is compiled, as a caller that does not wrap them has Dynamo trace them.

Two variants each: SGLang's output buffer made inside the compiled function (as SGLang's
runner allocates it) and given by the caller (an argument, whose state after the call is
compared too). Prints one JSON line: per case, whether it compiled, whether the results and
arguments equal eager's, the graph's FlashInfer operators; skipped cases with the reason;
dynafold's status for the MoE module (woken declarations, first-run checks)."""
import inspect
import json
import sys

import torch
from torch._inductor.compile_fx import compile_fx

import flashinfer
from flashinfer import fused_moe
from flashinfer.fused_moe import core

import moe_standins
from value_compare import clone, same

KERNELS = moe_standins.install(core)
RELEASE = flashinfer.__version__
PINNED_BY = {"0.6.3": "0.5.9", "0.6.11.post1": "0.5.12"}
SGLANG = PINNED_BY.get(RELEASE, "0.5.23")

# Tokens, hidden, intermediate, experts, top-k (trtllm-gen tile multiples; small).
M, H, I, E, TOP_K = 4, 256, 256, 8, 2  # noqa: E741  (I: intermediate)
G = torch.Generator().manual_seed(0)


def _bytes(*shape, dtype):
    return torch.randint(0, 255, shape, generator=G, dtype=torch.uint8).view(dtype)


def _fp8(*shape):
    return (torch.randn(*shape, generator=G) * 4).to(torch.float8_e4m3fn)


def _f32(*shape):
    return torch.rand(*shape, generator=G) + 0.5


def _routed_ids():
    """SGLang's packed routing (`_pack_topk_for_flashinfer_routed`): distinct experts per token,
    the bf16 weight in the low 16 bits."""
    ids = torch.stack([torch.randperm(E, generator=G)[:TOP_K] for _ in range(M)]).int()
    w = torch.rand(M, TOP_K, generator=G).to(torch.bfloat16).view(torch.int16).int() & 0xFFFF
    return (ids << 16) | w


def _accepts(fn, kwargs):
    params = inspect.signature(fn).parameters
    return [k for k in kwargs if k not in params]


# -- the calls ---------------------------------------------------------------------------------


def _fp4_weights(form):
    """NVFP4 experts after SGLang's process_weights_after_loading, and the activations after its
    fp4 quantize (linear scale layout)."""
    w = dict(
        hidden_states=_bytes(M, H // 2, dtype=torch.uint8),
        hidden_states_scale=_bytes(M, H // 16, dtype=torch.float8_e4m3fn),
        gemm1_weights=_bytes(E, 2 * I, H // 2, dtype=torch.uint8),
        gemm1_weights_scale=_bytes(E, 2 * I, H // 16, dtype=torch.float8_e4m3fn),
        gemm1_bias=None, gemm1_alpha=None, gemm1_beta=None, gemm1_clamp_limit=None,
        gemm2_weights=_bytes(E, H, I // 2, dtype=torch.uint8),
        gemm2_weights_scale=_bytes(E, H, I // 16, dtype=torch.float8_e4m3fn),
        gemm2_bias=None, output1_scale_scalar=_f32(E), output1_scale_gate_scalar=_f32(E),
        output2_scale_scalar=_f32(E), num_experts=E, intermediate_size=I,
        local_expert_offset=0, local_num_experts=E, do_finalize=True,
        tune_max_num_tokens=M)
    if form == "0.5.9":
        # flashinfer_trtllm.py:443: the scales flattened, `tile_tokens_dim=None`, no
        # activation type nor PDL choice.
        w["hidden_states_scale"] = w["hidden_states_scale"].flatten()
        w["tile_tokens_dim"] = None
    else:
        w["activation_type"] = 3  # Swiglu
    if form == "0.5.23":
        w.update(per_token_scale=None, enable_pdl=False)
    return w


def fp4_moe(form):
    """trtllm_fp4_block_scale_moe, routing from the router's logits, finalized into SGLang's
    output buffer; SGLang takes `[0]`."""
    kwargs = _fp4_weights(form)
    kwargs.update(routing_bias=None, top_k=TOP_K, n_group=None, topk_group=None,
                  routed_scaling_factor=None, routing_method_type=1)  # Renormalize
    return fused_moe.trtllm_fp4_block_scale_moe, kwargs, \
        {"routing_logits": torch.randn(M, E, generator=G)}, "list"


def fp4_routed_moe(form):
    """trtllm_fp4_block_scale_routed_moe, SGLang's packed top-k ids, finalized."""
    kwargs = _fp4_weights(form)
    kwargs.update(routing_bias=None, top_k=TOP_K, n_group=0, topk_group=0,
                  routed_scaling_factor=None, routing_method_type=1)
    return fused_moe.trtllm_fp4_block_scale_routed_moe, kwargs, {"topk_ids": _routed_ids()}, \
        "list"


def cutlass_fp4(form):
    """cutlass_fused_moe, NVFP4 experts, bf16 activations quantized by the kernel, into
    SGLang's output buffer; SGLang takes `[0]`."""
    kwargs = dict(
        token_selected_experts=torch.stack(
            [torch.randperm(E, generator=G)[:TOP_K] for _ in range(M)]).int(),
        token_final_scales=torch.rand(M, TOP_K, generator=G),
        fc1_expert_weights=_bytes(E, 2 * I, H // 2, dtype=torch.uint8).view(torch.long),
        fc2_expert_weights=_bytes(E, H, I // 2, dtype=torch.uint8).view(torch.long),
        output_dtype=torch.bfloat16, input_sf=None,
        quant_scales=[_f32(1), _bytes(E, 2 * I, H // 16, dtype=torch.uint8).view(torch.int32),
                      _f32(E), _f32(1), _bytes(E, H, I // 16, dtype=torch.uint8).view(torch.int32),
                      _f32(E)],
        ep_size=1, ep_rank=0, tp_size=1, tp_rank=0, tune_max_num_tokens=M,
        activation_type=fused_moe.ActivationType.Swiglu, enable_alltoall=False)
    if form == "0.5.23":
        kwargs.update(swiglu_alpha=None, swiglu_beta=None, swiglu_limit=None,
                      use_fused_finalize=True)
    return fused_moe.cutlass_fused_moe, kwargs, \
        {"input": torch.randn(M, H, generator=G).to(torch.bfloat16)}, "list"


def fp8_block_scale_moe(form):
    """trtllm_fp8_block_scale_moe (DeepSeek FP8: 128-blocks), routing from logits. 0.5.23 gives
    its output buffer (`..._out_wrapper`) and reads the buffer; 0.5.9 and 0.5.12 take the
    result (0.5.12 then copies it into its buffer)."""
    kwargs = dict(
        routing_bias=None, hidden_states=_fp8(M, H), hidden_states_scale=_f32(H // 128, M),
        gemm1_weights=_fp8(E, 2 * I, H), gemm1_weights_scale=_f32(E, 2 * I // 128, H // 128),
        gemm2_weights=_fp8(E, H, I), gemm2_weights_scale=_f32(E, H // 128, I // 128),
        num_experts=E, top_k=TOP_K, n_group=0 if form == "0.5.9" else None,
        topk_group=0 if form == "0.5.9" else None, intermediate_size=I,
        local_expert_offset=0, local_num_experts=E, routed_scaling_factor=1.0,
        routing_method_type=1, use_shuffled_weight=False, tune_max_num_tokens=M)
    if form == "0.5.23":
        kwargs.update(gemm1_alpha=None, gemm1_beta=None, gemm1_clamp_limit=None,
                      weight_layout=0, enable_pdl=None,
                      fp8_quantization_type=fused_moe.Fp8QuantizationType.DeepSeekFp8)
        returns = "buffer"
    elif form == "0.5.12":
        kwargs.update(weight_layout=0, enable_pdl=None,
                      fp8_quantization_type=fused_moe.Fp8QuantizationType.DeepSeekFp8)
        returns = "copy"
    else:
        returns = "result"
    return fused_moe.trtllm_fp8_block_scale_moe, kwargs, \
        {"routing_logits": torch.randn(M, E, generator=G).to(torch.bfloat16)}, returns


def fp8_per_tensor_scale_moe(form):
    """trtllm_fp8_per_tensor_scale_moe, routing from bf16 logits; SGLang copies the result into
    its buffer (0.5.12, 0.5.23) or takes it (0.5.9)."""
    kwargs = dict(
        routing_bias=None, hidden_states=_fp8(M, H), gemm1_weights=_fp8(E, 2 * I, H),
        output1_scales_scalar=_f32(E), output1_scales_gate_scalar=_f32(E),
        gemm2_weights=_fp8(E, H, I), output2_scales_scalar=_f32(E), num_experts=E,
        top_k=TOP_K, n_group=0 if form == "0.5.9" else None,
        topk_group=0 if form == "0.5.9" else None, intermediate_size=I,
        local_expert_offset=0, local_num_experts=E, routed_scaling_factor=1.0,
        use_routing_scales_on_input=False, routing_method_type=1, tune_max_num_tokens=M)
    if form != "0.5.9":
        kwargs["enable_pdl"] = None
    return fused_moe.trtllm_fp8_per_tensor_scale_moe, kwargs, \
        {"routing_logits": torch.randn(M, E, generator=G).to(torch.bfloat16)}, \
        "result" if form == "0.5.9" else "copy"


ENTRY_POINTS = {"trtllm_fp4_block_scale_moe": fp4_moe,
                "trtllm_fp4_block_scale_routed_moe": fp4_routed_moe,
                "cutlass_fused_moe": cutlass_fp4,
                "trtllm_fp8_block_scale_moe": fp8_block_scale_moe,
                "trtllm_fp8_per_tensor_scale_moe": fp8_per_tensor_scale_moe}
# What each SGLang release calls (the rest is made as 0.5.23 makes it, or skipped).
CALLED = {"0.5.9": {"trtllm_fp4_block_scale_moe", "cutlass_fused_moe",
                    "trtllm_fp8_block_scale_moe", "trtllm_fp8_per_tensor_scale_moe"},
          "0.5.12": set(ENTRY_POINTS), "0.5.23": set(ENTRY_POINTS)}


def sglang_call(public, kwargs, returns, buffer_given):
    """The function SGLang's runner is, around FlashInfer's call: (fn, its own argument names).
    `returns`: "list" (SGLang passes `output=` and takes `[0]`), "buffer" (passes `output=` and
    reads the buffer), "copy" (copies the result into its buffer), "result" (takes it)."""
    gives_output = returns in ("list", "buffer")

    def fn(inputs, output=None):
        if output is None:
            output = torch.empty(M, H, dtype=torch.bfloat16)
        call = dict(kwargs, **inputs)
        if gives_output:
            call["output"] = output
        result = public(**call)
        if returns == "list":
            return result[0]
        if returns == "buffer":
            return output
        if returns == "copy":
            output.copy_(result)
            return output
        return result
    return fn


# -- compiled against eager --------------------------------------------------------------------


def compare(fn, inputs, buffer_given):
    """Eager and compiled on fresh copies of the same arguments: results, argument states, the
    graph's call targets."""
    def args():
        a = [clone(inputs)]
        if buffer_given:
            a.append(torch.full((M, H), -7.0, dtype=torch.bfloat16))
        return a

    eager_args = args()
    try:
        eager = fn(*eager_args)
    except Exception as e:
        return {"ok": False, "error": f"eager: {type(e).__name__}: {e}"[:3000]}
    targets = []

    def backend(gm, example_inputs):
        targets.extend(str(n.target) for n in gm.graph.nodes if n.op == "call_function")
        return compile_fx(gm, example_inputs)

    compiled_args = args()
    torch._dynamo.reset()
    try:
        got = torch.compile(fn, fullgraph=True, backend=backend)(*compiled_args)
    except Exception as e:
        return {"ok": False, "error": f"{type(e).__name__}: {e}"[:3000],
                "operators": [t for t in targets if "flashinfer" in t]}
    out = {"ok": True, "results_equal": same(eager, got),
           "arguments_equal": same(eager_args, compiled_args),
           "operators": [t for t in targets if "flashinfer" in t],
           # The stand-in wrote every row (a kernel that never ran leaves the -7 or empty).
           "written": bool(isinstance(eager, torch.Tensor) and (eager != -7).all())}
    if not (out["results_equal"] and out["arguments_equal"]):
        out.update(eager=_show(eager), compiled=_show(got))
    return out


def _show(x):
    if isinstance(x, torch.Tensor):
        return [list(x.shape), str(x.dtype), x.float().reshape(-1)[:4].tolist()]
    if isinstance(x, (list, tuple)):
        return [_show(v) for v in x]
    return repr(x)[:200]


def _form(name, make):
    """The SGLang call this release is checked with: the pinned SGLang's, else the newest
    that calls the entry point and fits this release's signature; or why none does."""
    notes = []
    for form in (SGLANG, *[f for f in ("0.5.23", "0.5.12", "0.5.9") if f != SGLANG]):
        if name not in CALLED[form]:
            notes.append(f"SGLang {form} does not call it")
            continue
        public, kwargs, inputs, returns = make(form)
        missing = _accepts(public, {**kwargs, **inputs})
        if missing:
            notes.append(f"SGLang {form}'s call passes {missing}, which FlashInfer "
                         f"{RELEASE}'s lacks")
            continue
        return form, (public, kwargs, inputs, returns), notes
    return None, None, notes


def main():
    cases, skipped, notes = {}, {}, {}
    for name, make in ENTRY_POINTS.items():
        if getattr(fused_moe, name, None) is None:
            skipped[name] = f"FlashInfer {RELEASE} has no fused_moe.{name}"
            continue
        form, call, notes[name] = _form(name, make)
        if form is None:
            skipped[name] = "; ".join(notes[name])
            continue
        public, kwargs, inputs, returns = call
        try:
            # FlashInfer's own Python as shipped, eagerly: a call it refuses is no case.
            sglang_call(public, kwargs, returns, False)(clone(inputs))
        except Exception as e:
            skipped[name] = (f"SGLang {form}'s call raises eagerly on FlashInfer {RELEASE}: "
                             f"{type(e).__name__}: {e}")
            continue
        # SGLang 0.5.9's FP8 calls take FlashInfer's result and hold no buffer of their own.
        for buffer_given in (False,) if returns == "result" else (False, True):
            case = f"{name}/{'caller_buffer' if buffer_given else 'sglang_buffer'}"
            fn = sglang_call(public, kwargs, returns, buffer_given)
            cases[case] = dict(compare(fn, inputs, buffer_given), form=form, returns=returns)
    ops = sys.modules.get("_dynafold_ops.engine.wake")
    status = ops.status() if ops is not None else {}
    print("RESULT " + json.dumps({
        "flashinfer": RELEASE, "sglang": SGLANG, "cases": cases, "skipped": skipped,
        "forms_passed_over": {k: v for k, v in notes.items() if v},
        "kernels": KERNELS, "core": status.get("flashinfer.fused_moe.core", {}),
        "checks": status.get("fake checks", {}),
        "never_checked": status.get("never checked", {})}), flush=True)


main()
