//! `dynafold doctor [--python PATH]`: what `dynafold run` would find in this environment, and
//! whether it will work. Read-only: the Python is asked about itself without importing torch
//! or FlashInfer (import-time side effects and seconds of start-up are not ours to trigger);
//! the rules run as a dry run over the installed FlashInfer's files; the code executed with
//! the preload is an empty interpreter start, FlashInfer's import (the census) and, for
//! `--ops` on a release with no shipped table, a trace of its public ops on fake tensors
//! (live_table.rs: nothing runs on a GPU, nothing is compiled).

use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde::Deserialize;

use crate::cli::progress::Progress;
use crate::cli::run::{find_preload, preload_value};
use crate::cli::{api_table, live_table};
use crate::config;
use crate::cuda::{CudaVersion, Env, Outcome, PathRecipe, Resolver, TorchFacts, VersionRecipe};
use crate::rewrite::{self, FoldContext};

/// How long the interpreter probes may take (a cold start on a loaded machine is slow).
const PYTHON_TIMEOUT: Duration = Duration::from_secs(60);

pub struct DoctorOptions {
    /// The interpreter to check; `python3` on PATH when None.
    pub python: Option<PathBuf>,
    pub lib: Option<PathBuf>,
    pub nvcc_timeout: Duration,
    /// Print the installed release's public-API table (`--ops`).
    pub ops: bool,
    /// Only the table's ops with this status (`--status`).
    pub status: Option<String>,
    /// The problems and the table as JSON instead of the report (`--json`).
    pub json: bool,
    /// Say on stderr which check runs once the doctor has taken a second (a terminal).
    pub progress: bool,
}

/// One thing that stops dynafold from working here, and what to do about it.
struct Problem {
    what: String,
    fix: String,
}

/// The report being written: sections of `label  value` lines, then the problems.
#[derive(Default)]
struct Report {
    text: String,
    /// The current section's lines, written when it ends: its label column is as wide as its
    /// longest label, so a long module name does not push its value out of line.
    rows: Vec<(String, String)>,
    problems: Vec<Problem>,
}

impl Report {
    fn section(&mut self, title: &str) {
        self.flush();
        self.text.push_str(&format!("\n{title}\n"));
    }
    fn line(&mut self, label: &str, value: &str) {
        self.rows.push((label.to_owned(), value.to_owned()));
    }
    /// Text that is not a `label  value` line (the `--ops` table), after the pending lines.
    fn raw(&mut self, text: &str) {
        self.flush();
        self.text.push_str(text);
    }
    fn flush(&mut self) {
        let width = self
            .rows
            .iter()
            .map(|(label, _)| label.chars().count())
            .max()
            .unwrap_or(0);
        for (label, value) in self.rows.drain(..) {
            self.text.push_str(&format!("  {label:<width$} {value}\n"));
        }
    }
    fn problem(&mut self, what: impl Into<String>, fix: impl Into<String>) {
        self.problems.push(Problem {
            what: what.into(),
            fix: fix.into(),
        });
    }
}

/// What the probe script prints about the interpreter (see `PROBE`).
#[derive(Deserialize)]
struct PythonFacts {
    executable: String,
    version: Vec<u32>,
    implementation: String,
    free_threaded: bool,
    torch: Package,
    flashinfer: Package,
}

#[derive(Deserialize)]
struct Package {
    found: bool,
    dir: Option<String>,
    version: Option<String>,
    error: Option<String>,
}

/// Runs in the inspected interpreter. find_spec on a top-level name and importlib.metadata
/// locate packages without executing them; written for any Python 3 so an old interpreter is
/// reported as old rather than as broken.
const PROBE: &str = r#"
import json, sys, sysconfig
import importlib.util as util
def pkg(mod, dists):
    r = {"found": False, "dir": None, "version": None, "error": None}
    try:
        spec = util.find_spec(mod)
    except Exception as e:
        r["error"] = repr(e)
        return r
    if spec is None:
        return r
    r["found"] = True
    locs = list(spec.submodule_search_locations or [])
    r["dir"] = locs[0] if locs else None
    try:
        import importlib.metadata as md
        for d in dists:
            try:
                r["version"] = md.version(d)
                break
            except Exception:
                pass
    except Exception:
        pass
    return r
print(json.dumps({
    "executable": sys.executable,
    "version": list(sys.version_info[:3]),
    "implementation": sys.implementation.name,
    "free_threaded": bool(sysconfig.get_config_var("Py_GIL_DISABLED")),
    "torch": pkg("torch", ["torch"]),
    "flashinfer": pkg("flashinfer", ["flashinfer-python", "flashinfer"]),
}))
"#;

const LIVE_PROBE: &str = "import sys; print(type(sys.meta_path[0]).__name__)";

