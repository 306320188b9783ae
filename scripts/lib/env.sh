# Shared set-up for scripts/demo and scripts/test: one pinned Python environment with real
# torch and real FlashInfer releases, kept outside the clone and reused between runs.
# Sourced, not executed.

DYNAFOLD_CACHE=${DYNAFOLD_CACHE:-$HOME/.cache/dynafold}
TORCH_VERSION=${DYNAFOLD_TORCH:-2.15.0}
# The oldest torch the graph-break reporter supports; its tests run there too.
OLD_TORCH_VERSION=${DYNAFOLD_OLD_TORCH:-2.9.1}
BASE_PYTHON=${DYNAFOLD_BASE_PYTHON:-python3}
VENV="$DYNAFOLD_CACHE/venv-torch$TORCH_VERSION"
FLASHINFER_DIR="$DYNAFOLD_CACHE/flashinfer"
# Releases installed side by side (each in its own --target folder), chosen to span the
# layouts FlashInfer has shipped: sdists (0.2/0.3), the 0.5/0.6 wheels and the 0.7 split.
FLASHINFER_RELEASES=${DYNAFOLD_FLASHINFER_RELEASES:-"0.5.3 0.6.16 0.7.4"}
# What FlashInfer's fp4 path imports, minus its heavy extras (FIELD-NOTES 2).
FLASHINFER_DEPS="apache-tvm-ffi packaging filelock requests tqdm nvidia-ml-py einops click tabulate numpy"

log() { printf '[dynafold setup] %s\n' "$*" >&2; }

# ensure_venv [TORCH_VERSION]: the environment for that torch (default $TORCH_VERSION).
ensure_venv() {
  local torch=${1:-$TORCH_VERSION}
  local venv="$DYNAFOLD_CACHE/venv-torch$torch"
  if [ -x "$venv/bin/python" ] && [ -f "$venv/.complete" ]; then return 0; fi
  log "creating $venv (torch $torch from PyPI; first time only, a few minutes)"
  rm -rf "$venv"
  "$BASE_PYTHON" -m venv "$venv" || return 1
  "$venv/bin/python" -m pip install -q --upgrade pip || return 1
  "$venv/bin/python" -m pip install -q "torch==$torch" $FLASHINFER_DEPS pytest maturin ziglang auditwheel || return 1
  touch "$venv/.complete"
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
