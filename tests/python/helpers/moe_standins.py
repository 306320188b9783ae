"""CPU stand-ins for the fused-MoE kernel modules SGLang's Blackwell MoE backends reach, for
checking them on values (moe_values.py): the trtllm-gen module
(`gen_trtllm_gen_fused_moe_sm100_module`) and the CUTLASS one
(`gen_cutlass_fused_moe_sm100_module`), replaced at their JIT specs as standin_kernels.py
replaces the others. FlashInfer's loaders, declarations, autotuner calls and public functions
stay as shipped.

Each kernel writes what the real one writes (data/csrc/trtllm_fused_moe_kernel_launcher.cu,
fused_moe/cutlass_backend, each release's; docs/op-audit rows): the finalized output of every
token, and the routing results into the caller's top-k buffers where the launcher points the
routing kernel at them. Values are a deterministic function of every input and of each token's
experts and weights; they do not compute the MoE.

The kernels' parameters are read by name from FlashInfer's own call of each kernel in the
release's fused_moe/core.py (the op's `moe_op.<kernel>(...)`, the CUTLASS op's `run_moe(...)`):
the launchers' signatures change between releases (routing_input_mode, per_token_scale,
workspace_buffer...), and the call site is what each release passes them.

Three more stand-ins, for the Blackwell GPU this machine lacks: FlashInfer's compute
capability answers an SM100 for every device (blackwell_standins.py 1; 0.6.x's
`cutlass_fused_moe` asks torch's `get_device_capability`, which answers it too), `torch.cuda.device`
on a CPU tensor's device is no switch (`cutlass_fused_moe` enters it around its kernel call;
on a CPU device torch refuses it), and the cubin loader set-up does nothing (no cubins here).
"""
import ast
import contextlib
import inspect

import torch

import blackwell_standins
import standin_kernels

# -- the kernels' parameter names, from FlashInfer's calls of them -----------------------------

TRTLLM_KERNELS = ("trtllm_fp4_block_scale_moe", "trtllm_fp8_block_scale_moe",
                  "trtllm_fp8_per_tensor_scale_moe", "trtllm_fp8_per_tensor_scale_routed_moe")


def _call_sites(core):
    """{kernel: [argument names]} for each kernel the release's core.py calls with plain names
    (the op body's call; the autotuner runner's own call passes `kwargs[...]` and is not the
    one a call without tuning makes)."""
    sites = {}
    for node in ast.walk(ast.parse(inspect.getsource(core))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name))):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
        if name not in TRTLLM_KERNELS + ("run_moe",):
            continue
        names = [a.id if isinstance(a, ast.Name) else None for a in node.args]
        if isinstance(node.func, ast.Attribute) and not (
                isinstance(node.func.value, ast.Name) and node.func.value.id == "moe_op"):
            continue
        if sum(n is not None for n in names) > sum(n is not None for n in sites.get(name, [])):
            sites[name] = names
    return sites


def _bind(names, args):
    return {n: a for n, a in zip(names, args) if n is not None}


# -- the values ----------------------------------------------------------------------------------


def _sum(t):
    if t is None or not isinstance(t, torch.Tensor) or not t.numel():
        return 0.0
    if t.dtype in (torch.uint8, torch.int8, torch.int32, torch.int64):
        return float(t.to(torch.float64).sum()) * 1e-3
    return float(t.float().sum()) * 1e-3


def _per_expert(t, experts):
    """Each expert's share of a per-expert tensor (weights, scales, per-expert scalars)."""
    if not isinstance(t, torch.Tensor) or t.dim() == 0 or t.shape[0] != experts:
        return torch.full((experts,), _sum(t), dtype=torch.float64)
    view = t.view(torch.uint8) if t.element_size() == 1 else t
    return view.reshape(experts, -1).to(torch.float64).sum(-1) * 1e-4


def _unpack(packed):
    """SGLang's packed routing: (expert id << 16) | the bf16 weight's bits."""
    ids = (packed >> 16).long()
    weights = (packed & 0xFFFF).to(torch.int16).view(torch.bfloat16).float()
    return ids, weights


