use super::*;
use std::time::Instant;

const NVCC_12_8: &str = "nvcc: NVIDIA (R) Cuda compiler driver\n\
Copyright (c) 2005-2025 NVIDIA Corporation\n\
Built on Fri_Feb_21_20:23:50_PST_2025\n\
Cuda compilation tools, release 12.8, V12.8.93\n\
Build cuda_12.8.r12.8/compiler.35583870_0\n";

const FALLBACK: VersionRecipe = VersionRecipe::NvccTorchFallback;
const DEFAULT: PathRecipe = PathRecipe::EnvWhichDefault;
const RAISE: PathRecipe = PathRecipe::EnvWhichRaise;

/// A temp dir with `<root>/cuda/bin/` ready for a fake nvcc.
struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("cuda/bin")).unwrap();
        std::fs::create_dir_all(dir.path().join("empty")).unwrap();
        Fixture { dir }
    }
    fn p(&self, rel: &str) -> String {
        self.dir.path().join(rel).to_str().unwrap().to_owned()
    }
    fn home(&self) -> String {
        self.p("cuda")
    }
    fn file(&self, rel: &str, body: &[u8], mode: u32) {
        crate::cuda::test_files::write_program(&self.dir.path().join(rel), body, mode);
    }
    /// A fake nvcc printing `stdout` verbatim, then exiting with `code`.
    fn nvcc_printing(&self, stdout: &[u8], code: i32) {
        self.file("cuda/bin/out.txt", stdout, 0o644);
        let body = format!("#!/bin/sh\ncat \"$(dirname \"$0\")/out.txt\"\nexit {code}\n");
        self.file("cuda/bin/nvcc", body.as_bytes(), 0o755);
    }
    fn nvcc_script(&self, body: &str) {
        self.file("cuda/bin/nvcc", body.as_bytes(), 0o755);
    }
    /// Environment with `which` reachable but no nvcc, and a UTF-8 locale.
    fn env(&self, extra: &[(&str, &str)]) -> Env {
        let mut vars: HashMap<String, String> = [
            ("PATH", format!("{}:/usr/bin:/bin", self.p("empty"))),
            ("HOME", self.p("")),
            ("LANG", "C.UTF-8".into()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
        for (k, v) in extra {
            vars.insert(k.to_string(), v.to_string());
        }
        Env {
            vars,
            cwd: self.dir.path().to_path_buf(),
            undecodable: Vec::new(),
        }
    }
    fn resolver(&self, extra: &[(&str, &str)], torch_cuda: Option<Option<&str>>) -> Resolver {
        let torch = TorchFacts {
            cuda_version: torch_cuda.map(|o| o.map(str::to_owned)),
            cuda_home: None,
        };
        Resolver::new(self.env(extra), torch, Duration::from_secs(5))
            .with_default_cuda_home(&self.p("no-such-default"))
    }
}

fn value<T: std::fmt::Debug>(o: Outcome<T>) -> (T, String) {
    match o {
        Outcome::Value(v, Provenance(p)) => (v, p),
        other => panic!("expected a value, got {other:?}"),
    }
}

fn version(o: Outcome<CudaVersion>) -> (String, String) {
    let (v, p) = value(o);
    (v.as_str().to_owned(), p)
}

fn raise<T: std::fmt::Debug>(o: Outcome<T>) -> (&'static str, String) {
    match o {
        Outcome::Raise { exception, message } => (exception, message),
        other => panic!("expected a raise, got {other:?}"),
    }
}

fn unfoldable<T: std::fmt::Debug>(o: Outcome<T>) -> String {
    match o {
        Outcome::Unfoldable(why) => why,
        other => panic!("expected unfoldable, got {other:?}"),
    }
}

const TORCH_NONE_MSG: &str = "nvcc not found and PyTorch is not built with CUDA support. \
                              Could not determine CUDA version.";

#[test]
fn cuda_home_with_working_nvcc() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    let home = f.home();
    let r = f.resolver(
        &[("CUDA_HOME", &home), ("CUDA_PATH", "/elsewhere")],
        Some(None),
    );
    assert_eq!(
        value(r.cuda_path(DEFAULT)),
        (home.clone(), "CUDA_HOME".into())
    );
    let (v, how) = version(r.cuda_version(FALLBACK, DEFAULT));
    assert_eq!(v, "12.8");
    assert_eq!(
        how,
        format!("nvcc --version ({home}/bin/nvcc): release 12.8")
    );
    // Trailing slash: posixpath.join adds none.
    let r = f.resolver(&[("CUDA_HOME", &format!("{home}/"))], Some(None));
    let (_, how) = version(r.cuda_version(FALLBACK, RAISE));
    assert_eq!(
        how,
        format!("nvcc --version ({home}/bin/nvcc): release 12.8")
    );
}

