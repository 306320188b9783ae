//! Unit tests over inline snippets and over real releases from the corpus, which
//! `scripts/fetch-corpus` installs; a test that needs the corpus fails without it.

use std::cell::RefCell;
use std::path::PathBuf;

use super::*;
use crate::cuda::Provenance;

/// What the fake resolver answers for every recipe.
#[derive(Clone)]
enum Answer {
    Value(&'static str),
    Raise(&'static str, &'static str),
    Unfoldable,
}

struct FakeContext {
    path: Answer,
    version: Answer,
    folded: Option<&'static str>,
    asked: RefCell<Vec<String>>,
}

impl FakeContext {
    fn new(path: Answer, version: Answer, folded: Option<&'static str>) -> Self {
        FakeContext {
            path,
            version,
            folded,
            asked: RefCell::new(Vec::new()),
        }
    }
    fn values() -> Self {
        Self::new(
            Answer::Value("/opt/cuda"),
            Answer::Value("12.8"),
            Some("12.8"),
        )
    }
}

fn outcome<T>(answer: &Answer, value: impl FnOnce(&str) -> T) -> Outcome<T> {
    match answer {
        Answer::Value(v) => Outcome::Value(value(v), Provenance(format!("fake {v}"))),
        Answer::Raise(e, m) => Outcome::Raise {
            exception: e,
            message: m.to_string(),
        },
        Answer::Unfoldable => Outcome::Unfoldable("fake says no".to_string()),
    }
}

fn version(v: &str) -> CudaVersion {
    CudaVersion::parse_release(v).unwrap()
}

impl FoldContext for FakeContext {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String> {
        self.asked.borrow_mut().push(format!("path {recipe:?}"));
        outcome(&self.path, str::to_string)
    }
    fn cuda_version(&self, v: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion> {
        self.asked
            .borrow_mut()
            .push(format!("version {v:?} {path:?}"));
        outcome(&self.version, version)
    }
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        self.folded.map(version)
    }
}

fn corpus() -> PathBuf {
    std::env::var_os("DYNAFOLD_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/dynafold-dev")))
        .unwrap_or_default()
        .join("corpus")
}

/// A file of a corpus release; the corpus missing is a failure, not a reason to test less.
fn source(release: &str, rel: &str) -> String {
    let path = corpus().join(release).join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the corpus is missing, run scripts/fetch-corpus",
            path.display()
        )
    })
}

const CPP_EXT_05: &str = r#"import functools
import os
import re
import subprocess

import torch
from packaging.version import Version


@functools.cache
def get_cuda_path() -> str:
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")
    if cuda_home is not None:
        return cuda_home
    # get output of "which nvcc"
    nvcc_path = subprocess.run(["which", "nvcc"], capture_output=True)
    if nvcc_path.returncode == 0:
        cuda_home = os.path.dirname(
            os.path.dirname(nvcc_path.stdout.decode("utf-8").strip())
        )
    else:
        cuda_home = "/usr/local/cuda"
        if not os.path.exists(cuda_home):
            raise RuntimeError(
                f"Could not find nvcc and default {cuda_home=} doesn't exist"
            )
    return cuda_home


@functools.cache
def get_cuda_version() -> Version:
    # Try to query nvcc for CUDA version; if nvcc is unavailable, fall back to torch.version.cuda
    try:
        cuda_home = get_cuda_path()
        nvcc = os.path.join(cuda_home, "bin/nvcc")
        txt = subprocess.check_output([nvcc, "--version"], text=True)
        matches = re.findall(r"release (\d+\.\d+),", txt)
        if not matches:
            raise RuntimeError(
                f"Could not parse CUDA version from nvcc --version output: {txt}"
            )
        return Version(matches[0])
    except (RuntimeError, FileNotFoundError, subprocess.CalledProcessError) as e:
        # NOTE(Zihao): when nvcc is unavailable, fall back to torch.version.cuda
        if torch.version.cuda is None:
            raise RuntimeError(
                "nvcc not found and PyTorch is not built with CUDA support. "
                "Could not determine CUDA version."
            ) from e
        return Version(torch.version.cuda)


