//! Diff scope (`--since REV`): the lines of the working tree (uncommitted changes included)
//! that differ from the merge base of `HEAD` and `REV`, computed with git2, and whether a
//! mutation's occurrences meet them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Why the diff could not be computed: the diff does not fit the tree.
#[derive(Debug, thiserror::Error)]
pub enum SinceError {
    /// The workspace is not inside a git work tree.
    #[error("--since {rev}: {root} is not in a git work tree: {source}")]
    Repo {
        /// The revision given.
        rev: String,
        /// The workspace root.
        root: PathBuf,
        /// git2's error.
        source: git2::Error,
    },
    /// The revision (or `HEAD`) does not name a commit of the repository.
    #[error("--since {rev}: {what} does not name a commit of the repository: {source}")]
    Rev {
        /// The revision given.
        rev: String,
        /// `HEAD` or the revision.
        what: String,
        /// git2's error.
        source: git2::Error,
    },
    /// `HEAD` and the revision share no history.
    #[error("--since {rev}: no merge base of HEAD and {rev}: {source}")]
    NoMergeBase {
        /// The revision given.
        rev: String,
        /// git2's error.
        source: git2::Error,
    },
    /// The index holds unmerged (conflicted) entries: the working tree is halfway through a
    /// merge, rebase or cherry-pick, and its diff is not a change anyone could review.
    #[error(
        "--since {rev}: the index holds unmerged entries (a merge, rebase or cherry-pick in progress): {paths}"
    )]
    Conflicted {
        /// The revision given.
        rev: String,
        /// The conflicted paths, repository-relative, comma-separated.
        paths: String,
    },
    /// The workspace root does not lie inside the repository's work tree (after resolving
    /// symbolic links), so the diff's paths cannot be made relative to it.
    #[error(
        "--since {rev}: the workspace {root} lies outside the work tree {workdir} of its repository"
    )]
    Outside {
        /// The revision given.
        rev: String,
        /// The workspace root.
        root: PathBuf,
        /// The repository's work tree.
        workdir: PathBuf,
    },
    /// A changed Rust file (or its merge-base version) does not parse, so its functions
    /// cannot be listed (UNGUARDED-IN-DIFF).
    #[error(
        "--since {rev}: {side} version of {file}: cannot parse as Rust: {message} (line {line}, column {column})"
    )]
    Parse {
        /// The revision given.
        rev: String,
        /// `working-tree` or `merge-base`.
        side: &'static str,
        /// The file, relative to the workspace root.
        file: PathBuf,
        /// syn's message.
        message: String,
        /// 1-based line.
        line: usize,
        /// 0-based column.
        column: usize,
    },
    /// A changed file could not be read from the working tree or the merge base.
    #[error("--since {rev}: {file}: cannot read the {side} version: {message}")]
    Read {
        /// The revision given.
        rev: String,
        /// `working-tree` or `merge-base`.
        side: &'static str,
        /// The file, relative to the workspace root.
        file: PathBuf,
        /// The cause.
        message: String,
    },
    /// git2 could not compute the diff.
    #[error("--since {rev}: the diff against the merge base failed: {source}")]
    Diff {
        /// The revision given.
        rev: String,
        /// git2's error.
        source: git2::Error,
    },
}

/// Changed lines per file: path relative to the workspace root -> 1-based inclusive line
/// ranges of the working tree's side (a pure deletion is the line where it happened).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DiffLines {
    /// The revision given.
    pub rev: String,
    /// The merge base, hex.
    pub merge_base: String,
    /// The ranges.
    pub files: BTreeMap<PathBuf, Vec<(usize, usize)>>,
    /// The same diff as a unified patch (no context lines), paths relative to the workspace
    /// root with `a/` and `b/` prefixes: what cargo-mutants' `--in-diff` reads.
    pub patch: String,
    /// The repository's `.git` directory (to read the merge base's blobs).
    pub git_dir: PathBuf,
    /// The workspace root relative to the repository's work tree (empty at its top).
    pub prefix: PathBuf,
}

