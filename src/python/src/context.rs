//! The process-wide facts the rewriter folds: one resolver per process, built on the first
//! target import, and the CUDA version `flashinfer.jit.cpp_ext` was folded with, so that every
//! later module folds its call sites to that same value.

use std::path::PathBuf;
use std::sync::OnceLock;

use dynafold_core::cuda::{
    CudaVersion, Env, Outcome, PathRecipe, Resolver, TorchFacts, VersionRecipe,
};
use dynafold_core::rewrite::FoldContext;
use pyo3::prelude::*;

static RESOLVER: OnceLock<Resolver> = OnceLock::new();
static FOLDED_VERSION: OnceLock<CudaVersion> = OnceLock::new();

pub struct ProcessContext {
    resolver: &'static Resolver,
}

impl ProcessContext {
    /// The context, building the resolver on first use. `torch_home`: torch's
    /// `cpp_extension.CUDA_HOME` when the module reads it (FlashInfer 0.2/0.3), as the Python
    /// side of the loader found it (that takes an import, which is not run from here); None
    /// when unknown.
    pub fn get(py: Python<'_>, torch_home: Option<Option<String>>) -> ProcessContext {
        if let Some(resolver) = RESOLVER.get() {
            return ProcessContext { resolver };
        }
        // Outside the OnceLock: this runs Python, which lets another importing thread in;
        // blocked on the lock with the GIL held, that thread would deadlock the process. Two
        // threads may both compute the facts; one set wins.
        let torch = torch_facts(py, torch_home);
        let resolver = RESOLVER.get_or_init(|| {
            Resolver::new(
                Env::from_process(),
                torch,
                dynafold_core::config::nvcc_timeout(),
            )
            .with_override(dynafold_core::config::cuda_override())
        });
        ProcessContext { resolver }
    }

    pub fn set_folded_version(&self, v: CudaVersion) {
        let _ = FOLDED_VERSION.set(v);
    }
}

impl FoldContext for ProcessContext {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String> {
        self.resolver.cuda_path(recipe)
    }
    fn cuda_version(&self, version: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion> {
        self.resolver.cuda_version(version, path)
    }
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        FOLDED_VERSION.get().cloned()
    }
}

/// torch's CUDA facts: live when torch is imported, else read from its installed
/// `version.py` without importing it (importing torch takes seconds and is not ours to do).
fn torch_facts(py: Python<'_>, torch_home: Option<Option<String>>) -> TorchFacts {
    let live = || -> PyResult<Option<Option<String>>> {
        let modules = py.import("sys")?.getattr("modules")?;
        match modules.get_item("torch.version") {
            Ok(v) => Ok(Some(v.getattr("cuda")?.extract()?)),
            Err(_) => Ok(None),
        }
    };
    let cuda_version = live().ok().flatten();
    let mut facts = match cuda_version {
        Some(v) => TorchFacts {
            cuda_version: Some(v),
            cuda_home: None,
        },
        None => TorchFacts::from_torch_install(&sys_path(py)),
    };
    // None: not read by this module, or torch could not say; either way unknown.
    facts.cuda_home = torch_home;
    facts
}

fn sys_path(py: Python<'_>) -> Vec<PathBuf> {
    py.import("sys")
        .and_then(|s| s.getattr("path"))
        .and_then(|p| p.extract::<Vec<String>>())
        .map(|v| v.into_iter().map(PathBuf::from).collect())
        .unwrap_or_default()
}