def is_cuda_version_at_least(version_str: str) -> bool:
    return get_cuda_version() >= Version(version_str)
"#;

const FP4_SNIPPET: &str = r#"from .jit.cpp_ext import is_cuda_version_at_least


def gen_fp4_quantization_module(nvcc_flags, device_arch):
    return gen_jit_spec(
        f"fp4_quantization_{device_arch}",
        extra_cuda_cflags=nvcc_flags
        + [
            "-DENABLE_FP4" if is_cuda_version_at_least("12.8") else "",
            "-DX" if is_cuda_version_at_least(version) else "",
            "-DY" if is_cuda_version_at_least("13") else "",
            "-DZ" if is_cuda_version_at_least(
                "12.8"
            ) else "",
        ],
    )
"#;

fn cpp_ext_05() -> String {
    source("0.5.3", "flashinfer/jit/cpp_ext.py")
}

/// Same line count, and the output parses unless the input did not: only the statements that
/// mention a rule's name are parsed, so an error elsewhere goes unseen (and `compile()` in the
/// loader then rejects the output as it would the original).
fn assert_line_preserving(before: &str, after: &str) {
    assert_eq!(before.matches('\n').count(), after.matches('\n').count());
    assert!(
        syntax::parses(after) || !syntax::parses(before),
        "output does not parse:\n{after}"
    );
}

#[test]
fn targets_are_exact() {
    for t in TARGETS {
        assert!(is_target(t));
    }
    for not in [
        "flashinfer",
        "flashinfer.jit",
        "flashinfer.jit.cpp_ext2",
        "flashinfer.jit.cpp_ext.x",
        "xflashinfer.jit.cpp_ext",
        "flashinfer.fp4_quantization ",
        "",
    ] {
        assert!(!is_target(not), "{not}");
    }
}

#[test]
fn rule_data_loads() {
    let rules = rules::all().unwrap();
    let modules: Vec<&str> = rules.iter().map(|r| r.module.as_str()).collect();
    assert_eq!(modules.len(), TARGETS.len());
    for t in TARGETS {
        assert!(modules.contains(&t), "{t} has no rule file");
    }
}

#[test]
fn cpp_ext_values_fold_all_three() {
    let src = cpp_ext_05();
    let ctx = FakeContext::values();
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap();
    assert_line_preserving(&src, &out.source);
    let rules: Vec<&str> = out.edits.iter().map(|e| e.rule.as_str()).collect();
    assert_eq!(
        rules,
        [
            "cpp_ext.get_cuda_path",
            "cpp_ext.get_cuda_version",
            "cpp_ext.is_cuda_version_at_least"
        ]
    );
    assert!(out.source.contains("    return __dynafold_cuda_path__\n"));
    assert!(out
        .source
        .contains("    return __dynafold_cuda_version__\n"));
    assert!(out
        .source
        .contains("    return __dynafold_cuda_version__ >= Version(version_str)\n"));
    assert!(out
        .source
        .contains("\n# dynafold: @functools.cache removed, value folded\ndef get_cuda_path"));
    assert!(!out.source.contains("\n@functools.cache"));
    assert_eq!(out.cuda_version, Some(version("12.8")));
    let names: Vec<&str> = out.globals.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(names, [PATH_GLOBAL, VERSION_GLOBAL]);
    assert_eq!(out.globals[0].value, GlobalValue::Str("/opt/cuda".into()));
    assert_eq!(out.globals[1].provenance, "fake 12.8");
    assert_eq!(
        *ctx.asked.borrow(),
        [
            "path EnvWhichDefault",
            "version NvccTorchFallback EnvWhichDefault"
        ]
    );
    // Values never appear in the text, only the names of globals.
    for value in ["/opt/cuda", "12.8"] {
        assert_eq!(
            out.source.matches(value).count(),
            src.matches(value).count()
        );
    }
    // Each edit's lines are the function's lines, decorator included.
    let first = &out.edits[0];
    let lines: Vec<&str> = src.lines().collect();
    assert_eq!(lines[first.first_line as usize - 1], "@functools.cache");
    assert_eq!(lines[first.last_line as usize - 1], "    return cuda_home");
}

