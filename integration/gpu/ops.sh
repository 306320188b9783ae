#!/usr/bin/env bash
# Issue 12 on the GPU machine (by hand, never in CI): the op sweep with and without dynafold,
# then eager rmsnorm host time per call, without and with, in interleaved rounds.
#   integration/gpu/ops.sh OUT_DIR [all|with|without|eager] WHEEL...
# The wheels (a FlashInfer release and apache-tvm-ffi) are installed into $SITE (default
# /tmp/site-<first wheel's name>); the sweep runs in $SHARDS processes side by side (default 4),
# so FlashInfer's JIT builds share the machine's cores; each is stopped after $SWEEP_TIMEOUT s.
set -uo pipefail
out=${1:-/tmp/dynafold-ops}
what=${2:-all}
shift 2 || exit 2
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
site=${SITE:-/tmp/site-$(basename "$1" .whl)}
shards=${SHARDS:-4}
use_wheels "$site" "$@" || exit 1
cd "$root/integration/gpu"
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"

# sweep NAME PRELOAD: every shard's lines in $out/sweep-NAME.txt, its log beside it.
sweep() {
  local name=$1 preload=$2 i
  for i in $(seq 0 $((shards - 1))); do
    SWEEP_SHARD="$i/$shards" LD_PRELOAD="$preload" timeout "${SWEEP_TIMEOUT:-540}" python3 ops_sweep.py sweep \
      > "$out/sweep-$name-$i.log" 2>&1 &
  done
  wait
  cat "$out"/sweep-"$name"-*.log | grep '^SWEEP' | sort > "$out/sweep-$name.txt"
  echo "== sweep $name dynafold: $(grep -c ' PASS ' "$out/sweep-$name.txt") of $(grep -cv -e TOTAL -e STATUS "$out/sweep-$name.txt") pass"
  grep -e ' FAIL ' "$out/sweep-$name.txt" | cut -c1-400
}
if [ "$what" = all ] || [ "$what" = with ]; then
  sweep with "$lib"
fi
if [ "$what" = all ] || [ "$what" = without ]; then
  sweep without ""
fi
[ "$what" = eager ] || exit 0
LD_PRELOAD="$lib" python3 ops_sweep.py eager-us >/dev/null 2>&1  # builds the norm module once
echo "== eager rmsnorm 1x4096, us per call (host), ${ROUNDS:-10} interleaved rounds"
for round in $(seq "${ROUNDS:-10}"); do
  printf 'without %s\n' "$(python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
  printf 'with    %s\n' "$(LD_PRELOAD="$lib" python3 ops_sweep.py eager-us 2>&1 | grep EAGER_US)"
done | tee "$out/eager.txt"