impl DiffLines {
    /// The merge base's version of `rel` (relative to the workspace root): `None` when the
    /// file did not exist there (a new or untracked file).
    ///
    /// Errors: [`SinceError::Read`] when the repository or the blob cannot be read, or the
    /// blob is not UTF-8.
    pub fn base_text(&self, rel: &Path) -> Result<Option<String>, SinceError> {
        let err = |message: String| SinceError::Read {
            rev: self.rev.clone(),
            side: "merge-base",
            file: rel.to_path_buf(),
            message,
        };
        let repo = git2::Repository::open(&self.git_dir).map_err(|e| err(e.to_string()))?;
        let oid = git2::Oid::from_str(&self.merge_base).map_err(|e| err(e.to_string()))?;
        let tree = repo
            .find_commit(oid)
            .and_then(|c| c.tree())
            .map_err(|e| err(e.to_string()))?;
        let entry = match tree.get_path(&self.prefix.join(rel)) {
            Ok(e) => e,
            Err(e) if e.code() == git2::ErrorCode::NotFound => return Ok(None),
            Err(e) => return Err(err(e.to_string())),
        };
        let blob = entry
            .to_object(&repo)
            .and_then(|o| o.peel_to_blob())
            .map_err(|e| err(e.to_string()))?;
        String::from_utf8(blob.content().to_vec())
            .map(Some)
            .map_err(|e| err(format!("not UTF-8: {e}")))
    }

    /// Whether any of `ranges` (1-based inclusive lines of `rel`) meets a changed line.
    pub fn meets(&self, rel: &Path, ranges: &[(usize, usize)]) -> bool {
        self.files.get(rel).is_some_and(|changed| {
            changed
                .iter()
                .any(|&(a, b)| ranges.iter().any(|&(c, d)| a <= d && c <= b))
        })
    }
}

/// The changed lines of the working tree (index and uncommitted changes, untracked files
/// included) against the merge base of `HEAD` and `rev`, for the files under `root`.
pub fn changed_lines(root: &Path, rev: &str) -> Result<DiffLines, SinceError> {
    let repo_err = |source| SinceError::Repo {
        rev: rev.into(),
        root: root.to_path_buf(),
        source,
    };
    let repo = git2::Repository::discover(root).map_err(repo_err)?;
    let workdir = repo
        .workdir()
        .ok_or_else(|| repo_err(git2::Error::from_str("a bare repository has no work tree")))?
        .to_path_buf();
    let commit = |what: &str| -> Result<git2::Commit<'_>, SinceError> {
        repo.revparse_single(what)
            .and_then(|o| o.peel_to_commit())
            .map_err(|source| SinceError::Rev {
                rev: rev.into(),
                what: what.into(),
                source,
            })
    };
    let head = commit("HEAD")?;
    let other = commit(rev)?;
    let base =
        repo.merge_base(head.id(), other.id())
            .map_err(|source| SinceError::NoMergeBase {
                rev: rev.into(),
                source,
            })?;
    let diff_err = |source| SinceError::Diff {
        rev: rev.into(),
        source,
    };
    let tree = repo
        .find_commit(base)
        .and_then(|c| c.tree())
        .map_err(diff_err)?;
    let mut o = git2::DiffOptions::new();
    o.context_lines(0)
        .include_untracked(true)
        .recurse_untracked_dirs(true)
        .show_untracked_content(true);
    let diff = repo
        .diff_tree_to_workdir_with_index(Some(&tree), Some(&mut o))
        .map_err(diff_err)?;
    let canon = |p: &Path| p.canonicalize().unwrap_or_else(|_| p.to_path_buf());
    let prefix = canon(root)
        .strip_prefix(canon(&workdir))
        .map(Path::to_path_buf)
        .map_err(|_| SinceError::Outside {
            rev: rev.into(),
            root: root.to_path_buf(),
            workdir: workdir.clone(),
        })?;
    let index = repo.index().map_err(diff_err)?;
    if index.has_conflicts() {
        let mut paths: Vec<String> = index
            .conflicts()
            .map_err(diff_err)?
            .filter_map(Result::ok)
            .filter_map(|c| c.our.or(c.their).or(c.ancestor))
            .map(|e| String::from_utf8_lossy(&e.path).into_owned())
            .collect();
        paths.dedup();
        return Err(SinceError::Conflicted {
            rev: rev.into(),
            paths: paths.join(", "),
        });
    }
    let mut files: BTreeMap<PathBuf, Vec<(usize, usize)>> = BTreeMap::new();
    diff.foreach(
        &mut |_, _| true,
        None,
        Some(&mut |delta, hunk| {
            if let Some(rel) = delta
                .new_file()
                .path()
                .and_then(|p| p.strip_prefix(&prefix).ok())
            {
                let start = hunk.new_start() as usize;
                let end = start + (hunk.new_lines() as usize).max(1) - 1;
                files
                    .entry(rel.to_path_buf())
                    .or_default()
                    .push((start.max(1), end.max(1)));
            }
            true
        }),
        None,
    )
    .map_err(diff_err)?;
    let patch = patch_text(&diff, &prefix).map_err(diff_err)?;
    Ok(DiffLines {
        rev: rev.into(),
        merge_base: base.to_string(),
        files,
        patch,
        git_dir: repo.path().to_path_buf(),
        prefix,
    })
}

