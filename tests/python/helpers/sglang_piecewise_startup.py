"""SGLang's piecewise start-up over its own model classes, and what it is measured by (see
helpers/sglang_piecewise.py, which imports this module once SGLang's stand-ins are in place).
"""
import contextlib
import dataclasses
import glob
import json
import os
import sys
import tempfile
import time
import traceback
import types

import torch
import torch.distributed
from torch._dynamo.utils import counters
from transformers import LlamaConfig

import flashinfer
from sglang.srt.compilation.compilation_counter import compilation_counter
from sglang.srt.compilation.piecewise_context_manager import (
    enable_piecewise_cuda_graph,
    enable_piecewise_cuda_graph_compile,
    set_forward_context,
)
from sglang.srt.distributed import parallel_state
from sglang.srt.layers import dp_attention
from sglang.srt.layers.attention.torch_native_backend import TorchNativeAttnBackend
from sglang.srt.layers.quantization import modelopt_quant
from sglang.srt.mem_cache.memory_pool import MHATokenToKVPool, ReqToTokenPool
from sglang.srt.model_executor import piecewise_cuda_graph_runner as pcg
from sglang.srt.model_executor.forward_batch_info import (
    CaptureHiddenMode,
    ForwardBatch,
    ForwardMode,
)
from sglang.srt.model_executor.model_runner import ModelRunner
from sglang.srt.model_loader.utils import set_default_torch_dtype
from sglang.srt.models.llama import LlamaForCausalLM
from sglang.srt.server_args import ServerArgs, set_global_server_args_for_scheduler
from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

import sglang_standins as standins
from process_log import ProcessLog

SIZES = [4, 8, 16]

# -- the model: SGLang's LlamaForCausalLM with a ModelOpt NVFP4 checkpoint config, or bf16 ------
HF_CONFIG = dict(hidden_size=128, intermediate_size=256, num_attention_heads=4,
                 num_key_value_heads=2, head_dim=32, num_hidden_layers=2, vocab_size=512,
                 max_position_embeddings=256, rms_norm_eps=1e-5, rope_theta=10000.0,
                 torch_dtype="bfloat16")
# A ModelOpt NVFP4 checkpoint's `quantization_config` (config.json, the flat format).
QUANT_CONFIG = {"quant_method": "modelopt", "quant_algo": "NVFP4", "group_size": 16,
                "ignore": ["lm_head"], "kv_cache_scheme": None}
# The operators counted in SGLang's dumped graph.
COUNTED_OPS = ("dynafold_flashinfer", "sglang.fp4_gemm", "sglang.unified_attention_with_output",
               "sglang.moe_forward_piecewise_cuda_graph_impl", "sgl_kernel.scaled_fp4_quant",
               "sglang.flashinfer_fp4_quantize", "flashinfer")


def server_args(release, quantized):
    """ServerArgs with its field defaults (its __post_init__ resolves a model from disk) and the
    flags that reach the piecewise runner on this CPU."""
    values = {}
    for f in dataclasses.fields(ServerArgs):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    args = object.__new__(ServerArgs)
    args.__dict__.update(values)
    args.__dict__.update(model_path="dynafold-tiny-llama-nvfp4", device="cpu",
                         quantization="modelopt_fp4" if quantized else None,
                         attention_backend="torch_native", piecewise_cuda_graph_tokens=SIZES,
                         piecewise_cuda_graph_compiler="eager", disable_cuda_graph=True,
                         **release.server_flags)
    return args


def model_config(hf_config):
    """The fields of SGLang's ModelConfig that the code driven here reads."""
    return types.SimpleNamespace(hf_config=hf_config, hidden_size=hf_config.hidden_size,
                                 num_hidden_layers=hf_config.num_hidden_layers,
                                 dtype=torch.bfloat16)


def init_parallel(args, hf_config, config=None):
    init = f"file://{tempfile.mktemp(prefix='dynafold-gloo-')}"
    parallel_state.init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                                distributed_init_method=init, backend="gloo")
    parallel_state.initialize_model_parallel(1, 1, 1)
    dp_attention.initialize_dp_attention(args, config or model_config(hf_config))


