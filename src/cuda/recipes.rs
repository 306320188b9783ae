//! Placeholder so this branch compiles; the real resolver replaces it on merge.

pub struct Resolver;
