//! Differential test: real, unmodified FlashInfer `get_cuda_path()` / `get_cuda_version()` in
//! the pinned Python environment (see scripts/lib/env.sh) against the Rust resolver, across
//! environments built around fake nvcc scripts.
//!
//! Installed releases are imported as packages; 0.4.1, of which only the sources are kept
//! (corpus, scripts/fetch-corpus), has its two functions compiled verbatim from
//! `flashinfer/jit/cpp_ext.py`. All four releases are required.
//!
//! The resolver answers a value, a rebuilt RuntimeError, or "unfoldable" (the loader then
//! leaves the module untouched, so FlashInfer raises its own exception at run time). An
//! unfoldable answer agrees only with the exception class its reason names (errno, or
//! UnicodeDecodeError), and exactly the cases in `UNFOLDABLE` may agree that way.

use std::collections::HashMap;
use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use dynafold_core::cuda::{
    CudaVersion, Env, Outcome, PathRecipe, Resolver, TorchFacts, VersionRecipe,
};
use serde_json::{json, Value};

const HARNESS: &str = r#"
import functools, json, os, re, subprocess, sys
mode, arg = sys.argv[1], sys.argv[2]
import torch
if mode == "import":
    import flashinfer.jit.cpp_ext as mod
    ns = mod.__dict__
else:
    import ast
    from packaging.version import Version
    src = open(arg).read()
    fns = [n for n in ast.parse(src).body
           if isinstance(n, ast.FunctionDef) and n.name in ("get_cuda_path", "get_cuda_version")]
    assert len(fns) == 2, fns
    ns = {"functools": functools, "os": os, "re": re, "subprocess": subprocess,
          "Version": Version, "torch": torch}
    exec(compile(ast.Module(body=fns, type_ignores=[]), arg, "exec"), ns)
real_cuda = torch.version.cuda

def call(f):
    try:
        return ["value", str(f())]
    except Exception as e:
        return ["raise", type(e).__name__, str(e)]

out = []
for s in json.load(sys.stdin):
    os.environ.clear()
    os.environ.update(s["env"])
    os.chdir(s["cwd"])
    torch.version.cuda = real_cuda if s["torch_cuda"] else None
    ns["get_cuda_path"].cache_clear()
    ns["get_cuda_version"].cache_clear()
    out.append({"path": call(ns["get_cuda_path"]), "version": call(ns["get_cuda_version"])})
print(json.dumps(out))
"#;

const NVCC_12_8: &str = "nvcc: NVIDIA (R) Cuda compiler driver\r\n\
Copyright (c) 2005-2025 NVIDIA Corporation\n\
Cuda compilation tools, release 12.8, V12.8.93\n\
Build cuda_12.8.r12.8/compiler.35583870_0\n";

struct Scenario {
    name: &'static str,
    env: HashMap<String, String>,
    cwd: PathBuf,
    torch_cuda: bool,
}

fn cache_dir() -> PathBuf {
    match std::env::var_os("DYNAFOLD_CACHE") {
        Some(d) => PathBuf::from(d),
        None => {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/dynafold-dev")
        }
    }
}

fn venv() -> PathBuf {
    let torch = std::env::var("DYNAFOLD_TORCH").unwrap_or_else(|_| "2.15.0".into());
    let v = cache_dir().join(format!("venv-torch{torch}"));
    assert!(
        v.join("bin/python").is_file(),
        "{} is missing: run scripts/test first to create the pinned Python environment",
        v.display()
    );
    v
}

fn site_packages(venv: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(venv.join("lib"))
        .unwrap()
        .map(|e| e.unwrap().path().join("site-packages"))
        .filter(|p| p.is_dir())
        .collect()
}

fn write(path: &Path, body: &[u8], mode: u32) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, body).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// A fake nvcc under `<root>/<name>/bin/nvcc` printing `out` then exiting with `code`.
fn nvcc(root: &Path, name: &str, out: &[u8], code: i32) -> String {
    let bin = root.join(name).join("bin");
    write(&bin.join("out.txt"), out, 0o644);
    let script = format!("#!/bin/sh\ncat \"$(dirname \"$0\")/out.txt\"\nexit {code}\n");
    write(&bin.join("nvcc"), script.as_bytes(), 0o755);
    root.join(name).to_str().unwrap().to_owned()
}

