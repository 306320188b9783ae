#!/usr/bin/env bash
# Makes .sglang0512/site-0.5.12.tar.xz (git-ignored), what integration/gpu/sglang_server.sh
# carries to the GPU machine for SGLang 0.5.12's real server (issue 37): one `pip --target`
# folder, xz-compressed, since the wheels themselves (60 MB) and the repository do not fit in the
# 64 MiB a call carries. It holds:
#   - SGLang 0.5.12 (without multimodal_gen/), its FlashInfer (0.6.11.post1), transformers and
#     tokenizers pins, and the cp312 wheels of every other package its server processes import
#     that the GPU image lacks (found with sglang_server/imports.py; the image's list is in
#     /work/.library/device/KINDS.md). xgrammar (44 MB) is left out: the server runs with
#     --grammar-backend none and never imports it;
#   - sglang-kernel 0.4.2.post2 (322 MB) without flash_ops.abi3.so (FlashAttention 3, 1 GB,
#     imported only by the fa3 backend), sm100/, flashmla_ops and lib/.
# About 36 MB; takes two minutes (xz).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$root/.sglang0512"
py=${PYTHON312:-$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12.*/bin/python3.12 | sort -V | tail -n 1)}
grep -qx '/.sglang0512/' "$root/.git/info/exclude" 2>/dev/null || echo '/.sglang0512/' >> "$root/.git/info/exclude"
PINS="sglang==0.5.12 flashinfer-python==0.6.11.post1 apache-tvm-ffi==0.1.9 transformers==5.6.0
  tokenizers==0.22.2 annotated-types==0.7.0 cffi==2.1.1 compressed-tensors==0.20.1 dill==0.4.1
  distro==1.9.0 fastapi==0.165.0 gguf==0.19.0 ipython==9.18.1 ipython-pygments-lexers==1.1.1
  decorator==5.2.1 matplotlib-inline==0.2.2 pexpect==4.9.0
  ptyprocess==0.7.0 prompt-toolkit==3.0.53 wcwidth==0.9.4 stack-data==0.6.3 asttokens==3.0.2
  executing==2.3.0 pure-eval==0.2.4 jsonschema==4.26.0 jsonschema-specifications==2025.9.1
  loguru==0.7.3 msgspec==0.23.0 openai==2.6.1 jiter==0.19.0 opentelemetry-api==1.45.3
  importlib-metadata==8.7.1 orjson==3.13.0 partial-json-parser==0.2.1.1.post7 pybase64==1.5.1
  pydantic==2.14.4 pydantic-core==2.50.5 python-multipart==0.0.34 pyzmq==27.3.0
  referencing==0.37.0 rpds-py==2026.9.1 setproctitle==1.3.8 sniffio==1.3.1 soundfile==0.14.0
  starlette==1.10.0 traitlets==5.16.1 typing-inspection==0.4.5 uvicorn==0.55.0 pycparser==3.0"
PLATFORMS=(--python-version 3.12 --implementation cp --only-binary=:all:)
for n in 34 28 27 26 24 17 5; do PLATFORMS+=(--platform "manylinux_2_${n}_x86_64"); done
PLATFORMS+=(--platform manylinux2014_x86_64 --platform manylinux1_x86_64)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$py" -m pip download -q --no-deps "${PLATFORMS[@]}" -d "$tmp/wheels" $PINS sglang-kernel==0.4.2.post2
kernel=$(ls "$tmp"/wheels/sglang_kernel-*.whl)
"$py" -m pip install -q --no-deps --no-compile "${PLATFORMS[@]}" --target "$tmp/site" \
  $(ls "$tmp"/wheels/*.whl | grep -v sglang_kernel)
"$py" -m zipfile -e "$kernel" "$tmp/kernel"
mv "$tmp"/kernel/sgl_kernel "$tmp"/kernel/sglang_kernel-*.dist-info "$tmp/site/"
rm -rf "$tmp"/site/sgl_kernel/{flash_ops.abi3.so,flashmla_ops.abi3.so,sm100} "$tmp/site/sglang/multimodal_gen" "$tmp/site/bin"
find "$tmp/site" -name __pycache__ -prune -exec rm -rf {} +
mkdir -p "$out"
tar -C "$tmp/site" -cf - . | xz -9 -T0 > "$out/site-0.5.12.tar.xz"
du -sh "$out/site-0.5.12.tar.xz"