#[test]
fn cpp_ext_raise_folds_runtime_error_only() {
    let src = cpp_ext_05();
    let ctx = FakeContext::new(
        Answer::Raise("RuntimeError", "no nvcc"),
        Answer::Raise("RuntimeError", "no cuda"),
        None,
    );
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap();
    assert_line_preserving(&src, &out.source);
    assert!(out
        .source
        .contains("    raise RuntimeError(__dynafold_cuda_path_error__)\n"));
    assert!(out
        .source
        .contains("    raise RuntimeError(__dynafold_cuda_version_error__)\n"));
    assert!(out
        .source
        .contains("    return get_cuda_version() >= Version(version_str)"));
    assert_eq!(out.cuda_version, None);
    assert_eq!(out.edits.len(), 2);
    assert!(out.globals.iter().all(|g| g.name.ends_with("_error__")));

    // Another exception type cannot be rebuilt: that function stays as it is.
    let ctx = FakeContext::new(
        Answer::Value("/opt/cuda"),
        Answer::Raise("FileNotFoundError", "nvcc"),
        None,
    );
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap();
    assert_eq!(out.edits.len(), 1);
    assert!(out.source.contains("txt = subprocess.check_output"));
    assert_eq!(out.cuda_version, None);

    let ctx = FakeContext::new(
        Answer::Raise("OSError", "x"),
        Answer::Raise("FileNotFoundError", "nvcc"),
        None,
    );
    let err = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap_err();
    assert!(err.0.contains("no rule matched"), "{err:?}");
}

#[test]
fn cpp_ext_unfoldable_skips_module() {
    let src = cpp_ext_05();
    for ctx in [
        FakeContext::new(Answer::Unfoldable, Answer::Value("12.8"), None),
        FakeContext::new(Answer::Value("/x"), Answer::Unfoldable, None),
    ] {
        let err = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap_err();
        assert!(err.0.contains("fake says no"), "{err:?}");
    }
}

#[test]
fn cpp_ext_release_shapes_pick_their_recipes() {
    let cases = [
        (
            "0.2.14.post1",
            vec!["version NvccTorchHome TorchHomeWhichRaise"],
        ),
        (
            "0.3.1",
            vec![
                "path TorchHomeWhichRaise",
                "version NvccTorchHome TorchHomeWhichRaise",
            ],
        ),
        (
            "0.4.1",
            vec![
                "path EnvWhichRaise",
                "version NvccTorchFallback EnvWhichRaise",
            ],
        ),
        (
            "0.7.4",
            vec![
                "path EnvWhichDefault",
                "version NvccTorchFallback EnvWhichDefault",
            ],
        ),
    ];
    for (release, asked) in cases {
        let src = source(release, "flashinfer/jit/cpp_ext.py");
        let ctx = FakeContext::values();
        let out = rewrite("flashinfer.jit.cpp_ext", &src, &ctx).unwrap();
        assert_line_preserving(&src, &out.source);
        assert_eq!(*ctx.asked.borrow(), asked, "{release}");
    }
}

#[test]
fn cpp_ext_unknown_shape_or_nothing_skips() {
    let changed = CPP_EXT_05.replace("\"bin/nvcc\"", "\"bin/nvcc2\"");
    let err = rewrite("flashinfer.jit.cpp_ext", &changed, &FakeContext::values()).unwrap_err();
    assert!(
        err.0
            .starts_with("flashinfer.jit.cpp_ext: get_cuda_version has an unknown shape ("),
        "{err:?}"
    );
    let err = rewrite(
        "flashinfer.jit.cpp_ext",
        "import os\n",
        &FakeContext::values(),
    )
    .unwrap_err();
    assert!(err.0.contains("no rule matched"), "{err:?}");
    let no_version_import =
        CPP_EXT_05.replace("from packaging.version import Version", "Version = 1");
    let err = rewrite(
        "flashinfer.jit.cpp_ext",
        &no_version_import,
        &FakeContext::values(),
    )
    .unwrap_err();
    assert!(err.0.contains("packaging.version"), "{err:?}");
    let extra_decorator = CPP_EXT_05.replace(
        "@functools.cache\ndef get_cuda_path",
        "@functools.cache\n@other\ndef get_cuda_path",
    );
    assert!(rewrite(
        "flashinfer.jit.cpp_ext",
        &extra_decorator,
        &FakeContext::values()
    )
    .is_err());
    let twice = format!("{CPP_EXT_05}\n\ndef get_cuda_path():\n    return 1\n");
    assert!(rewrite("flashinfer.jit.cpp_ext", &twice, &FakeContext::values()).is_err());
}

