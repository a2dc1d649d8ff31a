//! Which commit a job tested and how it came to be: a merge the CI made (the checkout of a merge ref), or a commit the job checked out itself.
//!
//! The roles base and head come only from the ref the job checked out, as each CI documents
//! it: GitHub's `refs/pull/<n>/merge` (the `pull_request` event's `GITHUB_SHA`, "the last
//! merge commit" of the pull request's merge branch) and GitLab's merged-results
//! (`refs/merge-requests/<iid>/merge`) and merge-train (`refs/merge-requests/<iid>/train`)
//! refs are merges the CI made of the request's head into its base: first parent the base,
//! second the head. Every other checkout (`refs/pull/<n>/head`,
//! `refs/merge-requests/<iid>/head`, a branch, a tag, a sha) tested that commit itself,
//! whatever its parents: a developer's own merge of main into a topic branch has no base
//! and no head in this sense.

use git2::{Oid, Repository};
use serde::Serialize;

use super::history::{Answer, Reasoned, resolve};
use super::joblog::{CheckoutStep, CiKind, Job};

/// How the commit a job tested came to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TestedKind {
    /// A merge the CI made (GitHub `refs/pull/<n>/merge`, GitLab
    /// `refs/merge-requests/<iid>/merge` or `.../train`), or the merge given with `--merge`:
    /// its first parent is the base, its second the pull request's head.
    CiMerge,
    /// A commit the job checked out itself (the request's own head ref, a branch, a tag, a
    /// sha): no base and no head; the only question is what the commit contains.
    Commit,
    /// A merge queue's or merge train's entry (GitHub `gh-readonly-queue/<base>/pr-<n>-<sha>`,
    /// the `merge_group` event's; GitLab `refs/merge-requests/<iid>/train`): the merge of the
    /// base, the requests queued ahead and this request's head. Its base is where its
    /// first-parent chain meets the base branch ([`super::queue`]), its head its second parent.
    Queue,
}

impl TestedKind {
    /// Whether the tested commit has a base and a head (a CI-made merge or a queue entry).
    pub fn has_roles(self) -> bool {
        matches!(self, TestedKind::CiMerge | TestedKind::Queue)
    }
}

/// The tested commit of one job and where it came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tested {
    /// The step whose commit is the tested one (1-based), when one was chosen.
    pub step: Option<usize>,
    /// How the tested commit came to be; `None` while it is not known.
    pub kind: Option<TestedKind>,
    /// The ref the chosen step checked out, as its log names it.
    pub ref_name: Option<String>,
    /// The repository the chosen step checked out, when the log names it.
    pub repository: Option<String>,
    /// The tested commit (full sha): the tested merge of a [`TestedKind::CiMerge`].
    pub commit: Option<String>,
    /// The tested merge's first parent: the base ([`TestedKind::CiMerge`] only).
    pub base: Option<String>,
    /// The tested merge's second parent: the pull request's head ([`TestedKind::CiMerge`] only).
    pub head: Option<String>,
    /// The checkout fixed its commit before the job ran (GitHub: fetched by sha; GitLab:
    /// the pipeline's commit): a re-run of the job tests the same commit.
    pub pinned: bool,
    /// The request number the checked-out ref names (a queue's `pr-<n>`, a train's `<iid>`).
    pub request: Option<u64>,
    /// A queue's base branch: from the queue's ref (GitHub) or the train commit's message
    /// (GitLab), unless `--base-branch` gave it.
    pub base_branch: Option<String>,
    /// The request number the tested commit's own message names (a queue entry's).
    pub message_request: Option<u64>,
    /// Where these came from.
    pub notes: Vec<String>,
    /// Evidence that contradicts itself, or no way to tell which checkout was tested:
    /// every answer of the job is unknown with this reason.
    pub problem: Option<Reasoned>,
    /// The tested commit is not in the repository (answers about it are unknown).
    pub missing: Option<Reasoned>,
}

impl Tested {
    /// How the tested commit is named in messages: `merge` or `tested commit`.
    pub fn tip_name(&self) -> &'static str {
        match self.kind {
            Some(TestedKind::CiMerge) | Some(TestedKind::Queue) => "merge",
            _ => "tested commit",
        }
    }
}

fn short(s: &str) -> &str {
    &s[..s.len().min(12)]
}

fn unknown(reason: String) -> Option<Reasoned> {
    Some(Reasoned::new(Answer::Unknown, reason))
}

/// Whether two steps' evidence names the same commit (a full sha, or an abbreviation of it).
fn same_commit(a: &CheckoutStep, b: &CheckoutStep) -> bool {
    let id = |s: &CheckoutStep| s.commit().or(s.short.as_deref()).map(str::to_string);
    match (id(a), id(b)) {
        (Some(x), Some(y)) => x.starts_with(&y) || y.starts_with(&x),
        _ => true,
    }
}