def build_model(model_class, hf_config, quantized):
    # As SGLang's get_quant_config reads it, with the model class's packed modules.
    quant = modelopt_quant.ModelOptFp4Config.from_config(
        {**QUANT_CONFIG, "packed_modules_mapping": getattr(model_class, "packed_modules_mapping", {})}
    ) if quantized else None
    g = torch.Generator().manual_seed(0)
    # -- stand-in 7: scales SGLang moves with .cuda() (the MoE method's at construction, the
    # linear method's while processing the weights) stay on the CPU.
    with standins.cuda_stays_on_cpu():
        # As SGLang's loader builds it: parameters in the checkpoint's dtype.
        with set_default_torch_dtype(torch.bfloat16), torch.device("cpu"):
            model = model_class(hf_config, quant_config=quant)
        _random_weights(model, g)
        for module in model.modules():
            method = getattr(module, "quant_method", None)
            if method is not None and hasattr(method, "process_weights_after_loading"):
                method.process_weights_after_loading(module)
    return model


def _random_weights(model, g):
    for name, p in model.named_parameters():
        if p.dtype == torch.uint8:  # packed E2M1 weights
            p.data.copy_(torch.randint(0, 256, p.shape, generator=g, dtype=torch.uint8))
        elif p.dtype == torch.float8_e4m3fn:  # block scales
            p.data.copy_((torch.rand(p.shape, generator=g) * 0.02 + 0.005).to(p.dtype))
        elif "input_scale" in name:  # per-tensor activation scales (linear and experts)
            p.data.fill_(0.02)
        elif "weight_scale_2" in name or name.endswith((".k_scale", ".v_scale")):
            p.data.fill_(1.0)
        elif "norm" in name:
            p.data.copy_((torch.rand(p.shape, generator=g) + 0.5).to(p.dtype))
        elif p.is_floating_point():
            p.data.copy_((torch.randn(p.shape, generator=g) * 0.05).to(p.dtype))


def model_runner(args, hf_config, model):
    """A ModelRunner as SGLang's own __init__ leaves it on this machine, with what
    init_piecewise_cuda_graphs and the piecewise runner read (its __init__ loads a checkpoint
    and sizes GPU memory pools)."""
    runner = object.__new__(ModelRunner)
    layers = hf_config.num_hidden_layers
    kv_heads, head_dim = hf_config.num_key_value_heads, hf_config.head_dim
    runner.__dict__.update(
        server_args=args, model=model, device="cpu", gpu_id=0, dtype=torch.bfloat16,
        model_config=model_config(hf_config),
        tp_group=parallel_state.get_tp_group(), tp_size=1, pp_size=1, dp_size=1,
        is_draft_worker=False, is_multimodal=False, is_hybrid_swa=False, is_generation=True,
        spec_algorithm=SpeculativeAlgorithm.NONE,
        req_to_token_pool=ReqToTokenPool(size=4, max_context_len=64, device="cpu",
                                         enable_memory_saver=False),
        token_to_kv_pool=MHATokenToKVPool(256, page_size=1, dtype=torch.bfloat16,
                                          head_num=kv_heads, head_dim=head_dim,
                                          layer_num=layers, device="cpu",
                                          enable_memory_saver=False))
    runner.attn_backend = TorchNativeAttnBackend(runner)
    return runner