/// Runs the checks; returns the report and the exit code (0 only when nothing is wrong).
pub fn run(opts: &DoctorOptions) -> (String, i32) {
    let progress = Progress::start(opts.progress);
    let mut r = Report::default();
    r.text.push_str("dynafold doctor\n");
    let env: Vec<(String, String)> = std::env::vars_os()
        .map(|(k, v)| {
            (
                k.to_string_lossy().into_owned(),
                v.to_string_lossy().into_owned(),
            )
        })
        .collect();
    check_settings(&mut r, &env);
    progress.step("asking the Python about itself");
    let python = check_python(&mut r, opts.python.as_deref());
    let facts = python.as_ref().and_then(|p| probe_python(&mut r, p));
    let fi_dir = facts.as_ref().and_then(|f| check_packages(&mut r, f));
    let torch_dir = facts
        .as_ref()
        .and_then(|f| f.torch.dir.as_ref().map(PathBuf::from));
    progress.step("asking nvcc and torch for the CUDA version");
    let resolver = cuda_sources(&mut r, torch_dir.as_deref(), opts.nvcc_timeout);
    if let Some(dir) = &fi_dir {
        progress.step("running the rules over FlashInfer's files");
        dry_run(&mut r, dir, &resolver);
    }
    let lib = check_preload(&mut r, opts.lib.as_deref());
    if let (Some(py), Some(lib)) = (&python, &lib) {
        progress.step("starting Python with the preload");
        live_check(&mut r, py, lib, disabled());
        if fi_dir.is_some() {
            progress.step("importing FlashInfer with the preload");
            ops_census(&mut r, py, lib);
        }
    }
    let release = facts.as_ref().and_then(|f| f.flashinfer.version.clone());
    progress.finish();
    let table = match (opts.ops, release.as_deref()) {
        (true, Some(release)) => Some(table_of(release, python.as_deref(), lib.as_deref())),
        _ => None,
    };
    if opts.json {
        return json_report(&r, release.as_deref(), table, opts);
    }
    if opts.ops {
        api_table(&mut r, release.as_deref(), table, opts.status.as_deref());
    }
    r.flush();
    let mut out = r.text;
    out.push('\n');
    if r.problems.is_empty() {
        out.push_str("No problems: `dynafold run -- COMMAND` will fold FlashInfer's CUDA checks in every Python process of COMMAND.\n");
        return (out, 0);
    }
    out.push_str(&format!("{} problem(s):\n", r.problems.len()));
    for p in &r.problems {
        out.push_str(&format!("problem: {}; fix: {}\n", p.what, p.fix));
    }
    (out, 1)
}

/// Version of `--json`'s layout; raised when a field changes meaning or goes.
pub const JSON_SCHEMA: u32 = 1;

/// `--json`: the problems and, with `--ops`, the installed release's table.
fn json_report(
    r: &Report,
    release: Option<&str>,
    table: Option<Table>,
    opts: &DoctorOptions,
) -> (String, i32) {
    let problems: Vec<serde_json::Value> = r
        .problems
        .iter()
        .map(|p| serde_json::json!({"what": p.what, "fix": p.fix}))
        .collect();
    let mut out = serde_json::json!({
        "schema": JSON_SCHEMA,
        "flashinfer": release,
        "problems": problems,
    });
    if opts.ops {
        out["table"] = serde_json::json!(table.as_ref().map(|t| t.source.clone()));
        out["statuses"] = serde_json::json!(api_table::statuses());
        out["legend"] = serde_json::json!(api_table::LEGEND);
        out["ops"] = match table {
            Some(Table { ops: Some(ops), .. }) => api_table::json(ops, opts.status.as_deref()),
            _ => serde_json::Value::Null,
        };
    }
    let code = i32::from(!r.problems.is_empty());
    (format!("{out}\n"), code)
}

