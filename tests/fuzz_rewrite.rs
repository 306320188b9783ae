//! Fuzzing the rewriter with proptest: real FlashInfer target modules from the corpus
//! (`scripts/fetch-corpus`), mutated by byte and line deletions, insertions, swaps and splices
//! between files, plus arbitrary strings. The rewriter runs inside production servers, so the
//! property is: it never panics, and it either declines (`Err(Skip)`, the loader then imports
//! the file unchanged) or returns source with the same line count that parses, both by ruff
//! and, for a sample of distinct outputs, by CPython's own `compile()` — unless the input
//! itself did not parse: the rewriter parses only the top-level statements that mention a
//! rule's names, so it cannot see a syntax error elsewhere, and the loader's `compile()` then
//! fails exactly as the original's would and loads the original.
//!
//! The same mutations check that sparse parsing changes nothing the rules read: whenever the
//! full source parses, the facts about the relevant names are those of a full parse.
//!
//! `DYNAFOLD_FUZZ_CASES` scales the run (default sized to stay well under a minute in release).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use dynafold_core::rewrite::testing::sparse_and_full_facts;
use dynafold_core::rewrite::{rewrite, TARGETS};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

mod common;
use common::{corpus_dir, Cuda128};

fn corpus() -> Vec<(&'static str, String)> {
    let dir = corpus_dir();
    let mut files = Vec::new();
    let mut releases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{} missing ({e}): run scripts/fetch-corpus", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    releases.sort();
    for release in releases {
        for module in TARGETS {
            let path = release.join(format!("{}.py", module.replace('.', "/")));
            if let Ok(text) = std::fs::read_to_string(&path) {
                files.push((module, text));
            }
        }
    }
    assert!(files.len() >= 8, "corpus too small: {} files", files.len());
    files
}

fn cases(default: u32) -> u32 {
    std::env::var("DYNAFOLD_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Clone, Debug)]
enum Mutation {
    DeleteBytes {
        at: usize,
        len: usize,
    },
    InsertText {
        at: usize,
        text: String,
    },
    DeleteLine {
        line: usize,
    },
    DuplicateLine {
        line: usize,
    },
    SwapLines {
        a: usize,
        b: usize,
    },
    /// Lines `from..from+len` of another corpus file spliced in at `line`.
    Splice {
        other: usize,
        from: usize,
        len: usize,
        line: usize,
    },
}

/// Fragments that steer mutations towards what the rules look at.
const TOKENS: &[&str] = &[
    "is_cuda_version_at_least(\"12.8\")",
    "is_cuda_version_at_least(",
    "def get_cuda_version():\n",
    "def get_cuda_path():\n",
    "@functools.cache\n",
    "@functools.lru_cache(maxsize=None)\n",
    "from .jit.cpp_ext import is_cuda_version_at_least\n",
    "is_cuda_version_at_least = None\n",
    "subprocess.check_output([nvcc, \"--version\"])",
    "    ",
    "\t",
    "\r\n",
    "\r",
    "\\\n",
    "\"\"\"",
    "f\"{x!r:>{w}}\"",
    "(((((((((((",
    ")))",
    "lambda: ",
    "async ",
    "match x:\n    case 1:\n        pass\n",
    "# comment\n",
    "\u{feff}",
    "é",
    "\0",
    // Aimed at the top-level scanner.
    "'''",
    "'",
    "\"",
    "f\"{x:'>10}\"",
    "f\"{d[\"k\"]!r:{w}}\"",
    "r\"\\\"",
    "rb'\\'",
    "\\",
    "@deco\n",
    "else:\n",
    "if x:\n",
    "\ndef is_cuda_version_at_least(v):\n",
    "]",
    "}",
    "#",
    "ｉｓ_cuda_version_at_least",
    "\x0c",
    "from packaging.version import Version\n",
];

fn mutation(files: usize) -> impl Strategy<Value = Mutation> {
    let text = prop_oneof![
        proptest::sample::select(TOKENS).prop_map(str::to_owned),
        any::<String>().prop_map(|s| s.chars().take(12).collect::<String>()),
    ];
    prop_oneof![
        (any::<usize>(), 1usize..64).prop_map(|(at, len)| Mutation::DeleteBytes { at, len }),
        (any::<usize>(), text).prop_map(|(at, text)| Mutation::InsertText { at, text }),
        any::<usize>().prop_map(|line| Mutation::DeleteLine { line }),
        any::<usize>().prop_map(|line| Mutation::DuplicateLine { line }),
        (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Mutation::SwapLines { a, b }),
        (0..files, any::<usize>(), 1usize..30, any::<usize>()).prop_map(
            |(other, from, len, line)| Mutation::Splice {
                other,
                from,
                len,
                line
            }
        ),
    ]
}

/// Nearest char boundary at or below `at % (len + 1)`.
fn boundary(s: &str, at: usize) -> usize {
    let mut i = at % (s.len() + 1);
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Corpus file `file` with `mutations` applied in order; its module name beside it.
fn mutated<'f>(
    files: &'f [(&'f str, String)],
    file: usize,
    mutations: &[Mutation],
) -> (&'f str, String) {
    let (module, source) = &files[file];
    let text = mutations
        .iter()
        .fold(source.clone(), |text, m| apply(&text, m, files));
    (module, text)
}

