//! Every target module of every real FlashInfer release in the corpus
//! (`scripts/fetch-corpus`), rewritten as if the process had CUDA 12.8.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use dynafold_core::rewrite::{rewrite, TARGETS};

mod common;
use common::{corpus_dir, version, Cuda128};

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
    assert!(
        !releases.is_empty(),
        "corpus folder {} is empty: run scripts/fetch-corpus first",
        corpus.display()
    );

    let out_dir = tempfile::tempdir().expect("temp dir");
    let mut written: Vec<PathBuf> = Vec::new();
    let mut table: BTreeMap<(Vec<u64>, String), Vec<String>> = BTreeMap::new();
    for release_dir in &releases {
        let release = release_dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let mut row = Vec::new();
        for module in TARGETS {
            let path = release_dir.join(module_file(module));
            let Ok(src) = std::fs::read_to_string(&path) else {
                row.push("-".to_string());
                continue;
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
                    row.push(out.edits.len().to_string());
                }
                Err(skip) => {
                    // The one expected skip: 0.6.16+'s re-export stub has no call site.
                    assert!(
                        module == "flashinfer.fp4_quantization"
                            && skip.0.ends_with("no rule matched"),
                        "{release} {module}: unexpected skip: {}",
                        skip.0
                    );
                    row.push("skip (stub)".to_string());
                }
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
        println!("| {release:<13} | {} |", row.join(" | "));
    }
    println!("{} rewritten modules compiled with CPython", written.len());
}

fn release_key(path: &Path) -> Vec<u64> {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse().ok())
        .collect()
}