/// Every DYNAFOLD_* variable of `env`, read by the one reading `dynafold run` and every
/// process use (`config::check`): one problem line for each bad value, each setting that
/// turns dynafold (or part of it) off, and each name dynafold does not read.
fn check_settings(r: &mut Report, env: &[(String, String)]) {
    let mut set: Vec<&(String, String)> = env
        .iter()
        .filter(|(k, _)| k.starts_with("DYNAFOLD_"))
        .collect();
    if set.is_empty() {
        return;
    }
    set.sort();
    r.section("Settings (DYNAFOLD_* variables)");
    for (name, raw) in set {
        // As every process reads it: set to nothing is not set (neither relative nor ignored).
        if raw.is_empty() && config::variable(name).is_some() {
            r.line(name, "\"\": empty, read as unset");
            continue;
        }
        let Some(variable) = config::variable(name) else {
            if cfg!(feature = "test-fault") && name == "DYNAFOLD_TEST_FAULT" {
                r.line(name, &format!("{raw:?} (fault injection, a test build)"));
                continue;
            }
            r.line(name, &format!("{raw:?}: not a setting of dynafold"));
            let known: Vec<&str> = config::VARIABLES.iter().map(|v| v.name).collect();
            r.problem(
                format!("{name} is not a setting of dynafold (a typo?): no process reads it"),
                format!("unset it; the settings are {}", known.join(", ")),
            );
            continue;
        };
        // `dynafold run` makes a relative folder absolute; only a bare LD_PRELOAD ignores it.
        if variable.kind == config::Kind::Folder && !Path::new(raw).is_absolute() {
            r.line(
                name,
                &format!("{raw:?}: relative; dynafold run makes it absolute, a process started without it ignores it"),
            );
            continue;
        }
        if let Some(warning) = config::warning(name, raw) {
            r.line(name, &format!("{raw:?}: bad value"));
            r.problem(
                format!("{warning}: every process warns"),
                format!("set {name} to {}, or unset it", expected(variable.kind)),
            );
            continue;
        }
        let off = match (variable.kind, dynafold_values::yes_no(raw)) {
            (config::Kind::Flag(default), Ok(Some(v))) if v != default => Some(name.as_str()),
            _ => None,
        };
        let effect = match off {
            Some("DYNAFOLD_DISABLE") => Some((
                "dynafold stays off in every process",
                "unset DYNAFOLD_DISABLE (or pass --disable=false to dynafold run)",
            )),
            Some("DYNAFOLD_OPS") => Some((
                "the op engine is off: FlashInfer's op declarations stay dormant, so its ops break the graph",
                "unset DYNAFOLD_OPS (or pass --ops=1 to dynafold run)",
            )),
            Some("DYNAFOLD_FP4_OPAQUE") => Some((
                "fp4_quantize's kernel stays as FlashInfer ships it, so it breaks the graph",
                "unset DYNAFOLD_FP4_OPAQUE (or pass --fp4-opaque=1 to dynafold run)",
            )),
            Some("DYNAFOLD_SURVEY") => Some((
                "survey mode: compiles that ask for fullgraph=True carry on past their graph breaks (a diagnosis run, not a server's)",
                "unset DYNAFOLD_SURVEY once the survey is done (or pass --survey=0 to dynafold run)",
            )),
            _ => None,
        };
        match effect {
            Some((what, fix)) => {
                r.line(name, &format!("{raw:?}: {what}"));
                r.problem(format!("{name}={raw:?}: {what}"), fix);
            }
            None => r.line(name, &format!("{raw:?}")),
        }
    }
}

/// What a value of `kind` must look like, for a fix line.
fn expected(kind: config::Kind) -> &'static str {
    match kind {
        config::Kind::Flag(_) => "1 or 0 (also true/false, yes/no, on/off)",
        config::Kind::Log => "a log filter, e.g. info or dynafold=debug",
        config::Kind::CudaVersion => "MAJOR.MINOR, e.g. 12.8",
        config::Kind::Seconds => "whole seconds from 1 to 600",
        config::Kind::Folder => "an absolute path to a folder",
        config::Kind::Library => "the path of libdynafold.so",
    }
}

/// Whether every process will read DYNAFOLD_DISABLE as a yes.
fn disabled() -> bool {
    let raw = std::env::var("DYNAFOLD_DISABLE").ok();
    dynafold_values::flag("DYNAFOLD_DISABLE", raw.as_deref(), false).0
}

/// The interpreter `dynafold run` would meet: `--python`, else `python3` on PATH.
fn check_python(r: &mut Report, explicit: Option<&Path>) -> Option<PathBuf> {
    r.section("Python");
    let (wanted, how) = match explicit {
        Some(p) => (p.to_path_buf(), "--python"),
        None => (PathBuf::from("python3"), "python3 on PATH"),
    };
    // A bare name is looked up on PATH, as the shell would.
    let found = if wanted.components().count() == 1 && !wanted.is_absolute() {
        which(&wanted.to_string_lossy())
    } else {
        Some(wanted.clone()).filter(|p| is_executable(p))
    };
    match found {
        Some(p) => {
            r.line("interpreter", &format!("{} ({how})", p.display()));
            Some(p)
        }
        None => {
            r.line(
                "interpreter",
                &format!("{} ({how}): not found", wanted.display()),
            );
            r.problem(
                format!("no Python at {} ({how})", wanted.display()),
                "pass --python /path/to/the/python/your/server/runs",
            );
            None
        }
    }
}

