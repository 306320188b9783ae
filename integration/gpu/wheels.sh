# Sourced by the GPU scripts. The GPU machine has no network: what it lacks travels as wheels
# and is installed into a folder of its own, put on PYTHONPATH by the caller.
#   install_wheels SITE WHEEL...
install_wheels() {
  local site=$1
  shift
  PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --no-index --no-deps --no-compile \
    --no-cache-dir --upgrade --target "$site" "$@"
}
