#!/usr/bin/env bash
# The H200 run of the FP4 block (by hand, never in CI). From the repository root, with the
# built libraries in target/release and the wheels in .whl (see docs/testing.md, "GPU runs, by hand"):
#   integration/gpu/run.sh [OUT_DIR]
# Installs the carried flashinfer-python 0.6.16 and apache-tvm-ffi wheels, then: eager against
# eager; the compile without dynafold (expected: the seed's error); the compile with dynafold
# through LD_PRELOAD; and, when two GPUs are visible, the same with two spawned ranks.
set -uo pipefail
out=${1:-${OUT:-/tmp/dynafold-gpu}}
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
use_wheels /tmp/site "$root"/.whl/*.whl || exit 1
cd "$root/integration/gpu"
{
  date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__)'
  nvcc --version | tail -2
} 2>&1 | tee "$out/env.txt"
echo "== does the fp4 kernel write its outputs on this GPU?"
python3 writes_check.py 2>&1 | tee "$out/writes.txt" | grep -E '^WRITES|^CAPABILITY'
python3 fp4_block.py consistency 2>&1 | tee "$out/consistency.txt" | grep -E '^CONSISTENCY|Error'
echo "== without dynafold"
timeout 500 python3 fp4_block.py compile > "$out/without.txt" 2>&1
grep -E '^COMPILE' "$out/without.txt" | cut -c1-600
echo "== with dynafold"
LD_PRELOAD="$lib" DYNAFOLD_LOG=info DYNAFOLD_REPORT_DIR="$out/reports" timeout 500 python3 fp4_block.py compile > "$out/with.txt" 2>&1
grep -E '^COMPILE|^NOTE|dynafold\[' "$out/with.txt" | cut -c1-900
echo "== with dynafold, first and second input through plain pieces and CUDA graphs"
LD_PRELOAD="$lib" timeout 300 python3 capture_check.py > "$out/capture.txt" 2>&1
grep -E '^CAPTURE|Error' "$out/capture.txt" | cut -c1-400
echo "== with dynafold, fp4_quantize alone against eager on the same input"
LD_PRELOAD="$lib" timeout 300 python3 fp4_block.py fp4-only > "$out/fp4only.txt" 2>&1
grep -E '^FP4ONLY|Error' "$out/fp4only.txt" | cut -c1-600
echo "== with dynafold, whole forward in one CUDA graph (no split)"
LD_PRELOAD="$lib" timeout 300 python3 fp4_block.py compile-whole > "$out/whole.txt" 2>&1
grep -E '^COMPILE' "$out/whole.txt" | cut -c1-1500
if [ "$(python3 -c 'import torch; print(torch.cuda.device_count())')" -ge 2 ]; then
  echo "== with dynafold, two ranks"
  LD_PRELOAD="$lib" timeout 500 python3 fp4_block.py tp2 > "$out/tp2.txt" 2>&1
  grep -E '^TP' "$out/tp2.txt" | cut -c1-1500
  tail -5 "$out/tp2.txt"
fi
