//! A workspace's Cargo targets from `cargo metadata`, to name the package and kind of every target a test log shows.
//!
//! cargo test prints a target as `Running unittests src/codec.rs (.../deps/codec-HASH)`,
//! `Running tests/round_trip.rs (.../deps/round_trip-HASH)` or `Doc-tests codec`: a crate
//! name (the target's name with `-` written `_`) and a source path relative to the
//! package, never the package. [`Workspace::map`] finds the one target of the workspace
//! with that crate name, kind and source, and names its package and nextest-style target
//! (`lib`, `bin/NAME`, the test's name, `doc`). Read: `cargo metadata --no-deps
//! --format-version 1` (`packages[].name`, `manifest_path`, `targets[].name`, `kind`,
//! `src_path`, `doctest`).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::Deserialize;

use crate::ci::testlog::{Mapping, RunLog, TargetRun};

/// Errors reading a workspace's metadata.
#[derive(Debug, thiserror::Error)]
pub enum TargetsError {
    /// cargo could not be started.
    #[error("cannot run `cargo metadata --manifest-path {manifest}`: {source}")]
    Spawn {
        /// The manifest.
        manifest: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// cargo failed.
    #[error("`cargo metadata --manifest-path {manifest}` failed: {stderr}")]
    Failed {
        /// The manifest.
        manifest: PathBuf,
        /// The end of its standard error.
        stderr: String,
    },
    /// Its output is not the JSON expected.
    #[error("`cargo metadata --manifest-path {manifest}`: unexpected output: {message}")]
    Output {
        /// The manifest.
        manifest: PathBuf,
        /// The deserializer's message.
        message: String,
    },
}

/// One Cargo target.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Target {
    /// The target's name (`codec`, `round_trip`, `tool`).
    pub name: String,
    /// Its kinds (`lib`, `rlib`, `bin`, `test`, `bench`, `example`, `proc-macro`, ...).
    pub kind: Vec<String>,
    /// Its root source file (absolute).
    pub src_path: PathBuf,
}

/// One workspace member.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Package {
    /// The package's name.
    pub name: String,
    /// Its `Cargo.toml` (absolute).
    pub manifest_path: PathBuf,
    /// Its targets.
    pub targets: Vec<Target>,
}

/// The workspace's packages and targets.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Workspace {
    /// Workspace members.
    pub packages: Vec<Package>,
}

fn crate_name(target: &str) -> String {
    target.replace('-', "_")
}

impl Target {
    fn is_lib(&self) -> bool {
        self.kind.iter().any(|k| {
            matches!(
                k.as_str(),
                "lib" | "rlib" | "dylib" | "cdylib" | "staticlib" | "proc-macro"
            )
        })
    }

    fn has(&self, kind: &str) -> bool {
        self.kind.iter().any(|k| k == kind)
    }
}

