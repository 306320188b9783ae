#!/usr/bin/env bash
# The benchmarks on the GPU machine (by hand, never in CI): issue 7's start-up, rewrite,
# audit-hook and compile benchmarks with the machine's real CUDA and nvcc, then the FP4
# block's per-step latency without and with dynafold. From the repository root, with the
# built binaries in target/release and the wheels in .whl (see docs/testing.md, "GPU runs, by hand"):
#   integration/gpu/bench.sh [latency|bench|all] [bench/run.py options]
set -uo pipefail
what=${1:-all}
shift || true
source "$(dirname "$0")/wheels.sh"
use_wheels /tmp/site "$root"/.whl/*.whl || exit 1
if [ "$what" != bench ]; then
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "== nvcc --version, five runs (what dynafold's fold runs once per process)"
  TIMEFORMAT='%R s'
  for _ in 1 2 3 4 5; do time nvcc --version > /dev/null; done
  cd "$root/integration/gpu"
  echo "== latency without dynafold"
  timeout 280 python3 fp4_block.py latency 2>&1 | grep -E '^LATENCY|Error' | cut -c1-700
  echo "== latency with dynafold"
  LD_PRELOAD="$lib" timeout 280 python3 fp4_block.py latency 2>&1 | grep -E '^LATENCY|Error' | cut -c1-700
  cd "$root"
fi
if [ "$what" != latency ]; then
  python3 bench/run.py --preload "$lib" --dynafold "$root/target/release/dynafold" \
    --flashinfer /tmp/site --real-cuda "$@"
fi
