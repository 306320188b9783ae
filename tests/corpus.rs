//! Every target module of every real FlashInfer release in the corpus
//! (`scripts/fetch-corpus`), rewritten as if the process had CUDA 12.8, must give exactly the
//! table "Which sites each FlashInfer release has" in docs/architecture.md.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dynafold_core::rewrite::{rewrite, TARGETS};

mod common;
use common::{corpus_dir, version, Cuda128};

/// One cell of docs/architecture.md's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    /// `-`: the release has no such module.
    Absent,
    /// `stub`: the module only re-exports, so no rule matches and it is left untouched.
    Stub,
    /// This many sites folded, by these rules (in source order).
    Sites(&'static [&'static str]),
}
use Cell::{Absent, Sites, Stub};

/// 0.2.14.post1's cpp_ext has no `get_cuda_path` (it takes torch's `CUDA_HOME`).
const CPP_EXT_2: Cell = Sites(&[
    "cpp_ext.get_cuda_version",
    "cpp_ext.is_cuda_version_at_least",
]);
const CPP_EXT_3: Cell = Sites(&[
    "cpp_ext.get_cuda_path",
    "cpp_ext.get_cuda_version",
    "cpp_ext.is_cuda_version_at_least",
]);
const FP4_2: Cell = Sites(&[
    "fp4.is_cuda_version_at_least",
    "fp4.is_cuda_version_at_least",
]);

/// docs/architecture.md's table, row for row; columns in `TARGETS` order. Every release that
/// scripts/fetch-corpus installs must be here and in the corpus.
const EXPECTED: [(&str, [Cell; 4]); 9] = [
    ("0.2.0.post2", [Absent, Absent, Absent, Absent]),
    ("0.2.14.post1", [CPP_EXT_2, FP4_2, Absent, Absent]),
    ("0.3.1", [CPP_EXT_3, FP4_2, Absent, Absent]),
    ("0.4.1", [CPP_EXT_3, FP4_2, FP4_2, Absent]),
    ("0.5.3", [CPP_EXT_3, FP4_2, FP4_2, Absent]),
    ("0.6.0", [CPP_EXT_3, FP4_2, FP4_2, Absent]),
    ("0.6.16", [CPP_EXT_3, Stub, FP4_2, FP4_2]),
    ("0.7.0", [CPP_EXT_3, Stub, FP4_2, FP4_2]),
    ("0.7.4", [CPP_EXT_3, Stub, FP4_2, FP4_2]),
];

/// What the rewriter made of one module.
#[derive(Debug)]
enum Found {
    Absent,
    Stub,
    Sites(Vec<String>),
}

impl Found {
    fn is(&self, cell: &Cell) -> bool {
        match (self, cell) {
            (Found::Absent, Absent) | (Found::Stub, Stub) => true,
            (Found::Sites(got), Sites(want)) => got == want,
            _ => false,
        }
    }

    fn show(&self) -> String {
        match self {
            Found::Absent => "-".into(),
            Found::Stub => "stub".into(),
            Found::Sites(rules) => rules.len().to_string(),
        }
    }
}

fn module_file(module: &str) -> PathBuf {
    PathBuf::from(format!("{}.py", module.replace('.', "/")))
}

fn lines(text: &str) -> usize {
    text.matches('\n').count()
}

