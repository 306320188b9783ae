//! What the integration tests over the real FlashInfer corpus share: where the corpus lives and
//! a fold context standing for a process with CUDA 12.8.

use std::path::PathBuf;

use dynafold_core::cuda::{CudaVersion, Outcome, PathRecipe, Provenance, VersionRecipe};
use dynafold_core::rewrite::FoldContext;

pub struct Cuda128;

impl FoldContext for Cuda128 {
    fn cuda_path(&self, _: PathRecipe) -> Outcome<String> {
        Outcome::Value("/usr/local/cuda".into(), Provenance("test".into()))
    }
    fn cuda_version(&self, _: VersionRecipe, _: PathRecipe) -> Outcome<CudaVersion> {
        Outcome::Value(version(), Provenance("test".into()))
    }
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        Some(version())
    }
}

pub fn version() -> CudaVersion {
    CudaVersion::parse_release("12.8").expect("12.8 is a release")
}

/// `$DYNAFOLD_CACHE/corpus` (default `~/.cache/dynafold-dev/corpus`), filled by scripts/fetch-corpus.
pub fn corpus_dir() -> PathBuf {
    let cache = std::env::var_os("DYNAFOLD_CACHE")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/dynafold-dev")
        });
    cache.join("corpus")
}
