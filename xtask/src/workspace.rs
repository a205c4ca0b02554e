//! The workspace as `cargo metadata --no-deps` describes it: its packages, which of them are
//! device crates (a `[package.metadata.cmv]` table naming their PTX), and which depend on one.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::util::{self, Result, err};

/// A device crate (`#![no_std]` kernels built to PTX) and where its PTX is committed: a
/// workspace member whose manifest has
///
/// ```toml
/// [package.metadata.cmv]
/// ptx = "crates/dense-gemv/ptx/dense_kernels.ptx"
/// arch = "sm_90a"  # optional: one of ARCHS, default sm_80
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCrate {
    /// Cargo package name.
    pub package: String,
    /// The crate's directory relative to the workspace root (named in the PTX header).
    pub dir: String,
    /// Where the PTX goes, relative to the workspace root (inside the host crate that embeds it).
    pub ptx: String,
    /// The architecture the PTX targets (one of [`ARCHS`]).
    pub arch: String,
}

/// Architectures a device crate may target: `sm_80` (runs on every GPU from the A100 on; the
/// default) and `sm_90a` (Hopper only: `wgmma`, loaded only on compute capability 9.0).
pub const ARCHS: [&str; 2] = ["sm_80", "sm_90a"];

impl DeviceCrate {
    /// The PTX file's name (`dense_kernels.ptx`).
    pub fn ptx_file_name(&self) -> &str {
        self.ptx.rsplit('/').next().unwrap_or(&self.ptx)
    }
}

/// A workspace member.
#[derive(Debug, Clone)]
pub struct Package {
    pub name: String,
    /// The directory holding its `Cargo.toml`.
    pub dir: PathBuf,
    /// The names of its direct dependencies of every kind (normal, dev and build).
    pub deps: BTreeSet<String>,
    /// Set for device crates.
    pub device: Option<DeviceCrate>,
}

/// The workspace's members, in the order of `[workspace] members`.
#[derive(Debug, Clone)]
pub struct Workspace {
    pub packages: Vec<Package>,
}

// The parts of `cargo metadata --format-version 1` used here.
#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<MetaPackage>,
    workspace_members: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct MetaPackage {
    name: String,
    id: String,
    manifest_path: PathBuf,
    #[serde(default)]
    dependencies: Vec<MetaDependency>,
    #[serde(default)]
    metadata: Option<serde_json::Value>,
}

#[derive(Debug, Deserialize)]
struct MetaDependency {
    name: String,
}

/// `[package.metadata.cmv]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CmvTable {
    /// The PTX path, relative to the workspace root.
    ptx: String,
    /// The architecture (default `sm_80`).
    #[serde(default)]
    arch: Option<String>,
}

