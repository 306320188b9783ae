//! `libdynafold_python.so`: the Python side of dynafold, loaded by `libdynafold.so` once the
//! interpreter is up. It installs `DynafoldFinder` at `sys.meta_path[0]`, keeps it there,
//! rewrites FlashInfer's target modules as they are imported, and starts the graph-break
//! observer (and, when asked, survey mode) when `torch._dynamo` is imported.
//!
//! Everything exported here is called from C with the GIL held: no panic may cross the
//! boundary and no Python exception may be left set.

mod cache;
mod context;
mod dormant_ops;
mod embedded;
mod engine_package;
mod entry;
mod finder;
mod guard;
mod keep_first;
mod loader;
mod logging;
mod overhead;
mod post_import;
mod reporter;
mod spec_loaders;
mod survey;
