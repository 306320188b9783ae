//! Placeholder so this branch compiles; the real torch facts replace it on merge.

pub struct TorchFacts;
