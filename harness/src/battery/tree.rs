//! The tree under test: its file set and fingerprint, read by every stage of a battery.
//!
//! File set: the tracked files plus the untracked files git does not ignore (every file when
//! the root is not inside a git work tree); `.git` and explicitly excluded directories are
//! never walked, nor are ignored directories and directories holding a `CACHEDIR.TAG` (Cargo
//! target directories) unless git tracks a file inside them. The fingerprint is SHA-256 over
//! the path and content of every file of the set.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

/// Errors of tree inspection and mutation handling.
#[derive(Debug, thiserror::Error)]
pub enum TreeError {
    /// A filesystem operation failed.
    #[error("{path}: {op}: {source}")]
    Io {
        /// Path involved.
        path: PathBuf,
        /// What was attempted.
        op: &'static str,
        /// Underlying error.
        source: std::io::Error,
    },
    /// The file changed between the drift check / apply and the restore.
    #[error(
        "{file} was edited while mutation {mutation} was applied: the edited version is left in {file}; the original bytes are kept at {original_copy}"
    )]
    ConcurrentEdit {
        /// Mutated file.
        file: PathBuf,
        /// Mutation id.
        mutation: String,
        /// Where the original bytes are kept.
        original_copy: PathBuf,
    },
    /// Before applying, the file no longer held the bytes the drift check saw.
    #[error("{file} changed after the drift check (before mutation {mutation} was applied)")]
    ChangedBeforeApply {
        /// File.
        file: PathBuf,
        /// Mutation id.
        mutation: String,
    },
    /// A journal record could not be parsed.
    #[error("{path}: unreadable journal: {message}")]
    BadJournal {
        /// Journal path.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
}

/// Maps an I/O error on `path` while doing `op` to [`TreeError::Io`], which names both.
pub(crate) fn io(
    path: &Path,
    op: &'static str,
) -> impl FnOnce(std::io::Error) -> TreeError + use<> {
    let path = path.to_path_buf();
    move |source| TreeError::Io { path, op, source }
}

/// SHA-256 of `bytes`, lower-case hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let d = Sha256::digest(bytes);
    d.iter().map(|b| format!("{b:02x}")).collect()
}

/// One walk of a tree: the relative path of every file of its file set and its content hash.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TreeScan {
    /// Relative path -> content SHA-256 ([`scan`] hashes every file; `None` only in listings
    /// that do not hash, such as [`crate::battery::execute::scratch::list_tree`]).
    pub files: BTreeMap<PathBuf, Option<String>>,
    /// Relative paths of directories.
    pub dirs: BTreeSet<PathBuf>,
}

impl TreeScan {
    /// The fingerprint: SHA-256 over (path, content hash) of every covered file, hex.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        for (p, sha) in &self.files {
            if let Some(sha) = sha {
                h.update(p.to_string_lossy().as_bytes());
                h.update([0]);
                h.update(sha.as_bytes());
                h.update([0]);
            }
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Covered files whose content differs between `self` (before) and `after`, or that
    /// exist in only one of them, as `path (changed|created|removed)` lines.
    pub fn differences(&self, after: &TreeScan) -> Vec<String> {
        let covered = |s: &TreeScan| -> BTreeMap<PathBuf, String> {
            s.files
                .iter()
                .filter_map(|(p, h)| h.clone().map(|h| (p.clone(), h)))
                .collect()
        };
        let (a, b) = (covered(self), covered(after));
        let mut out = Vec::new();
        for (p, h) in &a {
            match b.get(p) {
                None => out.push(format!("{} (removed)", p.display())),
                Some(h2) if h2 != h => out.push(format!("{} (changed)", p.display())),
                _ => {}
            }
        }
        for p in b.keys() {
            if !a.contains_key(p) {
                out.push(format!("{} (created)", p.display()));
            }
        }
        out
    }
}

/// What git says about the paths under one root: which are tracked, which ignored.
struct GitView {
    repo: git2::Repository,
    /// The root's path inside the work tree (empty when the root is the work tree).
    prefix: PathBuf,
    /// Tracked paths (index entries), `/`-separated bytes.
    tracked: BTreeSet<Vec<u8>>,
}

