//! `dynafold rewrite --diff FILE --module NAME`: the rewrite as a unified diff, plus the
//! folded values and where they came from. It reads FILE and runs nothing from it; the CUDA
//! facts come from this environment exactly as the preload library would resolve them
//! (torch's CUDA version read from its installed `version.py`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cuda::{CudaVersion, Env, Outcome, PathRecipe, Resolver, TorchFacts, VersionRecipe};
use crate::rewrite::{self, FoldContext, GlobalValue};

struct CliContext {
    resolver: Resolver,
}

impl FoldContext for CliContext {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String> {
        self.resolver.cuda_path(recipe)
    }
    fn cuda_version(&self, version: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion> {
        self.resolver.cuda_version(version, path)
    }
    /// Alone, an fp4 module has no cpp_ext fold to agree with: use what current FlashInfer
    /// (0.5+) would compute here.
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        match self.resolver.cuda_version(
            VersionRecipe::NvccTorchFallback,
            PathRecipe::EnvWhichDefault,
        ) {
            Outcome::Value(v, _) => Some(v),
            _ => None,
        }
    }
}

pub fn run(
    file: &Path,
    module: &str,
    cuda_version: Option<CudaVersion>,
    site_dirs: &[PathBuf],
    timeout: Duration,
) -> Result<String, String> {
    if !rewrite::is_target(module) {
        return Err(format!("{module} is not a module dynafold rewrites"));
    }
    let source = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    let ctx = CliContext {
        resolver: Resolver::new(
            Env::from_process(),
            TorchFacts::from_torch_install(site_dirs),
            timeout,
        )
        .with_override(cuda_version),
    };
    match rewrite::rewrite(module, &source, &ctx) {
        Err(rewrite::Skip(reason)) => {
            Ok(format!("{module}: would be loaded unchanged: {reason}\n"))
        }
        Ok(r) => {
            let mut out = rewrite::unified_diff(&file.display().to_string(), &source, &r.source);
            out.push_str("\nfolded values:\n");
            for g in &r.globals {
                let shown = match &g.value {
                    GlobalValue::Version(v) => format!("Version({:?})", v.as_str()),
                    GlobalValue::Str(s) => format!("{s:?}"),
                };
                out.push_str(&format!("  {} = {shown}  ({})\n", g.name, g.provenance));
            }
            if r.globals.is_empty() {
                out.push_str("  (none: call sites folded to literals)\n");
            }
            out.push_str("edits:\n");
            for e in &r.edits {
                out.push_str(&format!(
                    "  {} lines {}-{}: {}\n",
                    e.rule, e.first_line, e.last_line, e.summary
                ));
            }
            Ok(out)
        }
    }
}
