//! Placeholder so this branch compiles; the real probe replaces it on merge.
