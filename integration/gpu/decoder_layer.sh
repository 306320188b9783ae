#!/usr/bin/env bash
# Issue 12's decoder-layer benchmark on the GPU machine (by hand, never in CI): an SGLang-shaped
# layer of FlashInfer ops, eager vs piecewise CUDA graphs vs one whole CUDA graph, with and
# without dynafold. Full logs in OUT_DIR, the LAYER/OPS/BREAKS/ENV/WOKEN lines on stdout.
#   integration/gpu/decoder_layer.sh OUT_DIR [extra decoder_layer.py args]
#   (libraries in target/release, wheels in .whl; SITE: where they are installed, /tmp/site;
#   BUILD_TIMEOUT, WITH_TIMEOUT, WITHOUT_TIMEOUT: seconds per step, 200+260+80 by default, so
#   the whole stays under the GPU tool's 600 s per command)
# FlashInfer's JIT modules (norm, rope, activation, decode) are built first, four processes at
# once (each module is a few source files, so one build alone leaves most cores idle); both runs
# then load them from FlashInfer's cache. With dynafold first: it is the point.
set -uo pipefail
out=${1:-/tmp/dynafold-decoder-layer}
shift || true
mkdir -p "$out"
source "$(dirname "$0")/wheels.sh"
site=${SITE:-/tmp/site}
use_wheels "$site" "$root"/.whl/*.whl || exit 1
cd "$root/integration/gpu"
show='^(ENV|OPS|BREAKS|LAYER|WOKEN)'
echo "== FlashInfer JIT builds"
start=$SECONDS
for m in norm rope act decode; do
  timeout "${BUILD_TIMEOUT:-200}" python3 decoder_layer.py --prebuild "$m" "$@" >"$out/prebuild-$m.txt" 2>&1 &
done
wait
grep -h '^PREBUILD' "$out"/prebuild-*.txt | tr '\n' ' '; echo "$((SECONDS - start))s"
echo "== with dynafold"
start=$SECONDS
LD_PRELOAD="$lib" timeout "${WITH_TIMEOUT:-260}" python3 decoder_layer.py "$@" 2>&1 | tee "$out/with.txt" | grep -E "$show"
echo "rc=${PIPESTATUS[0]} $((SECONDS - start))s" | tee "$out/with.rc"
echo "== without dynafold (compile expected to fail; eager timing still printed)"
start=$SECONDS
timeout "${WITHOUT_TIMEOUT:-80}" python3 decoder_layer.py "$@" 2>&1 | tee "$out/without.txt" | grep -E "$show"
echo "rc=${PIPESTATUS[0]} $((SECONDS - start))s" | tee "$out/without.rc"