fn scenarios(root: &Path) -> Vec<Scenario> {
    let r = |s: &str| root.join(s).to_str().unwrap().to_owned();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    let ok = nvcc(root, "ok", NVCC_12_8.as_bytes(), 0);
    let fail = nvcc(root, "fail", b"nvcc fatal\n", 2);
    let garbage = nvcc(root, "garbage", b"no version here\r\nrelease 12.8 x\n", 0);
    let first = nvcc(
        root,
        "first",
        b"release 12.8 x, release 12.9, release 11.0,\n",
        0,
    );
    let zeros = nvcc(
        root,
        "zeros",
        b"Cuda compilation tools, release 012.08, V1\n",
        0,
    );
    let latin = nvcc(root, "latin", b"release 12.8, \xe9\n", 0);
    let signal = r("signal");
    write(
        &root.join("signal/bin/nvcc"),
        b"#!/bin/sh\nkill -9 $$\n",
        0o755,
    );
    let noexec = r("noexec");
    write(&root.join("noexec/bin/nvcc"), NVCC_12_8.as_bytes(), 0o644);
    let noshebang = r("noshebang");
    write(
        &root.join("noshebang/bin/nvcc"),
        b"echo 'release 12.8,'\n",
        0o755,
    );
    let base_path = format!("{}:/usr/bin:/bin", r("empty"));

    let mk = |name, extra: &[(&str, &str)], cwd: &Path, torch_cuda| {
        let mut env: HashMap<String, String> = [
            ("PATH", base_path.as_str()),
            ("HOME", root.to_str().unwrap()),
            ("LANG", "C.UTF-8"),
        ]
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        for (k, v) in extra {
            env.insert(k.to_string(), v.to_string());
        }
        Scenario {
            name,
            env,
            cwd: cwd.to_path_buf(),
            torch_cuda,
        }
    };
    let on_path = format!("{ok}/bin:/usr/bin:/bin");
    let only_nvcc_path = format!("{ok}/bin");
    let ok_slash = format!("{ok}/");
    let okp = Path::new(&ok);
    vec![
        mk("cuda_home", &[("CUDA_HOME", &ok)], root, true),
        mk(
            "cuda_home_trailing_slash",
            &[("CUDA_HOME", &ok_slash)],
            root,
            true,
        ),
        mk(
            "cuda_home_empty_cuda_path",
            &[("CUDA_HOME", ""), ("CUDA_PATH", &ok)],
            root,
            true,
        ),
        mk(
            "both_empty_cwd_without_bin",
            &[("CUDA_HOME", ""), ("CUDA_PATH", "")],
            root,
            true,
        ),
        mk(
            "both_empty_cwd_with_bin",
            &[("CUDA_HOME", ""), ("CUDA_PATH", "")],
            okp,
            true,
        ),
        mk("cuda_home_relative", &[("CUDA_HOME", "ok")], root, true),
        mk("nvcc_on_path", &[("PATH", &on_path)], root, true),
        mk("no_nvcc", &[], root, true),
        mk("no_nvcc_torch_without_cuda", &[], root, false),
        mk("which_missing", &[("PATH", &only_nvcc_path)], root, true),
        mk("nvcc_exit_2", &[("CUDA_HOME", &fail)], root, true),
        mk(
            "nvcc_exit_2_torch_without_cuda",
            &[("CUDA_PATH", &fail)],
            root,
            false,
        ),
        mk("nvcc_garbage", &[("CUDA_HOME", &garbage)], root, true),
        mk(
            "nvcc_garbage_torch_without_cuda",
            &[("CUDA_HOME", &garbage)],
            root,
            false,
        ),
        mk("first_match_wins", &[("CUDA_HOME", &first)], root, true),
        mk("leading_zeros", &[("CUDA_HOME", &zeros)], root, true),
        mk("nvcc_killed", &[("CUDA_HOME", &signal)], root, true),
        mk("nvcc_not_utf8", &[("CUDA_HOME", &latin)], root, true),
        mk("nvcc_not_executable", &[("CUDA_HOME", &noexec)], root, true),
        mk("nvcc_no_shebang", &[("CUDA_HOME", &noshebang)], root, true),
        mk(
            "cuda_home_is_a_file",
            &[("CUDA_HOME", "/etc/hostname")],
            root,
            true,
        ),
    ]
}