#[test]
fn at_least_needs_one_plain_parameter() {
    for sig in [
        "(version_str: str = \"1\")",
        "(*version_str)",
        "(a, b)",
        "(a, /)",
    ] {
        let src = CPP_EXT_05.replace("(version_str: str)", sig);
        let out = rewrite("flashinfer.jit.cpp_ext", &src, &FakeContext::values());
        assert!(out.is_err(), "{sig}");
    }
    let src = CPP_EXT_05
        .replace("(version_str: str)", "(wanted)")
        .replace("Version(version_str)", "Version(wanted)");
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &FakeContext::values()).unwrap();
    assert!(out
        .source
        .contains("return __dynafold_cuda_version__ >= Version(wanted)"));
}

#[test]
fn crlf_is_kept() {
    let src = CPP_EXT_05.replace('\n', "\r\n");
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &FakeContext::values()).unwrap();
    assert_line_preserving(&src, &out.source);
    assert!(!out.source.replace("\r\n", "").contains('\n'));
    assert!(out
        .source
        .contains("\r\n    return __dynafold_cuda_path__\r\n\r\n"));
    let fp4 = FP4_SNIPPET.replace('\n', "\r\n");
    let out = rewrite("flashinfer.fp4_quantization", &fp4, &FakeContext::values()).unwrap();
    assert_line_preserving(&fp4, &out.source);
}

#[test]
fn fp4_literal_calls_fold() {
    let out = rewrite(
        "flashinfer.fp4_quantization",
        FP4_SNIPPET,
        &FakeContext::values(),
    )
    .unwrap();
    assert_line_preserving(FP4_SNIPPET, &out.source);
    assert!(out.source.contains("\"-DENABLE_FP4\" if True else \"\","));
    assert!(out.source.contains("\"-DY\" if False else \"\","));
    // Not a literal, and a call over several lines: left alone.
    assert!(out.source.contains("is_cuda_version_at_least(version)"));
    assert!(out.source.contains("is_cuda_version_at_least(\n"));
    assert_eq!(out.edits.len(), 2);
    assert!(out
        .edits
        .iter()
        .all(|e| e.rule == "fp4.is_cuda_version_at_least"));
    assert_eq!(out.edits[0].first_line, 9);
    assert!(out.globals.is_empty() && out.cuda_version.is_none());

    let ctx = FakeContext::new(Answer::Value("/x"), Answer::Value("12.4"), Some("12.4"));
    let out = rewrite("flashinfer.fp4_quantization", FP4_SNIPPET, &ctx).unwrap();
    assert!(out.source.contains("\"-DENABLE_FP4\" if False else \"\","));
}

#[test]
fn fp4_needs_folded_version_and_the_real_callee() {
    let ctx = FakeContext::new(Answer::Value("/x"), Answer::Value("12.8"), None);
    let err = rewrite("flashinfer.fp4_quantization", FP4_SNIPPET, &ctx).unwrap_err();
    assert!(
        err.0
            .contains("cuda_version was not folded in this process"),
        "{err:?}"
    );

    let other = FP4_SNIPPET.replace("from .jit.cpp_ext import", "from .elsewhere import");
    assert!(rewrite(
        "flashinfer.fp4_quantization",
        &other,
        &FakeContext::values()
    )
    .is_err());
    let shadowed = format!("{FP4_SNIPPET}\nis_cuda_version_at_least = lambda v: True\n");
    assert!(rewrite(
        "flashinfer.fp4_quantization",
        &shadowed,
        &FakeContext::values()
    )
    .is_err());
    // The jit module imports it from its sibling.
    let jit = FP4_SNIPPET.replace("from .jit.cpp_ext", "from .cpp_ext");
    assert!(rewrite(
        "flashinfer.jit.fp4_quantization",
        &jit,
        &FakeContext::values()
    )
    .is_ok());
}

