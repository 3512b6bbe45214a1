//! The manifests tell the truth: what `cargo metadata` resolves from the
//! lockfile agrees with what the crates declare.
//!
//! - Every crate inherits the workspace's `rust-version`, and no locked
//!   package needs a newer Rust than it (a lockfile that needs 1.88 under a
//!   declared 1.85 fails on the older toolchain it promises to support).
//! - Crates used by tests only (`tempfile`, `proptest`, `criterion`) are
//!   dev-dependencies: a user of the library does not build them.
//! - A crate that may be published has the metadata crates.io shows
//!   (description, licence, readme, keywords, categories) and gives every
//!   path dependency a version, which `cargo publish` needs.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// `cargo metadata` of the workspace, resolved from the lockfile as it is.
fn metadata() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let output = Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(&root)
        .output()
        .expect("cargo runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON")
}

/// A `rust-version` as comparable numbers (`1.88` and `1.88.0` are equal).
fn version(text: &str) -> Vec<u64> {
    let mut parts: Vec<u64> = text
        .split('.')
        .map(|part| part.parse().expect("a numeric rust-version"))
        .collect();
    parts.resize(3, 0);
    parts
}

fn members(metadata: &Value) -> Vec<&Value> {
    let ids = metadata["workspace_members"].as_array().unwrap();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|package| ids.contains(&package["id"]))
        .collect()
}

fn name(package: &Value) -> &str {
    package["name"].as_str().unwrap()
}

#[test]
fn every_crate_declares_one_rust_version_no_locked_package_exceeds() {
    let metadata = metadata();
    let members = members(&metadata);
    let declared = members[0]["rust_version"]
        .as_str()
        .expect("the workspace declares a rust-version");
    for member in &members {
        assert_eq!(
            member["rust_version"].as_str(),
            Some(declared),
            "{} does not inherit the workspace rust-version",
            name(member)
        );
    }
    let too_new: Vec<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|package| {
            let needs = package["rust_version"].as_str()?;
            (version(needs) > version(declared))
                .then(|| format!("{} {} needs {needs}", name(package), package["version"]))
        })
        .collect();
    assert!(
        too_new.is_empty(),
        "the lockfile needs a newer Rust than the declared {declared}: {too_new:?}"
    );
}

#[test]
fn test_only_crates_are_dev_dependencies() {
    let metadata = metadata();
    for member in members(&metadata) {
        for dependency in member["dependencies"].as_array().unwrap() {
            let dependency_name = dependency["name"].as_str().unwrap();
            if ["tempfile", "proptest", "criterion"].contains(&dependency_name) {
                assert_eq!(
                    dependency["kind"].as_str(),
                    Some("dev"),
                    "{} depends on {dependency_name} outside its tests",
                    name(member)
                );
            }
        }
    }
}

#[test]
fn publishable_crates_carry_crates_io_metadata_and_versioned_path_dependencies() {
    let metadata = metadata();
    let publishable: Vec<&Value> = members(&metadata)
        .into_iter()
        .filter(|member| member["publish"] != serde_json::json!([]))
        .collect();
    assert!(
        publishable.iter().any(|member| name(member) == "csam-calib"),
        "csam-calib, the crate without libtorch, is publishable"
    );
    for member in publishable {
        for field in ["description", "license", "readme"] {
            assert!(
                member[field].as_str().is_some_and(|text| !text.is_empty()),
                "{} has no {field}",
                name(member)
            );
        }
        for field in ["keywords", "categories"] {
            assert!(
                member[field].as_array().is_some_and(|list| !list.is_empty()),
                "{} has no {field}",
                name(member)
            );
        }
        for dependency in member["dependencies"].as_array().unwrap() {
            if dependency["path"].is_string() && dependency["kind"].as_str() != Some("dev") {
                assert_ne!(
                    dependency["req"].as_str(),
                    Some("*"),
                    "{} depends on {} by path without a version",
                    name(member),
                    dependency["name"]
                );
            }
        }
    }
}
