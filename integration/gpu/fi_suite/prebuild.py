"""FlashInfer's JIT modules for the H200 runs, built ahead (by hand, never in CI):
    python3 prebuild.py misc|attention      build them into FlashInfer's JIT cache
    python3 prebuild.py pack AOT_DIR        copy every built <name>.so to AOT_DIR/<name>/
An attention module is minutes of nvcc, and a device call is 10; the built libraries travel
back as a split tarball and, in a later call, are found through a stand-in
`flashinfer_jit_cache` package (jitcache/) whose get_jit_cache_dir() is AOT_DIR: FlashInfer
loads `<aot>/<name>/<name>.so` without ninja, and the tests' warm-up fixtures (autouse only
without that package) do not rebuild every module of their files.

`attention` builds what pick.py's attention sample and the decoder-layer benchmark
(bf16, head_dim 128, tensor-core decode) need; `misc` the norm, activation, rope, sampling,
page, quantization and cascade modules."""
import shutil
import sys
import time
from pathlib import Path

import torch


def misc_specs():
    from flashinfer.jit import gen_act_and_mul_module
    from flashinfer.jit.cascade import gen_cascade_module
    from flashinfer.norm import gen_norm_module
    from flashinfer.page import gen_page_module
    from flashinfer.quantization import gen_quantization_module
    from flashinfer.rope import gen_rope_module
    from flashinfer.sampling import gen_sampling_module

    return [gen_cascade_module(), gen_norm_module(), gen_page_module(),
            gen_quantization_module(), gen_rope_module(), gen_sampling_module()] + [
        gen_act_and_mul_module(a) for a in ("silu", "gelu", "gelu_tanh")]


def attention_specs():
    """In three groups, built one after the other, so that a build stopped by the call's
    limit has finished the first ones: (1) the fast_plan `out=` case (fp16, head_dim 256,
    ROPE_LLAMA; CUDA-core and tensor-core decode) and the decoder-layer benchmark's
    tensor-core decode (bf16, head_dim 128); (2) the rest of decode and fa2 prefill; (3) fa3,
    which FlashInfer's auto choice takes on sm90 for fp16 prefill without RoPE."""
    from flashinfer.decode import gen_batch_decode_module, gen_single_decode_module
    from flashinfer.prefill import gen_batch_prefill_module, gen_single_prefill_module

    f16, bf16, f8, i32 = torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.int32

    def decode(q, kv, hd, pos):
        return [gen_single_decode_module(q, kv, q, hd, hd, pos, False, False),
                gen_batch_decode_module(q, kv, q, i32, hd, hd, pos, False, False)]

    def batch_prefill(backend, q, hd, pos):
        return gen_batch_prefill_module(backend, q, q, q, i32, hd, hd, pos, False, False, False)

    def single_prefill(backend, q, hd, pos):
        return gen_single_prefill_module(backend, q, q, q, hd, hd, pos, False, False, False)

    return [
        decode(f16, f16, 256, 1) + [batch_prefill("fa2", f16, 256, 1),
                                    batch_prefill("fa2", bf16, 128, 0)],
        decode(f16, f16, 128, 0) + decode(f16, f8, 256, 1)
        + [single_prefill("fa2", f16, 256, 1), batch_prefill("fa2", f16, 128, 0),
           single_prefill("fa2", f16, 128, 0)],
        [batch_prefill("fa3", f16, 128, 0), single_prefill("fa3", f16, 128, 0)],
    ]


def pack(aot_dir):
    from flashinfer.jit import env

    aot = Path(aot_dir)
    n = 0
    for so in sorted(env.FLASHINFER_JIT_DIR.glob("*/*.so")):
        if so.stem != so.parent.name:
            continue
        (aot / so.stem).mkdir(parents=True, exist_ok=True)
        shutil.copy2(so, aot / so.stem / so.name)
        n += 1
        print(f"PACK {so.stem} {so.stat().st_size / 1e6:.1f} MB", flush=True)
    print(f"PACK {n} modules from {env.FLASHINFER_JIT_DIR}", flush=True)


def main():
    what = sys.argv[1]
    if what == "pack":
        pack(sys.argv[2])
        return
    from flashinfer.jit import build_jit_specs

    groups = [misc_specs()] if what == "misc" else attention_specs()
    start = time.monotonic()
    for i, specs in enumerate(groups):
        print(f"BUILD {what}[{i}]: {' '.join(s.name for s in specs)}", flush=True)
        build_jit_specs(specs, verbose=False)
        print(f"BUILT {what}[{i}] at {time.monotonic() - start:.0f}s", flush=True)


if __name__ == "__main__":
    main()
