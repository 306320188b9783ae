#!/usr/bin/env bash
# Issue 12 on the GPU machine (by hand, never in CI): the op sweep without and with dynafold,
# then eager rmsnorm host time per call, without and with, in interleaved rounds.
#   integration/gpu/ops.sh OUT_DIR [all|with|eager]   (libraries in target/release, wheels in .whl)
set -uo pipefail
out=${1:-/tmp/dynafold-ops}
what=${2:-all}
mkdir -p "$out"
root=$(cd "$(dirname "$0")/../.." && pwd)
lib="$root/target/release/libdynafold.so"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site "$root"/.whl/*.whl || exit 1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
cd "$root/integration/gpu"
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"
if [ "$what" = all ]; then
  echo "== sweep without dynafold"
  timeout 280 python3 ops_sweep.py sweep 2>&1 | tee "$out/sweep-without.txt" | grep '^SWEEP'
fi
if [ "$what" = all ] || [ "$what" = with ]; then
  echo "== sweep with dynafold"
  LD_PRELOAD="$lib" timeout 400 python3 ops_sweep.py sweep 2>&1 | tee "$out/sweep-with.txt" | grep '^SWEEP'
fi
[ "$what" = with ] && exit 0
LD_PRELOAD="$lib" python3 ops_sweep.py eager-us >/dev/null 2>&1  # builds the norm module once
echo "== eager rmsnorm 1x4096, us per call (host), ${ROUNDS:-10} interleaved rounds"
for round in $(seq "${ROUNDS:-10}"); do
  printf 'without %s\n' "$(python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
  printf 'with    %s\n' "$(LD_PRELOAD="$lib" python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
done | tee "$out/eager.txt"
