//! FlashInfer's `get_cuda_path()` / `get_cuda_version()`, replayed step by step with CPython's
//! semantics (`os.path`, `subprocess`, `str.strip`, `re`), from explicit inputs.
//!
//! Each step yields either a value or the exception CPython would raise; the recipe then
//! applies FlashInfer's `except` clauses. Exceptions we cannot rebuild exactly (OSErrors other
//! than the caught ones, decode errors, anything after a timeout) end as `Unfoldable`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use super::posixpath;
use super::probe::{self, Invocation, ProbeResult, Status};
use super::{CudaVersion, Outcome, PathRecipe, Provenance, TorchFacts, VersionRecipe};

/// The process environment as FlashInfer's Python sees it.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// `os.environ` (UTF-8 values only; see `undecodable`).
    pub vars: HashMap<String, String>,
    /// `os.getcwd()`; relative executables (`bin/nvcc` when the CUDA home is empty) and empty
    /// PATH entries resolve against it. An empty or relative path means "unknown".
    pub cwd: PathBuf,
    /// Names of variables whose values are not UTF-8. CPython holds them surrogate-escaped,
    /// which a Rust `String` cannot carry, so recipes that read them are `Unfoldable`.
    pub undecodable: Vec<String>,
}

impl Env {
    pub fn from_process() -> Env {
        let mut env = Env::default();
        for (k, v) in std::env::vars_os() {
            match (k.into_string(), v.into_string()) {
                (Ok(k), Ok(v)) => {
                    env.vars.insert(k, v);
                }
                (Ok(k), Err(_)) => env.undecodable.push(k),
                // A non-UTF-8 name is none FlashInfer asks for; only the child loses it.
                (Err(_), _) => {}
            }
        }
        env.cwd = std::env::current_dir().unwrap_or_default();
        env
    }

    /// `os.environ.get(name)`; `Err` when the value exists but is not representable.
    fn get(&self, name: &str) -> Result<Option<&str>, PyErr> {
        if self.undecodable.iter().any(|n| n == name) {
            return Err(PyErr::Other(format!("${name} is not UTF-8")));
        }
        Ok(self.vars.get(name).map(String::as_str))
    }

    /// Whether `subprocess(text=True)` decodes with UTF-8 in a Python started with this
    /// environment: UTF-8 mode, or a C/POSIX locale (PEP 538/540 switch those to UTF-8), or a
    /// UTF-8 locale. `None` when it may be another codec.
    fn python_text_is_utf8(&self) -> Option<bool> {
        match self.vars.get("PYTHONUTF8").map(String::as_str) {
            Some("1") => return Some(true),
            Some("0") => return None,
            _ => {}
        }
        let locale = ["LC_ALL", "LC_CTYPE", "LANG"]
            .iter()
            .filter_map(|n| self.vars.get(*n))
            .find(|v| !v.is_empty());
        match locale {
            None => Some(true),
            Some(l) if l == "C" || l == "POSIX" => Some(true),
            Some(l) => {
                let l = l.to_ascii_lowercase();
                (l.contains("utf-8") || l.contains("utf8")).then_some(true)
            }
        }
    }
}

/// An exception CPython would raise at some step, by how FlashInfer's handlers treat it.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PyErr {
    /// `RuntimeError(message)`: caught by the 0.4+ fallback, rebuildable otherwise.
    Runtime(String),
    /// `FileNotFoundError` (exec ENOENT): caught by the fallback, never rebuilt.
    FileNotFound(String),
    /// `subprocess.CalledProcessError`: caught by the fallback, never rebuilt.
    CalledProcess(String),
    /// Anything else (other OSErrors, UnicodeDecodeError, a hang CPython would wait out...).
    Other(String),
}

impl PyErr {
    fn describe(&self) -> String {
        match self {
            PyErr::Runtime(m) => format!("RuntimeError: {m}"),
            PyErr::FileNotFound(m) | PyErr::CalledProcess(m) | PyErr::Other(m) => m.clone(),
        }
    }
}

type Step<T> = Result<(T, String), PyErr>;