def forward_batch(runner, tokens):
    """An EXTEND batch of one request of `tokens` token ids, its KV cache at slots 1..n."""
    n = tokens.numel()
    slots = torch.arange(1, n + 1)
    runner.req_to_token_pool.req_to_token[0, :n] = slots.to(runner.req_to_token_pool.req_to_token.dtype)
    batch = ForwardBatch(
        forward_mode=ForwardMode.EXTEND, batch_size=1, input_ids=tokens,
        req_pool_indices=torch.tensor([0]), seq_lens=torch.tensor([n]),
        orig_seq_lens=torch.tensor([n]), seq_lens_cpu=torch.tensor([n]),
        req_to_token_pool=runner.req_to_token_pool, token_to_kv_pool=runner.token_to_kv_pool,
        attn_backend=runner.attn_backend, out_cache_loc=slots, seq_lens_sum=n,
        return_logprob=False, extend_num_tokens=n, extend_seq_lens=torch.tensor([n]),
        extend_prefix_lens=torch.tensor([0]), extend_start_loc=torch.tensor([0]),
        extend_prefix_lens_cpu=torch.tensor([0]), extend_seq_lens_cpu=torch.tensor([n]),
        extend_logprob_start_lens_cpu=torch.tensor([n]), positions=torch.arange(n),
        capture_hidden_mode=CaptureHiddenMode.NULL, global_forward_mode=ForwardMode.EXTEND)
    runner.attn_backend.init_forward_metadata(batch)
    return batch


def set_compiled(release):
    """Where the release needs it, SGLang's switch that routes the forward to its compiled
    version."""
    if not release.set_compiled:
        return contextlib.nullcontext()
    from sglang.srt.compilation.compile import set_compiled

    return set_compiled(True)


@contextlib.contextmanager
def compiled_forward(release):
    """What capture's first (warm-up) pass runs the forward in: the compiled forward, its pieces
    called through CUDAPiecewiseBackend without a CUDA graph."""
    with enable_piecewise_cuda_graph(), set_compiled(release), enable_piecewise_cuda_graph_compile():
        yield


def logits(release, runner, tokens, compiled):
    batch = forward_batch(runner, tokens)
    if not compiled:
        return runner.model.forward(batch.input_ids, batch.positions, batch).next_token_logits
    pr = runner.piecewise_cuda_graph_runner
    with compiled_forward(release):
        with set_forward_context(batch, pr.attention_layers, pr.quant_config, pr.moe_layers,
                                 pr.moe_fusions):
            return runner.model.forward(batch.input_ids, batch.positions, batch).next_token_logits


def llama_case(release, arch, args, quantized, facts):
    """SGLang's LlamaForCausalLM through ModelRunner.init_piecewise_cuda_graphs. Returns the
    compile step, the sizes capture() was asked for, and (compiled, eager) outputs per size."""
    hf_config = LlamaConfig(**HF_CONFIG)
    init_parallel(args, hf_config)
    model = build_model(LlamaForCausalLM, hf_config, quantized)
    runner = model_runner(args, hf_config, model)
    g = torch.Generator().manual_seed(1)
    prompts = {n: torch.randint(0, hf_config.vocab_size, (n,), generator=g) for n in SIZES + [5]}
    captured = []
    pcg.PiecewiseCudaGraphRunner.capture = lambda self: captured.extend(reversed(self.capture_num_tokens))
    # The decode graph runner's eager forwards, before the piecewise runner on CUDA.
    logits(release, runner, prompts[SIZES[0]], compiled=False)

    def compile_step():
        runner.init_piecewise_cuda_graphs()
        assert runner.piecewise_cuda_graph_runner is not None, "SGLang declined piecewise graphs"

    def outputs():
        return {n: (logits(release, runner, t, compiled=True),
                    logits(release, runner, t, compiled=False))
                for n, t in prompts.items()}
    return compile_step, captured, outputs


