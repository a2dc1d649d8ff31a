//! The scratch copy switch mode builds in: syncing its sources from the user's tree, and
//! seeding its target directory with the build products of the user's dependencies.
//!
//! Why a target directory of its own, seeded, rather than the user's: cargo names a workspace
//! member's artifacts by a hash of its path *relative to the workspace root* (so a moved
//! checkout keeps its cache). A scratch copy of the workspace therefore has the very same
//! artifact names and fingerprints as the user's tree: built in the user's target directory it
//! would overwrite the user's artifacts of the workspace members with switched (or, in the
//! rebuild fallback, mutated) code, and the user's next `cargo test` would find them fresh
//! and run them. Dependencies from outside the workspace (registry, git, path dependencies
//! outside the root) are built identically for both trees, so their products can be shared:
//! [`seed_dependencies`] gives the scratch target directory the user's products of every
//! package that is not a workspace member, without ever letting a later scratch build write
//! into one of the user's files.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::workspace::{self, TreeScan};

/// Makes `scratch` hold exactly the files of `scan` (taken of `root`): covered files are
/// compared by content hash, ignored ones by length and modification time; unchanged files
/// are not rewritten (so the scratch build stays incremental); files the scan does not have
/// are removed.
///
/// Errors: any I/O error (the caller names `scratch`).
pub fn sync_tree(root: &Path, scan: &TreeScan, scratch: &Path) -> Result<(), std::io::Error> {
    std::fs::create_dir_all(scratch)?;
    for (rel, sha) in &scan.files {
        let src = root.join(rel);
        let dst = scratch.join(rel);
        let same = match sha {
            Some(sha) => std::fs::read(&dst)
                .map(|b| &workspace::sha256_hex(&b) == sha)
                .unwrap_or(false),
            None => match (std::fs::metadata(&src), std::fs::metadata(&dst)) {
                (Ok(s), Ok(d)) => {
                    s.len() == d.len()
                        && matches!((s.modified(), d.modified()), (Ok(a), Ok(b)) if b >= a)
                }
                _ => false,
            },
        };
        if !same {
            if let Some(parent) = dst.parent() {
                std::fs::create_dir_all(parent)?;
            }
            let _ = std::fs::remove_file(&dst);
            std::fs::copy(&src, &dst)?;
        }
    }
    let have = list_tree(scratch)?;
    for rel in have.files.keys() {
        if !scan.files.contains_key(rel) {
            std::fs::remove_file(scratch.join(rel))?;
        }
    }
    Ok(())
}

/// Lists every file and directory under `dir` without hashing (paths only).
///
/// Errors: any I/O error reading a directory.
pub fn list_tree(dir: &Path) -> Result<TreeScan, std::io::Error> {
    let mut out = TreeScan::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
            if e.file_type()?.is_dir() {
                out.dirs.insert(rel);
                stack.push(p);
            } else {
                out.files.insert(rel, None);
            }
        }
    }
    Ok(out)
}

/// Every file under `dir` (recursively) with its length and modification time: what a build
/// may not change in a directory it does not own. A missing `dir` has no files.
///
/// Errors: any other I/O error reading the tree.
pub fn stat_tree(dir: &Path) -> Result<BTreeMap<PathBuf, (u64, SystemTime)>, std::io::Error> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    for rel in list_tree(dir)?.files.keys() {
        let m = std::fs::symlink_metadata(dir.join(rel))?;
        out.insert(rel.clone(), (m.len(), m.modified()?));
    }
    Ok(out)
}

/// The workspace members whose build products are never shared with a scratch copy: their
/// package names (cargo's `.fingerprint/<package>-<hash>` and `build/<package>-<hash>`
/// entries) and crate names (`deps/[lib]<crate>-<hash>[.ext]` files of the package's lib and
/// test targets, `-` written `_`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Members {
    /// Package names.
    pub packages: BTreeSet<String>,
    /// Crate (target) names with `-` replaced by `_`.
    pub crates: BTreeSet<String>,
}

impl Members {
    /// The members `cargo metadata --no-deps` lists.
    pub fn of(packages: &[crate::cargo::PackageMeta]) -> Members {
        let mut m = Members::default();
        for p in packages {
            m.packages.insert(p.name.clone());
            m.crates.insert(p.name.replace('-', "_"));
            for t in &p.test_targets {
                m.crates.insert(t.replace('-', "_"));
            }
        }
        m
    }

    fn owns_deps_file(&self, name: &str) -> bool {
        deps_crate(name).is_none_or(|c| {
            self.crates.contains(c)
                || c.strip_prefix("lib")
                    .is_some_and(|c| self.crates.contains(c))
        })
    }