#[test]
fn corpus_rewrites_cleanly() {
    let corpus = corpus_dir();
    let mut releases: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap_or_else(|e| {
            panic!(
                "corpus folder {} is missing ({e}): run scripts/fetch-corpus first",
                corpus.display()
            )
        })
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    releases.sort_by_key(|p| release_key(p));
    let found: Vec<String> = releases.iter().map(|p| release_name(p)).collect();
    let wanted: Vec<String> = EXPECTED.iter().map(|(r, _)| r.to_string()).collect();
    assert_eq!(
        found,
        wanted,
        "the releases in {} are not docs/architecture.md's table's: run scripts/fetch-corpus (or update \
         EXPECTED and docs/architecture.md together)",
        corpus.display()
    );
    for release_dir in &releases {
        // A folder left half-unpacked, or holding no FlashInfer at all, would otherwise read
        // as a release without the modules.
        assert!(
            release_dir.join(".complete").is_file()
                && release_dir.join("flashinfer/__init__.py").is_file(),
            "{} is not a complete FlashInfer release: delete it and run scripts/fetch-corpus",
            release_dir.display()
        );
    }

    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut written: Vec<PathBuf> = Vec::new();
    let mut table: BTreeMap<(Vec<u64>, String), Vec<Found>> = BTreeMap::new();
    let mut mismatches = Vec::new();
    for (release_dir, (release, expected)) in releases.iter().zip(EXPECTED) {
        let release = release.to_string();
        let mut row = Vec::new();
        for module in TARGETS {
            let path = release_dir.join(module_file(module));
            let src = match std::fs::read_to_string(&path) {
                Ok(src) => src,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    row.push(Found::Absent);
                    continue;
                }
                Err(e) => panic!("{}: {e}", path.display()),
            };
            match rewrite(module, &src, &Cuda128) {
                Ok(out) => {
                    assert_eq!(
                        lines(&out.source),
                        lines(&src),
                        "{release} {module}: line count"
                    );
                    let out_lines: Vec<&str> = out.source.split('\n').collect();
                    for edit in &out.edits {
                        let body = out_lines
                            .get(edit.first_line as usize - 1..edit.last_line as usize)
                            .expect("edit lines in range")
                            .join("\n");
                        assert!(
                            !body.contains("subprocess"),
                            "{release} {module}: {} still runs subprocess:\n{body}",
                            edit.rule
                        );
                    }
                    if module.ends_with("fp4_quantization") {
                        assert!(
                            !out.source.contains("is_cuda_version_at_least(\""),
                            "{release} {module}: a literal call remains"
                        );
                    }
                    if module == "flashinfer.jit.cpp_ext" {
                        assert_eq!(out.cuda_version, Some(version()), "{release}");
                    }
                    let dest = out_dir.path().join(&release).join(module_file(module));
                    std::fs::create_dir_all(dest.parent().expect("has a parent")).expect("mkdir");
                    std::fs::write(&dest, &out.source).expect("write");
                    written.push(dest);
                    row.push(Found::Sites(
                        out.edits.iter().map(|e| e.rule.clone()).collect(),
                    ));
                }
                Err(skip) => {
                    // The one expected skip: 0.6.16+'s re-export stub has no call site.
                    assert!(
                        module == "flashinfer.fp4_quantization" && skip.is_nothing_to_fold(),
                        "{release} {module}: unexpected skip: {}",
                        skip.0
                    );
                    row.push(Found::Stub);
                }
            }
        }
        for ((module, got), want) in TARGETS.iter().zip(&row).zip(&expected) {
            if !got.is(want) {
                mismatches.push(format!(
                    "{release} {module}: got {got:?}, docs/architecture.md says {want:?}"
                ));
            }
        }
        table.insert((release_key(release_dir), release), row);
    }

    // One CPython for every output: it must accept what ruff accepted.
    let status = Command::new("python3")
        .arg("-c")
        .arg("import sys\nfor p in sys.argv[1:]:\n    compile(open(p).read(), p, 'exec')")
        .args(&written)
        .status()
        .expect("python3 must be installed to check the rewritten sources");
    assert!(status.success(), "CPython rejected a rewritten module");

    let mut header = format!("| {:<13} |", "release");
    for module in TARGETS {
        header.push_str(&format!(" {module} |"));
    }
    println!("\nsites folded (release x module; - = module absent):\n{header}");
    println!("|{}", "---|".repeat(TARGETS.len() + 1));
    for ((_, release), row) in &table {
        let row: Vec<String> = row.iter().map(Found::show).collect();
        println!("| {release:<13} | {} |", row.join(" | "));
    }
    println!("{} rewritten modules compiled with CPython", written.len());
    assert!(
        mismatches.is_empty(),
        "docs/architecture.md's table is wrong:\n{}",
        mismatches.join("\n")
    );
    let expected_written = EXPECTED
        .iter()
        .flat_map(|(_, row)| row)
        .filter(|c| matches!(c, Sites(_)))
        .count();
    assert_eq!(written.len(), expected_written, "rewritten modules");
}

fn release_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn release_key(path: &Path) -> Vec<u64> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}
