"""SGLang 0.5.12's own answer to which model its default path (piecewise CUDA graphs, on by
default) leaves out: its `ModelConfig.is_piecewise_cuda_graph_disabled_model`, read from a
checkpoint's config.json, for GLM-5 and for Llama; and the `disable_piecewise_cuda_graph` that
`ServerArgs._handle_piecewise_cuda_graph` sets from it, with every other argument at its
default. Run by test_sglang0512.py in the 0.5.12 environment; prints one RESULT line.

    python sglang0512_model_config.py

GLM-5's config is its own model type, `glm_moe_dsa` (transformers 5.6.0, 0.5.12's pin, has it),
at transformers' defaults (GLM-5's dims) but for 2 layers; Llama's is tiny.
"""
import dataclasses
import json
import os
import sys

import sglang_standins as standins

CONFIGS = {
    "GlmMoeDsaForCausalLM": {"model_type": "glm_moe_dsa", "num_hidden_layers": 2},
    "LlamaForCausalLM": {"model_type": "llama", "hidden_size": 128, "intermediate_size": 256,
                         "num_attention_heads": 4, "num_key_value_heads": 2,
                         "num_hidden_layers": 2, "vocab_size": 512},
}


def server_args(model_path):
    """ServerArgs at its field defaults (its __post_init__ probes the GPU) for `model_path`."""
    from sglang.srt.server_args import ServerArgs

    values = {}
    for f in dataclasses.fields(ServerArgs):
        if f.default is not dataclasses.MISSING:
            values[f.name] = f.default
        elif f.default_factory is not dataclasses.MISSING:
            values[f.name] = f.default_factory()
    args = object.__new__(ServerArgs)
    args.__dict__.update(values, model_path=model_path)
    return args


def main():
    # -- stand-in 1 of helpers/sglang_piecewise.py: IPython.display (sglang/utils.py imports it)
    standins.ipython_display()
    from sglang.srt.configs.model_config import ModelConfig

    result = {}
    for arch, fields in CONFIGS.items():
        folder = os.path.abspath(arch)
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, "config.json"), "w") as f:
            json.dump({**fields, "architectures": [arch], "torch_dtype": "bfloat16"}, f)
        config = ModelConfig(model_path=folder)
        args = server_args(folder)
        default = args.disable_piecewise_cuda_graph
        args._handle_piecewise_cuda_graph()
        result[arch] = {"model_type": config.hf_config.model_type,
                        "disabled_model": config.is_piecewise_cuda_graph_disabled_model,
                        "disable_default": default,
                        "disable_piecewise_cuda_graph": args.disable_piecewise_cuda_graph}
    import sglang

    result["sglang"] = sglang.__version__
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    sys.exit(main())