impl Workspace {
    /// Runs `cargo metadata --format-version 1 --no-deps` in the workspace root `ws`.
    pub fn load(ws: &Path) -> Result<Workspace> {
        let mut cmd = Command::new(util::cargo_bin());
        cmd.current_dir(ws).args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ]);
        let out = util::run_captured(&mut cmd)?;
        Workspace::from_metadata(&String::from_utf8_lossy(&out.stdout), ws)
    }

    /// Parses `cargo metadata` JSON of the workspace rooted at `ws`.
    fn from_metadata(json: &str, ws: &Path) -> Result<Workspace> {
        let meta: Metadata =
            serde_json::from_str(json).map_err(|e| err!("cannot parse `cargo metadata`: {e}"))?;
        let mut packages = Vec::new();
        for id in &meta.workspace_members {
            let p =
                meta.packages.iter().find(|p| &p.id == id).ok_or_else(|| {
                    err!("`cargo metadata` lists member {id} but not its package")
                })?;
            let dir = p
                .manifest_path
                .parent()
                .ok_or_else(|| err!("{}: manifest has no directory", p.name))?
                .to_path_buf();
            let device = match p.metadata.as_ref().and_then(|m| m.get("cmv")) {
                None => None,
                Some(table) => Some(device_crate(p, table, &dir, ws)?),
            };
            packages.push(Package {
                name: p.name.clone(),
                dir,
                deps: p.dependencies.iter().map(|d| d.name.clone()).collect(),
                device,
            });
        }
        let ws = Workspace { packages };
        ws.check()?;
        Ok(ws)
    }

    /// The device crates, in member order.
    pub fn device_crates(&self) -> Vec<DeviceCrate> {
        self.packages
            .iter()
            .filter_map(|p| p.device.clone())
            .collect()
    }

    /// The member whose directory is `dir`.
    pub fn package_in(&self, dir: &Path) -> Option<&Package> {
        self.packages.iter().find(|p| p.dir == dir)
    }

    /// Whether `package` launches kernels of a device crate: it depends on one directly (as a
    /// normal, dev or build dependency). Device crates themselves do not (their own tests run on
    /// the CPU).
    pub fn uses_device_crate(&self, package: &Package) -> bool {
        package.device.is_none()
            && self
                .packages
                .iter()
                .any(|p| p.device.is_some() && package.deps.contains(&p.name))
    }

    /// Two device crates must not write the same PTX file, nor two files of the same name (the
    /// GPU bundle and `--check` put them in one directory).
    fn check(&self) -> Result<()> {
        let devices = self.device_crates();
        for (i, a) in devices.iter().enumerate() {
            for b in &devices[i + 1..] {
                if a.ptx_file_name() == b.ptx_file_name() {
                    return Err(err!(
                        "device crates {} and {} both write {}: give each its own PTX file name \
                         in [package.metadata.cmv]",
                        a.package,
                        b.package,
                        a.ptx_file_name()
                    ));
                }
            }
        }
        Ok(())
    }
}

