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
use std::fs;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::battery::tree::{TreeError, TreeScan, io};

/// Makes `scratch` hold exactly the files of `scan` (the file set of `root`), plus the
/// workspace's `Cargo.lock` even where git ignores it (it is an input of every build:
/// without it the scratch copy would resolve its dependencies afresh). An ignored folder (a
/// virtual environment, a download cache) is neither walked nor copied. Files are compared by
/// content and unchanged ones are not rewritten (so the scratch build stays incremental);
/// a symbolic link (to a file, to a folder, or dangling) is copied as a link to the same
/// target and never followed; files `scratch` holds that the set does not are removed.
///
/// Errors: [`TreeError::Io`] naming the path and the operation that failed.
pub fn sync_tree(root: &Path, scan: &TreeScan, scratch: &Path) -> Result<(), TreeError> {
    fs::create_dir_all(scratch).map_err(io(scratch, "create directory"))?;
    let mut kept = BTreeSet::new();
    let lock = Path::new("Cargo.lock");
    let ignored_lock =
        (!scan.files.contains_key(lock) && root.join(lock).is_file()).then(|| lock.to_path_buf());
    for rel in scan.files.keys().chain(ignored_lock.as_ref()) {
        kept.insert(rel.clone());
        sync_file(&root.join(rel), &scratch.join(rel))?;
    }
    let have = list_tree(scratch)?;
    for rel in have.files.keys() {
        if !kept.contains(rel) {
            let p = scratch.join(rel);
            fs::remove_file(&p).map_err(io(&p, "remove"))?;
        }
    }
    Ok(())
}

/// Makes `dst` a copy of `src`: the same bytes for a file, a link to the same target for a
/// symbolic link. Nothing is written when `dst` is one already.
fn sync_file(src: &Path, dst: &Path) -> Result<(), TreeError> {
    let meta = fs::symlink_metadata(src).map_err(io(src, "stat"))?;
    let have = fs::symlink_metadata(dst).ok();
    if meta.file_type().is_symlink() {
        let target = fs::read_link(src).map_err(io(src, "read link"))?;
        if have.as_ref().is_some_and(|m| m.file_type().is_symlink())
            && fs::read_link(dst).ok().as_ref() == Some(&target)
        {
            return Ok(());
        }
        clear(dst, have.as_ref())?;
        return std::os::unix::fs::symlink(&target, dst).map_err(io(dst, "create link"));
    }
    if have.as_ref().is_some_and(|m| m.is_file()) {
        let a = fs::read(src).map_err(io(src, "read"))?;
        if fs::read(dst).is_ok_and(|b| b == a) {
            return Ok(());
        }
    }
    clear(dst, have.as_ref())?;
    fs::copy(src, dst).map_err(io(src, "copy"))?;
    Ok(())
}

/// Removes whatever is at `dst` (described by `have`) and creates its parent directory.
fn clear(dst: &Path, have: Option<&fs::Metadata>) -> Result<(), TreeError> {
    match have {
        Some(m) if m.is_dir() => fs::remove_dir_all(dst).map_err(io(dst, "remove directory"))?,
        Some(_) => fs::remove_file(dst).map_err(io(dst, "remove"))?,
        None => {}
    }
    if let Some(parent) = dst.parent() {
        fs::create_dir_all(parent).map_err(io(parent, "create directory"))?;
    }
    Ok(())
}