/// Resolves the recipes once per process; cheap to share between threads.
pub struct Resolver {
    env: Env,
    torch: TorchFacts,
    timeout: Duration,
    /// The version every version recipe yields, and where it was given (the provenance).
    override_version: Option<(CudaVersion, String)>,
    default_cuda_home: String,
    paths: Mutex<HashMap<PathRecipe, Outcome<String>>>,
    versions: Mutex<HashMap<(VersionRecipe, PathRecipe), Outcome<CudaVersion>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere while holding the cache leaves it consistent (inserts are atomic).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Resolver {
    pub fn new(env: Env, torch: TorchFacts, timeout: Duration) -> Resolver {
        Resolver {
            env,
            torch,
            timeout,
            override_version: None,
            default_cuda_home: "/usr/local/cuda".to_owned(),
            paths: Mutex::new(HashMap::new()),
            versions: Mutex::new(HashMap::new()),
        }
    }

    /// `DYNAFOLD_CUDA_VERSION`: the version every version recipe yields, without running
    /// nvcc. Path recipes are unaffected.
    pub fn with_override(self, v: Option<CudaVersion>) -> Self {
        self.with_override_from(v, "DYNAFOLD_CUDA_VERSION")
    }

    /// The same, given as `source` (`--cuda-version` on a command line): the folded values
    /// name where their version came from.
    pub fn with_override_from(mut self, v: Option<CudaVersion>, source: &str) -> Self {
        self.override_version = v.map(|v| (v, source.to_owned()));
        self
    }

    /// The default timeout for each `which` / `nvcc` run.
    pub fn default_timeout() -> Duration {
        probe::DEFAULT_TIMEOUT
    }

    /// Points the 0.5+ default (`/usr/local/cuda`) elsewhere, so both of its branches can be
    /// tested on any machine.
    #[cfg(test)]
    pub(crate) fn with_default_cuda_home(mut self, p: &str) -> Self {
        self.default_cuda_home = p.to_owned();
        self
    }

    /// What `get_cuda_path()` returns or raises.
    pub fn cuda_path(&self, r: PathRecipe) -> Outcome<String> {
        let mut cache = lock(&self.paths);
        if let Some(o) = cache.get(&r) {
            return o.clone();
        }
        let o = match self.path_step(r) {
            Ok((v, how)) => Outcome::Value(v, Provenance(how)),
            Err(PyErr::Runtime(message)) => Outcome::Raise {
                exception: "RuntimeError",
                message,
            },
            Err(e) => Outcome::Unfoldable(format!("get_cuda_path would raise: {}", e.describe())),
        };
        cache.insert(r, o.clone());
        o
    }

    /// What `get_cuda_version()` returns or raises; `p` is the release's `get_cuda_path`
    /// shape (unused by `NvccTorchHome`, which reads torch's CUDA_HOME directly).
    pub fn cuda_version(&self, v: VersionRecipe, p: PathRecipe) -> Outcome<CudaVersion> {
        if let Some((ov, source)) = &self.override_version {
            return Outcome::Value(ov.clone(), Provenance(source.clone()));
        }
        let mut cache = lock(&self.versions);
        if let Some(o) = cache.get(&(v, p)) {
            return o.clone();
        }
        let o = match v {
            VersionRecipe::NvccTorchFallback => self.version_with_fallback(p),
            VersionRecipe::NvccTorchHome => self.version_torch_home(),
        };
        cache.insert((v, p), o.clone());
        o
    }

    fn version_torch_home(&self) -> Outcome<CudaVersion> {
        let nvcc = match &self.torch.cuda_home {
            None => {
                return Outcome::Unfoldable("torch.utils.cpp_extension.CUDA_HOME is unknown".into())
            }
            Some(None) => "nvcc".to_owned(),
            Some(Some(home)) => posixpath::join(home, "bin/nvcc"),
        };
        match self.nvcc_version(&nvcc) {
            Ok((v, how)) => Outcome::Value(v, Provenance(how)),
            Err(PyErr::Runtime(message)) => Outcome::Raise {
                exception: "RuntimeError",
                message,
            },
            Err(e) => {
                Outcome::Unfoldable(format!("get_cuda_version would raise: {}", e.describe()))
            }
        }
    }

    fn version_with_fallback(&self, p: PathRecipe) -> Outcome<CudaVersion> {
        let attempt = match self.path_step(p) {
            Ok((home, _)) => self.nvcc_version(&posixpath::join(&home, "bin/nvcc")),
            Err(e) => Err(e),
        };
        let why = match attempt {
            Ok((v, how)) => return Outcome::Value(v, Provenance(how)),
            Err(PyErr::Other(m)) => {
                return Outcome::Unfoldable(format!("get_cuda_version would raise: {m}"))
            }
            Err(e) => e.describe(),
        };
        match &self.torch.cuda_version {
            None => Outcome::Unfoldable(format!(
                "nvcc failed ({why}) and torch.version.cuda is unknown"
            )),
            Some(None) => Outcome::Raise {
                exception: "RuntimeError",
                message: "nvcc not found and PyTorch is not built with CUDA support. \
                          Could not determine CUDA version."
                    .into(),
            },
            Some(Some(s)) => match CudaVersion::parse_release(s) {
                Some(v) => Outcome::Value(
                    v,
                    Provenance(format!("torch.version.cuda (nvcc failed: {why})")),
                ),
                None => Outcome::Unfoldable(format!(
                    "torch.version.cuda {s:?} is not a plain numeric release"
                )),
            },
        }
    }

    fn path_step(&self, r: PathRecipe) -> Step<String> {
        match r {
            PathRecipe::EnvWhichDefault | PathRecipe::EnvWhichRaise => {
                // `os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH")`, then
                // `is not None`: an empty CUDA_HOME defers to CUDA_PATH, an empty CUDA_PATH
                // is returned as is.
                match self.env.get("CUDA_HOME")? {
                    Some(h) if !h.is_empty() => return Ok((h.to_owned(), "CUDA_HOME".into())),
                    _ => {}
                }
                if let Some(p) = self.env.get("CUDA_PATH")? {
                    return Ok((p.to_owned(), "CUDA_PATH".into()));
                }
                match self.which_nvcc()? {
                    Some(nvcc) => {
                        let home = posixpath::dirname(&posixpath::dirname(&nvcc));
                        Ok((home, format!("which nvcc ({nvcc})")))
                    }
                    None if r == PathRecipe::EnvWhichRaise => {
                        Err(PyErr::Runtime("Could not find nvcc".into()))
                    }
                    None => {
                        let home = &self.default_cuda_home;
                        if Path::new(home).exists() {
                            Ok((home.clone(), format!("default {home} (nvcc not on PATH)")))
                        } else {
                            let repr = py_repr(home).ok_or_else(|| {
                                PyErr::Other(format!("cannot render {home:?} as Python does"))
                            })?;
                            Err(PyErr::Runtime(format!(
                                "Could not find nvcc and default cuda_home={repr} doesn't exist"
                            )))
                        }
                    }
                }
            }
            PathRecipe::TorchHomeWhichRaise => match &self.torch.cuda_home {
                None => Err(PyErr::Other(
                    "torch.utils.cpp_extension.CUDA_HOME is unknown".into(),
                )),
                Some(Some(h)) => Ok((h.clone(), "torch.utils.cpp_extension.CUDA_HOME".into())),
                Some(None) => match self.which_nvcc()? {
                    Some(nvcc) => Ok((nvcc.clone(), format!("which nvcc ({nvcc})"))),
                    None => Err(PyErr::Runtime("Could not find nvcc".into())),
                },
            },
        }
    }

    fn invoke(&self, program: &str, args: &[&str]) -> Result<ProbeResult, PyErr> {
        let path_var = self.env.get("PATH")?;
        let cands = probe::exec_candidates(program, path_var);
        if !self.env.cwd.is_absolute() && cands.iter().any(|c| !c.starts_with('/')) {
            return Err(PyErr::Other(format!(
                "cannot run {program:?}: relative path and unknown cwd"
            )));
        }
        Ok(probe::run_search(
            &cands,
            &Invocation {
                arg0: program,
                args,
                env: &self.env.vars,
                cwd: &self.env.cwd,
                timeout: self.timeout,
            },
        ))
    }

    /// `subprocess.run(["which", "nvcc"], capture_output=True)`: `Some(stripped stdout)` on
    /// exit 0, `None` on any other return code (a signal gives a negative one).
    fn which_nvcc(&self) -> Result<Option<String>, PyErr> {
        let r = self.invoke("which", &["nvcc"])?;
        match r.status {
            Status::Exited(0) => {
                let out = String::from_utf8(r.stdout).map_err(|_| {
                    PyErr::Other("`which nvcc` printed non-UTF-8 (UnicodeDecodeError)".into())
                })?;
                Ok(Some(py_strip(&out).to_owned()))
            }
            Status::Exited(_) | Status::Signaled(_) => Ok(None),
            other => Err(status_error("which", other)),
        }
    }

    /// `subprocess.check_output([nvcc, "--version"], text=True)` and the regex.
    fn nvcc_version(&self, nvcc: &str) -> Step<CudaVersion> {
        let r = self.invoke(nvcc, &["--version"])?;
        match r.status {
            Status::Exited(0) => {}
            Status::Exited(code) => {
                return Err(PyErr::CalledProcess(format!(
                    "{nvcc} --version: exit status {code}{}",
                    stderr_hint(&r.stderr)
                )))
            }
            Status::Signaled(sig) => {
                return Err(PyErr::CalledProcess(format!(
                    "{nvcc} --version: killed by signal {sig}"
                )))
            }
            other => return Err(status_error(nvcc, other)),
        }
        let txt = self.decode_text(r.stdout, nvcc)?;
        match find_release(&txt) {
            Err(m) => Err(PyErr::Other(format!("{nvcc} --version: {m}"))),
            Ok(None) => Err(PyErr::Runtime(format!(
                "Could not parse CUDA version from nvcc --version output: {txt}"
            ))),
            Ok(Some(m)) => match CudaVersion::parse_release(&m) {
                Some(v) => Ok((v, format!("nvcc --version ({nvcc}): release {m}"))),
                None => Err(PyErr::Other(format!("{nvcc}: release {m} out of range"))),
            },
        }
    }

    /// `text=True`: locale decoding (strict) and universal newlines.
    fn decode_text(&self, bytes: Vec<u8>, nvcc: &str) -> Result<String, PyErr> {
        let ascii = bytes.is_ascii();
        let s = String::from_utf8(bytes).map_err(|_| {
            PyErr::Other(format!(
                "{nvcc} --version printed non-UTF-8 (UnicodeDecodeError)"
            ))
        })?;
        if !ascii && self.env.python_text_is_utf8() != Some(true) {
            return Err(PyErr::Other(format!(
                "{nvcc} --version printed non-ASCII text and Python's locale codec is unsure"
            )));
        }
        Ok(s.replace("\r\n", "\n").replace('\r', "\n"))
    }
}

/// The first line of a failing tool's stderr, for people reading the provenance.
fn stderr_hint(stderr: &[u8]) -> String {
    let text = String::from_utf8_lossy(stderr);
    match text.lines().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => format!(" ({})", line.chars().take(200).collect::<String>()),
        None => String::new(),
    }
}