#[test]
fn fp4_stub_has_nothing_to_fold() {
    // A re-export stub: loaded unchanged without a warning in every process (SGLang imports it).
    let stub = source("0.6.16", "flashinfer/fp4_quantization.py");
    let err = rewrite("flashinfer.fp4_quantization", &stub, &FakeContext::values()).unwrap_err();
    assert!(err.is_nothing_to_fold(), "{err:?}");
    // A module that does name the callee but in no recognised form still warns.
    let odd = format!("{stub}\nis_cuda_version_at_least = None\n");
    let err = rewrite("flashinfer.fp4_quantization", &odd, &FakeContext::values()).unwrap_err();
    assert!(!err.is_nothing_to_fold(), "{err:?}");
}

#[test]
fn diff_is_unified() {
    let src = cpp_ext_05();
    let out = rewrite("flashinfer.jit.cpp_ext", &src, &FakeContext::values()).unwrap();
    let d = unified_diff("flashinfer/jit/cpp_ext.py", &src, &out.source);
    assert!(d.starts_with("--- a/flashinfer/jit/cpp_ext.py\n+++ b/flashinfer/jit/cpp_ext.py\n"));
    assert!(d.contains("\n+    return __dynafold_cuda_path__\n"));
    assert!(unified_diff("x", "a\n", "a\n").is_empty());
}

#[test]
fn edits_keep_line_breaks() {
    assert_eq!(edits::keep_lines("x", "a\r\nb\nc"), "x\r\n\n");
    let out = edits::apply(
        "ab\ncd",
        vec![edits::Replacement {
            span: 1..4,
            text: "X\n".into(),
        }],
    )
    .unwrap();
    assert_eq!(out, "aX\nd");
    let bad = edits::apply(
        "ab\ncd",
        vec![edits::Replacement {
            span: 1..4,
            text: "X".into(),
        }],
    );
    assert!(bad.is_err());
    let out_of_range = edits::apply(
        "ab",
        vec![edits::Replacement {
            span: 1..9,
            text: "X".into(),
        }],
    );
    assert!(out_of_range.is_err());
}

/// Whatever comes in, the rewriter answers `Err(Skip)` or a same-line-count source that
/// parses (if the input did); it never panics (it runs inside a Python server).
fn check_hostile(module: &str, src: &str) {
    for ctx in [
        FakeContext::values(),
        FakeContext::new(
            Answer::Raise("RuntimeError", "x"),
            Answer::Raise("RuntimeError", "y"),
            None,
        ),
        FakeContext::new(Answer::Unfoldable, Answer::Unfoldable, Some("99")),
    ] {
        if let Ok(out) = rewrite(module, src, &ctx) {
            assert_line_preserving(src, &out.source);
        }
    }
}