#[test]
fn empty_cuda_home_falls_through_to_cuda_path() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    let home = f.home();
    let r = f.resolver(&[("CUDA_HOME", ""), ("CUDA_PATH", &home)], Some(None));
    assert_eq!(value(r.cuda_path(RAISE)), (home, "CUDA_PATH".into()));
    assert_eq!(version(r.cuda_version(FALLBACK, RAISE)).0, "12.8");
}

#[test]
fn empty_cuda_path_is_returned_and_nvcc_is_relative_to_cwd() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    let mut r = f.resolver(&[("CUDA_HOME", ""), ("CUDA_PATH", "")], Some(Some("12.4")));
    assert_eq!(
        value(r.cuda_path(DEFAULT)),
        (String::new(), "CUDA_PATH".into())
    );
    // cwd is the fixture root: `bin/nvcc` does not exist there -> ENOENT -> torch.
    let (v, how) = version(r.cuda_version(FALLBACK, DEFAULT));
    assert_eq!(v, "12.4");
    assert!(how.starts_with("torch.version.cuda (nvcc failed:"), "{how}");
    r.env.cwd = PathBuf::from(f.home());
    r.versions = Mutex::new(HashMap::new());
    let (v, how) = version(r.cuda_version(FALLBACK, DEFAULT));
    assert_eq!(
        (v.as_str(), how.as_str()),
        ("12.8", "nvcc --version (bin/nvcc): release 12.8")
    );
}

#[test]
fn nvcc_found_through_which() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    let path = format!("{}/bin:/usr/bin:/bin", f.home());
    let r = f.resolver(&[("PATH", &path)], Some(None));
    let (home, how) = value(r.cuda_path(DEFAULT));
    assert_eq!(home, f.home());
    assert_eq!(how, format!("which nvcc ({}/bin/nvcc)", f.home()));
    assert_eq!(version(r.cuda_version(FALLBACK, DEFAULT)).0, "12.8");
    assert_eq!(version(r.cuda_version(FALLBACK, RAISE)).0, "12.8");
}

#[test]
fn no_nvcc_anywhere() {
    let f = Fixture::new();
    // 0.4: get_cuda_path raises; get_cuda_version catches it.
    let r = f.resolver(&[], Some(Some("12.6")));
    assert_eq!(
        raise(r.cuda_path(RAISE)),
        ("RuntimeError", "Could not find nvcc".into())
    );
    let (v, how) = version(r.cuda_version(FALLBACK, RAISE));
    assert_eq!(v, "12.6");
    assert_eq!(
        how,
        "torch.version.cuda (nvcc failed: RuntimeError: Could not find nvcc)"
    );
    let r = f.resolver(&[], Some(None));
    assert_eq!(
        raise(r.cuda_version(FALLBACK, RAISE)),
        ("RuntimeError", TORCH_NONE_MSG.into())
    );
    let r = f.resolver(&[], None);
    unfoldable(r.cuda_version(FALLBACK, RAISE));
    let r = f.resolver(&[], Some(Some("12.8+cu")));
    unfoldable(r.cuda_version(FALLBACK, RAISE));
}