fn status_error(program: &str, s: Status) -> PyErr {
    match s {
        Status::SpawnFailed(libc::ENOENT) => {
            PyErr::FileNotFound(format!("{program}: No such file or directory"))
        }
        Status::SpawnFailed(errno) => PyErr::Other(format!(
            "{program}: exec failed: {}",
            std::io::Error::from_raw_os_error(errno)
        )),
        Status::Timeout => PyErr::Other(format!("{program}: timed out")),
        Status::TooMuchOutput => PyErr::Other(format!("{program}: too much output")),
        Status::Broken(m) => PyErr::Other(format!("{program}: {m}")),
        Status::Exited(c) => PyErr::Other(format!("{program}: exit status {c}")),
        Status::Signaled(c) => PyErr::Other(format!("{program}: signal {c}")),
    }
}

/// `str.isspace` per character, which is what `str.strip()` removes: Unicode White_Space
/// plus the ASCII information separators U+001C..U+001F.
fn py_isspace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// `str.strip()`.
fn py_strip(s: &str) -> &str {
    s.trim_matches(py_isspace)
}

/// `repr(str)` for ASCII text; `None` for text whose repr depends on Unicode tables.
fn py_repr(s: &str) -> Option<String> {
    if !s.is_ascii() {
        return None;
    }
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (' '..='~').contains(&c) => out.push(c),
            c => out.push_str(&format!("\\x{:02x}", u32::from(c))),
        }
    }
    out.push(quote);
    Some(out)
}

