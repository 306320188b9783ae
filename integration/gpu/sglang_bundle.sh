#!/usr/bin/env bash
# Makes .sglang/ (git-ignored), what integration/gpu/sglang.sh carries to the GPU machine, from
# the SGLang environment scripts/test installs (sglang 0.5.23 from its cp312 wheel):
#   sglang-0.5.23-py.tar.xz  SGLang's package without its compiled extensions (cp311 *.so, about
#     45 MB), __pycache__, multimodal_gen/ and tests: its .py files alone are about 47 MB, over
#     what one call carries, so they travel compressed (7.5 MB) and sglang.sh unpacks them;
#   wheels/  cp312 wheels, at that environment's versions, of what importing SGLang's compile
#     path needs and the GPU image lacks (/work/.library/device/KINDS.md's package list).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${SGLANG_VENV:-$HOME/.cache/dynafold-dev/venv-sglang0.5.23-torch2.14.1}
out="$root/.sglang"
mkdir -p "$out/wheels"
grep -qx '/.sglang/' "$root/.git/info/exclude" 2>/dev/null || echo '/.sglang/' >> "$root/.git/info/exclude"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
tar -C "$site" --exclude=__pycache__ --exclude='*.so' --exclude=sglang/multimodal_gen \
    --exclude=sglang/test --exclude=tests -cJf "$out/sglang-0.5.23-py.tar.xz" sglang
pins=$("$venv/bin/python" -m pip list --format=freeze | grep -iE \
  '^(orjson|pybase64|msgspec|pydantic|pydantic[-_]core|typing[-_]inspection|annotated[-_]types|starlette|pyzmq|typing[-_]extensions)==')
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_26_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux1_x86_64 --platform manylinux_2_5_x86_64 \
  -d "$out/wheels" $pins
du -sh "$out"
