# Shared set-up for scripts/demo and scripts/test: one pinned Python environment with real
# torch and real FlashInfer releases, kept outside the clone and reused between runs.
# Sourced, not executed.

DYNAFOLD_CACHE=${DYNAFOLD_CACHE:-$HOME/.cache/dynafold-dev}
TORCH_VERSION=${DYNAFOLD_TORCH:-2.15.0}
# The oldest torch the graph-break reporter supports; its tests run there too.
OLD_TORCH_VERSION=${DYNAFOLD_OLD_TORCH:-2.9.1}
BASE_PYTHON=${DYNAFOLD_BASE_PYTHON:-python3}
VENV="$DYNAFOLD_CACHE/venv-torch$TORCH_VERSION"
FLASHINFER_DIR="$DYNAFOLD_CACHE/flashinfer"
# Releases installed side by side (each in its own --target folder), chosen to span the
# layouts FlashInfer has shipped: sdists (0.2/0.3), the 0.5/0.6 wheels and the 0.7 split.
FLASHINFER_RELEASES=${DYNAFOLD_FLASHINFER_RELEASES:-"0.5.3 0.6.16 0.7.4"}
# A 0.6.x release older than 0.6.16 whose layouts differ (flashinfer/mla.py, tensor-core
# decode's paged_run arguments, the trtllm MoE and XQA ops declared in other loaders): installed
# beside them, but only the tests of those layouts run on it (tests/python/test_fold.py
# OLD_LAYOUT_RELEASE), not every release-parametrized one.
OLD_LAYOUT_RELEASE=${DYNAFOLD_OLD_LAYOUT_RELEASE:-0.6.7.post3}
# What FlashInfer's fp4 path imports, minus its heavy extras (FIELD-NOTES 2).
FLASHINFER_DEPS="apache-tvm-ffi packaging filelock requests tqdm nvidia-ml-py einops click tabulate numpy"

# SGLang's own compile code (tests/python/test_sglang.py), in the environment its users run:
# CPython 3.12 (SGLang's images), the torch and FlashInfer that SGLang pins, SGLang itself
# without its dependencies (its cp312 wheel, --no-deps: none of its compiled extensions is
# imported by the compile path) plus the light pure-Python packages that importing
# sglang.srt.compilation needs.
SGLANG_VERSION=0.5.23
SGLANG_TORCH_VERSION=2.14.1
SGLANG_FLASHINFER=0.7.2
# SGLang 0.5.23 pins apache-tvm-ffi 0.1.11 for its FlashInfer.
SGLANG_DEPS="apache-tvm-ffi==0.1.11 orjson psutil pybase64 pillow starlette msgspec pydantic pyzmq aiohttp"
SGLANG_VENV="$DYNAFOLD_CACHE/venv-sglang$SGLANG_VERSION-torch$SGLANG_TORCH_VERSION"

