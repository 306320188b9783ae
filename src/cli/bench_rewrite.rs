//! `dynafold bench-rewrite` (hidden): times the rewriter alone on real files, for
//! `scripts/bench`. The CUDA facts are fixed constants: the real loader resolves them once per
//! process, so they are not part of the per-module cost measured here.

use std::path::PathBuf;
use std::time::Instant;

use crate::cuda::{CudaVersion, Outcome, PathRecipe, Provenance, VersionRecipe};
use crate::rewrite::{self, FoldContext};

struct FixedContext(CudaVersion);

impl FoldContext for FixedContext {
    fn cuda_path(&self, _: PathRecipe) -> Outcome<String> {
        Outcome::Value("/usr/local/cuda".into(), Provenance("bench".into()))
    }
    fn cuda_version(&self, _: VersionRecipe, _: PathRecipe) -> Outcome<CudaVersion> {
        Outcome::Value(self.0.clone(), Provenance("bench".into()))
    }
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        Some(self.0.clone())
    }
}

/// One JSON line per `(module, file)`: the median, min and max of `iterations` rewrites in
/// microseconds, and how many edits one rewrite made.
pub fn run(targets: &[(String, PathBuf)], iterations: u32) -> Result<String, String> {
    let ctx = FixedContext(CudaVersion::parse_override("12.8")?);
    let mut out = String::new();
    for (module, file) in targets {
        let source = std::fs::read_to_string(file)
            .map_err(|e| format!("cannot read {}: {e}", file.display()))?;
        let mut times = Vec::with_capacity(iterations as usize);
        let mut edits = 0;
        for _ in 0..iterations.max(1) {
            let start = Instant::now();
            let result = rewrite::rewrite(module, &source, &ctx);
            times.push(start.elapsed().as_secs_f64() * 1e6);
            edits = result.map(|r| r.edits.len()).unwrap_or(0);
        }
        times.sort_by(f64::total_cmp);
        let pick = |q: f64| {
            let i = ((times.len() - 1) as f64 * q).round() as usize;
            times.get(i).copied().unwrap_or(f64::NAN)
        };
        out.push_str(&format!(
            "{{\"module\": {module:?}, \"file\": {:?}, \"bytes\": {}, \"edits\": {edits}, \"median_us\": {:.1}, \"min_us\": {:.1}, \"max_us\": {:.1}, \"n\": {}}}\n",
            file.display().to_string(),
            source.len(),
            pick(0.5),
            pick(0.0),
            pick(1.0),
            times.len()
        ));
    }
    Ok(out)
}