#[test]
fn default_cuda_home_branches() {
    let f = Fixture::new();
    let r = f.resolver(&[], Some(None));
    let (exc, msg) = raise(r.cuda_path(DEFAULT));
    assert_eq!(exc, "RuntimeError");
    assert_eq!(
        msg,
        format!(
            "Could not find nvcc and default cuda_home='{}' doesn't exist",
            f.p("no-such-default")
        )
    );
    assert_eq!(raise(r.cuda_version(FALLBACK, DEFAULT)).1, TORCH_NONE_MSG);
    // The real default renders exactly as FlashInfer's f-string does.
    let real = Resolver::new(f.env(&[]), TorchFacts::unknown(), Duration::from_secs(5))
        .with_default_cuda_home("/no/such/usr/local/cuda");
    assert_eq!(
        raise(real.cuda_path(DEFAULT)).1,
        "Could not find nvcc and default cuda_home='/no/such/usr/local/cuda' doesn't exist"
    );
    // Existing default without nvcc: path is the default, version falls back.
    let r = f
        .resolver(&[], Some(Some("12.9")))
        .with_default_cuda_home(&f.p("empty"));
    assert_eq!(value(r.cuda_path(DEFAULT)).0, f.p("empty"));
    assert_eq!(version(r.cuda_version(FALLBACK, DEFAULT)).0, "12.9");
}

#[test]
fn failing_nvcc_falls_back_only_in_0_4_plus() {
    let f = Fixture::new();
    f.nvcc_script("#!/bin/sh\necho boom >&2\nexit 1\n");
    let home = f.home();
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(Some("12.8")));
    let (v, how) = version(r.cuda_version(FALLBACK, DEFAULT));
    assert_eq!(v, "12.8");
    assert_eq!(
        how,
        format!(
            "torch.version.cuda (nvcc failed: {home}/bin/nvcc --version: exit status 1 (boom))"
        )
    );
    let mut r = f.resolver(&[], Some(Some("12.8")));
    r.torch.cuda_home = Some(Some(home));
    unfoldable(r.cuda_version(
        VersionRecipe::NvccTorchHome,
        PathRecipe::TorchHomeWhichRaise,
    ));
}

#[test]
fn nvcc_killed_by_signal_is_called_process_error() {
    let f = Fixture::new();
    f.nvcc_script("#!/bin/sh\nkill -9 $$\n");
    let r = f.resolver(&[("CUDA_HOME", &f.home())], Some(Some("12.1")));
    let (v, how) = version(r.cuda_version(FALLBACK, DEFAULT));
    assert_eq!(v, "12.1");
    assert!(how.contains("signal 9"), "{how}");
}

#[test]
fn unparsable_output() {
    let f = Fixture::new();
    f.nvcc_printing(b"garbage\r\nrelease 12.8 no comma\r\nrelease 12,\n", 0);
    let home = f.home();
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(None));
    // 0.4+: the RuntimeError is caught; torch has no CUDA.
    assert_eq!(raise(r.cuda_version(FALLBACK, DEFAULT)).1, TORCH_NONE_MSG);
    // 0.2/0.3: raised as is, with universal newlines applied to the text.
    let mut r = f.resolver(&[], Some(None));
    r.torch.cuda_home = Some(Some(home));
    let (exc, msg) = raise(r.cuda_version(VersionRecipe::NvccTorchHome, DEFAULT));
    assert_eq!(exc, "RuntimeError");
    assert_eq!(
        msg,
        "Could not parse CUDA version from nvcc --version output: \
         garbage\nrelease 12.8 no comma\nrelease 12,\n"
    );
}