# SGLang's real server (tests/python/test_sglang_server.py: `python -m sglang.launch_server` on
# CPU, SGLANG_USE_CPU_ENGINE=1) imports far more than its compile path: these are exactly the
# packages its launcher, scheduler and detokenizer import for a Llama model, found by starting
# it, with their own dependencies, pinned (SGLang 0.5.23's own pins where it has one) and
# installed --no-deps so nothing above changes. The rest of what SGLang lists (its CUDA kernels,
# other grammar back ends, multimodal) is never imported there.
SGLANG_SERVER_DEPS="annotated-doc==0.0.7 asttokens==3.0.2 cffi==2.1.1 compressed-tensors==0.18.0 dill==0.4.1
  distro==1.9.0 executing==2.3.0 fastapi==0.165.0 gguf==0.19.0 h11==0.16.0 hf-xet==1.8.0
  httpcore==1.0.9 httpx==0.28.1 huggingface_hub==1.33.0 ipython==9.18.1
  ipython_pygments_lexers==1.1.1 jedi==0.20.1 jiter==0.19.0 jsonschema==4.26.0
  jsonschema-specifications==2025.9.1 loguru==0.7.3 markdown-it-py==4.3.0
  matplotlib-inline==0.2.2 mdurl==0.1.2 openai==2.8.0 opentelemetry-api==1.45.2 parso==0.8.7
  partial-json-parser==0.2.1.1.post7 pexpect==4.9.0 prompt_toolkit==3.0.53 ptyprocess==0.7.0
  pure_eval==0.2.4 pycparser==3.12 python-dateutil==2.9.0.post0 python-multipart==0.0.34
  PyYAML==6.0.4 referencing==0.37.0 regex==2026.11.19 rich==15.0.0 rpds-py==2026.9.1
  safetensors==0.8.0 sentencepiece==0.2.1 setproctitle==1.3.8 shellingham==1.5.4 six==1.17.0
  sniffio==1.3.1 soundfile==0.13.1 stack-data==0.6.3 tokenizers==0.23.2 torchvision==0.29.2
  traitlets==5.16.1 transformers==5.19.0 typer==0.29.2 uvicorn==0.54.0 uvloop==0.23.0
  wcwidth==0.9.4 xgrammar==0.2.7"

# SGLang 0.5.9, the seed's release (tests/python/test_sglang059.py): its pins (torch 2.9.1,
# FlashInfer 0.6.3) on CPython 3.12 (SGLang's images). Its wheel is pure Python
# (py3-none-any) but no torch 2.9.1 environment on 3.12 exists to share. SGLang is installed
# --no-deps, with exactly what importing its ModelRunner, LlamaForCausalLM and
# PiecewiseCudaGraphRunner needs (found by importing them), at SGLang's own pins where it has
# one (transformers, openai); torchvision at torch 2.9.1's pair, so nothing moves torch.
SGLANG059_VERSION=0.5.9
SGLANG059_TORCH_VERSION=2.9.1
SGLANG059_FLASHINFER=0.6.3
SGLANG059_DEPS="torchvision==0.24.1 apache-tvm-ffi<0.2,!=0.1.8,!=0.1.8.post0 orjson psutil pybase64
  pillow starlette msgspec pydantic pyzmq aiohttp transformers==4.57.1 openai==2.6.1
  partial_json_parser dill sentencepiece gguf compressed-tensors==0.15.0.1 pytest"
SGLANG059_VENV="$DYNAFOLD_CACHE/venv-sglang$SGLANG059_VERSION-torch$SGLANG059_TORCH_VERSION"

# SGLang 0.5.12 (tests/python/test_sglang0512.py), piecewise CUDA graphs on by default: its pins
# (torch 2.11.0, FlashInfer 0.6.11.post1) on CPython 3.12. No other environment has torch 2.11.0,
# so this one costs a torch of its own (5 GB, about 11 minutes the first time; scripts/test
# leaves it out with DYNAFOLD_SGLANG0512=0). SGLang --no-deps with what importing its
# ModelRunner, LlamaForCausalLM and PiecewiseCudaGraphRunner needs, at SGLang 0.5.12's own pins
# where it has one; torchvision at torch 2.11.0's pair.
SGLANG0512_VERSION=0.5.12
SGLANG0512_TORCH_VERSION=2.11.0
SGLANG0512_FLASHINFER=0.6.11.post1
SGLANG0512_DEPS="torchvision==0.26.0 apache-tvm-ffi==0.1.9 orjson psutil pybase64 pillow starlette
  msgspec pydantic pyzmq aiohttp transformers==5.6.0 openai==2.6.1 partial_json_parser dill
  sentencepiece gguf compressed-tensors pytest"
SGLANG0512_VENV="$DYNAFOLD_CACHE/venv-sglang$SGLANG0512_VERSION-torch$SGLANG0512_TORCH_VERSION"