def _route_logits(logits, top_k, bias):
    scores = logits.float() + (bias.float() if isinstance(bias, torch.Tensor) else 0.0)
    values, ids = scores.topk(top_k, dim=-1)
    return ids, values.softmax(-1)


def _tokens(hidden, scale, tokens):
    """Each token's share of the activations (and their per-token block scales)."""
    view = hidden.view(torch.uint8) if hidden.element_size() == 1 else hidden
    rows = view.reshape(tokens, -1).to(torch.float64).sum(-1) * 1e-3
    if isinstance(scale, torch.Tensor) and scale.numel() and scale.numel() % tokens == 0:
        s = scale.view(torch.uint8) if scale.element_size() == 1 else scale
        # Block scales come token-major ([tokens, hidden/16]) or flattened, or (FP8 block
        # scale) hidden-major [hidden/128, tokens]: the sum over a token's blocks either way.
        s = s.reshape(-1, tokens).t() if s.dim() == 2 and s.shape[-1] == tokens \
            and s.shape[0] != tokens else s.reshape(tokens, -1)
        rows = rows + s.to(torch.float64).sum(-1) * 1e-4
    return rows


def _write_output(output, rows, ids, weights, experts, per_expert_tensors, rest):
    """output[t, j] = the token's share + its experts' shares weighted by its routing weights
    + everything else the kernel reads + the column."""
    expert = sum(_per_expert(t, experts) for t in per_expert_tensors)
    routed = (weights.double() * expert[ids.clamp(0, experts - 1)]).sum(-1)
    cols = torch.arange(output.shape[1], dtype=torch.float64) * 1e-2
    value = (rows + routed)[:, None] + cols[None, :] + sum(_sum(t) for t in rest)
    output.copy_(value.to(output.dtype))


def _routing(a, tokens, top_k):
    """The experts and weights the routing kernel uses, writing the caller's buffers where the
    launcher points it at them (from logits: the packed ids and the weights; packed ids given
    with a weights buffer: the weights)."""
    logits = a.get("routing_logits")
    topk_ids = a.get("topk_ids", a.get("expert_indices"))
    weights_buf = a.get("expert_weights", a.get("topk_weights"))
    has = [isinstance(t, torch.Tensor) and t.dim() == 2 and t.numel() for t in
           (topk_ids, weights_buf)]
    if isinstance(logits, torch.Tensor):
        ids, w = _route_logits(logits, top_k, a.get("routing_bias"))
        if has[0]:
            bits = w.to(torch.bfloat16).view(torch.int16).to(torch.int32) & 0xFFFF
            topk_ids.copy_(((ids.to(torch.int32) << 16) | bits).to(topk_ids.dtype))
        if has[1]:
            weights_buf.copy_(w.to(weights_buf.dtype))
        return ids, w
    # 0.7.x's `routing_input_mode` (flashinfer/tllm_enums.py RoutingInputMode): 0 from
    # logits, 1 packed, 2 unpacked; the releases before it take packed ids only.
    if has[0] and has[1] and a.get("routing_input_mode", 1) == 2:
        # Unpacked (ids, weights) given: both only read.
        return topk_ids.long(), weights_buf.float()
    ids, w = _unpack(topk_ids)
    if has[1]:
        weights_buf.copy_(w.to(weights_buf.dtype))
    return ids, w


