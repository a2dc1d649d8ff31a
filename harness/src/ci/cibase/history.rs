//! Ancestry answers against a repository: resolving revisions, shallow boundaries, and one walk per tip.

use git2::{ErrorCode, Oid, Repository};
use serde::Serialize;

/// An answer: yes, no, or unknown.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Answer {
    /// The commit is in it.
    Yes,
    /// The commit is not in it (the history walked was complete).
    No,
    /// Cannot tell; see the reason.
    Unknown,
}

/// An answer with the reason behind it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Reasoned {
    /// The answer.
    pub answer: Answer,
    /// Why (for unknown: what is missing and how to get it).
    pub reason: String,
}

impl Reasoned {
    pub(crate) fn new(answer: Answer, reason: impl Into<String>) -> Self {
        Reasoned {
            answer,
            reason: reason.into(),
        }
    }
}

/// The shallow state of a repository: the commits at which its history was cut.
#[derive(Debug, Clone, Default)]
pub struct Shallow {
    boundary: std::collections::HashSet<Oid>,
}

impl Shallow {
    /// Read `.git/shallow` (empty for a complete repository).
    pub fn of(repo: &Repository) -> Self {
        let mut boundary = std::collections::HashSet::new();
        if repo.is_shallow()
            && let Ok(text) = std::fs::read_to_string(repo.path().join("shallow"))
        {
            boundary.extend(text.lines().filter_map(|l| Oid::from_str(l.trim()).ok()));
        }
        Shallow { boundary }
    }

    /// Whether the history is cut anywhere.
    pub fn is_shallow(&self) -> bool {
        !self.boundary.is_empty()
    }
}

/// Resolve a revision (full or abbreviated sha, branch, tag) to a commit.
///
/// # Errors
/// An unknown answer: `missing object` or `ambiguous abbreviation` (with the candidates).
pub fn resolve(repo: &Repository, rev: &str) -> Result<Oid, Reasoned> {
    match repo.revparse_single(rev) {
        Ok(obj) => match obj.peel_to_commit() {
            Ok(c) => Ok(c.id()),
            Err(e) => Err(Reasoned::new(
                Answer::Unknown,
                format!(
                    "{rev} names a {}, not a commit: {}",
                    obj.kind().map_or("?".into(), |k| k.to_string()),
                    e.message()
                ),
            )),
        },
        Err(e) if e.code() == ErrorCode::Ambiguous => {
            let cands = candidates(repo, rev);
            Err(Reasoned::new(
                Answer::Unknown,
                format!(
                    "ambiguous abbreviation: {rev} matches {} objects ({}); give more digits",
                    cands.len().max(2),
                    cands.join(", ")
                ),
            ))
        }
        Err(e) => Err(Reasoned::new(
            Answer::Unknown,
            format!(
                "missing object: {rev} is not in the repository ({}); fetch it or give a longer sha",
                e.message()
            ),
        )),
    }
}

/// Objects whose id starts with `prefix` (at most 5, `sha (type)`).
fn candidates(repo: &Repository, prefix: &str) -> Vec<String> {
    let prefix = prefix.to_ascii_lowercase();
    let mut found = Vec::new();
    if let Ok(odb) = repo.odb() {
        let _ = odb.foreach(|oid| {
            let s = oid.to_string();
            if s.starts_with(&prefix) {
                let kind = odb
                    .read_header(*oid)
                    .map(|(_, k)| k.to_string())
                    .unwrap_or_else(|_| "?".to_string());
                found.push(format!("{} ({kind})", &s[..12]));
            }
            found.len() < 5
        });
    }
    found.sort();
    found
}

/// The history of one tip (a base or a merge), for ancestry questions about it.
///
/// Each question is first put to libgit2's `graph_descendant_of` (a merge-base walk that
/// uses the commit-graph's generation numbers when the repository has one). In a
/// complete repository its "no" is final. In a shallow one a "no" is only trusted after a
/// walk of the tip's history that meets no shallow boundary; that walk is done once per
/// tip, on demand, and what it saw answers later questions at once.
pub struct History<'r> {
    repo: &'r Repository,
    tip: Oid,
    walk: Option<git2::Revwalk<'r>>,
    seen: std::collections::HashSet<Oid>,
    /// A shallow boundary commit the walk reached.
    cut_at: Option<Oid>,
    /// Whether the walk ran to the end.
    done: bool,
    error: Option<String>,
}