# FlashInfer's CuTe DSL kernel modules import `cutlass` (nvidia-cutlass-dsl) at the top: the
# check of dynafold's cute-dsl fake against FlashInfer's own shape arithmetic
# (tests/python/test_cute_dsl_fake.py) runs in an environment with it, layered over the torch
# one by a .pth file, so torch is not installed twice.
CUTLASS_DSL_VERSION=4.8.1
CUTLASS_VENV="$DYNAFOLD_CACHE/venv-cutlass-dsl$CUTLASS_DSL_VERSION-torch$TORCH_VERSION"
# cuDNN's Python frontend (11 MB; the libcudnn under it is torch's own): FlashInfer's cuDNN
# GEMM backends build their graphs with it, in the API table's fake check (scripts/api-status).
CUTLASS_EXTRAS="nvidia-cudnn-frontend==1.32.0"

log() { printf '[dynafold setup] %s\n' "$*" >&2; }

# What the tests need besides torch and FlashInfer's dependencies (the wheel is linked by zig
# and audited by auditwheel; `python -m build` makes the sdist, see test_package.py).
TEST_TOOLS="pytest pytest-xdist maturin ziglang auditwheel build"

# ensure_venv [TORCH_VERSION]: the environment for that torch (default $TORCH_VERSION). An
# environment made before a tool joined TEST_TOOLS gets the missing ones added, not remade.
ensure_venv() {
  local torch=${1:-$TORCH_VERSION}
  local venv="$DYNAFOLD_CACHE/venv-torch$torch"
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
    [ "$(cat "$venv/.complete")" = "$TEST_TOOLS" ] && return 0
    log "adding $TEST_TOOLS to $venv"
    "$venv/bin/python" -m pip install -q $TEST_TOOLS || return 1
    printf '%s' "$TEST_TOOLS" > "$venv/.complete"
    return 0
  fi
  log "creating $venv (torch $torch from PyPI; first time only, a few minutes)"
  fresh_venv "$BASE_PYTHON" "$venv" || return 1
  "$venv/bin/python" -m pip install -q "torch==$torch" $FLASHINFER_DEPS $TEST_TOOLS || return 1
  printf '%s' "$TEST_TOOLS" > "$venv/.complete"
}

# The linter and the type checker, pinned, in an environment of their own: they import none of
# the code they read, so they need no torch, and a new pin remakes only this small one.
# `.complete` holds the pins it was made with. mypy stays on 1.20: 2.x no longer checks code
# as Python 3.9, the oldest the hooks run on.
LINT_TOOLS="ruff==0.17.6 mypy==1.20.2"
LINT_VENV="$DYNAFOLD_CACHE/venv-lint"
ensure_lint_venv() {
  local venv=$LINT_VENV
  [ -x "$venv/bin/ruff" ] && [ "$(cat "$venv/.complete" 2>/dev/null)" = "$LINT_TOOLS" ] && return 0
  log "creating $venv ($LINT_TOOLS; first time only, seconds)"
  fresh_venv "$BASE_PYTHON" "$venv" || return 1
  "$venv/bin/python" -m pip install -q $LINT_TOOLS || return 1
  printf '%s' "$LINT_TOOLS" > "$venv/.complete"
}

# fresh_venv PYTHON VENV: an empty environment of that interpreter at VENV (whatever was there
# is removed), with a current pip.
fresh_venv() {
  rm -rf "$2"
  "$1" -m venv "$2" || return 1
  "$2/bin/python" -m pip install -q --upgrade pip
}

# ensure_flashinfer VERSION: installs that release (no deps) into its own folder, prints it.
ensure_flashinfer() {
  local v=$1 dir="$FLASHINFER_DIR/$1"
  if [ ! -f "$dir/.complete" ]; then
    log "installing flashinfer-python $v into $dir"
    rm -rf "$dir"
    "$VENV/bin/python" -m pip install -q --no-deps --no-compile --target "$dir" "flashinfer-python==$v" >&2 || return 1
    touch "$dir/.complete"
  fi
  printf '%s\n' "$dir"
}

