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