def _trtllm_kernel(kernel, names):
    def run(*args):
        a = _bind(names, args)
        hidden = a["hidden_states"]
        tokens = hidden.shape[0]
        top_k, experts = int(a["top_k"]), int(a["local_num_experts" if "local_num_experts"
                                                  in a else "num_local_experts"])
        ids, w = _routing(a, tokens, top_k)
        ids = ids - int(a.get("local_expert_offset", 0))
        output = a["output"]
        fresh = "do_finalize" not in a and kernel != "trtllm_fp4_block_scale_moe"
        if fresh:
            # 0.6.3's FP8 launchers allocate their output and return it (their `output`
            # argument is never written: launcher.cu alloc_tensor in prepare_moe).
            output = torch.empty(tokens, a["hidden_states"].shape[-1], dtype=torch.bfloat16)
        elif "do_finalize" in a and not a["do_finalize"]:
            raise NotImplementedError(f"{kernel}: the unfinalized call has no stand-in")
        per_expert = [a.get(n) for n in (
            "gemm1_weights", "gemm1_weights_scale", "gemm2_weights", "gemm2_weights_scale",
            "output1_scale_scalar", "output1_scale_gate_scalar", "output2_scale_scalar",
            "output1_scales_scalar", "output1_scales_gate_scalar", "output2_scales_scalar",
            "gemm1_bias", "gemm2_bias", "gemm1_alpha", "gemm1_beta", "gemm1_clamp_limit")]
        _write_output(output, _tokens(hidden, a.get("hidden_states_scale"), tokens), ids, w,
                      experts, per_expert, [a.get("per_token_scale")])
        if isinstance(a.get("routing_replay_out"), torch.Tensor):
            a["routing_replay_out"].copy_(ids.to(a["routing_replay_out"].dtype))
        return output if fresh else [output]
    return run


# -- the CUTLASS module: module.init(...) returns the fused MoE runner -------------------------


class _CutlassRunner:
    """The runner `module.init(...)` builds (csrc/fused_moe/cutlass_backend
    flashinfer_cutlass_fused_moe_binding.cu): `run_moe` writes `output` (the routed,
    weighted sum of every token's experts) and, when given, the workspace."""

    def __init__(self, names):
        self.names = names

    def get_tactic_num(self):
        return 1

    def get_gemm1_tactic_count(self):
        return 1

    def get_gemm2_tactic_count(self):
        return 1

    def run_moe(self, *args):
        a = _bind(self.names, args)
        x, output = a["input"], a["output"]
        experts = a["fc2_expert_weights"].shape[0]
        ids = a["token_selected_experts"].long()
        w = a["token_final_scales"].float()
        per_expert = [a.get("fc1_expert_weights"), a.get("fc2_expert_weights"),
                      a.get("fc1_expert_biases"), a.get("fc2_expert_biases"),
                      *a.get("quant_scales", [])]
        _write_output(output, _tokens(x, a.get("input_sf"), x.shape[0]), ids, w, experts,
                      per_expert, [a.get("swiglu_alpha"), a.get("swiglu_beta"),
                                   a.get("swiglu_limit")])
        workspace = a.get("workspace_buffer")
        if isinstance(workspace, torch.Tensor) and workspace.numel():
            workspace.view(-1)[:1].fill_(1)


# -- installing them -------------------------------------------------------------------------


class _Library:
    """A spec's library paths (the loaders hand them to the cubin loader, stood in below)."""

    def get_library_paths(self):
        return []

    def get_library_path(self):
        return ""


def install(core):
    sites = _call_sites(core)
    kernels = {k: _trtllm_kernel(k, sites[k]) for k in TRTLLM_KERNELS if k in sites}
    # The loaders' set-up calls: valid tactics (asked only while tuning) answer the default.
    kernels["trtllm_get_valid_moe_configs"] = lambda *a: [[-1, -1]]
    trtllm = standin_kernels._spec(**kernels)
    runner_names = sites["run_moe"]
    cutlass = standin_kernels._spec(
        init=lambda *a, **k: _CutlassRunner(runner_names),
        set_deepgemm_jit_include_dirs=lambda *a: None)
    for spec in (trtllm, cutlass):
        spec.get_library_paths = _Library().get_library_paths
        spec.get_library_path = _Library().get_library_path
    core.gen_trtllm_gen_fused_moe_sm100_module = lambda *a, **k: trtllm
    core.gen_cutlass_fused_moe_sm100_module = lambda *a, **k: cutlass
    if hasattr(core, "setup_cubin_loader"):
        core.setup_cubin_loader = lambda *a, **k: None
    blackwell_standins._stand_in_capability()
    blackwell_standins._stand_in_device_switch()
    torch.cuda.device = _no_switch
    torch.cuda.get_device_capability = lambda device=None: blackwell_standins.SM100
    return sorted(sites)


def _no_switch(device):
    """`torch.cuda.device(cpu)`: no device switch (torch refuses a CPU device there)."""
    return contextlib.nullcontext()