fn probe_python(r: &mut Report, python: &Path) -> Option<PythonFacts> {
    // Not -I: PYTHONPATH is often how FlashInfer is found, and the server will see it too.
    let mut cmd = Command::new(python);
    cmd.args(["-c", PROBE]).env_remove("LD_PRELOAD");
    let out = match run_with_timeout(&mut cmd, PYTHON_TIMEOUT) {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = last_line(&o.stderr);
            r.line("version", &format!("the probe failed: {err}"));
            r.problem(
                format!("{} does not run a Python 3 probe ({err})", python.display()),
                "point --python at a working CPython 3.9+",
            );
            return None;
        }
        Err(e) => {
            r.line("version", &format!("cannot run it: {e}"));
            r.problem(
                format!("cannot run {}: {e}", python.display()),
                "point --python at a working CPython 3.9+",
            );
            return None;
        }
    };
    let facts: PythonFacts = match serde_json::from_slice(&out.stdout) {
        Ok(f) => f,
        Err(e) => {
            r.problem(
                format!("{} printed something unexpected ({e})", python.display()),
                "point --python at a working CPython 3.9+",
            );
            return None;
        }
    };
    let version = facts
        .version
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(".");
    let mut verdict = "supported";
    if facts.implementation != "cpython" {
        verdict = "NOT supported";
        r.problem(
            format!(
                "{} is {}, not CPython",
                facts.executable, facts.implementation
            ),
            "run the server with CPython 3.9 or newer",
        );
    } else if facts.version.first().copied().unwrap_or(0) != 3
        || facts.version.get(1).copied().unwrap_or(0) < 9
    {
        verdict = "NOT supported";
        r.problem(
            format!("Python {version} is older than 3.9"),
            "run the server with CPython 3.9 or newer",
        );
    } else if facts.free_threaded {
        verdict = "NOT supported";
        r.problem(
            format!("Python {version} is a free-threaded build"),
            "use the regular (GIL) build of CPython",
        );
    }
    let kind = if facts.free_threaded {
        " free-threaded"
    } else {
        ""
    };
    r.line(
        "version",
        &format!(
            "{} {version}{kind} ({verdict})",
            display_impl(&facts.implementation)
        ),
    );
    r.line("sys.executable", &facts.executable);
    Some(facts)
}

fn display_impl(name: &str) -> &str {
    match name {
        "cpython" => "CPython",
        "pypy" => "PyPy",
        other => other,
    }
}

/// Reports torch and FlashInfer; returns the FlashInfer package folder when there is one.
fn check_packages(r: &mut Report, f: &PythonFacts) -> Option<PathBuf> {
    r.section("Packages (located, not imported)");
    for (name, pkg, fix) in [
        (
            "torch",
            &f.torch,
            "install torch into this Python (pip install torch)",
        ),
        (
            "FlashInfer",
            &f.flashinfer,
            "install FlashInfer into this Python (pip install flashinfer-python), or put it on PYTHONPATH",
        ),
    ] {
        let value = match (pkg.found, &pkg.dir, &pkg.error) {
            (_, _, Some(e)) => format!("cannot be located: {e}"),
            (false, _, None) => "not installed".to_owned(),
            (true, dir, None) => format!(
                "{} at {}",
                pkg.version.as_deref().unwrap_or("(version unknown)"),
                dir.as_deref().unwrap_or("(not a package folder)")
            ),
        };
        r.line(name, &value);
        if !pkg.found || pkg.dir.is_none() {
            r.problem(format!("{name} is not importable from this Python"), fix);
        }
    }
    f.flashinfer.dir.as_ref().map(PathBuf::from)
}

/// Every place FlashInfer (and dynafold) may read the CUDA version from, and what each says.
fn cuda_sources(r: &mut Report, torch_dir: Option<&Path>, timeout: Duration) -> Resolver {
    r.section("CUDA version sources");
    for var in ["CUDA_HOME", "CUDA_PATH"] {
        let value = match std::env::var(var) {
            Ok(v) if !v.is_empty() => {
                format!(
                    "{v} -> {}",
                    nvcc_answer(&Path::new(&v).join("bin/nvcc"), timeout)
                )
            }
            Ok(_) => "(empty)".to_owned(),
            Err(_) => "(unset)".to_owned(),
        };
        r.line(var, &value);
    }
    let which_nvcc = match which("nvcc") {
        Some(p) => format!("{} -> {}", p.display(), nvcc_answer(&p, timeout)),
        None => "(no nvcc on PATH)".to_owned(),
    };
    r.line("which nvcc", &which_nvcc);
    let torch = match torch_dir.and_then(Path::parent) {
        Some(site) => TorchFacts::from_torch_install(&[site.to_path_buf()]),
        None => TorchFacts::unknown(),
    };
    let torch_cuda = match (&torch.cuda_version, torch_dir) {
        (Some(Some(v)), Some(d)) => format!("{v} ({})", d.join("version.py").display()),
        (Some(None), Some(d)) => format!("None: a CPU build ({})", d.join("version.py").display()),
        (None, Some(d)) => format!("unreadable ({})", d.join("version.py").display()),
        (_, None) => "(torch not found)".to_owned(),
    };
    r.line("torch.version.cuda", &torch_cuda);
    let override_version = match std::env::var("DYNAFOLD_CUDA_VERSION") {
        Err(_) => {
            r.line("DYNAFOLD_CUDA_VERSION", "(unset)");
            None
        }
        Ok(v) => match config::parse_cuda_version(&v) {
            Ok(Some(version)) => {
                r.line("DYNAFOLD_CUDA_VERSION", &format!("{v} (overrides nvcc)"));
                Some(version)
            }
            Ok(None) => {
                r.line("DYNAFOLD_CUDA_VERSION", "(empty: unset)");
                None
            }
            // A problem of the settings (check_settings), said there.
            Err(why) => {
                r.line("DYNAFOLD_CUDA_VERSION", &format!("{v:?}: ignored, {why}"));
                None
            }
        },
    };
    let resolver =
        Resolver::new(Env::from_process(), torch, timeout).with_override(override_version);
    let answer = match resolver.cuda_version(
        VersionRecipe::NvccTorchFallback,
        PathRecipe::EnvWhichDefault,
    ) {
        Outcome::Value(v, how) => format!("{} (from {})", v.as_str(), how.0),
        Outcome::Raise { exception, message } => format!("raises {exception}: {message}"),
        Outcome::Unfoldable(why) => format!("unknown until run: {why}"),
    };
    r.line("FlashInfer 0.4+ would use", &answer);
    resolver
}