# GLM-5 (GlmMoeDsaForCausalLM, a DeepseekV2ForCausalLM with DeepSeek sparse attention), tiny:
# layer 0 dense, layer 1 MoE (sigmoid scores, grouped top-k with correction bias, one shared
# expert), the DSA indexer's dims. rope_scaling: SGLang's CPU rope for DeepSeek asks for one.
GLM5_CONFIG = dict(hidden_size=256, intermediate_size=512, moe_intermediate_size=128,
                   num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4,
                   n_routed_experts=8, n_shared_experts=1, num_experts_per_tok=2, n_group=1,
                   topk_group=1, first_k_dense_replace=1, q_lora_rank=64, kv_lora_rank=64,
                   qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32, vocab_size=512,
                   max_position_embeddings=256, rope_theta=10000.0, torch_dtype="bfloat16",
                   architectures=["GlmMoeDsaForCausalLM"],
                   rope_scaling={"type": "yarn", "rope_type": "yarn", "factor": 1.0,
                                 "original_max_position_embeddings": 256, "beta_fast": 32,
                                 "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0})
GLM5_EXTRA = dict(index_topk=64, index_n_heads=4, index_head_dim=64, moe_layer_freq=1,
                  scoring_func="sigmoid", topk_method="noaux_tc", norm_topk_prob=True,
                  routed_scaling_factor=2.5)


def glm5_moe_case(release, arch, args, quantized, facts):
    """GLM-5's MoE layer alone (the whole forward's trace stops in the DSA indexer before it, and
    its DSA attention has no CPU path to run eagerly): SGLang's DeepseekV2MoE of a
    GlmMoeDsaForCausalLM, compiled as the piecewise runner compiles the model (see
    helpers/sglang_piecewise.py)."""
    from sglang.srt.compilation.compilation_config import CompilationConfig
    from sglang.srt.compilation.compile import install_torch_compiled
    from sglang.srt.layers.moe import initialize_moe_config
    from sglang.srt.models.glm4_moe import GlmMoeDsaForCausalLM
    from transformers import DeepseekV3Config

    args.moe_runner_backend = "flashinfer_cutlass"
    initialize_moe_config(args)
    hf_config = DeepseekV3Config(**GLM5_CONFIG)
    for key, value in GLM5_EXTRA.items():
        setattr(hf_config, key, value)
    init_parallel(args, hf_config)
    model = build_model(GlmMoeDsaForCausalLM, hf_config, quantized)
    moe = model.model.layers[1].mlp
    # -- stand-in 10: FlashInfer's fused MoE as SGLang's MoE method calls it.
    modelopt_quant.flashinfer_cutlass_fused_moe = standins.cutlass_fused_moe_cpu
    # -- stand-in 11: the CPU key of SGLang's MoE operator calls SGLang's own (CUDA key).
    standins.sglang_cuda_kernel_on_cpu("moe_forward_piecewise_cuda_graph_impl")
    g = torch.Generator().manual_seed(1)
    hidden = {n: torch.randn(n, hf_config.hidden_size, generator=g).to(torch.bfloat16)
              for n in SIZES + [5]}
    # What set_forward_context receives from the runner: the MoE layers by layer id.
    context = dict(attention_layers=[], quant_config=model.quant_config,
                   moe_layers=[None, moe.experts], moe_fusions=[None, moe])
    moe(hidden[SIZES[0]])  # the eager forwards before the piecewise runner
    captured = []

    def run(x):
        with set_forward_context(None, **context):
            return moe(x)

    def compile_step():
        config = CompilationConfig(SIZES, args.piecewise_cuda_graph_compiler)
        with enable_piecewise_cuda_graph():
            install_torch_compiled(moe, fullgraph=True, compile_config=config,
                                   graph_pool=torch.cuda.graph_pool_handle())
            with set_compiled(release), enable_piecewise_cuda_graph_compile():
                for n in reversed(SIZES):
                    run(hidden[n])
        captured.extend(reversed(SIZES))

    def outputs():
        result = {}
        for n, x in hidden.items():
            with compiled_forward(release):
                compiled = run(x)
            result[n] = (compiled, moe(x))
        return result
    return compile_step, captured, outputs


def glm5_case(*args):
    import sglang_glm5  # it builds on this module's helpers

    return sglang_glm5.glm5_case(*args)


CASES = {"llama": llama_case, "glm5-moe": glm5_moe_case, "glm5": glm5_case}


def graph_ops(result):
    """The operators in the split graph SGLangBackend wrote to
    $SGLANG_CACHE_DIR/torch_compile_cache/<hash>/rank_0_0/backbone/computation_graph_*.py."""
    dumped = sorted(glob.glob(os.path.join(os.environ["SGLANG_CACHE_DIR"], "torch_compile_cache",
                                           "**", "computation_graph_*.py"), recursive=True))
    result["dumped_graphs"] = len(dumped)
    # The graph's code lines (its comments quote the traced source, which names ops too).
    code = [line for path in dumped for line in open(path).read().splitlines()
            if "torch.ops." in line and not line.lstrip().startswith("#")]
    result["graph_ops"] = sorted({line.split("torch.ops.", 1)[1].split("(", 1)[0].strip()
                                  for line in code})
    result["graph_op_counts"] = {op: sum(line.count("torch.ops." + op) for line in code)
                                 for op in COUNTED_OPS}


@contextlib.contextmanager
def traced_ops(names):
    """Records the operators Dynamo puts into the graph it traces (the call_function targets of
    SubgraphTracer.create_proxy, in order), so a trace that stops before SGLang's backend gets
    a graph still says which operators it got through. An observer: Dynamo's own create_proxy
    does the work and its result is returned as it is."""
    from torch._dynamo.output_graph import SubgraphTracer

    create_proxy = SubgraphTracer.create_proxy

    def observed(self, kind, target, *args, **kwargs):
        if kind == "call_function" and isinstance(target, (torch._ops.OpOverload,
                                                           torch._ops.OpOverloadPacket)):
            names.append(str(target))
        return create_proxy(self, kind, target, *args, **kwargs)

    SubgraphTracer.create_proxy = observed
    try:
        yield
    finally:
        SubgraphTracer.create_proxy = create_proxy


def main(release, arch, model, built, imported_s):
    # -- stand-in 5: the CPU kernel of SGLang's fp4 GEMM
    standins.sglang_fp4_gemm()
    # -- stand-in 6: the CPU key of SGLang's CUDA-only operators
    for name in release.cuda_only_ops:
        if hasattr(torch.ops.sglang, name):
            standins.sglang_cuda_kernel_on_cpu(name)
    processes = ProcessLog()
    case, quantized = release.models[model]
    args = server_args(release, quantized)
    set_global_server_args_for_scheduler(args)
    result = {"arch": arch, "model": model,
              "fp4_quantize": f"{modelopt_quant.fp4_quantize.__module__}."
                              f"{modelopt_quant.fp4_quantize.__name__}"}
    with torch.no_grad():
        compile_step, captured, outputs = CASES[case](release, arch, args, quantized, result)
        counters.clear()
        before = compilation_counter.clone()
        processes.active = True
        started = time.monotonic()
        traced = []
        try:
            with traced_ops(traced):
                compile_step()
            result["ok"] = True
        except Exception as e:
            result.update(ok=False, error=f"{type(e).__name__}: {e}"[:8000],
                          traceback=traceback.format_exc()[-4000:])
        finally:
            processes.active = False
            result["compile_s"] = round(time.monotonic() - started, 1)
            result["graph_breaks"] = sum(counters["graph_break"].values())
            result["graph_break_reasons"] = list(counters["graph_break"])[:5]
            result["counter"] = {k: getattr(compilation_counter, k) - getattr(before, k)
                                 for k in vars(compilation_counter)}
            result["processes_while_compiling"] = list(processes.commands)
            result["captured_sizes"] = captured
            # The counted operators Dynamo traced, in order, whether or not the trace finished.
            result["traced_ops"] = [name for name in traced if name.startswith(COUNTED_OPS)]
        if result["ok"]:
            diffs, equal, spread = {}, {}, {}
            for n, (compiled, eager) in outputs().items():
                equal[n] = bool(torch.equal(compiled, eager))
                diffs[n] = float((compiled.float() - eager.float()).abs().max())
                spread[n] = float(eager.float().std())
            result.update(equal_to_eager=equal, max_abs_diff=diffs, output_std=spread)
    graph_ops(result)
    result.update(dynafold=bool(sys.meta_path and type(sys.meta_path[0]).__name__ == "DynafoldFinder"),
                  python=sys.version.split()[0], torch=torch.__version__,
                  flashinfer=flashinfer.__version__, sglang=__import__("sglang").__version__,
                  import_s=round(imported_s, 1), built=list(built))
    print("RESULT " + json.dumps(result), flush=True)
    torch.distributed.destroy_process_group()