#[test]
fn undecodable_or_unsure_output_is_unfoldable() {
    let f = Fixture::new();
    let home = f.home();
    f.nvcc_printing(b"release 12.8, \xff\xfe\n", 0);
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(Some("12.8")));
    assert!(unfoldable(r.cuda_version(FALLBACK, DEFAULT)).contains("UnicodeDecodeError"));
    // Valid UTF-8, non-ASCII: fine under a UTF-8 locale, unsure under Latin-1.
    f.nvcc_printing("© NVIDIA\nrelease 12.8, V12.8.93\n".as_bytes(), 0);
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(None));
    assert_eq!(version(r.cuda_version(FALLBACK, DEFAULT)).0, "12.8");
    let r = f.resolver(
        &[("CUDA_HOME", &home), ("LANG", "de_DE.ISO-8859-1")],
        Some(None),
    );
    unfoldable(r.cuda_version(FALLBACK, DEFAULT));
    // Unicode digits would match `\d` in Python.
    f.nvcc_printing("release ١٢.٨, V12\n".as_bytes(), 0);
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(None));
    assert!(unfoldable(r.cuda_version(FALLBACK, DEFAULT)).contains("non-ASCII digit"));
}

#[test]
fn hung_nvcc_times_out_fast() {
    let f = Fixture::new();
    f.nvcc_script("#!/bin/sh\nsleep 60\n");
    let torch = TorchFacts {
        cuda_version: Some(Some("12.8".into())),
        cuda_home: None,
    };
    let r = Resolver::new(
        f.env(&[("CUDA_HOME", &f.home())]),
        torch,
        Duration::from_millis(300),
    );
    let t0 = Instant::now();
    assert!(unfoldable(r.cuda_version(FALLBACK, DEFAULT)).contains("timed out"));
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
}

#[test]
fn odd_exec_errors_are_unfoldable() {
    let f = Fixture::new();
    let home = f.home();
    // EACCES -> PermissionError, which FlashInfer does not catch.
    f.file("cuda/bin/nvcc", NVCC_12_8.as_bytes(), 0o644);
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(Some("12.8")));
    assert!(unfoldable(r.cuda_version(FALLBACK, DEFAULT)).contains("ermission"));
    // No shebang: ENOEXEC (CPython does not retry through /bin/sh).
    f.file(
        "cuda/bin/nvcc",
        b"echo 'Cuda compilation tools, release 12.8, V12.8.93'\n",
        0o755,
    );
    let r = f.resolver(&[("CUDA_HOME", &home)], Some(Some("12.8")));
    unfoldable(r.cuda_version(FALLBACK, DEFAULT));
    // CUDA_HOME is a file: ENOTDIR -> NotADirectoryError.
    let r = f.resolver(&[("CUDA_HOME", &f.p("cuda/bin/nvcc"))], Some(Some("12.8")));
    unfoldable(r.cuda_version(FALLBACK, DEFAULT));
}

#[test]
fn missing_which() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    // `which` itself is not on PATH: FileNotFoundError from get_cuda_path.
    let path = format!("{}/bin", f.home());
    let r = f.resolver(&[("PATH", &path)], Some(Some("12.2")));
    assert!(unfoldable(r.cuda_path(DEFAULT)).contains("No such file"));
    assert_eq!(version(r.cuda_version(FALLBACK, DEFAULT)).0, "12.2");
    // PATH unset: CPython uses os.defpath, where which lives.
    let mut r = f.resolver(&[], Some(Some("12.2")));
    r.env.vars.remove("PATH");
    assert!(matches!(r.cuda_path(RAISE), Outcome::Raise { .. }));
}

#[test]
fn override_skips_nvcc_but_not_paths() {
    let f = Fixture::new();
    f.nvcc_script("#!/bin/sh\ntouch \"$(dirname \"$0\")/ran\"\necho 'release 12.8,'\n");
    let ov = CudaVersion::parse_override("13.0").unwrap();
    let r = f
        .resolver(&[("CUDA_HOME", &f.home())], None)
        .with_override(Some(ov));
    assert_eq!(
        version(r.cuda_version(FALLBACK, DEFAULT)),
        ("13.0".into(), "DYNAFOLD_CUDA_VERSION".into())
    );
    assert_eq!(
        version(r.cuda_version(VersionRecipe::NvccTorchHome, DEFAULT)).0,
        "13.0"
    );
    assert_eq!(value(r.cuda_path(DEFAULT)).0, f.home());
    assert!(!f.dir.path().join("cuda/bin/ran").exists());
    assert!(CudaVersion::parse_override("12.8\"); import os; os.system(\"touch X\")#").is_err());
}