/// What `PATH/--version` says: the release, or why there is none.
fn nvcc_answer(nvcc: &Path, timeout: Duration) -> String {
    if !nvcc.exists() {
        return format!("{} does not exist", nvcc.display());
    }
    let mut cmd = Command::new(nvcc);
    cmd.arg("--version");
    match run_with_timeout(&mut cmd, timeout) {
        Err(e) => format!("nvcc --version: {e}"),
        Ok(o) if !o.status.success() => format!("nvcc --version failed ({})", o.status),
        Ok(o) => {
            let text = String::from_utf8_lossy(&o.stdout);
            match release_of(&text) {
                Some(v) => format!("nvcc --version: {v}"),
                None => "nvcc --version printed no `release X.Y,`".to_owned(),
            }
        }
    }
}

/// FlashInfer's `release (\d+\.\d+),`.
fn release_of(text: &str) -> Option<&str> {
    text.split("release ").skip(1).find_map(|rest| {
        let (v, _) = rest.split_once(',')?;
        let (a, b) = v.split_once('.')?;
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
        (digits(a) && digits(b)).then_some(v)
    })
}

/// The rules over the installed files, in import order: cpp_ext fixes the version the fp4
/// modules fold to, as in a real process.
struct DryRun<'a> {
    resolver: &'a Resolver,
    folded: Option<CudaVersion>,
}

impl FoldContext for DryRun<'_> {
    fn cuda_path(&self, recipe: PathRecipe) -> Outcome<String> {
        self.resolver.cuda_path(recipe)
    }
    fn cuda_version(&self, version: VersionRecipe, path: PathRecipe) -> Outcome<CudaVersion> {
        self.resolver.cuda_version(version, path)
    }
    fn folded_cuda_version(&self) -> Option<CudaVersion> {
        self.folded.clone()
    }
}

fn dry_run(r: &mut Report, fi_dir: &Path, resolver: &Resolver) {
    r.section("Rules (dry run over the installed FlashInfer)");
    let mut ctx = DryRun {
        resolver,
        folded: None,
    };
    for module in rewrite::TARGETS {
        let rel = module
            .trim_start_matches("flashinfer.")
            .replace('.', "/")
            .to_string()
            + ".py";
        let file = fi_dir.join(rel);
        let Ok(source) = std::fs::read_to_string(&file) else {
            r.line(module, "not in this release");
            if module == "flashinfer.jit.cpp_ext" {
                r.problem(
                    format!(
                        "{} is missing: not a FlashInfer dynafold knows",
                        file.display()
                    ),
                    "use a FlashInfer release with flashinfer/jit/cpp_ext.py (0.2 or newer)",
                );
            }
            continue;
        };
        match rewrite::rewrite(module, &source, &ctx) {
            Ok(done) => {
                let rules: Vec<&str> = done.edits.iter().map(|e| e.rule.as_str()).collect();
                let version = done
                    .cuda_version
                    .as_ref()
                    .map(|v| format!(" -> CUDA {}", v.as_str()))
                    .unwrap_or_default();
                r.line(
                    module,
                    &format!(
                        "{} site(s) folded: {}{version}",
                        done.edits.len(),
                        rules.join(", ")
                    ),
                );
                if done.cuda_version.is_some() {
                    ctx.folded = done.cuda_version;
                }
            }
            // Some releases keep only re-exports in a target file: nothing there breaks Dynamo.
            Err(_)
                if module != "flashinfer.jit.cpp_ext"
                    && !source.contains("is_cuda_version_at_least") =>
            {
                r.line(
                    module,
                    "nothing to fold (no CUDA version check in this file)",
                );
            }
            Err(skip) => {
                let why = skip.why(module);
                r.line(module, &format!("loaded unchanged: {why}"));
                let fix = if module == "flashinfer.jit.cpp_ext" {
                    "make the CUDA version knowable: set CUDA_HOME to a toolkit with bin/nvcc, or DYNAFOLD_CUDA_VERSION=MAJOR.MINOR".to_owned()
                } else {
                    format!(
                        "fix flashinfer.jit.cpp_ext first if it is listed; otherwise `dynafold rewrite {}` shows what is unexpected",
                        file.display()
                    )
                };
                r.problem(format!("{module} would be loaded unchanged ({why})"), fix);
            }
        }
    }
}