fn device_crate(
    p: &MetaPackage,
    table: &serde_json::Value,
    dir: &Path,
    ws: &Path,
) -> Result<DeviceCrate> {
    let manifest = p.manifest_path.display();
    let cmv: CmvTable = serde_json::from_value(table.clone())
        .map_err(|e| err!("{manifest}: [package.metadata.cmv]: {e}"))?;
    let ptx = Path::new(&cmv.ptx);
    let valid = !cmv.ptx.is_empty()
        && ptx.is_relative()
        && ptx.extension().is_some_and(|e| e == "ptx")
        && ptx
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)));
    if !valid {
        return Err(err!(
            "{manifest}: [package.metadata.cmv] ptx = {:?} must be a `.ptx` path relative to the \
             workspace root, without `..`",
            cmv.ptx
        ));
    }
    let rel = dir.strip_prefix(ws).map_err(|_| {
        err!(
            "{manifest}: a device crate must live inside the workspace {}",
            ws.display()
        )
    })?;
    let arch = cmv.arch.unwrap_or_else(|| ARCHS[0].to_owned());
    if !ARCHS.contains(&arch.as_str()) {
        return Err(err!(
            "{manifest}: [package.metadata.cmv] arch = {arch:?} must be one of {}",
            ARCHS.join(", ")
        ));
    }
    Ok(DeviceCrate {
        package: p.name.clone(),
        dir: rel.to_string_lossy().into_owned(),
        ptx: cmv.ptx,
        arch,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(packages: &[(&str, &[&str], Option<&str>)]) -> String {
        let packages: Vec<serde_json::Value> = packages
            .iter()
            .map(|(name, deps, cmv)| {
                let deps: Vec<_> = deps
                    .iter()
                    .map(|d| serde_json::json!({ "name": d, "kind": null }))
                    .collect();
                serde_json::json!({
                    "name": name,
                    "id": format!("path+file:///ws/{name}#0.1.0"),
                    "manifest_path": format!("/ws/crates/{name}/Cargo.toml"),
                    "dependencies": deps,
                    "metadata": cmv.map(|c| serde_json::from_str::<serde_json::Value>(c).unwrap()),
                })
            })
            .collect();
        let members: Vec<_> = packages.iter().map(|p| p["id"].clone()).collect();
        serde_json::json!({ "packages": packages, "workspace_members": members }).to_string()
    }

    #[test]
    fn a_crate_with_the_table_is_a_device_crate() {
        let json = metadata(&[
            ("host", &["k"], None),
            (
                "k",
                &[],
                Some(r#"{"cmv": {"ptx": "crates/host/ptx/k.ptx"}}"#),
            ),
            ("other", &[], Some(r#"{"docs": {"x": 1}}"#)),
            ("bench", &["host"], None),
        ]);
        let ws = Workspace::from_metadata(&json, Path::new("/ws")).unwrap();
        assert_eq!(
            ws.device_crates(),
            [DeviceCrate {
                package: "k".into(),
                dir: "crates/k".into(),
                ptx: "crates/host/ptx/k.ptx".into(),
                arch: "sm_80".into(),
            }]
        );
        let host = ws.package_in(Path::new("/ws/crates/host")).unwrap();
        assert!(ws.uses_device_crate(host));
        for name in ["k", "other", "bench"] {
            let p = ws.packages.iter().find(|p| p.name == name).unwrap();
            assert!(!ws.uses_device_crate(p), "{name}");
        }
    }

    #[test]
    fn bad_tables_are_refused() {
        for table in [
            r#"{"cmv": {}}"#,
            r#"{"cmv": {"ptx": "/abs/k.ptx"}}"#,
            r#"{"cmv": {"ptx": "../k.ptx"}}"#,
            r#"{"cmv": {"ptx": "crates/k.txt"}}"#,
            r#"{"cmv": {"ptx": "crates/k.ptx", "typo": 1}}"#,
        ] {
            let json = metadata(&[("k", &[], Some(table))]);
            assert!(
                Workspace::from_metadata(&json, Path::new("/ws")).is_err(),
                "{table}"
            );
        }
        let json = metadata(&[
            ("a", &[], Some(r#"{"cmv": {"ptx": "crates/x/ptx/k.ptx"}}"#)),
            ("b", &[], Some(r#"{"cmv": {"ptx": "crates/y/ptx/k.ptx"}}"#)),
        ]);
        let e = Workspace::from_metadata(&json, Path::new("/ws")).unwrap_err();
        assert!(e.to_string().contains("both write k.ptx"), "{e}");
    }

    /// Discovery on the real workspace finds today's device crates, and each one's PTX path is
    /// unique, named after the crate, and inside a host crate's `ptx/` directory.
    #[test]
    fn discovery_finds_the_device_crates() {
        let root = util::workspace_root();
        let ws = Workspace::load(&root).unwrap();
        let devices = ws.device_crates();
        let names: BTreeSet<&str> = devices.iter().map(|d| d.package.as_str()).collect();
        for expected in [
            "dense-kernels",
            "selftest-kernels",
            "ans-kernels",
            "spqr-kernels",
        ] {
            assert!(names.contains(expected), "{expected} not found: {names:?}");
        }
        assert!(!names.contains("cmv-device"), "cmv-device builds no PTX");
        assert!(!names.contains("xtask"));
        for k in &devices {
            assert!(
                k.ptx
                    .ends_with(&format!("/ptx/{}.ptx", k.package.replace('-', "_"))),
                "{k:?}"
            );
            assert_eq!(
                devices.iter().filter(|o| o.ptx == k.ptx).count(),
                1,
                "{k:?}"
            );
            assert!(root.join(&k.dir).join("Cargo.toml").is_file(), "{k:?}");
        }
        // The host crates that embed the PTX launch the kernels.
        for host in ["dense-gemv", "ans-codec", "spqr-format", "cmv-runtime"] {
            let p = ws.packages.iter().find(|p| p.name == host).unwrap();
            assert!(ws.uses_device_crate(p), "{host}");
        }
    }
}
