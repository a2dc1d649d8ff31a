//! A merge queue's or merge train's tested commit taken apart: the base it was built on, the requests queued ahead, and the request's own entry.
//!
//! GitHub's merge queue (merge method "merge") and GitLab's merge trains build each entry as
//! a merge commit whose first parent is the entry ahead of it (or, for the first, the base
//! branch) and whose second parent is the request's head: GitHub's subject is `Merge pull
//! request #<n> from <owner>/<branch>`, GitLab's default message `Merge branch '<source>'
//! into '<target>'` ... `See merge request <project>!<iid>`. The tested commit's
//! first-parent chain is walked down until it meets the base branch's history (as the
//! repository holds that branch: `refs/remotes/origin/<base>`, else `refs/heads/<base>`, or
//! the revision given with `--base-branch`); every commit met before is a queue entry, the
//! tested commit itself the request's own. A walk that cannot tell (a shallow history cut
//! on the way, a base branch the repository lacks) is unknown, never a guess.

use git2::{Oid, Repository};
use serde::Serialize;

use super::history::{Answer, Histories, Reasoned, Shallow, ask, resolve};

/// At most this many entries are walked before the walk gives up (unknown).
const MAX_ENTRIES: usize = 500;

/// One entry of a merge queue or train.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QueueEntry {
    /// The entry's commit (full sha).
    pub commit: String,
    /// The pull or merge request it merged, from its message (`#<n>`, `!<iid>`), when named.
    pub request: Option<u64>,
    /// Its second parent: the request's head (`None` for a one-parent entry: a squash or
    /// rebase, whose commits are copies).
    pub head: Option<String>,
    /// Its subject.
    pub subject: String,
}

/// The queue a tested commit was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Queue {
    /// The base branch, as the ref or the commit message names it (or `--base-branch`).
    pub base_branch: String,
    /// The ref of the repository that stood for it (`refs/remotes/origin/main`).
    pub base_ref: String,
    /// That ref's commit.
    pub base_tip: String,
    /// The commit of the base branch the queue was built on: the first commit of the tested
    /// commit's first-parent chain that is in the base branch's history.
    pub base: String,
    /// The requests queued ahead, the nearest to the base first.
    pub ahead: Vec<QueueEntry>,
    /// The request's own entry: the tested commit.
    pub own: QueueEntry,
}

/// The request number an entry's message names: GitHub's `Merge pull request #<n> from`,
/// GitLab's `See merge request <project>!<iid>`.
pub fn request_of(message: &str) -> Option<u64> {
    let digits = |s: &str| -> Option<u64> {
        let d: String = s.chars().take_while(char::is_ascii_digit).collect();
        d.parse().ok()
    };
    let first = message.lines().next().unwrap_or("");
    if let Some(rest) = first.strip_prefix("Merge pull request #") {
        return digits(rest);
    }
    message
        .lines()
        .filter_map(|l| l.trim().strip_prefix("See merge request "))
        .find_map(|r| r.rsplit_once('!').and_then(|(_, n)| digits(n)))
}

/// The target branch of a GitLab merge commit's message (`Merge branch 'x' into 'main'`).
pub fn target_of(message: &str) -> Option<String> {
    let first = message.lines().next()?;
    let (_, rest) = first.split_once("' into '")?;
    let t = rest.strip_suffix('\'')?;
    (!t.is_empty()).then(|| t.to_string())
}

/// The ref that stands for `branch` in `repo`: `refs/remotes/origin/<branch>`, then
/// `refs/heads/<branch>`, then `branch` as any revision.
fn base_ref(repo: &Repository, branch: &str) -> Result<(String, Oid), Reasoned> {
    for name in [
        format!("refs/remotes/origin/{branch}"),
        format!("refs/heads/{branch}"),
    ] {
        if let Ok(r) = repo.find_reference(&name)
            && let Ok(c) = r.peel_to_commit()
        {
            return Ok((name, c.id()));
        }
    }
    match resolve(repo, branch) {
        Ok(oid) => Ok((branch.to_string(), oid)),
        Err(_) => Err(Reasoned::new(
            Answer::Unknown,
            format!(
                "the base branch {branch} is not in the repository (no refs/remotes/origin/{branch} or refs/heads/{branch}): \
                 which commits came from the base and which from the requests queued ahead cannot be told; fetch it: \
                 `git fetch origin {branch}`"
            ),
        )),
    }
}

