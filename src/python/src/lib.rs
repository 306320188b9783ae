//! Placeholder so the workspace builds in this branch (replaced on merge).