/// `diff` as a unified patch of the files under `prefix`, their paths made relative to it.
fn patch_text(diff: &git2::Diff<'_>, prefix: &Path) -> Result<String, git2::Error> {
    let mut out = String::new();
    let rel = |p: Option<&Path>| p.and_then(|p| p.strip_prefix(prefix).ok().map(Path::to_path_buf));
    diff.print(git2::DiffFormat::Patch, |delta, _, line| {
        let (Some(old), Some(new)) = (
            rel(delta.old_file().path()).or_else(|| rel(delta.new_file().path())),
            rel(delta.new_file().path()).or_else(|| rel(delta.old_file().path())),
        ) else {
            return true;
        };
        let content = String::from_utf8_lossy(line.content());
        match line.origin() {
            'F' => {
                let a = match delta.status() {
                    git2::Delta::Added | git2::Delta::Untracked => "/dev/null".to_string(),
                    _ => format!("a/{}", old.display()),
                };
                let b = match delta.status() {
                    git2::Delta::Deleted => "/dev/null".to_string(),
                    _ => format!("b/{}", new.display()),
                };
                out.push_str(&format!(
                    "diff --git a/{} b/{}\n--- {a}\n+++ {b}\n",
                    old.display(),
                    new.display()
                ));
            }
            '+' | '-' | ' ' => {
                out.push(line.origin());
                out.push_str(&content);
            }
            _ => out.push_str(&content),
        }
        true
    })?;
    Ok(out)
}

/// The 1-based inclusive line ranges of every occurrence of `find` in `original`.
pub fn occurrence_lines(original: &[u8], find: &str) -> Vec<(usize, usize)> {
    let needle = find.as_bytes();
    let mut out = Vec::new();
    if needle.is_empty() {
        return out;
    }
    let span = needle.iter().filter(|&&b| b == b'\n').count();
    let mut from = 0;
    while let Some(at) = original[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .map(|i| from + i)
    {
        let line = original[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        out.push((line, line + span));
        from = at + needle.len();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn occurrences_span_their_lines() {
        let text = b"a\nb x\ny c\nx\n";
        assert_eq!(occurrence_lines(text, "x"), vec![(2, 2), (4, 4)]);
        assert_eq!(occurrence_lines(text, "x\ny"), vec![(2, 3)]);
        assert_eq!(occurrence_lines(text, "zz"), Vec::<(usize, usize)>::new());
    }

    #[test]
    fn ranges_meet_when_they_overlap() {
        let d = DiffLines {
            files: [(PathBuf::from("src/a.rs"), vec![(5, 7)])].into(),
            ..DiffLines::default()
        };
        assert!(d.meets(Path::new("src/a.rs"), &[(7, 9)]));
        assert!(d.meets(Path::new("src/a.rs"), &[(1, 5)]));
        assert!(!d.meets(Path::new("src/a.rs"), &[(8, 9)]));
        assert!(!d.meets(Path::new("src/b.rs"), &[(5, 7)]));
    }
}
