//! The rewriter: FlashInfer module source in, line-preserving rewritten source and the list of
//! edits out. Pure: no I/O, no Python. Rules are data (`hooks/*.toml`, embedded at build time).
//!
//! Contract (relied on by the loader in `src/python` and by `dynafold rewrite`):
//! - `is_target` is an exact, allocation-free match on the dotted module name.
//! - `rewrite` returns `Err(Skip)` with a one-line reason whenever anything is not exactly as
//!   the rules expect; callers then load the original module untouched.
//! - On success the output has exactly as many lines as the input and every statement stays
//!   on its line; values never appear in the generated text, only the names of module globals
//!   listed in `Rewritten::globals`, which the loader sets before executing the module. The
//!   only literals generated are `True` / `False`.

use crate::cuda::{CudaVersion, Outcome, PathRecipe, VersionRecipe};

/// What the rewriter may ask about the process it is folding for.
pub trait FoldContext {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String>;
    fn cuda_version(&self, version: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion>;
    /// The version `flashinfer.jit.cpp_ext` was folded with in this process, if it was:
    /// call sites elsewhere fold only to that value, so every module agrees.
    fn folded_cuda_version(&self) -> Option<CudaVersion>;
}

/// One change, for `__dynafold__`, logs and `--diff`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Edit {
    /// The rule's name, e.g. `cpp_ext.get_cuda_version`.
    pub rule: String,
    /// 1-based, inclusive.
    pub first_line: u32,
    pub last_line: u32,
    /// What it did, e.g. `body -> return __dynafold_cuda_version__`.
    pub summary: String,
}

/// A module global the loader must define before executing the rewritten source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Global {
    pub name: String,
    pub value: GlobalValue,
    /// Where the value came from (e.g. `nvcc --version at /usr/local/cuda/bin/nvcc`).
    pub provenance: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GlobalValue {
    /// Build with the module's own `Version` (packaging.version.Version).
    Version(CudaVersion),
    Str(String),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    pub source: String,
    pub edits: Vec<Edit>,
    pub globals: Vec<Global>,
    /// Set when this module's fold fixed the process's CUDA version (cpp_ext).
    pub cuda_version: Option<CudaVersion>,
}

/// Why a module is loaded untouched: one line, for the warning.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skip(pub String);

// placeholder, replaced by the rewrite branch
pub fn is_target(module: &str) -> bool {
    matches!(
        module,
        "flashinfer.jit.cpp_ext"
            | "flashinfer.fp4_quantization"
            | "flashinfer.jit.fp4_quantization"
            | "flashinfer.quantization.fp4_quantization"
    )
}
pub fn rewrite(module: &str, _source: &str, _ctx: &dyn FoldContext) -> Result<Rewritten, Skip> {
    Err(Skip(format!("{module}: rewriter not built yet")))
}