fn describe(s: &CheckoutStep) -> String {
    format!(
        "step {} (line {}, {} at {}: {})",
        s.index,
        s.line,
        s.ref_name.as_deref().unwrap_or("?"),
        s.place(),
        s.commit().or(s.short.as_deref()).map_or("?", short)
    )
}

/// The fetch that brings a tested commit: by its ref on the server (a GitLab merge request's
/// ref), else by sha (GitHub serves any commit of the repository by sha).
fn fetch_command(ref_name: Option<&str>, sha: &str) -> String {
    match ref_name {
        Some(r) if r.starts_with("refs/") && !r.starts_with("refs/remotes/") => {
            format!("`git fetch origin {r}`")
        }
        _ if super::joblog::is_full_sha(sha) => format!("`git fetch origin {sha}`"),
        Some(r) => format!(
            "`git fetch origin {}`",
            r.replacen("refs/remotes/", "refs/", 1)
        ),
        None => format!("`git fetch origin {sha}`"),
    }
}

/// Pick the step whose commit the job tested, or say why none can be picked.
fn choose(job: &Job, notes: &mut Vec<String>) -> Result<usize, Reasoned> {
    let merges: Vec<&CheckoutStep> = job.steps.iter().filter(|s| s.ci_made()).collect();
    if let Some(first) = merges.first() {
        if let Some(other) = merges.iter().find(|s| !same_commit(first, s)) {
            return Err(Reasoned::new(
                Answer::Unknown,
                format!(
                    "contradictory evidence: two checkouts of the pull request's merge or queue ref name different commits, {} and {}; \
                     which one the tests ran on cannot be told from the log (give --merge)",
                    describe(first),
                    describe(other)
                ),
            ));
        }
        return Ok(first.index);
    }
    match job.steps.as_slice() {
        [] => Err(Reasoned::new(
            Answer::Unknown,
            "no checkout line in this job's log (`HEAD is now at ...`, `git log -1`, `Checking out ...`)",
        )),
        [only] => Ok(only.index),
        steps => {
            let roots: Vec<&CheckoutStep> = steps.iter().filter(|s| s.path.is_none()).collect();
            if let [root] = roots.as_slice() {
                notes.push(format!(
                    "no checkout of a pull request's merge ref: the checkout at the workspace root, {}, is taken as the tested commit",
                    describe(root)
                ));
                Ok(root.index)
            } else {
                Err(Reasoned::new(
                    Answer::Unknown,
                    format!(
                        "{} checkouts and none of a pull request's merge ref: which one was tested cannot be told (give --merge)",
                        steps.len()
                    ),
                ))
            }
        }
    }
}

/// The step's own lines must agree: the full sha starts with the abbreviation, and the
/// fetched sha is the one checked out.
fn self_consistent(s: &CheckoutStep) -> Result<(), Reasoned> {
    if let (Some(full), Some(ab)) = (&s.full, &s.short)
        && !full.starts_with(ab.as_str())
    {
        return Err(Reasoned::new(
            Answer::Unknown,
            format!(
                "contradictory evidence in step {}: `git log -1` printed {} (line {}) but the checkout line says {ab} (line {})",
                s.index,
                short(full),
                s.sha_line.unwrap_or(0),
                s.checkout_line.unwrap_or(0)
            ),
        ));
    }
    if let (Some(full), Some(fetched)) = (&s.full, &s.fetched)
        && full != fetched
    {
        return Err(Reasoned::new(
            Answer::Unknown,
            format!(
                "contradictory evidence in step {}: the fetch named {} but `git log -1` printed {} (line {})",
                s.index,
                short(fetched),
                short(full),
                s.sha_line.unwrap_or(0)
            ),
        ));
    }
    Ok(())
}

/// The note for a tested step whose ref the log does not name.
fn checked_out(step: &CheckoutStep) -> String {
    format!(
        "step {} does not name the ref it checked out (no fetch or checkout command in the log): taken as a commit the job tested itself",
        step.index
    )
}