/// Lists every file, symbolic link and directory under `dir` without hashing (paths only;
/// links are listed, never followed).
///
/// Errors: [`TreeError::Io`] naming the directory that could not be read.
pub fn list_tree(dir: &Path) -> Result<TreeScan, TreeError> {
    let mut out = TreeScan::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).map_err(io(&d, "read directory"))? {
            let e = e.map_err(io(&d, "read directory"))?;
            let p = e.path();
            let rel = p.strip_prefix(dir).unwrap_or(&p).to_path_buf();
            if e.file_type().map_err(io(&p, "stat"))?.is_dir() {
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
/// Errors: [`TreeError::Io`] naming the path that could not be read.
pub fn stat_tree(dir: &Path) -> Result<BTreeMap<PathBuf, (u64, SystemTime)>, TreeError> {
    let mut out = BTreeMap::new();
    if !dir.exists() {
        return Ok(out);
    }
    for rel in list_tree(dir)?.files.keys() {
        let p = dir.join(rel);
        let m = fs::symlink_metadata(&p).map_err(io(&p, "stat"))?;
        out.insert(
            rel.clone(),
            (m.len(), m.modified().map_err(io(&p, "stat"))?),
        );
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
            for t in p.test_targets.iter().chain(&p.bins) {
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
    /// place: fingerprints, dep-info, build-script output), and cargo's rustc information
    /// cache ([`seed_rustc_info`]).
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

fn link_or_copy(src: &Path, dst: &Path, stats: &mut SeedStats) -> Result<(), TreeError> {
    if replaced_not_rewritten(src) && fs::hard_link(src, dst).is_ok() {
        stats.linked += 1;
        return Ok(());
    }
    fs::copy(src, dst).map_err(io(src, "copy"))?;
    let modified = fs::metadata(src)
        .and_then(|m| m.modified())
        .map_err(io(src, "stat"))?;
    fs::File::options()
        .write(true)
        .open(dst)
        .and_then(|f| f.set_modified(modified))
        .map_err(io(dst, "set modification time"))?;
    stats.copied += 1;
    Ok(())
}

/// Seeds `dst` from `src` (a file or a directory tree) unless `dst` exists.
fn seed_entry(src: &Path, dst: &Path, stats: &mut SeedStats) -> Result<(), TreeError> {
    if dst.symlink_metadata().is_ok() {
        return Ok(());
    }
    let meta = src.symlink_metadata().map_err(io(src, "stat"))?;
    let mut tmp = dst.as_os_str().to_owned();
    tmp.push(".harness-seed");
    let tmp = PathBuf::from(tmp);
    if meta.is_dir() {
        // Fill a temporary sibling, then rename: an interrupted seed leaves no half-filled
        // entry that a later seed would take for complete.
        let _ = fs::remove_dir_all(&tmp);
        fs::create_dir_all(&tmp).map_err(io(&tmp, "create directory"))?;
        for e in fs::read_dir(src).map_err(io(src, "read directory"))? {
            let e = e.map_err(io(src, "read directory"))?;
            seed_entry(&e.path(), &tmp.join(e.file_name()), stats)?;
        }
    } else if meta.is_file() {
        let _ = fs::remove_file(&tmp);
        link_or_copy(src, &tmp, stats)?;
    } else {
        return Ok(());
    }
    fs::rename(&tmp, dst).map_err(io(dst, "rename into place"))
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
/// Errors: [`TreeError::Io`] naming the path that could not be read or written.
pub fn seed_dependencies(
    from: &Path,
    to: &Path,
    members: &Members,
) -> Result<SeedStats, TreeError> {
    let mut stats = SeedStats::default();
    if !from.join(".fingerprint").is_dir() {
        return Ok(stats);
    }
    for sub in [".fingerprint", "build", "deps"] {
        let dir = from.join(sub);
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        let out = to.join(sub);
        fs::create_dir_all(&out).map_err(io(&out, "create directory"))?;
        for e in entries {
            let e = e.map_err(io(&dir, "read directory"))?;
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

/// Cargo's cache of what `rustc` reports about itself (`<target>/.rustc_info.json`), as
/// cargo names it: keyed by the compiler's fingerprint, so an entry made for another
/// compiler is recomputed, never trusted.
const RUSTC_INFO: &str = ".rustc_info.json";

/// Gives the target directory `to` the user's target directory `from`'s [`RUSTC_INFO`]
/// when `to` has none, so that a cold scratch build does not run `rustc` again to learn
/// what cargo already knows. Returns whether it was copied.
///
/// Errors: [`TreeError::Io`] naming the file that could not be copied.
pub fn seed_rustc_info(from: &Path, to: &Path) -> Result<bool, TreeError> {
    let (src, dst) = (from.join(RUSTC_INFO), to.join(RUSTC_INFO));
    if !src.is_file() || fs::symlink_metadata(&dst).is_ok() {
        return Ok(false);
    }
    fs::create_dir_all(to).map_err(io(to, "create directory"))?;
    fs::copy(&src, &dst).map_err(io(&src, "copy"))?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeding_copies_the_rustc_information_only_where_there_is_some() {
        let d = tempfile::tempdir().unwrap();
        let (from, to) = (d.path().join("user"), d.path().join("scratch"));
        std::fs::create_dir_all(&from).unwrap();
        assert!(!seed_rustc_info(&from, &to).unwrap(), "nothing to copy");
        assert!(!to.join(".rustc_info.json").exists());
        std::fs::write(from.join(".rustc_info.json"), "{\"rustc_fingerprint\":1}").unwrap();
        assert!(seed_rustc_info(&from, &to).unwrap());
        // One the scratch target directory has already (cargo's own, maybe newer) stays.
        std::fs::write(from.join(".rustc_info.json"), "{\"rustc_fingerprint\":2}").unwrap();
        assert!(!seed_rustc_info(&from, &to).unwrap());
        assert_eq!(
            std::fs::read_to_string(to.join(".rustc_info.json")).unwrap(),
            "{\"rustc_fingerprint\":1}"
        );
    }

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

    fn scan_of(root: &Path) -> TreeScan {
        crate::battery::tree::scan(root, &[]).unwrap()
    }

    #[test]
    fn sync_copies_links_as_links_and_names_the_path_that_fails() {
        let d = tempfile::tempdir().unwrap();
        let (root, scratch) = (d.path().join("root"), d.path().join("scratch"));
        touch(&root.join("src/lib.rs"), "fn f() {}\n");
        std::os::unix::fs::symlink("src", root.join("to-dir")).unwrap();
        std::os::unix::fs::symlink("src/lib.rs", root.join("to-file")).unwrap();
        std::os::unix::fs::symlink("nowhere", root.join("dangling")).unwrap();
        sync_tree(&root, &scan_of(&root), &scratch).unwrap();
        for (link, target) in [
            ("to-dir", "src"),
            ("to-file", "src/lib.rs"),
            ("dangling", "nowhere"),
        ] {
            assert_eq!(
                fs::read_link(scratch.join(link)).unwrap(),
                PathBuf::from(target),
                "{link}"
            );
        }
        assert_eq!(
            fs::read(scratch.join("src/lib.rs")).unwrap(),
            b"fn f() {}\n"
        );
        // A second sync over its own result changes nothing and fails nowhere.
        sync_tree(&root, &scan_of(&root), &scratch).unwrap();
        // A file the copy cannot read: the error names it.
        let scan = scan_of(&root);
        fs::remove_file(root.join("src/lib.rs")).unwrap();
        fs::remove_file(scratch.join("src/lib.rs")).unwrap();
        let e = sync_tree(&root, &scan, &scratch).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{}: ", root.join("src/lib.rs").display())),
            "{e}"
        );
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
