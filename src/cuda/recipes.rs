// placeholder, replaced by the cuda branch
use super::*;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;
pub struct Env {
    pub vars: HashMap<String, String>,
    pub cwd: PathBuf,
}
impl Env {
    pub fn from_process() -> Env {
        Env { vars: std::env::vars().collect(), cwd: PathBuf::new() }
    }
}
pub struct Resolver;
impl Resolver {
    pub fn new(_env: Env, _torch: TorchFacts, _timeout: Duration) -> Self {
        Resolver
    }
    pub fn with_override(self, _v: Option<CudaVersion>) -> Self {
        self
    }
    pub fn cuda_path(&self, _r: PathRecipe) -> Outcome<String> {
        Outcome::Unfoldable("placeholder".into())
    }
    pub fn cuda_version(&self, _v: VersionRecipe, _p: PathRecipe) -> Outcome<CudaVersion> {
        Outcome::Unfoldable("placeholder".into())
    }
}