/// The tested commit of `job`: `merge_override` (`--merge`, taken as a CI-made merge) or the
/// chosen step's commit; for a CI-made merge, its parents from the repository (else from the
/// log's `Merge <head> into <base>`).
pub(crate) fn tested(repo: &Repository, job: &Job, merge_override: Option<&str>) -> Tested {
    let mut t = Tested::default();
    let mut subject: Option<(String, String)> = None;
    if let Some(m) = merge_override {
        match resolve(repo, m) {
            Ok(oid) => t.commit = Some(oid.to_string()),
            Err(r) => t.problem = Some(r),
        }
        t.kind = Some(TestedKind::CiMerge);
        t.notes
            .push(format!("merge commit given with --merge: {m}"));
    } else {
        let step = match choose(job, &mut t.notes) {
            Ok(i) => &job.steps[i - 1],
            Err(r) => {
                // Checkouts of a CI-made merge that disagree: the answers keep their shape.
                if job.steps.iter().any(|s| s.ci_made()) {
                    t.kind = Some(TestedKind::CiMerge);
                }
                t.problem = Some(r);
                return t;
            }
        };
        t.step = Some(step.index);
        t.ref_name = step.ref_name.clone();
        t.repository = step.repository.clone();
        t.pinned = job.ci == CiKind::Gitlab || step.fetched.is_some();
        t.kind = Some(if let Some((base, n)) = step.merge_queue() {
            t.base_branch = Some(base);
            t.request = Some(n);
            TestedKind::Queue
        } else if step.is_train() {
            t.request = step.merge_request();
            TestedKind::Queue
        } else if step.merge_request().is_some() {
            TestedKind::CiMerge
        } else {
            TestedKind::Commit
        });
        if let Err(r) = self_consistent(step) {
            t.problem = Some(r);
            return t;
        }
        if t.kind == Some(TestedKind::CiMerge) {
            subject = step.subject_merge();
        } else if step.ref_name.is_none() {
            t.notes.push(checked_out(step));
        }
        match (step.commit(), &step.short) {
            (Some(full), _) => t.commit = Some(full.to_string()),
            (None, Some(ab)) => match resolve(repo, ab) {
                Ok(oid) => t.commit = Some(oid.to_string()),
                Err(r) => {
                    t.missing = Some(Reasoned::new(
                        Answer::Unknown,
                        format!(
                            "{} {ab}: {}; fetch it: {}",
                            t.tip_name(),
                            r.reason,
                            fetch_command(step.ref_name.as_deref(), ab)
                        ),
                    ));
                }
            },
            (None, None) => {}
        }
    }
    parents(repo, &mut t, subject);
    t
}

/// Base and head of a CI-made merge: its parents in the repository, checked against the
/// log's subject. A commit the job tested itself keeps neither.
fn parents(repo: &Repository, t: &mut Tested, subject: Option<(String, String)>) {
    let ci_merge = t.kind == Some(TestedKind::CiMerge);
    if ci_merge && let Some((h, b)) = &subject {
        t.head = Some(h.clone());
        t.base = Some(b.clone());
    }
    let Some(m) = t.commit.clone() else {
        if t.problem.is_none() && t.missing.is_none() && t.base.is_none() {
            t.problem = unknown("the job's tested commit is not known from the log".to_string());
        }
        return;
    };
    let Ok(commit) = Oid::from_str(&m).and_then(|oid| repo.find_commit(oid)) else {
        let fetch = fetch_command(t.ref_name.as_deref(), &m);
        t.missing = Some(Reasoned::new(
            Answer::Unknown,
            format!(
                "missing object: {} {} is not in the repository; fetch it: {fetch}",
                t.tip_name(),
                short(&m)
            ),
        ));
        if ci_merge && t.base.is_none() {
            t.notes.push(format!(
                "merge {} not in the repository: its parents are unknown",
                short(&m)
            ));
        }
        return;
    };
    let ids: Vec<String> = commit.parent_ids().map(|p| p.to_string()).collect();
    if t.kind == Some(TestedKind::Queue) {
        let message = commit.message().unwrap_or("");
        t.message_request = super::queue::request_of(message);
        if t.base_branch.is_none() {
            t.base_branch = super::queue::target_of(message);
        }
        match ids.as_slice() {
            [_, h, ..] => t.head = Some(h.clone()),
            _ => t.notes.push(format!(
                "queue entry {} has one parent: a squash or rebase entry, whose commits are copies of the request's; \
                 the request's head is not in the tested history (a commit of the head is answered by sha, and is not in it)",
                short(&m)
            )),
        }
        return;
    }
    if !ci_merge {
        if ids.len() > 1 {
            t.notes.push(format!(
                "{} is a merge commit the CI did not make: its parents play no part in the answers",
                short(&m)
            ));
        }
        return;
    }
    match ids.as_slice() {
        [b, h, ..] => {
            if let Some((sh, sb)) = &subject
                && (sh != h || sb != b)
            {
                t.problem = unknown(format!(
                    "contradictory evidence: the log's subject says `Merge {} into {}` but commit {}'s parents are {} (base) and {} (head)",
                    short(sh),
                    short(sb),
                    short(&m),
                    short(b),
                    short(h)
                ));
                return;
            }
            t.base = Some(b.clone());
            t.head = Some(h.clone());
        }
        _ if subject.is_some() => {
            t.problem = unknown(format!(
                "contradictory evidence: the log's subject says commit {} is a merge but it has {} parent(s)",
                short(&m),
                ids.len()
            ));
        }
        _ => {
            t.notes.push(format!(
                "{} is not a merge: the job tested that commit itself",
                short(&m)
            ));
            t.kind = Some(TestedKind::Commit);
            t.base = None;
            t.head = None;
        }
    }
}
