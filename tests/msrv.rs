//! The `rust-version` the workspace declares is the true minimum: no dependency that a Linux
//! build compiles asks for a newer Rust (ruff's 0.0.10 crates need 1.95, not the 1.85 once
//! declared here). The README states the same version.

use std::process::Command;

fn version(v: &str) -> (u64, u64) {
    let mut parts = v.split('.').map(|p| p.parse::<u64>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn declared_rust_version_covers_every_dependency() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let platform = format!("{}-unknown-linux-gnu", std::env::consts::ARCH);
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--offline",
            "--filter-platform",
        ])
        .arg(&platform)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let members: Vec<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|m| m.as_str())
        .collect();
    let resolved: Vec<&str> = meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    let packages = meta["packages"].as_array().unwrap();
    let rust_version = |p: &serde_json::Value| p["rust_version"].as_str().map(version);
    let declared = packages
        .iter()
        .filter(|p| members.contains(&p["id"].as_str().unwrap_or_default()))
        .filter_map(rust_version)
        .min()
        .expect("the workspace declares rust-version");
    let needed = packages
        .iter()
        .filter(|p| resolved.contains(&p["id"].as_str().unwrap_or_default()))
        .filter_map(|p| Some((rust_version(p)?, p["name"].as_str()?.to_owned())))
        .max()
        .expect("some dependency declares rust-version");
    assert!(
        declared >= needed.0,
        "rust-version {declared:?} is older than {needed:?}, which {} needs",
        needed.1
    );
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let stated = format!("Rust {}.{}+", declared.0, declared.1);
    assert!(readme.contains(&stated), "README does not say {stated}");
}

/// The declared minimum really builds the workspace. When the toolchain running these tests is
/// that version (CI's is), the build that made this test binary is the proof; otherwise the
/// workspace is checked again with `cargo +<minimum>`, which must be installed.
#[test]
fn declared_rust_version_builds_the_workspace() {
    let declared = version(env!("CARGO_PKG_RUST_VERSION"));
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let rustc = std::path::Path::new(&cargo).with_file_name("rustc");
    let out = Command::new(&rustc)
        .arg("--version")
        .output()
        .expect("rustc beside cargo runs");
    let running = String::from_utf8_lossy(&out.stdout).into_owned();
    let running_version = version(running.split_whitespace().nth(1).unwrap_or_default());
    if running_version == declared {
        return;
    }
    let toolchain = format!("+{}.{}", declared.0, declared.1);
    let target = concat!(env!("CARGO_MANIFEST_DIR"), "/target/msrv");
    let out = Command::new("cargo")
        .args([
            toolchain.as_str(),
            "check",
            "--workspace",
            "--all-targets",
            "--offline",
        ])
        .env("CARGO_TARGET_DIR", target)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("rustup's cargo runs");
    assert!(
        out.status.success(),
        "{running} runs the tests; `cargo {toolchain} check` (the declared minimum) failed \
         (install it with `rustup toolchain install {}.{}`):\n{}",
        declared.0,
        declared.1,
        String::from_utf8_lossy(&out.stderr)
    );
}