fn entry(repo: &Repository, oid: Oid) -> Result<(QueueEntry, Option<Oid>), Reasoned> {
    let c = repo.find_commit(oid).map_err(|e| {
        Reasoned::new(
            Answer::Unknown,
            format!(
                "missing object: queue entry {oid} is not in the repository ({}); fetch it: `git fetch origin {oid}`",
                e.message()
            ),
        )
    })?;
    let message = c.message().unwrap_or("");
    let parents: Vec<Oid> = c.parent_ids().collect();
    Ok((
        QueueEntry {
            commit: oid.to_string(),
            request: request_of(message),
            head: parents.get(1).map(Oid::to_string),
            subject: c.summary().unwrap_or("").to_string(),
        },
        parents.first().copied(),
    ))
}

/// Take the queue of `tested` apart against `branch` (see the module docs).
///
/// # Errors
/// An unknown answer with the reason: the base branch not in the repository, a shallow
/// history cut before the chain meets it, a missing entry, a chain that never meets it.
pub(crate) fn walk<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    tested: Oid,
    branch: &str,
) -> Result<Queue, Reasoned> {
    let (base_ref, tip) = base_ref(repo, branch)?;
    let mut entries = Vec::new();
    let mut at = tested;
    loop {
        let r = ask(repo, histories, shallow, tip, "base branch", at);
        match r.answer {
            Answer::Yes => break,
            Answer::Unknown => {
                return Err(Reasoned::new(
                    Answer::Unknown,
                    format!(
                        "where the queue meets {branch} cannot be told at {}: {}",
                        &at.to_string()[..12],
                        r.reason
                    ),
                ));
            }
            Answer::No => {}
        }
        if entries.len() >= MAX_ENTRIES {
            return Err(Reasoned::new(
                Answer::Unknown,
                format!(
                    "the tested commit's first-parent chain does not meet {branch} ({base_ref}) within {MAX_ENTRIES} commits: \
                     is it the queue's base branch? (give --base-branch)"
                ),
            ));
        }
        let (e, first) = entry(repo, at)?;
        entries.push(e);
        match first {
            Some(p) => at = p,
            None => {
                return Err(Reasoned::new(
                    Answer::Unknown,
                    format!(
                        "the tested commit's first-parent chain ends without meeting {branch} ({base_ref}): \
                         is it the queue's base branch? (give --base-branch)"
                    ),
                ));
            }
        }
    }
    if entries.is_empty() {
        return Err(Reasoned::new(
            Answer::Unknown,
            format!(
                "the tested commit {} is already in {branch} ({base_ref}): the queue's entries cannot be told apart from the base",
                &tested.to_string()[..12]
            ),
        ));
    }
    entries.reverse();
    let own = entries.pop().expect("not empty");
    Ok(Queue {
        base_branch: branch.to_string(),
        base_ref,
        base_tip: tip.to_string(),
        base: at.to_string(),
        ahead: entries,
        own,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_numbers_and_targets_from_github_and_gitlab_messages() {
        assert_eq!(
            request_of("Merge pull request #32 from acme/parse-headers\n\nfeature"),
            Some(32)
        );
        assert_eq!(
            request_of(
                "Merge branch 'stream' into 'main'\n\nstream: tokens\n\nSee merge request acme/app!43\n"
            ),
            Some(43)
        );
        assert_eq!(request_of("Merge branch 'main' into topic"), None);
        assert_eq!(
            target_of("Merge branch 'stream' into 'release/1.2'\n\nx"),
            Some("release/1.2".to_string())
        );
        assert_eq!(target_of("Merge pull request #3 from a/b"), None);
    }
}
