//! The CUDA-version resolver: what FlashInfer's `get_cuda_path()` / `get_cuda_version()` would
//! return in this process, computed once, without Python.
//!
//! FlashInfer has shipped several shapes of these functions; each shape is a *recipe* here,
//! named in the rules under `hooks/` and chosen by the rewriter from the function's source.
//! A recipe either yields a value, or the exact error FlashInfer would raise, or says it
//! cannot be sure (`Unfoldable`), in which case nothing is folded.

mod posixpath;
mod probe;
mod recipes;
#[cfg(test)]
mod test_files;
mod torch_facts;
mod version;

pub use recipes::{Env, Resolver};
pub use torch_facts::TorchFacts;
pub use version::CudaVersion;

/// How FlashInfer locates the CUDA toolkit (`get_cuda_path`), by release family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PathRecipe {
    /// 0.5+: `CUDA_HOME or CUDA_PATH`, else `which nvcc` (dirname twice), else
    /// `/usr/local/cuda`, raising RuntimeError when that does not exist.
    EnvWhichDefault,
    /// 0.4: `CUDA_HOME or CUDA_PATH`, else `which nvcc` (dirname twice), else RuntimeError.
    EnvWhichRaise,
    /// 0.3: torch's `cpp_extension.CUDA_HOME`, else `which nvcc` (the nvcc path itself, not
    /// its grandparent), else RuntimeError.
    TorchHomeWhichRaise,
}

/// How FlashInfer obtains the version (`get_cuda_version`), by release family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum VersionRecipe {
    /// 0.4+: `<get_cuda_path()>/bin/nvcc --version`, regex `release (\d+\.\d+),`; on
    /// RuntimeError / FileNotFoundError / CalledProcessError fall back to torch.version.cuda,
    /// raising RuntimeError when torch has no CUDA.
    NvccTorchFallback,
    /// 0.2/0.3: `nvcc` from torch's `cpp_extension.CUDA_HOME` (or PATH when None), no
    /// fallback: a missing or failing nvcc propagates.
    NvccTorchHome,
}

/// Where a folded value came from, for `__dynafold__` and `dynafold doctor`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Provenance(pub String);

/// The result of resolving one function the way FlashInfer would.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome<T> {
    /// FlashInfer would return this value.
    Value(T, Provenance),
    /// FlashInfer would raise `exception(message)` (only exceptions we can rebuild exactly).
    Raise {
        exception: &'static str,
        message: String,
    },
    /// dynafold cannot be sure what FlashInfer would do (timeout, odd errno, undecodable
    /// output...): the function must be left as it is.
    Unfoldable(String),
}
