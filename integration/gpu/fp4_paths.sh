#!/usr/bin/env bash
# Issue 12, item 5, on the GPU machine (by hand, never in CI): fp4_paths.py without dynafold,
# then with FlashInfer's own fp4 declaration woken (general) and with dynafold's special path
# (DYNAFOLD_FP4_SPECIAL=1), in interleaved rounds of fresh processes, each with a fresh Inductor
# cache (the special arm needs libraries of commit 7084b8c: see fp4_paths.py). From the
# repository root, with the libraries in target/release and .whl/ carried:
#   integration/gpu/fp4_paths.sh OUT_DIR [ROUNDS]
set -uo pipefail
out=${1:-/tmp/dynafold-fp4-paths}
rounds=${2:-3}
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
use_wheels /tmp/site "$root"/.whl/*.whl || exit 1
cd "$root/integration/gpu"
python3 -c 'import torch, flashinfer; print("torch", torch.__version__, "flashinfer", flashinfer.__version__, torch.cuda.get_device_name())' | tee "$out/env.txt"

one() {  # NAME MODE [VAR=VALUE...]: one fresh process, its FP4PATH line to lines.jsonl
  local name=$1 mode=$2
  shift 2
  local cache
  cache=$(mktemp -d)
  env "$@" TORCHINDUCTOR_CACHE_DIR="$cache" timeout 300 python3 fp4_paths.py "$mode" \
    > "$out/$name-$mode.log" 2>&1
  grep '^FP4PATH' "$out/$name-$mode.log" | sed "s/^FP4PATH {/{\"path\": \"$name\", /" | tee -a "$out/lines.jsonl" | cut -c1-400
  rm -rf "$cache"
}
echo "== eager builds (FlashInfer's JIT, once)"
one without warm
for r in $(seq "$rounds"); do
  echo "== round $r"
  one general warm LD_PRELOAD="$lib"
  one special warm LD_PRELOAD="$lib" DYNAFOLD_FP4_SPECIAL=1
  one without warm
done
echo "== compile before any eager call in the process (the JIT build is on disk by now)"
one general cold LD_PRELOAD="$lib"
one special cold LD_PRELOAD="$lib" DYNAFOLD_FP4_SPECIAL=1
