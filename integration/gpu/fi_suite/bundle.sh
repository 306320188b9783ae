#!/usr/bin/env bash
# Makes the bundle integration/gpu/fi_suite.sh runs from (by hand, never in CI):
#   integration/gpu/fi_suite/bundle.sh FLASHINFER_GIT_DIR TAG WHEEL_DIR BUNDLE [AOT_PARTS_DIR]
# FLASHINFER_GIT_DIR: a clone of flashinfer-ai/flashinfer holding TAG (e.g. v0.6.17); WHEEL_DIR:
# flashinfer_python (slimmed with integration/gpu/slim_wheel.py if over the device tool's carry)
# and apache_tvm_ffi wheels. BUNDLE must be an ignored folder of the checkout the device tool
# sends (e.g. dist/gpu), carried with `carry: ["dist/gpu"]`; under 64 MiB with the tree.
set -euo pipefail
git_dir=$1 tag=$2 wheels=$3 bundle=$4 parts=${5:-}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
rm -rf "$bundle" && mkdir -p "$bundle/whl" "$bundle/scripts"
cp "$wheels"/*.whl "$bundle/whl/"
cp "$root/target/release/libdynafold.so" "$root/target/release/libdynafold_python.so" "$bundle/"
cp -r "$here/../fi_suite.sh" "$here/../decoder_layer.py" "$here" "$bundle/scripts/"
rm -rf "$bundle/scripts/fi_suite/__pycache__"
tmp=$(mktemp -d)
files=$(git --git-dir "$git_dir" ls-tree -r --name-only "$tag" tests | grep -E \
  '^tests/(__init__|conftest)\.py$|^tests/test_helpers/|^tests/utils/(__init__|test_(norm|activation|sampling|quantization))\.py$|^tests/attention/(__init__|conftest|test_(rope|page|batch_decode_kernels|tensor_cores_decode|batch_prefill_kernels|single_prefill|shared_prefix_kernels))\.py$')
git --git-dir "$git_dir" archive "$tag" $files | tar -x -C "$tmp"
(cd "$tmp" && patch -p1 < "$here/conftest.patch")
tar -czf "$bundle/fi-tests.tar.gz" -C "$tmp" tests
rm -rf "$tmp"
[ -z "$parts" ] || cp "$parts"/aot*.tar.xz.* "$bundle/"
du -sh "$bundle"