    fn owns_unit_dir(&self, name: &str) -> bool {
        strip_hash(name).is_none_or(|p| self.packages.contains(p))
    }
}

/// What [`seed_dependencies`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedStats {
    /// Files hard-linked (compiler and linker outputs, which are replaced, never rewritten).
    pub linked: usize,
    /// Files copied, modification time kept (what cargo or a build script may rewrite in
    /// place: fingerprints, dep-info, build-script output).
    pub copied: usize,
    /// Entries left out because they belong to a workspace member (or are not in cargo's
    /// `<name>-<hash>` form).
    pub members_skipped: usize,
}

/// `name-0123456789abcdef` → `name` (cargo's `<name>-<16 hex digit hash>` entries).
fn strip_hash(name: &str) -> Option<&str> {
    let (stem, hash) = name.rsplit_once('-')?;
    (hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit())).then_some(stem)
}

/// The name part of a `deps/` file (`libfoo_bar-<hash>.rlib` → `libfoo_bar`, `foo-<hash>`
/// → `foo` for executables), or `None` for a name not in cargo's form.
fn deps_crate(file: &str) -> Option<&str> {
    let stem = match file.split_once('.') {
        Some((stem, _)) => stem,
        None => file,
    };
    strip_hash(stem)
}

/// Files rustc or the linker write by creating a new file and renaming it over the old one
/// (or by unlinking the old one first): safe to share by hard link, since a rebuild in the
/// scratch copy replaces its own link only.
fn replaced_not_rewritten(path: &Path) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("rlib" | "rmeta" | "so" | "dylib") => true,
        Some(_) => false,
        // Executables carry no extension: test binaries and bins in deps/, compiled build
        // scripts in build/ (but not the build-script run's `output` and its siblings).
        None => {
            path.parent()
                .and_then(Path::file_name)
                .is_some_and(|d| d == "deps")
                || path.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                    n.starts_with("build-script-") || n.starts_with("build_script_")
                })
        }
    }
}

fn link_or_copy(src: &Path, dst: &Path, stats: &mut SeedStats) -> std::io::Result<()> {
    if replaced_not_rewritten(src) && std::fs::hard_link(src, dst).is_ok() {
        stats.linked += 1;
        return Ok(());
    }
    std::fs::copy(src, dst)?;
    let modified = std::fs::metadata(src)?.modified()?;
    std::fs::File::options()
        .write(true)
        .open(dst)?
        .set_modified(modified)?;
    stats.copied += 1;
    Ok(())
}

/// Seeds `dst` from `src` (a file or a directory tree) unless `dst` exists.
fn seed_entry(src: &Path, dst: &Path, stats: &mut SeedStats) -> std::io::Result<()> {
    if dst.symlink_metadata().is_ok() {
        return Ok(());
    }
    let meta = src.symlink_metadata()?;
    if meta.is_dir() {
        // Fill a temporary sibling, then rename: an interrupted seed leaves no half-filled
        // entry that a later seed would take for complete.
        let mut tmp = dst.as_os_str().to_owned();
        tmp.push(".harness-seed");
        let tmp = PathBuf::from(tmp);
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp)?;
        for e in std::fs::read_dir(src)? {
            let e = e?;
            seed_entry(&e.path(), &tmp.join(e.file_name()), stats)?;
        }
        std::fs::rename(&tmp, dst)
    } else if meta.is_file() {
        let mut tmp = dst.as_os_str().to_owned();
        tmp.push(".harness-seed");
        let tmp = PathBuf::from(tmp);
        let _ = std::fs::remove_file(&tmp);
        link_or_copy(src, &tmp, stats)?;
        std::fs::rename(&tmp, dst)
    } else {
        Ok(())
    }
}