# ensure_flashinfer_wheel: FlashInfer's $UNINSTALL_FLASHINFER wheel itself (7 MB), downloaded once, so
# tests/python/test_uninstall.py can install it with pip into a throw-away environment and
# uninstall it again without the network. Prints the wheel's path.
UNINSTALL_FLASHINFER=0.5.3
FLASHINFER_WHEELS="$DYNAFOLD_CACHE/flashinfer-wheels"
ensure_flashinfer_wheel() {
  local wheel="$FLASHINFER_WHEELS/flashinfer_python-$UNINSTALL_FLASHINFER-py3-none-any.whl"
  if [ ! -f "$wheel" ]; then
    log "downloading the flashinfer-python $UNINSTALL_FLASHINFER wheel into $FLASHINFER_WHEELS"
    "$VENV/bin/python" -m pip download -q --no-deps --only-binary=:all: -d "$FLASHINFER_WHEELS" \
      "flashinfer-python==$UNINSTALL_FLASHINFER" >&2 || return 1
  fi
  printf '%s\n' "$wheel"
}

# pyenv_python MINOR: the newest pyenv build of that CPython minor (every machine of this kind
# has them), or nothing.
pyenv_python() {
  ls -d "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -n 1
}

# ensure_sglang_venv: CPython 3.12 with torch $SGLANG_TORCH_VERSION, FlashInfer's runtime
# dependencies, pytest, SGLang $SGLANG_VERSION (--no-deps) with what its compile path imports, and
# what its server imports ($SGLANG_SERVER_DEPS). FlashInfer $SGLANG_FLASHINFER itself is installed
# by ensure_flashinfer, like the others. An environment made before the server's packages joined
# gets them added, not remade: `.server` holds the list last installed.
ensure_sglang_venv() {
  local venv=$SGLANG_VENV py
  if [ ! -x "$venv/bin/python" ] || [ ! -f "$venv/.complete" ]; then
    py=$(pyenv_python 3.12)
    if [ -z "$py" ]; then log "no pyenv CPython 3.12 under ${PYENV_ROOT:-$HOME/.pyenv}/versions"; return 1; fi
    log "creating $venv ($py, torch $SGLANG_TORCH_VERSION, sglang $SGLANG_VERSION; first time only, a few minutes)"
    fresh_venv "$py" "$venv" || return 1
    "$venv/bin/python" -m pip install -q "torch==$SGLANG_TORCH_VERSION" $FLASHINFER_DEPS $SGLANG_DEPS pytest || return 1
    "$venv/bin/python" -m pip install -q --no-deps "sglang==$SGLANG_VERSION" || return 1
    touch "$venv/.complete"
  fi
  [ -f "$venv/.server" ] && [ "$(cat "$venv/.server")" = "$SGLANG_SERVER_DEPS" ] && return 0
  log "adding SGLang's server packages to $venv (first time only, about a minute)"
  "$venv/bin/python" -m pip install -q --no-deps $SGLANG_SERVER_DEPS || return 1
  printf '%s' "$SGLANG_SERVER_DEPS" > "$venv/.server"
}

# ensure_sglang_release_venv VERSION TORCH DEPS: SGLang VERSION's environment at
# $DYNAFOLD_CACHE/venv-sglang$VERSION-torch$TORCH (the SGLANG059_* and SGLANG0512_* pins above):
# pyenv's CPython 3.12 with torch TORCH, FlashInfer's runtime dependencies, SGLang VERSION
# (--no-deps) and DEPS. Its FlashInfer release is installed by ensure_flashinfer, like the
# others, with the main environment's pip (scripts/lib/setup.sh setup_flashinfer).
# `.complete` holds the package list it was made with: a changed list remakes it.
ensure_sglang_release_venv() {
  local version=$1 torch=$2 deps=$3 venv py want
  venv="$DYNAFOLD_CACHE/venv-sglang$version-torch$torch"
  want="torch==$torch sglang==$version $deps"
  if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.complete" 2>/dev/null)" != "$want" ]; then
    py=$(pyenv_python 3.12)
    if [ -z "$py" ]; then log "no pyenv CPython 3.12 under ${PYENV_ROOT:-$HOME/.pyenv}/versions"; return 1; fi
    log "creating $venv ($py, torch $torch, sglang $version; first time only, a few minutes)"
    fresh_venv "$py" "$venv" || return 1
    "$venv/bin/python" -m pip install -q "torch==$torch" $FLASHINFER_DEPS $deps || return 1
    "$venv/bin/python" -m pip install -q --no-deps "sglang==$version" || return 1
    printf '%s' "$want" > "$venv/.complete"
  fi
}

