"""The sample of FlashInfer's own tests run on the H200 (by hand, never in CI):
    python3 pick.py COLLECTED {attention|other} > ids.txt
COLLECTED is `pytest --collect-only -q` over the test files. The full files hold about 59,000
cases (rope alone 30,000); a window of one device call runs a few hundred compiled ones.

- other (norm, activation, rope, sampling, page, quantization): every test function, at most two
  of its parametrizations (the first and the middle one), so each function is reached.
- attention: cases chosen so that the JIT modules they need are few (each attention module is
  minutes of nvcc; prebuild.py builds exactly these): fp16 head_dim 128 without RoPE, fp16 and
  fp8-KV head_dim 256 with ROPE_LLAMA (the fast_plan `out=` failure of issue 30), batch decode on
  CUDA cores and tensor cores, with plan and fast_decode_plan, CUDA-graph decode, batch prefill
  paged and ragged, single prefill, cascade (shared prefix, merge_state).
"""
import re
import sys

ATTENTION = [
    # batch decode, CUDA cores: plan, fast_decode_plan, tuple KV, CUDA graph
    r"test_batch_decode_kernels.py::test_batch_decode_with_(paged_kv_cache|paged_kv_cache_with_fast_plan|tuple_paged_kv_cache)"
    r"\[True-kv_dtype0-q_dtype0-True-0.0-NONE-NHD-128-32-4-8-54-12\]",
    r"test_batch_decode_kernels.py::test_batch_decode_with_(paged_kv_cache|paged_kv_cache_with_fast_plan|tuple_paged_kv_cache)"
    r"\[True-kv_dtype[01]-q_dtype0-True-0.0-ROPE_LLAMA-NHD-256-32-4-8-54-12\]",
    r"test_batch_decode_kernels.py::test_cuda_graph_batch_decode_with_paged_kv_cache"
    r"\[True-kv_dtype0-q_dtype0-(NONE-NHD-128|ROPE_LLAMA-NHD-256)-32-4-8-54-12\]",
    r"test_batch_decode_kernels.py::test_single_decode_torch_compile_cuda_graph$",
    r"test_batch_decode_kernels.py::test_tensor_core_decode_rejects_mismatched_q_len$",
    # batch decode, tensor cores (the prefill module): plan, fast_decode_plan, CUDA graph
    r"test_tensor_cores_decode.py::test_(batch_decode_tensor_cores|batch_decode_tensor_cores_cuda_graph"
    r"|batch_fast_decode_tensor_cores_cuda_graph)\[(NONE-NHD-128|ROPE_LLAMA-NHD-256)-4-4-8-54-12\]",
    r"test_tensor_cores_decode.py::test_batch_decode_tensor_cores_with_fast_plan"
    r"\[(NONE-NHD-128-4-4-8-False|ROPE_LLAMA-NHD-256-4-4-8-True)-2048-5000-4-12\]",
    r"test_tensor_cores_decode.py::test_single_decode_tensor_cores"
    r"\[(NONE-NHD-128|ROPE_LLAMA-NHD-256)-4-4-54\]",
    # batch prefill, paged (with and without CUDA-graph mode) and ragged
    r"test_batch_prefill_kernels.py::test_batch_prefill_with_paged_kv_cache"
    r"\[True-True-0.0-(False|True)-NONE-NHD-(False|True)-128-32-4-16-37-54-12\]",
    r"test_batch_prefill_kernels.py::test_batch_prefill_with_paged_kv_cache"
    r"\[True-True-0.0-False-ROPE_LLAMA-NHD-True-256-32-4-16-37-54-12\]",
    r"test_batch_prefill_kernels.py::test_batch_prefill_with_ragged_kv_cache"
    r"\[True-0.0-(NONE-(False|True)-128|ROPE_LLAMA-True-256)-32-4-37-54-12\]",
    r"test_batch_prefill_kernels.py::test_single_prefill_torch_compile_cuda_graph$",
    # single prefill
    r"test_single_prefill.py::test_sinqle_prefill_with_paged_kv_cache\[NONE-(True|False)-128-4-1-37-501\]",
    # cascade
    r"test_shared_prefix_kernels.py::test_batch_attention_with_shared_prefix_paged_kv_cache"
    r"\[(16-128-False-8-128-37-12|1-128-False-16-512-17-17)-(decode|append)\]",
    r"test_shared_prefix_kernels.py::test_merge_state_in_place_with_mask\[",
]


def main(collected, which):
    ids = [line.strip() for line in open(collected) if "::" in line]
    if which == "attention":
        pats = [re.compile(p) for p in ATTENTION]
        chosen = [i for i in ids if any(p.search(i) for p in pats)]
    else:
        by_fn = {}
        for i in ids:
            if "/attention/" in i and not re.search(r"test_(rope|page)\.py", i):
                continue
            by_fn.setdefault(i.split("[")[0], []).append(i)
        chosen = []
        for cases in by_fn.values():
            chosen += sorted({cases[0], cases[len(cases) // 2]}, key=cases.index)
    print("\n".join(chosen))


if __name__ == "__main__":
    main(*sys.argv[1:3])