#[test]
fn torch_home_recipes() {
    let f = Fixture::new();
    f.nvcc_printing(NVCC_12_8.as_bytes(), 0);
    let th = PathRecipe::TorchHomeWhichRaise;
    let mut r = f.resolver(&[], Some(None));
    unfoldable(r.cuda_path(th));
    unfoldable(r.cuda_version(VersionRecipe::NvccTorchHome, th));

    r = f.resolver(&[], Some(None));
    r.torch.cuda_home = Some(Some(f.home()));
    assert_eq!(value(r.cuda_path(th)).0, f.home());
    assert_eq!(
        version(r.cuda_version(VersionRecipe::NvccTorchHome, th)).0,
        "12.8"
    );

    // torch found no CUDA_HOME: `which nvcc` gives the nvcc path itself (0.3 quirk), and
    // 0.2/0.3 get_cuda_version runs plain `nvcc` through PATH.
    let path = format!("{}/bin:/usr/bin:/bin", f.home());
    r = f.resolver(&[("PATH", &path)], Some(None));
    r.torch.cuda_home = Some(None);
    assert_eq!(value(r.cuda_path(th)).0, format!("{}/bin/nvcc", f.home()));
    let (v, how) = version(r.cuda_version(VersionRecipe::NvccTorchHome, th));
    assert_eq!(
        (v.as_str(), how.as_str()),
        ("12.8", "nvcc --version (nvcc): release 12.8")
    );

    r = f.resolver(&[], Some(Some("12.8")));
    r.torch.cuda_home = Some(None);
    assert_eq!(raise(r.cuda_path(th)).1, "Could not find nvcc");
    // FileNotFoundError propagates in 0.2/0.3.
    unfoldable(r.cuda_version(VersionRecipe::NvccTorchHome, th));
}

#[test]
fn undecodable_env_is_unfoldable() {
    let f = Fixture::new();
    let mut r = f.resolver(&[], Some(Some("12.8")));
    r.env.undecodable.push("CUDA_HOME".into());
    unfoldable(r.cuda_path(DEFAULT));
    unfoldable(r.cuda_version(FALLBACK, DEFAULT));
}

#[test]
fn results_are_memoised_and_shareable() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Resolver>();
    let f = Fixture::new();
    f.nvcc_script("#!/bin/sh\necho x >> \"$(dirname \"$0\")/count\"\necho 'release 12.8, V1'\n");
    let r = f.resolver(&[("CUDA_HOME", &f.home())], Some(None));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| assert_eq!(version(r.cuda_version(FALLBACK, DEFAULT)).0, "12.8"));
        }
    });
    let count = std::fs::read_to_string(f.dir.path().join("cuda/bin/count")).unwrap();
    assert_eq!(count.lines().count(), 1);
}

#[test]
fn python_helpers() {
    assert_eq!(py_strip("\u{1c} /a/b\n\u{a0}\u{3000}"), "/a/b");
    assert_eq!(py_repr("/usr/local/cuda").unwrap(), "'/usr/local/cuda'");
    assert_eq!(py_repr("it's").unwrap(), "\"it's\"");
    assert_eq!(py_repr("a'\"\\\n\x01").unwrap(), "'a\\'\"\\\\\\n\\x01'");
    assert_eq!(py_repr("é"), None);
}

#[test]
fn release_regex() {
    let f = |s: &str| find_release(s).unwrap();
    assert_eq!(f(NVCC_12_8).as_deref(), Some("12.8"));
    assert_eq!(f("release 12.8 x\nrelease 12.9,").as_deref(), Some("12.9"));
    assert_eq!(f("release 12.8.1, release 11.0,").as_deref(), Some("11.0"));
    assert_eq!(f("release release 123.45,").as_deref(), Some("123.45"));
    assert_eq!(f("release  12.8,"), None);
    assert_eq!(f("Release 12.8,"), None);
    assert_eq!(f("release 12.8"), None);
    assert_eq!(f("release .8,"), None);
    assert!(find_release("release 12.٨,").is_err());
}