# ensure_cutlass_venv: nvidia-cutlass-dsl $CUTLASS_DSL_VERSION over the torch environment.
ensure_cutlass_venv() {
  local venv=$CUTLASS_VENV under own
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then
    [ "$(cat "$venv/.complete")" = "$CUTLASS_EXTRAS" ] && return 0
  else
    log "creating $venv (nvidia-cutlass-dsl $CUTLASS_DSL_VERSION over $VENV; first time only)"
    # The torch environment's interpreter: the .pth below needs the same CPython.
    fresh_venv "$VENV/bin/python" "$venv" || return 1
    under=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
    own=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])') || return 1
    printf '%s\n' "$under" > "$own/dynafold-torch-venv.pth"
    "$venv/bin/python" -m pip install -q "nvidia-cutlass-dsl==$CUTLASS_DSL_VERSION" || return 1
  fi
  # An environment made before an extra joined CUTLASS_EXTRAS gets it added, not remade.
  log "adding $CUTLASS_EXTRAS to $venv"
  "$venv/bin/python" -m pip install -q --no-deps $CUTLASS_EXTRAS || return 1
  printf '%s' "$CUTLASS_EXTRAS" > "$venv/.complete"
}

# NVIDIA's cuTile (`cuda.tile`, the cuda-tile package): a dependency FlashInfer 0.7.x's wheel
# declares (`Requires-Dist: cuda-tile>=1.4.0`), the only backend of 0.7.2's
# per_token_group_quant_8bit. Pure Python over a small extension that imports without a GPU
# (its compiler, tileiras, is an extra and not installed: nothing is compiled here). Kept in a
# folder of its own, put on PYTHONPATH by the tools that trace FlashInfer (scripts/api-status),
# so the environments other tools share are unchanged.
CUTILE_VERSION=${DYNAFOLD_CUTILE:-1.7.0}
CUTILE_DIR="$DYNAFOLD_CACHE/cuda-tile$CUTILE_VERSION"
ensure_cutile() {
  if [ ! -f "$CUTILE_DIR/.complete" ]; then
    log "installing cuda-tile $CUTILE_VERSION into $CUTILE_DIR"
    rm -rf "$CUTILE_DIR"
    "$VENV/bin/python" -m pip install -q --no-deps --no-compile --target "$CUTILE_DIR" "cuda-tile==$CUTILE_VERSION" >&2 || return 1
    touch "$CUTILE_DIR/.complete"
  fi
}

# ensure_build_wheelhouse: the wheels of the build requirements pyproject.toml names, downloaded
# once, so tests/python/test_package.py can run the README's install line word for
# word (pip's isolated build takes them from here through PIP_FIND_LINKS, without the network).
WHEELHOUSE="$DYNAFOLD_CACHE/build-wheelhouse"
ensure_build_wheelhouse() {
  local requires
  requires=$("$VENV/bin/python" -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["build-system"]["requires"]))') || return 1
  [ -f "$WHEELHOUSE/.complete" ] && [ "$(cat "$WHEELHOUSE/.complete")" = "$requires" ] && return 0
  log "downloading the build requirements ($requires) into $WHEELHOUSE"
  rm -rf "$WHEELHOUSE"
  printf '%s\n' "$requires" | xargs -d '\n' "$VENV/bin/python" -m pip download -q --only-binary=:all: -d "$WHEELHOUSE" || return 1
  printf '%s' "$requires" > "$WHEELHOUSE/.complete"
}