fn apply(source: &str, m: &Mutation, files: &[(&str, String)]) -> String {
    let mut lines: Vec<String> = source.split_inclusive('\n').map(str::to_owned).collect();
    let pick = |n: usize, len: usize| if len == 0 { 0 } else { n % len };
    match m {
        Mutation::DeleteBytes { at, len } => {
            let start = boundary(source, *at);
            let end = boundary(source, start.saturating_add(*len).min(source.len()));
            let end = end.max(start);
            format!("{}{}", &source[..start], &source[end..])
        }
        Mutation::InsertText { at, text } => {
            let at = boundary(source, *at);
            format!("{}{text}{}", &source[..at], &source[at..])
        }
        Mutation::DeleteLine { line } => {
            if !lines.is_empty() {
                lines.remove(pick(*line, lines.len()));
            }
            lines.concat()
        }
        Mutation::DuplicateLine { line } => {
            if !lines.is_empty() {
                let i = pick(*line, lines.len());
                let copy = lines[i].clone();
                lines.insert(i, copy);
            }
            lines.concat()
        }
        Mutation::SwapLines { a, b } => {
            if !lines.is_empty() {
                let (a, b) = (pick(*a, lines.len()), pick(*b, lines.len()));
                lines.swap(a, b);
            }
            lines.concat()
        }
        Mutation::Splice {
            other,
            from,
            len,
            line,
        } => {
            let donor: Vec<&str> = files[*other].1.split_inclusive('\n').collect();
            let from = pick(*from, donor.len());
            let end = (from + len).min(donor.len());
            let at = pick(*line, lines.len() + 1);
            let piece: Vec<String> = donor[from..end].iter().map(|s| s.to_string()).collect();
            lines.splice(at..at, piece);
            lines.concat()
        }
    }
}

fn parses(source: &str) -> bool {
    // A helper thread with a big stack, like the rewriter's own check: outputs are never
    // deeper than their inputs, which the rewriter has already measured.
    std::thread::scope(|s| {
        std::thread::Builder::new()
            .stack_size(64 << 20)
            .spawn_scoped(s, || {
                ruff_python_parser::parse_unchecked_source(
                    source,
                    ruff_python_ast::PySourceType::Python,
                )
                .errors()
                .is_empty()
            })
            .expect("spawn")
            .join()
            .expect("parser thread")
    })
}

/// The property; returns the output when the rewrite succeeded. ruff's parser does not make
/// CPython's compile-time checks (e.g. a repeated keyword argument), so "parses" here is the
/// grammar; `python_compiles_all` checks that the rewrite never adds a compile error.
fn check(module: &str, input: &str) -> Result<Option<String>, TestCaseError> {
    match rewrite(module, input, &Cuda128) {
        Err(_) => Ok(None),
        Ok(out) => {
            prop_assert_eq!(
                out.source.matches('\n').count(),
                input.matches('\n').count(),
                "line count changed for {}",
                module
            );
            prop_assert!(
                parses(&out.source) || !parses(input),
                "output does not parse for {} (the input does)",
                module
            );
            prop_assert!(!out.edits.is_empty());
            Ok(Some(out.source))
        }
    }
}

/// Distinct successful (input, output) pairs, compiled by CPython at the end (sampled: one
/// subprocess).
struct Sample {
    seen: BTreeSet<u64>,
    outputs: Vec<(String, String)>,
}

impl Sample {
    const LIMIT: usize = 300;
    fn add(&mut self, input: String, output: String) {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        output.hash(&mut h);
        if self.outputs.len() < Self::LIMIT && self.seen.insert(h.finish()) {
            self.outputs.push((input, output));
        }
    }
}