/// Gives the profile directory `to` (`<scratch target>/debug`) the entries of `from` (the
/// user's `<target>/debug`) that belong to packages which are not workspace members:
/// `.fingerprint/<package>-<hash>/` and `build/<package>-<hash>/` directories and `deps/`
/// files. Entries `to` already has are left alone, so a warm scratch target costs only a
/// directory listing. Compiler and linker outputs are hard-linked, everything else is copied
/// with its modification time (cargo compares modification times), so cargo finds the
/// dependencies fresh while no scratch build can write into one of the user's files.
/// Workspace members' entries and `incremental/` (members only) are never taken: the scratch
/// copy builds its members itself. A `from` without `.fingerprint/` seeds nothing.
///
/// Errors: any I/O error (the caller names the directories).
pub fn seed_dependencies(
    from: &Path,
    to: &Path,
    members: &Members,
) -> Result<SeedStats, std::io::Error> {
    let mut stats = SeedStats::default();
    if !from.join(".fingerprint").is_dir() {
        return Ok(stats);
    }
    for sub in [".fingerprint", "build", "deps"] {
        let Ok(entries) = std::fs::read_dir(from.join(sub)) else {
            continue;
        };
        let out = to.join(sub);
        std::fs::create_dir_all(&out)?;
        for e in entries {
            let e = e?;
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            if name.ends_with(".harness-seed") {
                continue;
            }
            let member = if sub == "deps" {
                members.owns_deps_file(name)
            } else {
                members.owns_unit_dir(name)
            };
            if member {
                stats.members_skipped += 1;
                continue;
            }
            seed_entry(&e.path(), &out.join(name), &mut stats)?;
        }
    }
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_in_cargo_form() {
        assert_eq!(
            strip_hash("num-traits-0123456789abcdef"),
            Some("num-traits")
        );
        assert_eq!(strip_hash("num-traits-0123"), None);
        assert_eq!(strip_hash("plain"), None);
        assert_eq!(
            deps_crate("libnum_traits-0123456789abcdef.rlib"),
            Some("libnum_traits")
        );
        assert_eq!(deps_crate("contract-0123456789abcdef"), Some("contract"));
        assert_eq!(deps_crate("serde-0123456789abcdef.d"), Some("serde"));
        assert!(replaced_not_rewritten(Path::new(
            "deps/contract-0123456789abcdef"
        )));
        assert!(replaced_not_rewritten(Path::new(
            "b/x-0123456789abcdef/build-script-build"
        )));
        assert!(!replaced_not_rewritten(Path::new(
            "b/x-0123456789abcdef/output"
        )));
        assert!(!replaced_not_rewritten(Path::new(
            "deps/serde-0123456789abcdef.d"
        )));
    }

    fn touch(p: &Path, text: &str) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn seeds_dependencies_but_never_members_and_never_shares_rewritable_files() {
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("from"), d.path().join("to"));
        let h = "0123456789abcdef";
        for f in [
            format!(".fingerprint/dep-a-{h}/lib-dep_a"),
            format!(".fingerprint/sample-{h}/lib-sample"),
            format!("build/dep-a-{h}/out/gen.rs"),
            format!("build/sample-{h}/out/gen.rs"),
            format!("deps/libdep_a-{h}.rlib"),
            format!("deps/dep_a-{h}.d"),
            format!("deps/libsample-{h}.rlib"),
            format!("deps/contract-{h}"),
            format!("incremental/sample-{h}/x"),
        ] {
            touch(&from.join(f), "x");
        }
        let old = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let fp = from.join(format!(".fingerprint/dep-a-{h}/lib-dep_a"));
        std::fs::File::options()
            .write(true)
            .open(&fp)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let members = Members {
            packages: ["sample".to_string()].into(),
            crates: ["sample".to_string(), "contract".to_string()].into(),
        };
        let before = stat_tree(&from).unwrap();
        let stats = seed_dependencies(&from, &to, &members).unwrap();
        let got: BTreeSet<String> = list_tree(&to)
            .unwrap()
            .files
            .keys()
            .map(|p| p.display().to_string())
            .collect();
        let want: BTreeSet<String> = [
            format!(".fingerprint/dep-a-{h}/lib-dep_a"),
            format!("build/dep-a-{h}/out/gen.rs"),
            format!("deps/libdep_a-{h}.rlib"),
            format!("deps/dep_a-{h}.d"),
        ]
        .into();
        assert_eq!(got, want);
        assert_eq!(stats.linked, 1, "only the rlib is shared: {stats:?}");
        assert_eq!(stats.copied, 3, "{stats:?}");
        assert_eq!(stats.members_skipped, 4, "{stats:?}");
        // Copies keep their modification time (cargo compares them).
        let copied = to.join(format!(".fingerprint/dep-a-{h}/lib-dep_a"));
        assert_eq!(std::fs::metadata(&copied).unwrap().modified().unwrap(), old);
        // Rewriting the copied fingerprint in place leaves the user's untouched.
        std::fs::write(&copied, "changed").unwrap();
        assert_eq!(std::fs::read_to_string(&fp).unwrap(), "x");
        assert_eq!(stat_tree(&from).unwrap(), before);
        // A second seed finds everything present and does nothing.
        let again = seed_dependencies(&from, &to, &members).unwrap();
        assert_eq!((again.linked, again.copied), (0, 0));
    }
}