fn check_preload(r: &mut Report, explicit: Option<&Path>) -> Option<PathBuf> {
    r.section("Preload");
    match find_preload(explicit) {
        Ok(lib) => {
            r.line("library", &lib.display().to_string());
            Some(lib)
        }
        Err(e) => {
            r.line("library", &e);
            r.problem(
                e,
                "reinstall dynafold (pip install dynafold, or cargo build --release), or pass --lib /path/to/libdynafold.so",
            );
            None
        }
    }
}

/// `python -c code` with the preload in front, as `dynafold run` would start it, with the
/// settings it would pass on (DYNAFOLD_DISABLE included: the check shows what a run would do).
fn with_preload(python: &Path, lib: &Path, code: &str) -> Command {
    let mut cmd = Command::new(python);
    cmd.args(["-c", code]).env(
        "LD_PRELOAD",
        preload_value(lib, std::env::var_os("LD_PRELOAD").as_deref()),
    );
    cmd
}

/// Starts the interpreter with the preload and asks who is first on sys.meta_path. With
/// DYNAFOLD_DISABLE on, the finder must not be there (the setting is the problem, said once).
fn live_check(r: &mut Report, python: &Path, lib: &Path, disabled: bool) {
    let verdict = match run_with_timeout(&mut with_preload(python, lib, LIVE_PROBE), PYTHON_TIMEOUT)
    {
        Ok(o) => {
            let first = String::from_utf8_lossy(&o.stdout).trim().to_owned();
            if o.status.success() && disabled && first != "DynafoldFinder" {
                Ok(format!(
                    "off (DYNAFOLD_DISABLE): the interpreter starts, dynafold's finder is not installed (first finder: {first})"
                ))
            } else if o.status.success() && disabled {
                Err(
                    "DynafoldFinder is first on sys.meta_path although DYNAFOLD_DISABLE is on"
                        .to_owned(),
                )
            } else if o.status.success() && first == "DynafoldFinder" {
                Ok("DynafoldFinder is first on sys.meta_path".to_owned())
            } else if o.status.success() {
                let why = last_line(&o.stderr);
                Err(format!(
                    "the preload did not activate (first finder: {first}){}",
                    if why.is_empty() {
                        String::new()
                    } else {
                        format!("; it said: {why}")
                    }
                ))
            } else {
                Err(format!(
                    "the interpreter failed with the preload: {}",
                    last_line(&o.stderr)
                ))
            }
        }
        Err(e) => Err(format!("cannot start the interpreter: {e}")),
    };
    match verdict {
        Ok(v) => r.line("live check", &v),
        Err(e) => {
            r.line("live check", &e);
            r.problem(
                format!("live check in {}: {e}", python.display()),
                "run with DYNAFOLD_LOG=debug to see why; check that libdynafold_python.so sits beside libdynafold.so",
            );
        }
    }
}

/// Imports FlashInfer with the preload and prints what `hooks/ops/engine/wake.py` recorded.
const OPS_PROBE: &str = "import json, sys\nimport flashinfer\n\
m = sys.modules.get('_dynafold_ops.engine.wake')\nprint(json.dumps(m.census() if m else None))";