impl Workspace {
    /// Run `cargo metadata --no-deps --format-version 1 --manifest-path MANIFEST` (`$CARGO`
    /// or `cargo`).
    ///
    /// # Errors
    /// [`TargetsError`] naming the manifest.
    pub fn load(manifest: &Path) -> Result<Workspace, TargetsError> {
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        let out = Command::new(cargo)
            .args([
                "metadata",
                "--no-deps",
                "--format-version",
                "1",
                "--manifest-path",
            ])
            .arg(manifest)
            .output()
            .map_err(|source| TargetsError::Spawn {
                manifest: manifest.to_path_buf(),
                source,
            })?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            let lines: Vec<&str> = err.lines().collect();
            return Err(TargetsError::Failed {
                manifest: manifest.to_path_buf(),
                stderr: lines[lines.len().saturating_sub(5)..].join("\n"),
            });
        }
        Self::from_json(&out.stdout).map_err(|message| TargetsError::Output {
            manifest: manifest.to_path_buf(),
            message,
        })
    }

    /// Parse `cargo metadata`'s JSON.
    ///
    /// # Errors
    /// The deserializer's message.
    pub fn from_json(json: &[u8]) -> Result<Workspace, String> {
        serde_json::from_slice(json).map_err(|e| e.to_string())
    }

    /// The (package, nextest-style target) a target of a cargo test log is, when exactly
    /// one target of the workspace fits its crate name, kind and source path.
    pub fn resolve(&self, run: &TargetRun) -> Option<(String, String)> {
        match self.candidates(run).as_slice() {
            [one] => Some(one.clone()),
            _ => None,
        }
    }

    /// Every (package, target) of the workspace that fits a log's target.
    pub fn candidates(&self, run: &TargetRun) -> Vec<(String, String)> {
        let Some(krate) = run.krate.as_deref() else {
            return Vec::new();
        };
        let mut found: Vec<(String, String)> = Vec::new();
        for p in &self.packages {
            if run.package.as_deref().is_some_and(|k| k != p.name) {
                continue;
            }
            let dir = p.manifest_path.parent().unwrap_or(Path::new(""));
            let source_fits = |t: &Target| {
                run.source
                    .as_deref()
                    .is_none_or(|s| t.src_path == dir.join(s) || t.src_path.ends_with(s))
            };
            for t in &p.targets {
                if crate_name(&t.name) != krate {
                    continue;
                }
                let name = match run.target.as_str() {
                    "doc" if t.is_lib() => "doc".to_string(),
                    "doc" => continue,
                    _ if !source_fits(t) => continue,
                    _ if t.is_lib() => "lib".to_string(),
                    _ if t.has("bin") => format!("bin/{}", t.name),
                    _ if t.has("test") => t.name.clone(),
                    _ if t.has("bench") => format!("bench/{}", t.name),
                    _ if t.has("example") => format!("example/{}", t.name),
                    _ => continue,
                };
                // A `Running unittests` line is a lib or a bin, never an integration test.
                let unit = run.target == "lib" || run.target.starts_with("bin/");
                if unit && !(name == "lib" || name.starts_with("bin/")) {
                    continue;
                }
                found.push((p.name.clone(), name));
            }
        }
        found.dedup();
        found
    }

    /// Name the package and target of every target in `log` the log left unnamed
    /// ([`Mapping::Guessed`]) that [`Workspace::resolve`] places.
    ///
    /// Targets several packages fit (two packages with `tests/round_trip.rs`) are named
    /// by cargo's order ([`Mapping::Order`]): cargo runs packages in the order of their
    /// names, so when the log shows as many such targets as there are candidate packages,
    /// the k-th is the k-th package by name; otherwise a target takes the package of the
    /// target cargo ran just before it, when that is a candidate.
    pub fn map(&self, log: &mut RunLog) {
        let found: Vec<Vec<(String, String)>> = log
            .targets
            .iter()
            .map(|run| {
                if run.mapping == Mapping::Guessed {
                    let mut c = self.candidates(run);
                    c.sort();
                    c
                } else {
                    Vec::new()
                }
            })
            .collect();
        let mut previous: Option<String> = None;
        for (i, run) in log.targets.iter_mut().enumerate() {
            if run.mapping != Mapping::Guessed {
                previous = run.package.clone();
                continue;
            }
            let pick = match found[i].as_slice() {
                [one] => Some((one.clone(), Mapping::Metadata)),
                [] => None,
                many => {
                    let same: Vec<usize> =
                        (0..found.len()).filter(|&j| found[j] == found[i]).collect();
                    if same.len() == many.len() {
                        let k = same.iter().position(|&j| j == i).unwrap_or(0);
                        Some((many[k].clone(), Mapping::Order))
                    } else {
                        previous
                            .as_ref()
                            .and_then(|p| many.iter().find(|(pk, _)| pk == p))
                            .map(|one| (one.clone(), Mapping::Order))
                    }
                }
            };
            if let Some(((package, target), how)) = pick {
                run.package = Some(package);
                run.target = target;
                run.alt_target = None;
                run.mapping = how;
            }
            // Doc tests run after every package's targets: they do not continue a package.
            if run.target != "doc" {
                previous = run.package.clone();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> Workspace {
        let json = r#"{"packages":[
          {"name":"acme-codec","manifest_path":"/w/acme-codec/Cargo.toml","targets":[
            {"name":"codec","kind":["lib"],"src_path":"/w/acme-codec/src/codec.rs"},
            {"name":"round_trip","kind":["test"],"src_path":"/w/acme-codec/tests/round_trip.rs"}]},
          {"name":"tool","manifest_path":"/w/tool/Cargo.toml","targets":[
            {"name":"tool","kind":["bin"],"src_path":"/w/tool/src/main.rs"}]},
          {"name":"acme-util","manifest_path":"/w/acme-util/Cargo.toml","targets":[
            {"name":"acme-util","kind":["lib"],"src_path":"/w/acme-util/src/lib.rs"},
            {"name":"round_trip","kind":["test"],"src_path":"/w/acme-util/tests/round_trip.rs"}]}
        ]}"#;
        Workspace::from_json(json.as_bytes()).unwrap()
    }

    fn run(target: &str, krate: &str, source: Option<&str>, alt: Option<&str>) -> TargetRun {
        TargetRun {
            package: None,
            target: target.to_string(),
            krate: Some(krate.to_string()),
            mapping: Mapping::Guessed,
            terse: false,
            alt_target: alt.map(str::to_string),
            source: source.map(str::to_string),
            line: 1,
            declared: None,
            tests: Vec::new(),
            counts: Default::default(),
            summary: None,
        }
    }

    #[test]
    fn a_library_named_unlike_its_package_is_found() {
        let w = ws();
        assert_eq!(
            w.resolve(&run(
                "lib",
                "codec",
                Some("src/codec.rs"),
                Some("bin/codec")
            )),
            Some(("acme-codec".into(), "lib".into()))
        );
        assert_eq!(
            w.resolve(&run("doc", "codec", None, None)),
            Some(("acme-codec".into(), "doc".into()))
        );
        assert_eq!(
            w.resolve(&run("doc", "acme_util", None, None)),
            Some(("acme-util".into(), "doc".into()))
        );
        assert_eq!(
            w.resolve(&run("bin/tool", "tool", Some("src/main.rs"), None)),
            Some(("tool".into(), "bin/tool".into()))
        );
    }

    #[test]
    fn integration_tests_of_the_same_name_are_told_apart_by_source_only() {
        let w = ws();
        // Both packages have tests/round_trip.rs: the log's line fits both.
        assert_eq!(
            w.resolve(&run(
                "round_trip",
                "round_trip",
                Some("tests/round_trip.rs"),
                None
            )),
            None
        );
    }
}
