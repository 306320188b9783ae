"""Makes what a real SGLang 0.5.23 server needs to start on this GPU-less machine, in OUT:

    OUT/model/        a random LlamaForCausalLM (2 layers, hidden 64, 4 heads, 2 KV heads,
                      bf16, `save_pretrained`) and a byte-level BPE tokenizer trained here with
                      `tokenizers` (no network), saved beside it with `save_pretrained`;
    OUT/standin/      the stand-in `sgl_kernel` package (below), for PYTHONPATH;
    OUT/standin-amx/  the same with the operators of SGLang's Intel AMX path added
                      (sgl_kernel_amx_standin.py), for the server that compiles
                      (`--enable-torch-compile` on CPU runs only on that path).

    python sglang_server_model.py OUT

Run by test_sglang_server.py and scripts/bench-sglang-server in the SGLang environment of
scripts/lib/env.sh. Prints `RESULT {...}` with the paths.
"""
import json
import os
import pathlib
import sys

# SGLang's CPU engine (SGLANG_USE_CPU_ENGINE=1) imports its CPU kernels from `sgl_kernel`,
# whose package (sglang-kernel-cpu) is not on PyPI. This stand-in is the only thing of the
# server that is not real: the one kernel a plain generation calls, in plain torch, and every
# other name a function that raises if called, so nothing passes on a kernel that never ran.
STANDIN_SGL_KERNEL = '''"""STAND-IN for sglang-kernel-cpu's `sgl_kernel` (not on PyPI), written by dynafold's tests
(tests/python/helpers/sglang_server_model.py). `assign_req_to_token_pool_cpu` is plain torch
with the semantics of SGLang 0.5.23's triton `assign_req_to_token_pool`
(sglang/srt/mem_cache/allocation.py); every other name raises NotImplementedError if called."""
import torch

STANDIN = True


def assign_req_to_token_pool_cpu(req_pool_indices, req_to_token, start_offset, end_offset,
                                 out_cache_loc, pool_len):
    # Request i's new slots are the next (end - start) entries of out_cache_loc, in batch
    # order, written at positions [start, end) of its row of req_to_token.
    taken = 0
    for row, start, end in zip(req_pool_indices.tolist(), start_offset.tolist(),
                               end_offset.tolist()):
        req_to_token[row, start:end] = out_cache_loc[taken:taken + end - start].to(req_to_token.dtype)
        taken += end - start


def __getattr__(name):
    if name.startswith("__"):
        raise AttributeError(name)

    def not_stood_in(*args, **kwargs):
        raise NotImplementedError(f"sgl_kernel.{name}: not in dynafold's stand-in sgl_kernel")
    not_stood_in.__name__ = name
    return not_stood_in
'''

AMX_STANDIN = pathlib.Path(__file__).with_name("sgl_kernel_amx_standin.py")
AMX_ANSWER = pathlib.Path(__file__).with_name("amx_answer_sitecustomize.py")

# Text the tokenizer is trained on: local, fixed, with enough variety for a few hundred merges.
CORPUS = [
    "The quick brown fox jumps over the lazy dog.",
    "dynafold folds FlashInfer's CUDA version checks so torch.compile can trace them.",
    "SGLang serves language models with a scheduler, a detokenizer and an HTTP front end.",
    "A server starts, answers requests and drains when it is told to stop.",
    "Numbers 0 1 2 3 4 5 6 7 8 9 10 100 1000 and punctuation: , . ; : ! ? ( ) [ ] { }",
]


def make_tokenizer(out):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=["<s>", "</s>", "<unk>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(CORPUS * 20, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>")
    fast.save_pretrained(out)
    return fast


def make_model(out, tokenizer):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=2048, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, torch_dtype="bfloat16")
    model = LlamaForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out)


def main():
    out = pathlib.Path(sys.argv[1])
    model_dir, standin = out / "model", out / "standin" / "sgl_kernel"
    amx = out / "standin-amx" / "sgl_kernel"
    model_dir.mkdir(parents=True, exist_ok=True)
    for folder in (standin, amx):
        folder.mkdir(parents=True, exist_ok=True)
    (standin / "__init__.py").write_text(STANDIN_SGL_KERNEL)
    (amx / "__init__.py").write_text(STANDIN_SGL_KERNEL + "\n\n" + AMX_STANDIN.read_text())
    # A CPU without AMX tiles answers as one with them (the stand-in's operators are plain torch).
    (amx.parent / "sitecustomize.py").write_text(AMX_ANSWER.read_text())
    make_model(model_dir, make_tokenizer(model_dir))
    print("RESULT " + json.dumps({"model": str(model_dir), "standin": str(standin.parent),
                                  "standin_amx": str(amx.parent),
                                  "files": sorted(os.listdir(model_dir))}), flush=True)


if __name__ == "__main__":
    main()
