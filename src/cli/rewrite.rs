//! `dynafold rewrite FILE [--module NAME]`: the rewrite as a unified diff, plus the
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

/// The dotted module name of a FlashInfer source file, from its path's last `flashinfer`
/// folder on (`.../flashinfer/jit/cpp_ext.py` -> `flashinfer.jit.cpp_ext`).
pub fn module_of(file: &Path) -> Option<String> {
    let parts: Vec<&str> = file.iter().filter_map(|c| c.to_str()).collect();
    let start = parts.iter().rposition(|p| *p == "flashinfer")?;
    let mut names: Vec<&str> = parts[start..].to_vec();
    let last = names.pop()?.strip_suffix(".py")?;
    names.push(last);
    Some(names.join("."))
}

/// A CUDA version given to `rewrite`, and how it was given (`--cuda-version` or
/// `DYNAFOLD_CUDA_VERSION`): the folded values name it as their source.
pub struct Override {
    pub version: CudaVersion,
    pub given_as: &'static str,
}

/// The module `file` holds: `--module`, else read from the path. A folder or a file that is not
/// Python source is named as such, not as one outside FlashInfer.
fn module_for(file: &Path, module: Option<&str>) -> Result<String, String> {
    if file.is_dir() {
        return Err(format!(
            "{} is a folder; name one FlashInfer source file in it (a .py file)",
            file.display()
        ));
    }
    if let Some(m) = module {
        return Ok(m.to_owned());
    }
    if file.extension().is_none_or(|x| x != "py") {
        return Err(format!(
            "{}: not a Python source file (.py); name its module with --module",
            file.display()
        ));
    }
    module_of(file).ok_or_else(|| {
        format!(
            "{}: not under a flashinfer folder; name its module with --module",
            file.display()
        )
    })
}

pub fn run(
    file: &Path,
    module: Option<&str>,
    cuda_version: Option<Override>,
    site_dirs: &[PathBuf],
    timeout: Duration,
) -> Result<String, String> {
    let module = module_for(file, module)?;
    let module = module.as_str();
    let source = std::fs::read_to_string(file)
        .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    // As a process would treat it: imported as FlashInfer ships it. Not an error: the answer
    // to "what would dynafold change here" is "nothing", as for a target with nothing to fold.
    if !rewrite::is_target(module) {
        return Ok(format!(
            "{module}: would be loaded unchanged: not a module dynafold rewrites (it rewrites {}); FlashInfer's op declarations are woken at import, not rewritten: `dynafold doctor` counts them per module\n",
            rewrite::TARGETS.join(", ")
        ));
    }
    let overridden = cuda_version.is_some();
    let (version, given_as) = match cuda_version {
        Some(o) => (Some(o.version), o.given_as),
        None => (None, ""),
    };
    let ctx = CliContext {
        resolver: Resolver::new(
            Env::from_process(),
            TorchFacts::from_torch_install(site_dirs),
            timeout,
        )
        .with_override_from(version, given_as),
    };
    // The diff names the file as a package path, as git would (`a/flashinfer/jit/...`).
    let shown = format!("{}.py", module.replace('.', "/"));
    match rewrite::rewrite(module, &source, &ctx) {
        Err(skip) => {
            let mut out = format!(
                "{module}: would be loaded unchanged: {}\n",
                skip.why(module)
            );
            // A module with nothing to fold needs no version: no hint for one.
            if !overridden && !skip.is_nothing_to_fold() && ctx.folded_cuda_version().is_none() {
                out.push_str(
                    "hint: no CUDA version is known here (no nvcc answers, no torch found): pass --cuda-version MAJOR.MINOR, or --site-dir with the site-packages that hold torch\n",
                );
            }
            Ok(out)
        }
        Ok(r) => {
            let mut out = rewrite::unified_diff(&shown, &source, &r.source);
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

#[cfg(test)]
mod tests {
    use super::{module_for, module_of};
    use std::path::Path;

    #[test]
    fn the_module_is_read_from_the_path() {
        let m = |p: &str| module_of(Path::new(p));
        assert_eq!(
            m("/v/lib/python3.12/site-packages/flashinfer/jit/cpp_ext.py").as_deref(),
            Some("flashinfer.jit.cpp_ext")
        );
        assert_eq!(
            m("/src/flashinfer/flashinfer/fp4_quantization.py").as_deref(),
            Some("flashinfer.fp4_quantization")
        );
        assert_eq!(m("/tmp/cpp_ext.py"), None);
        assert_eq!(m("/x/flashinfer/jit/cpp_ext.pyc"), None);
    }

    #[test]
    fn a_folder_or_a_non_python_file_is_named_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let fi = dir.path().join("flashinfer/jit");
        std::fs::create_dir_all(&fi).unwrap();
        let err = module_for(&fi, None).unwrap_err();
        assert!(
            err.ends_with("is a folder; name one FlashInfer source file in it (a .py file)"),
            "{err}"
        );
        let so = fi.join("x.so");
        let err = module_for(&so, None).unwrap_err();
        assert!(err.contains("not a Python source file"), "{err}");
        assert_eq!(
            module_for(&so, Some("flashinfer.x")).as_deref(),
            Ok("flashinfer.x")
        );
    }
}