/// A run of `\d` and the character after it.
fn digit_run(chars: &mut std::str::CharIndices<'_>) -> Result<(usize, Option<char>), String> {
    let mut n = 0;
    for (_, c) in chars.by_ref() {
        if c.is_ascii_digit() {
            n += 1;
        } else if !c.is_ascii() && c.is_numeric() {
            return Err(format!("non-ASCII digit {c:?} after \"release \""));
        } else {
            return Ok((n, Some(c)));
        }
    }
    Ok((n, None))
}

/// The first match of `re.findall(r"release (\d+\.\d+),", txt)`. `\d` on `str` matches
/// every Unicode decimal digit; rather than carry the tables, a non-ASCII numeric character
/// where a digit could go makes the answer `Err` (unsure).
fn find_release(txt: &str) -> Result<Option<String>, String> {
    for (i, _) in txt.match_indices("release ") {
        let Some(rest) = txt.get(i + "release ".len()..) else {
            continue;
        };
        let mut chars = rest.char_indices();
        let (major, sep) = digit_run(&mut chars)?;
        if major == 0 || sep != Some('.') {
            continue;
        }
        let (minor, end) = digit_run(&mut chars)?;
        if minor == 0 || end != Some(',') {
            continue;
        }
        // All characters consumed are ASCII, so byte length equals character count.
        return Ok(rest.get(..major + 1 + minor).map(str::to_owned));
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