#[test]
fn hostile_sources_never_panic() {
    let odd_shapes = [
        "def get_cuda_path():\n    return 1\n",
        "@functools.cache\ndef get_cuda_path(): return os.environ.get(\"CUDA_HOME\")\n",
        "async def get_cuda_version():\n    pass\n",
        "def get_cuda_version(): ...\ndef is_cuda_version_at_least(v): return get_cuda_version() >= Version(v)\n",
        "from packaging.version import Version\ndef is_cuda_version_at_least(v): return get_cuda_version() >= Version(v)\n",
        "class get_cuda_path:\n    pass\n",
        "def get_cuda_path(\n",
        "def get_cuda_version():\n\treturn 1\n  x = 2\n",
        "\u{feff}def get_cuda_path():\n    return 'ünïcødé 🚀'\n",
        "x = '''\nget_cuda_path\n''' \\\n + 1\n",
        "def f(:\n    is_cuda_version_at_least(\"12.8\")\n",
        "from .jit.cpp_ext import is_cuda_version_at_least\nx = is_cuda_version_at_least(\"12.8\") if is_cuda_version_at_least('1') else f'{is_cuda_version_at_least(\"2\")}'\n",
        "from .jit.cpp_ext import is_cuda_version_at_least\nx = [is_cuda_version_at_least(\"99999999999999999999999.1\"), is_cuda_version_at_least(b\"1\"), is_cuda_version_at_least(\"1\", \"2\"), is_cuda_version_at_least(v=\"1\"), a.is_cuda_version_at_least(\"1\")]\n",
        "\r",
        "a\rb\n",
        "\0\0\0",
        "",
        "\n\n\n",
        "\\",
        "🚀🚀(((((",
    ];
    let mut sources: Vec<String> = odd_shapes.iter().map(|s| s.to_string()).collect();
    // The real cpp_ext with each body cut short, CRLF, and everything after a point removed.
    let real = cpp_ext_05();
    for cut in (0..real.len()).step_by(97) {
        if let Some(prefix) = real.get(..cut) {
            sources.push(prefix.to_string());
        }
    }
    sources.push(real.replace('\n', "\r\n"));
    sources.push(real.replace("    ", "\t"));
    sources.push(real.replace("return", "yield"));
    sources.push(format!("{real}\n{FP4_SNIPPET}"));
    // Arbitrary bytes turned into a string.
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..50 {
        let bytes: Vec<u8> = (0..512)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                (seed >> 24) as u8
            })
            .collect();
        sources.push(String::from_utf8_lossy(&bytes).into_owned());
    }
    for src in &sources {
        for module in TARGETS {
            check_hostile(module, src);
        }
    }
}

#[test]
fn huge_and_deep_sources_never_panic() {
    // Far past MAX_DEPTH and past what an ordinary thread stack survives when recursing.
    let n = 200_000;
    let deep = [
        format!("x = {}1\n", "1+".repeat(n)),
        format!("x = {}1\n", "-".repeat(n)),
        format!("x = {}\n", "[".repeat(n)),
        format!("x = {}1{}\n", "(".repeat(n), ")".repeat(n)),
        format!("x = {}1\n", "not ".repeat(n)),
        format!("x = {}1\n", "lambda:".repeat(n / 2)),
    ];
    for src in &deep {
        for module in ["flashinfer.jit.cpp_ext", "flashinfer.fp4_quantization"] {
            match rewrite(module, src, &FakeContext::values()) {
                // Parentheses build no nodes: that one is shallow and merely has no rule.
                Err(Skip(why, kind)) => assert!(
                    why.contains("nested deeper")
                        || why.contains("no rule matched")
                        || kind == SkipKind::NothingToFold,
                    "{why}"
                ),
                Ok(out) => panic!("folded a deep tree: {:?}", out.edits),
            }
        }
    }
    // At the size cap, with something to fold at the end.
    let filler = "x = 1\n".repeat((MAX_SOURCE_BYTES - CPP_EXT_05.len()) / 6 - 1);
    let big = format!("{filler}{CPP_EXT_05}");
    assert!(big.len() <= MAX_SOURCE_BYTES);
    let out = rewrite("flashinfer.jit.cpp_ext", &big, &FakeContext::values()).unwrap();
    assert_line_preserving(&big, &out.source);
    let too_big = format!("{CPP_EXT_05}{}", "#".repeat(MAX_SOURCE_BYTES));
    let err = rewrite("flashinfer.jit.cpp_ext", &too_big, &FakeContext::values()).unwrap_err();
    assert!(err.0.contains("larger"), "{err:?}");
}

