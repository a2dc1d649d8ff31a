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
}

impl DiffLines {
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
        .unwrap_or_default();
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
    Ok(DiffLines {
        rev: rev.into(),
        merge_base: base.to_string(),
        files,
    })
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
