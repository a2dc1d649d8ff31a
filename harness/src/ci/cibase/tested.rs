//! Which commit a job tested: the checkout of the pull request's merge ref, checked against itself and the repository.

use git2::{Oid, Repository};

use super::history::{Answer, Reasoned, resolve};
use super::joblog::{CheckoutStep, Job};

/// The tested merge of one job and where it came from.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tested {
    /// The step whose commit is the tested merge (1-based), when one was chosen.
    pub step: Option<usize>,
    /// The tested merge commit (full sha).
    pub merge: Option<String>,
    /// Its first parent: the base.
    pub base: Option<String>,
    /// Its second parent: the pull request's head.
    pub head: Option<String>,
    /// Where these came from.
    pub notes: Vec<String>,
    /// Evidence that contradicts itself, or no way to tell which checkout was tested:
    /// every answer of the job is unknown with this reason.
    pub problem: Option<Reasoned>,
    /// The merge commit is not in the repository (answers about the merge are unknown).
    pub merge_missing: Option<Reasoned>,
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
    let merges: Vec<&CheckoutStep> = job
        .steps
        .iter()
        .filter(|s| s.merge_request().is_some())
        .collect();
    if let Some(first) = merges.first() {
        if let Some(other) = merges.iter().find(|s| !same_commit(first, s)) {
            return Err(Reasoned::new(
                Answer::Unknown,
                format!(
                    "contradictory evidence: two checkouts of the pull request's merge ref name different commits, {} and {}; \
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

/// The tested merge of `job`: `merge_override` (`--merge`) or the chosen step's commit,
/// with its parents from the repository (else from the log's `Merge <head> into <base>`).
pub(crate) fn tested(repo: &Repository, job: &Job, merge_override: Option<&str>) -> Tested {
    let mut t = Tested::default();
    let mut subject: Option<(String, String)> = None;
    let mut ref_hint = None;
    if let Some(m) = merge_override {
        match resolve(repo, m) {
            Ok(oid) => t.merge = Some(oid.to_string()),
            Err(r) => t.problem = Some(r),
        }
        t.notes
            .push(format!("merge commit given with --merge: {m}"));
    } else {
        let step = match choose(job, &mut t.notes) {
            Ok(i) => &job.steps[i - 1],
            Err(r) => {
                t.problem = Some(r);
                return t;
            }
        };
        t.step = Some(step.index);
        if let Err(r) = self_consistent(step) {
            t.problem = Some(r);
            return t;
        }
        subject = step.subject_merge();
        ref_hint = step.ref_name.clone();
        match (step.commit(), &step.short) {
            (Some(full), _) => t.merge = Some(full.to_string()),
            (None, Some(ab)) => match resolve(repo, ab) {
                Ok(oid) => t.merge = Some(oid.to_string()),
                Err(r) => {
                    t.merge_missing = Some(Reasoned::new(
                        Answer::Unknown,
                        format!(
                            "merge {ab}: {}; fetch it: {}",
                            r.reason,
                            fetch_command(step.ref_name.as_deref(), ab)
                        ),
                    ));
                }
            },
            (None, None) => {}
        }
    }
    parents(repo, &mut t, subject, ref_hint);
    t
}

/// Base and head: the merge's parents in the repository, checked against the log's subject.
fn parents(
    repo: &Repository,
    t: &mut Tested,
    subject: Option<(String, String)>,
    ref_hint: Option<String>,
) {
    if let Some((h, b)) = &subject {
        t.head = Some(h.clone());
        t.base = Some(b.clone());
    }
    let Some(m) = t.merge.clone() else {
        if t.problem.is_none() && t.merge_missing.is_none() && t.base.is_none() {
            t.problem = unknown("the job's tested merge is not known from the log".to_string());
        }
        return;
    };
    let Ok(commit) = Oid::from_str(&m).and_then(|oid| repo.find_commit(oid)) else {
        let fetch = fetch_command(ref_hint.as_deref(), &m);
        t.merge_missing = Some(Reasoned::new(
            Answer::Unknown,
            format!(
                "missing object: merge {} is not in the repository; fetch it: {fetch}",
                short(&m)
            ),
        ));
        if t.base.is_none() {
            t.notes.push(format!(
                "merge {} not in the repository: its parents are unknown",
                short(&m)
            ));
        }
        return;
    };
    let ids: Vec<String> = commit.parent_ids().map(|p| p.to_string()).collect();
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
                "{} is not a merge: the job tested that commit itself, taken as its base",
                short(&m)
            ));
            t.base = Some(m.clone());
            t.head = None;
        }
    }
}