/// Deep trees just under `MAX_DEPTH`, each kind of node nesting its own way.
fn deepest_sources() -> Vec<String> {
    let n = syntax::MAX_DEPTH - 4;
    let mut block = String::new();
    for level in 0..n {
        block.push_str(&" ".repeat(level));
        block.push_str("if x:\n");
    }
    block.push_str(&" ".repeat(n));
    block.push_str("pass\n");
    vec![
        format!("x = {}1\n", "1+".repeat(n)),
        format!("x = {}1\n", "not ".repeat(n)),
        format!("x = {}1\n", "-".repeat(n)),
        format!("x = {}1{}\n", "[".repeat(n), "]".repeat(n)),
        format!("x = {}1{}\n", "f(".repeat(n), ")".repeat(n)),
        format!("x = {}1{}\n", "a[".repeat(n), "]".repeat(n)),
        format!("x = {}1{}\n", "{1:".repeat(n), "}".repeat(n)),
        format!("x = {}1\n", "lambda:".repeat(n)),
        format!("x = a{}\n", ".b".repeat(n)),
        format!("x = {}\n", "1 if 1 else ".repeat(n) + "1"),
        block,
    ]
}

/// How much stack the parse, visit and drop of the deepest accepted trees take: each size is
/// tried in a child process, since running out aborts. The rewriter parses on the caller's
/// thread when `ON_THREAD_MIN_STACK` is left, so half of that must always be enough; the
/// sizes that pass are printed (`-- --nocapture`) for retuning the constant.
#[test]
fn stack_needed_at_max_depth() {
    if let Ok(kb) = std::env::var("DYNAFOLD_STACK_PROBE_KB") {
        let kb: usize = kb.parse().unwrap();
        std::thread::Builder::new()
            .stack_size(kb << 10)
            .spawn(|| {
                for src in deepest_sources() {
                    assert!(syntax::analyze_here(&src, &[]).is_ok(), "{}", &src[..40]);
                }
            })
            .unwrap()
            .join()
            .unwrap();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let enough = (syntax::ON_THREAD_MIN_STACK / 2) >> 10;
    let mut failed_at_or_above = Vec::new();
    for kb in [128, 256, 512, 768, 1024, 1536, 2048, 3072, 4096, 8192] {
        let status = std::process::Command::new(&exe)
            .args([
                "--exact",
                "rewrite::tests::stack_needed_at_max_depth",
                "--test-threads=1",
            ])
            .env("DYNAFOLD_STACK_PROBE_KB", kb.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        println!(
            "stack {kb} KiB: {}",
            if status.success() { "ok" } else { "failed" }
        );
        if kb >= enough && !status.success() {
            failed_at_or_above.push(kb);
        }
    }
    assert!(
        failed_at_or_above.is_empty(),
        "the deepest accepted trees overflow {failed_at_or_above:?} KiB of stack; \
         ON_THREAD_MIN_STACK ({} KiB) needs twice what they take",
        syntax::ON_THREAD_MIN_STACK >> 10
    );
}

/// The fast path is the one real FlashInfer takes: the scanner is sure of every corpus
/// module's statements, and reads few of them.
#[test]
fn corpus_modules_scan_without_doubt() {
    let releases = std::fs::read_dir(corpus()).unwrap_or_else(|e| {
        panic!(
            "{}: {e}: the corpus is missing, run scripts/fetch-corpus",
            corpus().display()
        )
    });
    let mut scanned = 0;
    for release in releases.filter_map(Result::ok) {
        for module in TARGETS {
            let path = release
                .path()
                .join(format!("{}.py", module.replace('.', "/")));
            let Ok(src) = std::fs::read_to_string(&path) else {
                continue;
            };
            let rules = rules::for_module(module).unwrap().unwrap();
            let names = relevant_names(rules);
            match toplevel::sparse(&src, &names, definitions_only(rules)) {
                Some(toplevel::Sparse::Nothing) => {}
                Some(toplevel::Sparse::Source(out)) => {
                    let kept = out.bytes().filter(|b| !b.is_ascii_whitespace()).count();
                    let all = src.bytes().filter(|b| !b.is_ascii_whitespace()).count();
                    assert!(
                        src.len() < 16_000 || kept * 4 < all,
                        "{}: keeps {kept} of {all} bytes",
                        path.display()
                    );
                }
                None => panic!("{}: the scanner doubts", path.display()),
            }
            scanned += 1;
        }
    }
    // The 25 target files of the nine releases whose table tests/corpus.rs asserts.
    assert_eq!(scanned, 25, "target modules in {}", corpus().display());
}
