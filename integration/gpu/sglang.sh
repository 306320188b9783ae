#!/usr/bin/env bash
# Issue 11, item 2, on the GPU machine (by hand, never in CI): SGLang 0.5.23's own piecewise CUDA
# graph path (sglang_piecewise.py) without dynafold, then with it. From the repository root:
#   integration/gpu/sglang.sh OUT_DIR
# Carried there (git-ignored): target/release/libdynafold{,_python}.so; .whl/ (flashinfer-python
# 0.6.16, apache-tvm-ffi); .sglang/sglang-0.5.23-py.tar.xz (SGLang's own files from its cp312
# wheel, without its compiled extensions, multimodal_gen/ and tests: the unpacked .py files alone
# are about 47 MB, over what one call carries) and .sglang/wheels/ (the cp312 wheels of what
# importing SGLang's compile path needs and the machine lacks).
# FLASHINFER_SITE: a `pip --target` folder holding the FlashInfer to use (default /tmp/site, filled
# from .whl here; e.g. /tmp/site07 for a 0.7 release installed there earlier).
# Logs, the full JSON lines, SGLang's dumped graphs and dynafold's reports go to OUT_DIR.
# Time: the JIT builds take a minute or two on a fresh machine; the three steps are capped at
# 200 + 90 + 240 s, so the whole script stays under the device's 600 s per call.
set -uo pipefail
out=${1:-/tmp/dynafold-sglang}
mkdir -p "$out"
out=$(cd "$out" && pwd)
source "$(dirname "$0")/wheels.sh"
fi_site=${FLASHINFER_SITE:-/tmp/site}
cache=/tmp/dynafold-sglang-cache
install_wheels /tmp/site "$root"/.whl/*.whl || exit 1
install_wheels /tmp/site-sglang "$root"/.sglang/wheels/*.whl || exit 1
# No `unzip`/`xz` needed: Python's tarfile reads .tar.xz.
rm -rf /tmp/sglang-py "$cache" && mkdir -p /tmp/sglang-py || exit 1
python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter="data")' \
  "$root/.sglang/sglang-0.5.23-py.tar.xz" /tmp/sglang-py || exit 1
# FlashInfer's folder first; /tmp/site also for apache-tvm-ffi; SGLang's files before the image's.
export PYTHONPATH="$fi_site:/tmp/site:/tmp/site-sglang:/tmp/sglang-py" PYTHONUNBUFFERED=1
driver="$root/integration/gpu/sglang_piecewise.py"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader
  nvcc --version | tail -2 | head -1
  python3 -c 'import sys, torch, flashinfer, runpy
print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda,
      "flashinfer", flashinfer.__version__, "at", flashinfer.__file__)
print("sglang", runpy.run_path("/tmp/sglang-py/sglang/_version.py")["__version__"], "from /tmp/sglang-py")'
} 2>&1 | tee "$out/env.txt"

echo "== FlashInfer's JIT builds (fp4, norm, activation), eagerly, once for both runs"
start=$SECONDS
timeout 200 python3 -c 'import torch, flashinfer
x = torch.randn(4, 2048, device="cuda", dtype=torch.bfloat16)
w = torch.ones(2048, device="cuda", dtype=torch.bfloat16)
flashinfer.fp4_quantize(x, torch.tensor([8.0], device="cuda"), is_sf_swizzled_layout=False)
flashinfer.rmsnorm(x, w, 1e-6)
flashinfer.fused_add_rmsnorm(x, x.clone(), w, 1e-6)
flashinfer.silu_and_mul(torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16))
torch.cuda.synchronize()' > "$out/build.txt" 2>&1
echo "exit $? after $((SECONDS - start)) s"

run() {  # NAME TIMEOUT [VAR=VALUE...]: the driver over both models and both compilers
  local name=$1 limit=$2 start=$SECONDS f
  shift 2
  echo "== $name"
  env "$@" DYNAFOLD_SGLANG_CACHE="$cache/$name" timeout "$limit" python3 "$driver" > "$out/$name.txt" 2>&1
  local rc=$?
  grep -E '^SGLANG_ENV|^SUMMARY' "$out/$name.txt" | cut -c1-900
  grep -E '^SGLANG ' "$out/$name.txt" > "$out/$name.jsonl"
  echo "exit $rc after $((SECONDS - start)) s ($(grep -c '^SUMMARY' "$out/$name.txt") of 4 cases reported)"
  [ "$rc" = 0 ] || tail -n 5 "$out/$name.txt" | cut -c1-300
  mkdir -p "$out/graphs/$name"
  find "$cache/$name" -name 'computation_graph_*.py' 2>/dev/null | while read -r f; do
    rel=${f#"$cache/$name/"}
    cp "$f" "$out/graphs/$name/${rel//\//_}.txt"  # .txt: kept as a record, not as code
  done
}
# SGLang's sequence as shipped: its eager dummy forward finds the modules built above, then each
# compile is expected to die on the seed's error without dynafold and to pass with it.
run without 90
run with 240 LD_PRELOAD="$lib" DYNAFOLD_REPORT_DIR="$out/reports"
# ALSO_WITH="NAME VAR=VALUE...": one more run with dynafold under those settings, to compare.
if [ -n "${ALSO_WITH:-}" ]; then
  read -r also_name also_env <<< "$ALSO_WITH"
  # shellcheck disable=SC2086  # the settings are words on purpose
  run "with-$also_name" 240 LD_PRELOAD="$lib" $also_env
fi
echo "dynafold reports: $(cat "$out"/reports/* 2>/dev/null | wc -l) line(s) in $(ls "$out/reports" 2>/dev/null | wc -l) file(s)"