/// Every output CPython rejects must come from an input it rejects as well.
fn python_compiles_all(pairs: &[(String, String)]) {
    if pairs.is_empty() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    for (i, (input, output)) in pairs.iter().enumerate() {
        std::fs::write(dir.path().join(format!("{i}.in")), input).expect("write sample");
        std::fs::write(dir.path().join(format!("{i}.out")), output).expect("write sample");
    }
    let out = Command::new("python3")
        .arg("-c")
        .arg(
            "import sys, pathlib\n\
             def ok(p):\n\
             \x20   try:\n\
             \x20       compile(p.read_text(), p.name, 'exec'); return True\n\
             \x20   except (SyntaxError, ValueError):\n\
             \x20       return False\n\
             d = pathlib.Path(sys.argv[1])\n\
             bad = [p.name for p in sorted(d.glob('*.out')) if not ok(p) and ok(p.with_suffix('.in'))]\n\
             print(bad)\n\
             sys.exit(1 if bad else 0)",
        )
        .arg(dir.path())
        .output()
        .expect("python3 must be installed");
    assert!(
        out.status.success(),
        "the rewrite made CPython reject a source it accepted: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A runner that keeps no failure files: a failing case is printed, and CI has no use for them.
fn runner(cases: u32) -> TestRunner {
    TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    })
}

/// A corpus file (by index) and one to five mutations of it.
fn mutated_file(files: usize) -> impl Strategy<Value = (usize, Vec<Mutation>)> {
    (0..files, proptest::collection::vec(mutation(files), 1..6))
}

#[test]
fn mutated_corpus_never_panics_and_stays_line_preserving() {
    let files = corpus();
    let runs = AtomicUsize::new(0);
    let folded = AtomicUsize::new(0);
    let sample = Mutex::new(Sample {
        seen: BTreeSet::new(),
        outputs: Vec::new(),
    });
    let mut runner = runner(cases(3000));
    let strategy = mutated_file(files.len());
    let started = std::time::Instant::now();
    runner
        .run(&strategy, |(file, mutations)| {
            let (module, text) = mutated(&files, file, &mutations);
            runs.fetch_add(1, Ordering::Relaxed);
            if let Some(out) = check(module, &text)? {
                folded.fetch_add(1, Ordering::Relaxed);
                sample.lock().expect("sample").add(text, out);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    let sample = sample.into_inner().expect("sample");
    python_compiles_all(&sample.outputs);
    println!(
        "fuzz (mutated corpus, {} files): {} executions, {} folded, {} distinct outputs compiled by CPython, {:.1} s",
        files.len(),
        runs.load(Ordering::Relaxed),
        folded.load(Ordering::Relaxed),
        sample.outputs.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn arbitrary_strings_never_panic() {
    let runs = AtomicUsize::new(0);
    let mut runner = runner(cases(3000) * 2);
    let text = prop_oneof![
        any::<String>(),
        proptest::collection::vec(proptest::sample::select(TOKENS), 0..40).prop_map(|v| v.concat()),
        (1usize..5000).prop_map(|n| "(".repeat(n)),
        (1usize..5000).prop_map(|n| format!("x = {}1", "not ".repeat(n))),
        (1usize..3000).prop_map(|n| format!("x = 1{}", "+1".repeat(n))),
    ];
    let started = std::time::Instant::now();
    runner
        .run(&(0..TARGETS.len(), text), |(t, input)| {
            runs.fetch_add(1, Ordering::Relaxed);
            check(TARGETS[t], &input)?;
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "fuzz (arbitrary strings): {} executions, {:.1} s",
        runs.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
}

/// Sparse parsing is invisible to the rules: every corpus module, and mutations of it, give
/// the same facts about the relevant names as a full parse whenever the full parse succeeds.
#[test]
fn sparse_facts_equal_full_facts() {
    let files = corpus();
    for (module, source) in &files {
        let (sparse, full) = sparse_and_full_facts(module, source).expect("corpus modules parse");
        assert_eq!(sparse, full, "{module}");
    }
    let compared = AtomicUsize::new(0);
    let mut runner = runner(cases(3000));
    let strategy = mutated_file(files.len());
    runner
        .run(&strategy, |(file, mutations)| {
            let (module, text) = mutated(&files, file, &mutations);
            if let Some((sparse, full)) = sparse_and_full_facts(module, &text) {
                compared.fetch_add(1, Ordering::Relaxed);
                prop_assert_eq!(sparse, full, "{}", module);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    println!(
        "sparse vs full parse: {} mutated modules that parse compared",
        compared.load(Ordering::Relaxed)
    );
}
