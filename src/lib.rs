//! dynafold's pure-Rust core, shared by the CLI and the pyo3 library.
//!
//! Nothing here touches Python: the rewriter turns source into source, the resolver turns an
//! environment into CUDA facts, the report module turns records into tables. The Python-facing
//! glue lives in `src/python`, the LD_PRELOAD stub in `src/preload`.

pub mod cli;
pub mod config;
pub mod cuda;
pub mod report;
pub mod rewrite;