/// Per FlashInfer module: how many op declarations a compile would wake, and why the others
/// stay as FlashInfer ships them. Informational: the fold does not depend on it.
fn ops_census(r: &mut Report, python: &Path, lib: &Path) {
    r.section("FlashInfer op declarations (woken for torch.compile)");
    let out = match run_with_timeout(&mut with_preload(python, lib, OPS_PROBE), PYTHON_TIMEOUT) {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            r.line(
                "import flashinfer",
                &format!("failed: {}", last_line(&o.stderr)),
            );
            return;
        }
        Err(e) => {
            r.line("import flashinfer", &format!("cannot start: {e}"));
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed: Option<serde_json::Value> = text
        .lines()
        .last()
        .and_then(|l| serde_json::from_str(l).ok());
    let Some(serde_json::Value::Object(modules)) = parsed else {
        r.line(
            "declarations",
            "not recorded (DYNAFOLD_OPS=0, or flashinfer.utils is not the dormant pair: DYNAFOLD_LOG=warn says)",
        );
        return;
    };
    let mut names: Vec<&String> = modules.keys().collect();
    names.sort();
    for name in names {
        let entry = &modules[name];
        let woken = entry["woken"].as_u64().unwrap_or(0);
        let mut line = format!("{woken} woken");
        if let Some(serde_json::Value::Object(skipped)) = entry.get("skipped") {
            for (why, n) in skipped {
                line.push_str(&format!("; {} left: {why}", n.as_u64().unwrap_or(0)));
            }
        }
        r.line(name, &line);
    }
    // Nothing has run here: no declaration is vouched for by its kernel yet.
    r.line(
        "first-run check",
        "never checked in this process: each woken operator is checked against its kernel at its first real run, per call form (`status()` in the compiling process)",
    );
}

/// Where a shipped table came from (`--json`'s "table").
const SHIPPED: &str = "shipped with dynafold (traced by its authors)";

/// A release's public-API table, and where it came from (`--ops`).
struct Table {
    /// "shipped", or what the live trace was (or why there is none).
    source: String,
    ops: Option<api_table::Ops>,
}

/// The table shipped for `release`; else the release traced here and now (live_table.rs),
/// with the user's interpreter and the preload: a release nobody measured still gets its
/// answer, said to be this machine's.
fn table_of(release: &str, python: Option<&Path>, lib: Option<&Path>) -> Table {
    if let Some(ops) = api_table::shipped(release) {
        return Table {
            source: SHIPPED.to_owned(),
            ops: Some(ops),
        };
    }
    let shipped = api_table::releases().join(", ");
    let (Some(python), Some(lib)) = (python, lib) else {
        return Table {
            source: format!(
                "none shipped for {release} (this dynafold has tables for {shipped}), and no interpreter with the preload to trace it live"
            ),
            ops: None,
        };
    };
    eprintln!(
        "dynafold doctor: no table shipped for FlashInfer {release}: tracing its public ops live (a minute or more)"
    );
    match live_table::trace(python, lib, release) {
        Ok((ops, seconds)) => Table {
            source: format!(
                "none shipped for {release} (this dynafold has tables for {shipped}): traced live here in {seconds}s, on fake tensors, by this dynafold"
            ),
            ops: Some(ops),
        },
        Err(why) => Table {
            source: format!(
                "none shipped for {release} (this dynafold has tables for {shipped}); the live trace failed: {why}"
            ),
            ops: None,
        },
    }
}

/// The installed release's public-API table (`--ops`), grouped by status, each row cut to a
/// terminal's width (`--json` has the rows whole). Not a problem when there is none: the
/// table is documentation, the fold does not depend on it.
fn api_table(r: &mut Report, release: Option<&str>, table: Option<Table>, status: Option<&str>) {
    let (Some(release), Some(table)) = (release, table) else {
        r.section("FlashInfer public API under torch.compile");
        r.line("release", "unknown: FlashInfer's version could not be read");
        return;
    };
    r.section(&format!(
        "FlashInfer {release} public API under torch.compile(fullgraph=True)"
    ));
    // A shipped table goes without saying (as it always has); one traced here, or none, is
    // said.
    if table.source != SHIPPED {
        r.line("table", &table.source);
    }
    let Some(ops) = table.ops else {
        return;
    };
    let rows = api_table::rows(&ops, status);
    let (n, totals) = api_table::totals(&ops);
    r.line(&format!("{n} public tensor ops"), &totals);
    let mut table = format!("  {}\n", api_table::LEGEND);
    // One name column for the whole table, as wide as its longest name.
    let width = rows
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0);
    let mut current = "";
    for (i, row) in rows.iter().enumerate() {
        if row.status != current {
            current = &row.status;
            let count = rows[i..].iter().take_while(|r| r.status == current).count();
            table.push_str(&format!("\n  {current} ({count})\n"));
        }
        let line = format!("    {:<width$} {}", row.name, row.detail);
        table.push_str(&cut(&line, ROW_WIDTH));
        table.push('\n');
    }
    r.raw(&table);
}

/// The widest `--ops` row; longer ones end in "...".
const ROW_WIDTH: usize = 160;

fn cut(line: &str, width: usize) -> String {
    if line.chars().count() <= width {
        return line.to_owned();
    }
    let kept: String = line.chars().take(width - 3).collect();
    format!("{kept}...")
}

fn last_line(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .trim()
        .to_owned()
}