impl GitView {
    /// The git work tree holding `root`, if any.
    fn open(root: &Path) -> Option<GitView> {
        let repo = git2::Repository::discover(root).ok()?;
        let workdir = repo.workdir()?.canonicalize().ok()?;
        let prefix = root
            .canonicalize()
            .ok()?
            .strip_prefix(&workdir)
            .ok()?
            .to_path_buf();
        let tracked = repo
            .index()
            .map(|i| i.iter().map(|e| e.path).collect())
            .unwrap_or_default();
        Some(GitView {
            repo,
            prefix,
            tracked,
        })
    }

    fn in_repo(&self, rel: &Path) -> PathBuf {
        self.prefix.join(rel)
    }

    fn key(p: &Path) -> Vec<u8> {
        p.to_string_lossy().as_bytes().to_vec()
    }

    fn is_tracked(&self, rel: &Path) -> bool {
        self.tracked.contains(&Self::key(&self.in_repo(rel)))
    }

    /// Whether git tracks any file under the folder `rel`.
    fn tracks_under(&self, rel: &Path) -> bool {
        let mut dir = Self::key(&self.in_repo(rel));
        dir.push(b'/');
        self.tracked
            .range(dir.clone()..)
            .next()
            .is_some_and(|p| p.starts_with(&dir))
    }

    fn is_ignored(&self, rel: &Path) -> bool {
        self.repo
            .is_path_ignored(self.in_repo(rel))
            .unwrap_or(false)
    }
}

/// The `CACHEDIR.TAG` a cache directory holds: its first line is the signature the Cache
/// Directory Tagging Specification (<https://bford.info/cachedir/>) fixes, as Cargo writes
/// in its target directories.
const CACHEDIR_TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n\
# This file is a cache directory tag created by the harness: its scratch copies and builds.\n\
# For information about cache directory tags see https://bford.info/cachedir/\n";

/// Makes `dir` a cache directory as Cargo makes its target directories: created when
/// missing, with a `CACHEDIR.TAG` when it has none; the file set then leaves it out unless
/// git tracks a file in it. For the directories the harness writes into while batteries
/// run at once: a catalog's target directory (where the scratch copies go: one the harness
/// made first lacks the tag a build in it later leaves out too, since Cargo tags only a
/// directory it creates, and the catalog's check of its target directory takes an untagged
/// one for part of the tree) and `mutants --via-harness`'s output (its generated catalogs,
/// written while other batteries have fingerprinted the tree).
///
/// Errors: [`TreeError::Io`] naming the path and the operation that failed.
pub fn mark_cache_dir(dir: &Path) -> Result<(), TreeError> {
    fs::create_dir_all(dir).map_err(io(dir, "create directory"))?;
    let tag = dir.join("CACHEDIR.TAG");
    if tag.exists() {
        return Ok(());
    }
    fs::write(&tag, CACHEDIR_TAG).map_err(io(&tag, "write"))
}

