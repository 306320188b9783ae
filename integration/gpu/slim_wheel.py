"""A FlashInfer 0.7 wheel small enough for the GPU tool (64 MiB a call), by hand:
    python3 slim_wheel.py flashinfer_python-0.7.2-py3-none-any.whl OUT_DIR
Leaves out sources the op sweep, the decoder layer and SGLang's run never JIT-build (the 0.7.2
wheel goes from 65 MB to 29 MB, 0.7.4's from 101 MB to 47 MB); `flashinfer/experimental` stays: gemm imports it. The RECORD
is rewritten to list what is kept, so pip installs it as any wheel."""
import os
import re
import sys
import zipfile

DROPPED = [re.compile(p) for p in (
    r"^flashinfer/data/csrc/cake_",
    r"^flashinfer/data/csrc/(fused_moe|kda|gdn|experimental|blackwell_bf16_fp4)/",
    r"^flashinfer/fused_moe/backends/cudnn_frost/artifacts/",
    r"^flashinfer/moe_ep/kernel_src/",
    # 0.7.4: the Cake kernels' CUDA sources and the Blackwell MSA sources (SM100 JIT builds).
    r"^flashinfer/experimental/cake/.*\.cu$",
    r"^flashinfer/data/csrc/blackwell_msa/",
)]


def main(wheel, out_dir):
    os.makedirs(out_dir, exist_ok=True)
    out = os.path.join(out_dir, os.path.basename(wheel))
    with zipfile.ZipFile(wheel) as src, \
            zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as dst:
        names = src.namelist()
        kept = {n for n in names if not any(p.search(n) for p in DROPPED)}
        record = next(n for n in names if n.endswith(".dist-info/RECORD"))
        for name in names:
            if name in kept and name != record:
                dst.writestr(src.getinfo(name), src.read(name))
        lines = [line for line in src.read(record).decode().splitlines()
                 if line.split(",")[0] in kept]
        dst.writestr(record, "\n".join(lines) + "\n")
    print(f"{out}: {len(kept)} of {len(names)} files, {os.path.getsize(out) / 1e6:.1f} MB")


if __name__ == "__main__":
    main(*sys.argv[1:3])