impl<'r> History<'r> {
    /// Prepare a walk of `tip`'s history (nothing is read until asked).
    pub fn new(repo: &'r Repository, tip: Oid) -> Self {
        History {
            repo,
            tip,
            walk: None,
            seen: std::collections::HashSet::new(),
            cut_at: None,
            done: false,
            error: None,
        }
    }

    /// Whether `commit` is `tip` or one of its ancestors; `tip_name` names the tip in
    /// the reason (`base`, `merge`).
    pub fn contains(&mut self, shallow: &Shallow, tip_name: &str, commit: Oid) -> Reasoned {
        if commit == self.tip {
            return Reasoned::new(Answer::Yes, format!("it is the {tip_name} itself"));
        }
        if self.repo.find_commit(self.tip).is_err() {
            return Reasoned::new(
                Answer::Unknown,
                format!(
                    "missing object: {tip_name} {} is not in the repository; fetch it: `git fetch {}origin {}`",
                    self.tip,
                    if shallow.is_shallow() {
                        "--unshallow "
                    } else {
                        ""
                    },
                    self.tip
                ),
            );
        }
        if self.seen.contains(&commit) {
            return Reasoned::new(Answer::Yes, format!("ancestor of the {tip_name}"));
        }
        match self.repo.graph_descendant_of(self.tip, commit) {
            Ok(true) => return Reasoned::new(Answer::Yes, format!("ancestor of the {tip_name}")),
            Ok(false) if !shallow.is_shallow() => {
                return Reasoned::new(Answer::No, format!("not an ancestor of the {tip_name}"));
            }
            Ok(false) => {}
            Err(e) => {
                return Reasoned::new(
                    Answer::Unknown,
                    format!("ancestry walk failed: {}", e.message()),
                );
            }
        }
        // Shallow: walk the tip's whole history once to see whether it is cut.
        if !self.done {
            if self.walk.is_none() {
                match self
                    .repo
                    .revwalk()
                    .and_then(|mut w| w.push(self.tip).map(|()| w))
                {
                    Ok(w) => self.walk = Some(w),
                    Err(e) => {
                        self.done = true;
                        self.error = Some(e.message().to_string());
                    }
                }
            }
            if let Some(walk) = self.walk.as_mut() {
                for next in walk.by_ref() {
                    let oid = match next {
                        Ok(o) => o,
                        Err(e) => {
                            self.error = Some(e.message().to_string());
                            break;
                        }
                    };
                    self.seen.insert(oid);
                    if self.cut_at.is_none() && shallow.boundary.contains(&oid) {
                        self.cut_at = Some(oid);
                    }
                    if oid == commit {
                        return Reasoned::new(Answer::Yes, format!("ancestor of the {tip_name}"));
                    }
                }
                self.done = true;
                self.walk = None;
            }
        }
        if let Some(e) = &self.error {
            return Reasoned::new(Answer::Unknown, format!("history walk failed: {e}"));
        }
        match self.cut_at {
            Some(b) => Reasoned::new(
                Answer::Unknown,
                format!(
                    "shallow history: the {tip_name}'s history is cut at {} (shallow clone); fetch the rest: `git fetch --unshallow origin {}`",
                    &b.to_string()[..12],
                    self.tip
                ),
            ),
            None => Reasoned::new(Answer::No, format!("not an ancestor of the {tip_name}")),
        }
    }
}

/// Whether `commit` is in the history of `tip` (an ancestor of it, or `tip` itself), as a
/// one-off question (see [`History`] to ask several about the same tip).
pub fn contains(
    repo: &Repository,
    shallow: &Shallow,
    tip: Oid,
    tip_name: &str,
    commit: Oid,
) -> Reasoned {
    History::new(repo, tip).contains(shallow, tip_name, commit)
}

/// Histories by tip, shared by every job and commit of one check.
pub(crate) type Histories<'r> = std::collections::HashMap<Oid, History<'r>>;

pub(crate) fn ask<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    tip: Oid,
    tip_name: &str,
    commit: Oid,
) -> Reasoned {
    histories
        .entry(tip)
        .or_insert_with(|| History::new(repo, tip))
        .contains(shallow, tip_name, commit)
}