/// Walks the file set of `root` (see the module docs) and hashes every file. `exclude` holds
/// absolute directories never walked (the private target directory, the reports directory).
///
/// Errors: [`TreeError::Io`] naming the path that could not be read.
pub fn scan(root: &Path, exclude: &[PathBuf]) -> Result<TreeScan, TreeError> {
    let git = GitView::open(root);
    let mut out = TreeScan::default();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let entries = fs::read_dir(&dir).map_err(io(&dir, "read directory"))?;
        let mut entries: Vec<_> = entries
            .collect::<Result<_, _>>()
            .map_err(io(&dir, "read directory"))?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let path = e.path();
            let ft = e.file_type().map_err(io(&path, "stat"))?;
            let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
            if e.file_name() == ".git" {
                continue;
            }
            if ft.is_dir() {
                if exclude.iter().any(|x| x == &path) {
                    continue;
                }
                let outside = path.join("CACHEDIR.TAG").exists()
                    || git.as_ref().is_some_and(|g| g.is_ignored(&rel));
                if outside && !git.as_ref().is_some_and(|g| g.tracks_under(&rel)) {
                    continue;
                }
                out.dirs.insert(rel);
                stack.push(path);
                continue;
            }
            if let Some(g) = &git
                && !g.is_tracked(&rel)
                && g.is_ignored(&rel)
            {
                continue;
            }
            let sha = if ft.is_symlink() {
                let target = fs::read_link(&path).map_err(io(&path, "read link"))?;
                sha256_hex(target.to_string_lossy().as_bytes())
            } else {
                sha256_hex(&fs::read(&path).map_err(io(&path, "read"))?)
            };
            out.files.insert(rel, Some(sha));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_marked_directory_is_a_tagged_cache_directory_the_file_set_leaves_out() {
        let d = tempfile::tempdir().unwrap();
        fs::write(d.path().join("a.rs"), "x").unwrap();
        let target = d.path().join("target/harness/ws");
        mark_cache_dir(&target).unwrap();
        let tag = fs::read_to_string(target.join("CACHEDIR.TAG")).unwrap();
        assert!(
            tag.starts_with("Signature: 8a477f597d28d172789f06886806bc55\n"),
            "{tag}"
        );
        fs::write(target.join("generated.toml"), "y").unwrap();
        let files: Vec<PathBuf> = scan(d.path(), &[]).unwrap().files.into_keys().collect();
        assert_eq!(files, vec![PathBuf::from("a.rs")]);
        // A tag already there (Cargo's) is left as it is.
        fs::write(target.join("CACHEDIR.TAG"), "Signature: cargo's").unwrap();
        mark_cache_dir(&target).unwrap();
        assert_eq!(
            fs::read_to_string(target.join("CACHEDIR.TAG")).unwrap(),
            "Signature: cargo's"
        );
    }

    #[test]
    fn scan_skips_cargo_target_dirs_and_honours_gitignore() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        git2::Repository::init(root).unwrap();
        fs::write(root.join(".gitignore"), "/ignored.txt\n").unwrap();
        fs::write(root.join("kept.txt"), "k").unwrap();
        fs::write(root.join("ignored.txt"), "i").unwrap();
        fs::create_dir_all(root.join("target/debug")).unwrap();
        fs::write(root.join("target/CACHEDIR.TAG"), "x").unwrap();
        fs::write(root.join("target/debug/out"), "o").unwrap();
        let s = scan(root, &[]).unwrap();
        assert!(s.files[Path::new("kept.txt")].is_some());
        // Ignored files are not in the file set: not even listed.
        assert!(!s.files.contains_key(Path::new("ignored.txt")));
        assert!(!s.files.keys().any(|p| p.starts_with("target")));
        let before = s.fingerprint();
        fs::write(root.join("ignored.txt"), "changed").unwrap();
        assert_eq!(scan(root, &[]).unwrap().fingerprint(), before);
        fs::write(root.join("kept.txt"), "changed").unwrap();
        let after = scan(root, &[]).unwrap();
        assert_ne!(after.fingerprint(), before);
        assert_eq!(
            s.differences(&after),
            vec!["kept.txt (changed)".to_string()]
        );
    }

    #[test]
    fn scan_skips_ignored_folders_but_keeps_tracked_files_inside_them() {
        let ws = tempfile::tempdir().unwrap();
        let root = ws.path();
        let repo = git2::Repository::init(root).unwrap();
        fs::write(root.join(".gitignore"), "/venv/\n/data/\n").unwrap();
        fs::create_dir_all(root.join("venv/lib")).unwrap();
        fs::write(root.join("venv/lib/site.py"), "x").unwrap();
        fs::create_dir_all(root.join("data")).unwrap();
        fs::write(root.join("data/tracked.csv"), "1,2").unwrap();
        fs::write(root.join("data/scratch.csv"), "3,4").unwrap();
        let mut index = repo.index().unwrap();
        index.add_path(Path::new("data/tracked.csv")).unwrap();
        index.write().unwrap();
        let s = scan(root, &[]).unwrap();
        let files: Vec<&Path> = s.files.keys().map(PathBuf::as_path).collect();
        assert_eq!(
            files,
            vec![Path::new(".gitignore"), Path::new("data/tracked.csv")]
        );
        assert!(!s.dirs.contains(Path::new("venv")));
    }
}