/// `shutil.which`: the first executable `name` on PATH.
fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/bin:/bin"));
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// Runs `cmd` (no stdin), killing it after `timeout`: a hanging nvcc or interpreter must not
/// hang the doctor.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<Output, String> {
    use std::os::unix::process::CommandExt;
    // Its own process group, so a timeout kills a script's children (sleep, a real nvcc's
    // helpers) too.
    let mut child = cmd
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    // Readers on threads: a chatty child must not block on a full pipe while we wait.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            if let Some(mut p) = pipe {
                let _ = p.read_to_end(&mut buf);
            }
            buf
        })
    };
    let out = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let err = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if start.elapsed() < timeout => std::thread::sleep(Duration::from_millis(20)),
            Ok(None) => {
                // SAFETY: kill on the group we created; the child is not reaped yet, so its
                // pid (the group id) cannot have been reused.
                unsafe {
                    libc::kill(-(child.id() as i32), libc::SIGKILL);
                }
                let _ = child.wait();
                // The reader threads are left behind: a grandchild may still hold the pipes.
                return Err(format!("timed out after {}s", timeout.as_secs()));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    Ok(Output {
        status,
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use super::{check_settings, config, release_of, Report};

    fn problems(vars: &[(&str, &str)]) -> Vec<String> {
        let env: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mut r = Report::default();
        check_settings(&mut r, &env);
        r.problems.into_iter().map(|p| p.what).collect()
    }

    /// Every spelling every process reads as a yes turns dynafold off, so doctor says so.
    #[test]
    fn disable_is_read_as_the_processes_read_it() {
        for yes in ["1", "TRUE", "Yes", "on"] {
            let found = problems(&[("DYNAFOLD_DISABLE", yes)]);
            assert!(
                found.len() == 1 && found[0].contains("stays off"),
                "{yes}: {found:?}"
            );
        }
        for no in ["", "0", "FALSE", "Off"] {
            assert!(problems(&[("DYNAFOLD_DISABLE", no)]).is_empty(), "{no:?}");
        }
        let found = problems(&[("DYNAFOLD_DISABLE", "maybe")]);
        assert!(
            found.len() == 1 && found[0].contains("every process warns"),
            "{found:?}"
        );
    }

    /// Each bad value is one problem, in the words every process warns with.
    #[test]
    fn every_setting_is_checked_once() {
        let bad = [
            ("DYNAFOLD_OPS", "garbage"),
            ("DYNAFOLD_FP4_OPAQUE", "garbage"),
            ("DYNAFOLD_LOG", "garbage"),
            ("DYNAFOLD_NVCC_TIMEOUT", "garbage"),
            ("DYNAFOLD_NVCC_TIMEOUT", "0"),
            ("DYNAFOLD_CUDA_VERSION", "twelve"),
            ("DYNAFOLD_CACHE_DIR", "/dev/null"),
            ("DYNAFOLD_OPTS", "1"),
        ];
        for (name, raw) in bad {
            let found = problems(&[(name, raw)]);
            assert_eq!(found.len(), 1, "{name}={raw}: {found:?}");
            assert!(found[0].starts_with(name), "{found:?}");
        }
        for off in [("DYNAFOLD_OPS", "0"), ("DYNAFOLD_FP4_OPAQUE", "off")] {
            let found = problems(&[off]);
            assert!(
                found.len() == 1 && found[0].contains("the graph"),
                "{found:?}"
            );
        }
        let found = problems(&[("DYNAFOLD_SURVEY", "yes")]);
        assert!(
            found.len() == 1 && found[0].contains("a diagnosis run"),
            "{found:?}"
        );
        let fine = [
            ("DYNAFOLD_OPS", "1"),
            ("DYNAFOLD_SURVEY", "0"),
            ("DYNAFOLD_LOG", "dynafold=debug"),
            ("DYNAFOLD_NVCC_TIMEOUT", "600"),
            ("DYNAFOLD_CUDA_VERSION", "12.8"),
            ("DYNAFOLD_REPORT_DIR", "/tmp"),
            ("DYNAFOLD_CACHE_DIR", "relative/cache"),
            ("DYNAFOLD_LIB", "/x/libdynafold.so"),
        ];
        assert_eq!(problems(&fine), Vec::<String>::new());
    }

    /// An empty variable is an unset one, as every process reads it: shown so, no problem.
    #[test]
    fn an_empty_setting_is_unset() {
        let env: Vec<(String, String)> = config::VARIABLES
            .iter()
            .map(|v| (v.name.to_owned(), String::new()))
            .collect();
        let mut r = Report::default();
        check_settings(&mut r, &env);
        r.flush();
        assert!(r.problems.is_empty());
        for v in config::VARIABLES {
            let line = r.text.lines().find(|l| l.trim_start().starts_with(v.name));
            assert!(
                line.is_some_and(|l| l.ends_with("\"\": empty, read as unset")),
                "{}",
                r.text
            );
        }
    }

    /// A section's values start in one column, however long its longest label.
    #[test]
    fn a_long_label_keeps_its_section_in_line() {
        let mut r = Report::default();
        r.section("S");
        r.line("short", "a");
        r.line(
            "flashinfer.fused_moe.cute_dsl.blockscaled_contiguous_gather",
            "b",
        );
        r.section("T");
        r.line("x", "c");
        r.flush();
        let column = |l: &str| l.rfind(' ').map(|i| i + 1);
        let lines: Vec<&str> = r.text.lines().filter(|l| l.starts_with("  ")).collect();
        assert_eq!(column(lines[0]), column(lines[1]), "{}", r.text);
        assert_eq!(lines[2], "  x c");
    }

    #[test]
    fn release_matches_flashinfer_regex() {
        assert_eq!(
            release_of("Cuda compilation tools, release 12.8, V12.8.93"),
            Some("12.8")
        );
        assert_eq!(release_of("release 12, V12"), None);
        assert_eq!(release_of("hello"), None);
    }
}
