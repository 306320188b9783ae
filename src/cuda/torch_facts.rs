//! What FlashInfer reads from torch: `torch.version.cuda` (the 0.4+ fallback) and
//! `torch.utils.cpp_extension.CUDA_HOME` (0.2/0.3). Learned without importing torch, which
//! would cost seconds and is not ours to trigger.

use std::path::{Path, PathBuf};

/// Facts about the torch FlashInfer will see. Outer `None`: unknown, so any recipe that needs
/// the fact is `Unfoldable`; inner `None`: torch says `None`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TorchFacts {
    /// `torch.version.cuda`.
    pub cuda_version: Option<Option<String>>,
    /// `torch.utils.cpp_extension.CUDA_HOME` (computed by torch at import; only the live
    /// module can say).
    pub cuda_home: Option<Option<String>>,
}

impl TorchFacts {
    /// Nothing known.
    pub fn unknown() -> TorchFacts {
        TorchFacts::default()
    }

    /// Reads `torch/version.py` of the torch that `import torch` would find on `site_dirs`
    /// (sys.path order: the first entry holding a `torch/__init__.py`). `cuda_home` stays
    /// unknown: torch computes it from the environment at import time.
    pub fn from_torch_install(site_dirs: &[PathBuf]) -> TorchFacts {
        let pkg = site_dirs
            .iter()
            .map(|d| d.join("torch"))
            .find(|t| t.join("__init__.py").is_file());
        TorchFacts {
            cuda_version: pkg.and_then(|p| read_version_py(&p.join("version.py"))),
            cuda_home: None,
        }
    }
}

fn read_version_py(path: &Path) -> Option<Option<String>> {
    let text = std::fs::read_to_string(path).ok()?;
    parse_cuda_assignment(&text)
}

/// The value of the single top-level `cuda = ...` / `cuda: <annotation> = ...` line, when it
/// is `None` or a plain string literal. Anything fancier (two assignments, escapes, a
/// computed value) is unknown rather than guessed.
pub(crate) fn parse_cuda_assignment(text: &str) -> Option<Option<String>> {
    let mut found: Option<Option<String>> = None;
    let mut count = 0usize;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cuda") else {
            continue;
        };
        let rest = rest.trim_start_matches([' ', '\t']);
        let rhs = if let Some(r) = rest.strip_prefix(':') {
            // Annotation: everything up to the `=` (annotations here never contain one).
            match r.split_once('=') {
                Some((_, v)) => v,
                None => continue,
            }
        } else if let Some(r) = rest.strip_prefix('=') {
            if r.starts_with('=') {
                continue;
            }
            r
        } else {
            // `cuda_foo = ...`, `cuda.x = ...` and the like are other names.
            continue;
        };
        count += 1;
        found = parse_value(rhs.trim_matches([' ', '\t']));
    }
    if count == 1 {
        found
    } else {
        None
    }
}

fn parse_value(v: &str) -> Option<Option<String>> {
    if v == "None" {
        return Some(None);
    }
    let quote = v.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = v.strip_prefix(quote)?.strip_suffix(quote)?;
    if inner.contains(['\'', '"', '\\']) {
        return None;
    }
    Some(Some(inner.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_shapes() {
        let real = "from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda']\n\
                    __version__ = '2.15.0+cu132'\ndebug = False\ncuda: Optional[str] = '13.2'\n\
                    hip: Optional[str] = None\n";
        assert_eq!(parse_cuda_assignment(real), Some(Some("13.2".into())));
        assert_eq!(parse_cuda_assignment("cuda = None\n"), Some(None));
        assert_eq!(
            parse_cuda_assignment("cuda: Optional[str] = None"),
            Some(None)
        );
        assert_eq!(
            parse_cuda_assignment("cuda = \"12.8\"\n"),
            Some(Some("12.8".into()))
        );
        assert_eq!(
            parse_cuda_assignment("cuda='12.8'\r\n"),
            Some(Some("12.8".into()))
        );
    }

    #[test]
    fn refuses_anything_else() {
        for t in [
            "",
            "hip = None\n",
            "cuda = None\ncuda = '12.8'\n",
            "cuda = get()\n",
            "cuda = '12.8' if x else None\n",
            "cuda = '12\\x2e8'\n",
            "cuda = '12.8\n",
            "cuda = f'{x}'\n",
            "cuda: Optional[str]\n",
        ] {
            assert_eq!(parse_cuda_assignment(t), None, "{t:?}");
        }
        assert_eq!(
            parse_cuda_assignment("cuda_x = 1\ncuda = None\n"),
            Some(None)
        );
        assert_eq!(
            parse_cuda_assignment("if x:\n    cuda = '1'\ncuda = None\n"),
            Some(None)
        );
    }

    #[test]
    fn finds_first_torch_on_path() {
        let a = tempfile::tempdir().unwrap();
        let b = tempfile::tempdir().unwrap();
        let c = tempfile::tempdir().unwrap();
        // `a` has a stray torch/ without __init__.py: not importable, skipped.
        std::fs::create_dir(a.path().join("torch")).unwrap();
        std::fs::write(a.path().join("torch/version.py"), "cuda = '9.9'\n").unwrap();
        for (d, v) in [(&b, "cuda = None\n"), (&c, "cuda = '12.8'\n")] {
            std::fs::create_dir(d.path().join("torch")).unwrap();
            std::fs::write(d.path().join("torch/__init__.py"), "").unwrap();
            std::fs::write(d.path().join("torch/version.py"), v).unwrap();
        }
        let dirs = |ds: &[&tempfile::TempDir]| -> Vec<PathBuf> {
            ds.iter().map(|d| d.path().to_path_buf()).collect()
        };
        let f = TorchFacts::from_torch_install(&dirs(&[&a, &b, &c]));
        assert_eq!(f.cuda_version, Some(None));
        assert_eq!(f.cuda_home, None);
        let f = TorchFacts::from_torch_install(&dirs(&[&c, &b]));
        assert_eq!(f.cuda_version, Some(Some("12.8".into())));
        assert_eq!(
            TorchFacts::from_torch_install(&dirs(&[&a])).cuda_version,
            None
        );
    }
}