fn run_python(
    python: &Path,
    mode: &str,
    arg: &str,
    pythonpath: Option<&str>,
    input: &str,
) -> Value {
    let mut cmd = Command::new(python);
    cmd.args(["-c", HARNESS, mode, arg])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("LANG", "C.UTF-8")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(pp) = pythonpath {
        cmd.env("PYTHONPATH", pp);
    }
    let mut child = cmd.spawn().unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "harness failed for {mode} {arg}:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The resolver's answer in the harness's shape (see `agrees` for `Unfoldable`).
fn ours<T>(o: Outcome<T>, show: impl Fn(&T) -> String) -> Value {
    match o {
        Outcome::Value(v, _) => json!(["value", show(&v)]),
        Outcome::Raise { exception, message } => json!(["raise", exception, message]),
        Outcome::Unfoldable(why) => json!(["unfoldable", why]),
    }
}

/// Releases compared: installed under `$DYNAFOLD_CACHE/flashinfer`, and 0.4.1 from the corpus.
const INSTALLED: [&str; 3] = ["0.5.3", "0.6.16", "0.7.4"];
const FROM_CORPUS: &str = "0.4.1";

/// Every answer compared: 21 scenarios x 4 releases x 2 functions, all of them equal.
const COMPARED: usize = 168;

/// The (scenario, function, FlashInfer's exception) where the resolver says "unfoldable",
/// in every release: 5 x 4 = 20 of the 168 answers agree this way, the rest are equal.
const UNFOLDABLE: [(&str, &str, &str); 5] = [
    ("which_missing", "get_cuda_path", "FileNotFoundError"),
    ("nvcc_not_utf8", "get_cuda_version", "UnicodeDecodeError"),
    ("nvcc_not_executable", "get_cuda_version", "PermissionError"),
    ("nvcc_no_shebang", "get_cuda_version", "OSError"),
    (
        "cuda_home_is_a_file",
        "get_cuda_version",
        "NotADirectoryError",
    ),
];

/// The Python exception class an unfoldable reason stands for: CPython maps errno to an
/// OSError subclass the same way (PEP 3151), and a decode failure is named in the reason.
fn exception_of(why: &str) -> Option<&'static str> {
    if why.contains("(UnicodeDecodeError)") {
        return Some("UnicodeDecodeError");
    }
    let errno = why
        .split("(os error ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse::<i32>().ok())
        // std's message for ENOENT from a failed spawn has no "(os error 2)" after `which:`.
        .or_else(|| why.ends_with("No such file or directory").then_some(2))?;
    Some(match errno {
        2 => "FileNotFoundError",
        1 | 13 => "PermissionError",
        20 => "NotADirectoryError",
        21 => "IsADirectoryError",
        _ => "OSError",
    })
}

/// How a resolver answer agreed with FlashInfer's, if it did.
#[derive(Debug, PartialEq)]
enum Agreement {
    Equal,
    /// Unfoldable, and FlashInfer raised the exception class the reason names.
    SameException(String),
    Differ,
}

fn agrees(python: &Value, rust: &Value) -> Agreement {
    if rust.get(0) == Some(&json!("unfoldable")) {
        let expected = rust.get(1).and_then(Value::as_str).and_then(exception_of);
        return match (
            python.get(0).and_then(Value::as_str),
            python.get(1),
            expected,
        ) {
            (Some("raise"), Some(got), Some(want)) if got == want => {
                Agreement::SameException(want.to_string())
            }
            _ => Agreement::Differ,
        };
    }
    if python == rust {
        Agreement::Equal
    } else {
        Agreement::Differ
    }
}

#[test]
fn resolver_matches_real_flashinfer() {
    let venv = venv();
    let python = venv.join("bin/python");
    let real_torch = TorchFacts::from_torch_install(&site_packages(&venv));
    assert!(
        real_torch.cuda_version.is_some(),
        "cannot read torch/version.py in {}",
        venv.display()
    );

    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().canonicalize().unwrap();
    let scen = scenarios(&root);
    let input: Vec<Value> = scen
        .iter()
        .map(|s| json!({"env": s.env, "cwd": s.cwd, "torch_cuda": s.torch_cuda}))
        .collect();
    let input = serde_json::to_string(&input).unwrap();

    let cache = cache_dir();
    // (label, mode, argument, PYTHONPATH, path recipe)
    let mut releases: Vec<(String, &str, String, Option<String>, PathRecipe)> = Vec::new();
    for v in INSTALLED {
        let dir = cache.join("flashinfer").join(v);
        assert!(
            dir.is_dir(),
            "{} is missing: run scripts/test first",
            dir.display()
        );
        releases.push((
            v.into(),
            "import",
            String::new(),
            Some(dir.to_str().unwrap().into()),
            PathRecipe::EnvWhichDefault,
        ));
    }
    let src = cache.join(format!("corpus/{FROM_CORPUS}/flashinfer/jit/cpp_ext.py"));
    assert!(
        src.is_file(),
        "{} is missing: run scripts/fetch-corpus",
        src.display()
    );
    releases.push((
        format!("{FROM_CORPUS} (corpus source)"),
        "source",
        src.to_str().unwrap().into(),
        None,
        PathRecipe::EnvWhichRaise,
    ));

    // The harnesses are independent; run them side by side (importing FlashInfer takes seconds).
    let answers: Vec<Value> = std::thread::scope(|s| {
        let handles: Vec<_> = releases
            .iter()
            .map(|(_, mode, arg, pp, _)| {
                let (python, input) = (&python, &input);
                s.spawn(move || run_python(python, mode, arg, pp.as_deref(), input))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });

    let mut mismatches = Vec::new();
    let mut compared = 0;
    let mut unfoldable: Vec<(String, &str, &str, String)> = Vec::new();
    for ((label, _, _, _, path_recipe), answer) in releases.iter().zip(&answers) {
        for (i, s) in scen.iter().enumerate() {
            let torch = TorchFacts {
                cuda_version: if s.torch_cuda {
                    real_torch.cuda_version.clone()
                } else {
                    Some(None)
                },
                cuda_home: None,
            };
            let env = Env {
                vars: s.env.clone(),
                cwd: s.cwd.clone(),
                undecodable: Vec::new(),
            };
            let r = Resolver::new(env, torch, Duration::from_secs(10));
            let rust_path = ours(r.cuda_path(*path_recipe), |p: &String| p.clone());
            let rust_version = ours(
                r.cuda_version(VersionRecipe::NvccTorchFallback, *path_recipe),
                CudaVersion::canonical,
            );
            let py = &answer[i];
            eprintln!(
                "{label:>8} {:<32} path={} version={}",
                s.name, py["path"], py["version"]
            );
            for (what, p, rs) in [
                ("get_cuda_path", &py["path"], &rust_path),
                ("get_cuda_version", &py["version"], &rust_version),
            ] {
                compared += 1;
                match agrees(p, rs) {
                    Agreement::Equal => {}
                    Agreement::SameException(e) => {
                        unfoldable.push((label.clone(), s.name, what, e));
                    }
                    Agreement::Differ => mismatches.push(format!(
                        "{label} / {} / {what}:\n  flashinfer: {p}\n  resolver:   {rs}",
                        s.name
                    )),
                }
            }
        }
    }
    eprintln!(
        "compared {compared} answers ({} scenarios x {} releases x 2 functions)",
        scen.len(),
        releases.len()
    );
    assert!(
        mismatches.is_empty(),
        "{} mismatches:\n{}",
        mismatches.len(),
        mismatches.join("\n")
    );
    assert_eq!(releases.len(), INSTALLED.len() + 1);
    assert_eq!(compared, COMPARED, "answers compared");
    let expected: Vec<(String, &str, &str, String)> = releases
        .iter()
        .flat_map(|(label, ..)| {
            UNFOLDABLE
                .iter()
                .map(move |(scenario, what, e)| (label.clone(), *scenario, *what, e.to_string()))
        })
        .collect();
    let (mut got, mut want) = (unfoldable, expected);
    got.sort();
    want.sort();
    assert_eq!(
        got, want,
        "answers that agree only as unfoldable vs FlashInfer's exception"
    );
    eprintln!(
        "{compared} of {COMPARED} answers agree: {} equal, {} unfoldable where FlashInfer raises \
         the same exception class",
        compared - got.len(),
        got.len()
    );
}
