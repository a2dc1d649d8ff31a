//! The answers for each job: is each named commit in the tested commit (and, for a merge the CI made, in its base), did the pull request's head move, and what follows.

use git2::{Oid, Repository};
use serde::Serialize;

use crate::system::exit::ExitCode;

use super::history::{Answer, Histories, Reasoned, Shallow, ask, resolve};
use super::joblog::{CiKind, Job, JobStatus, is_full_sha, is_hex};
use super::queue::Queue;
use super::tested::{Tested, TestedKind, tested};

/// JSON schema identifier of [`BaseReport`].
pub const BASE_SCHEMA: &str = "harness.base-check/4";

/// A named commit's answers for one job.
#[derive(Debug, Clone, Serialize)]
pub struct CommitAnswer {
    /// Its label (`--commit LABEL=REV`).
    pub label: String,
    /// The revision as given.
    pub rev: String,
    /// The commit it resolved to.
    pub commit: Option<String>,
    /// Whether it is in the tested base: only for a merge the CI made
    /// ([`TestedKind::CiMerge`]); `None` for a commit the job tested itself.
    pub in_base: Option<Reasoned>,
    /// Whether it is in the tested commit (for a CI-made merge: in the tested merge).
    pub in_tested: Reasoned,
    /// A queue entry ([`TestedKind::Queue`]) whose answers are known: what brought it into
    /// the tested commit (`base`, `request #31 queued ahead`, `this request's head`), or
    /// `none` when it is not in it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub came_with: Option<String>,
}

impl CommitAnswer {
    /// Whether any answer is unknown.
    pub fn is_unknown(&self) -> bool {
        self.in_tested.answer == Answer::Unknown
            || self.came_with.as_deref() == Some("unknown")
            || self
                .in_base
                .as_ref()
                .is_some_and(|b| b.answer == Answer::Unknown)
    }
}

/// How the tested head stands against the pull request's current head (`--pr-head`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum HeadState {
    /// The tested head is the current head.
    Current,
    /// The tested head is an ancestor of the current head: commits were pushed since.
    Behind,
    /// The tested head is not in the current head's history: the branch was force-pushed.
    Replaced,
    /// Cannot tell; see the reason.
    Unknown,
}

/// The tested head against `--pr-head`: for a CI-made merge its second parent, for a commit
/// the job tested itself that commit.
#[derive(Debug, Clone, Serialize)]
pub struct HeadCheck {
    /// The revision given with `--pr-head`.
    pub rev: String,
    /// The commit it resolved to.
    pub commit: Option<String>,
    /// How the tested head stands against it.
    pub state: HeadState,
    /// Why.
    pub reason: String,
}

impl HeadCheck {
    fn moved(&self) -> bool {
        matches!(self.state, HeadState::Behind | HeadState::Replaced)
    }
}

/// One job's answers.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// The job as read from the log, with every checkout step.
    pub job: Job,
    /// The step whose commit is the tested one (1-based), when one was chosen.
    pub tested_step: Option<usize>,
    /// How the tested commit came to be (a merge the CI made, or a commit the job checked
    /// out itself); `None` when it is not known.
    pub kind: Option<TestedKind>,
    /// The ref the tested step checked out, as the log names it.
    pub tested_ref: Option<String>,
    /// The commit the job's tests ran on (for a CI-made merge: the tested merge).
    pub tested: Option<String>,
    /// The base: the CI-made merge's first parent (`None` for a commit tested itself).
    pub base: Option<String>,
    /// The pull/merge request head: the CI-made merge's second parent (`None` for a commit
    /// tested itself).
    pub head: Option<String>,
    /// Why the tested commit or its base is missing, or where they came from.
    pub notes: Vec<String>,
    /// The tested head against `--pr-head`, when given.
    pub pr_head: Option<HeadCheck>,
    /// A merge queue's or train's entry: its base branch, the requests queued ahead and its
    /// own ([`TestedKind::Queue`] once the queue was taken apart).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<Queue>,
    /// One per `--commit`.
    pub answers: Vec<CommitAnswer>,
    /// What follows for this job.
    pub follows: Vec<String>,
}

impl JobReport {
    /// Whether every answer is yes or no and the tested commit (and, for a CI-made merge,
    /// its base) was found.
    pub fn is_definite(&self) -> bool {
        let roles = match self.kind {
            Some(TestedKind::CiMerge) => self.base.is_some(),
            Some(TestedKind::Queue) => self.base.is_some() && self.queue.is_some(),
            Some(TestedKind::Commit) => self.tested.is_some(),
            None => false,
        };
        roles
            && self
                .pr_head
                .as_ref()
                .is_none_or(|h| h.state != HeadState::Unknown)
            && !self.answers.iter().any(CommitAnswer::is_unknown)
    }
}

/// The whole base check (JSON output; `schema` = [`BASE_SCHEMA`]).
#[derive(Debug, Clone, Serialize)]
pub struct BaseReport {
    /// Schema identifier.
    pub schema: &'static str,
    /// The log read.
    pub log: String,
    /// One per job (or one for the whole log when no job marker was found).
    pub jobs: Vec<JobReport>,
    /// Exit code: 0 every answer yes or no, 2 any unknown or a job whose tested commit is unknown.
    pub exit_code: ExitCode,
}

/// What to ask of every job.
#[derive(Debug, Clone, Default)]
pub struct Questions {
    /// The named commits: (label, rev).
    pub commits: Vec<(String, String)>,
    /// Use this merge commit instead of the one in the log (`--merge`).
    pub merge: Option<String>,
    /// The pull request's current head (`--pr-head`).
    pub pr_head: Option<String>,
    /// A queue's base branch (`--base-branch`), instead of the one its ref or message names.
    pub base_branch: Option<String>,
}

/// A sha the log names as a step's evidence.
struct LogSha {
    sha: String,
    /// Where: `job N step K`.
    at: String,
    /// The repository that step checked out, when the log names it.
    repository: Option<String>,
}

fn log_shas(jobs: &[Job]) -> Vec<LogSha> {
    let mut out = Vec::new();
    for j in jobs {
        for s in &j.steps {
            let at = format!("{} step {}", j.label(), s.index);
            let subject = s.subject_merge().map(|(h, b)| [h, b]);
            for sha in [&s.full, &s.fetched, &s.short]
                .into_iter()
                .flatten()
                .chain(subject.iter().flatten())
            {
                out.push(LogSha {
                    sha: sha.clone(),
                    at: at.clone(),
                    repository: s.repository.clone(),
                });
            }
        }
    }
    out
}

/// Answer `questions` for every job of `jobs` against `repo`.
pub fn check(repo: &Repository, jobs: &[Job], questions: &Questions, log_name: &str) -> BaseReport {
    let shallow = Shallow::of(repo);
    let mut jobs: Vec<Job> = jobs.to_vec();
    if jobs.is_empty() {
        jobs.push(Job::new(1, 1));
    }
    let shas = log_shas(&jobs);
    let mut histories = Histories::new();
    let reports: Vec<JobReport> = jobs
        .into_iter()
        .map(|job| check_job(repo, &mut histories, &shallow, &shas, job, questions))
        .collect();
    let exit_code = if reports.iter().all(JobReport::is_definite) {
        ExitCode::AllMet
    } else {
        ExitCode::Refused
    };
    BaseReport {
        schema: BASE_SCHEMA,
        log: log_name.to_string(),
        jobs: reports,
        exit_code,
    }
}

pub(crate) fn short(s: &str) -> &str {
    &s[..s.len().min(12)]
}

fn check_job<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    shas: &[LogSha],
    job: Job,
    questions: &Questions,
) -> JobReport {
    let mut t = tested(repo, &job, questions.merge.as_deref());
    let queue = queue_of(repo, histories, shallow, &mut t, questions);
    let mut notes = t.notes.clone();
    for r in [&t.problem, &t.missing].into_iter().flatten() {
        notes.push(r.reason.clone());
    }
    let answers = questions
        .commits
        .iter()
        .map(|(label, rev)| {
            let mut a = answer(repo, histories, shallow, shas, &t, label, rev);
            if let Some(q) = &queue {
                a.came_with = Some(came_with(repo, histories, shallow, q, &a));
            }
            a
        })
        .collect::<Vec<_>>();
    let pr_head = questions
        .pr_head
        .as_deref()
        .map(|rev| head_check(repo, histories, shallow, &t, rev));
    let (kind, tested, base, head) = if t.problem.is_some() {
        (None, None, None, None)
    } else {
        (t.kind, t.commit.clone(), t.base.clone(), t.head.clone())
    };
    let follows = follows(&job, &t, kind, &answers, pr_head.as_ref(), queue.as_ref());
    JobReport {
        job,
        tested_step: t.step,
        kind,
        tested_ref: t.ref_name.clone(),
        tested,
        base,
        head,
        notes,
        pr_head,
        queue,
        answers,
        follows,
    }
}

/// A queue entry's queue: walked from the tested commit down to its base branch; sets the
/// tested base, or the problem that keeps the roles unknown. The request number the ref
/// names must be the one the tested commit's message names.
fn queue_of<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    t: &mut Tested,
    questions: &Questions,
) -> Option<Queue> {
    if t.kind != Some(TestedKind::Queue) || t.problem.is_some() || t.missing.is_some() {
        return None;
    }
    if let (Some(r), Some(m)) = (t.request, t.message_request)
        && r != m
    {
        t.problem = Some(Reasoned::new(
            Answer::Unknown,
            format!(
                "contradictory evidence: the queue's ref names request {r} but the tested commit's message names {m}"
            ),
        ));
        return None;
    }
    let oid = t.commit.as_deref().and_then(|c| Oid::from_str(c).ok())?;
    let branch = match (questions.base_branch.clone(), t.base_branch.clone()) {
        (Some(b), _) | (None, Some(b)) => b,
        (None, None) => {
            t.problem = Some(Reasoned::new(
                Answer::Unknown,
                "the queue's base branch is named neither by its ref nor by the tested commit's message: give --base-branch",
            ));
            return None;
        }
    };
    match super::queue::walk(repo, histories, shallow, oid, &branch) {
        Ok(q) => {
            t.base = Some(q.base.clone());
            t.notes.push(format!(
                "queue on {} ({} at {}): built on {}, {} request(s) queued ahead{}",
                q.base_branch,
                q.base_ref,
                short(&q.base_tip),
                short(&q.base),
                q.ahead.len(),
                if q.ahead.is_empty() {
                    String::new()
                } else {
                    format!(
                        " ({})",
                        q.ahead
                            .iter()
                            .map(entry_name)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                }
            ));
            Some(q)
        }
        Err(r) => {
            t.problem = Some(r);
            None
        }
    }
}

/// `#31 (145c5e95749a)` or the entry's sha alone.
fn entry_name(e: &super::queue::QueueEntry) -> String {
    match e.request {
        Some(n) => format!("#{n} ({})", short(&e.commit)),
        None => format!("{} ({})", short(&e.commit), e.subject),
    }
}

/// What brought a commit into a queue entry's tested commit: the base, the first entry
/// queued ahead that holds it, this request's own entry (its head, or the entry's merge
/// itself); `none` when it is not in the tested commit.
fn came_with<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    q: &Queue,
    a: &CommitAnswer,
) -> String {
    if a.is_unknown() {
        return "unknown".to_string();
    }
    if a.in_base.as_ref().is_some_and(|b| b.answer == Answer::Yes) {
        return "base".to_string();
    }
    if a.in_tested.answer == Answer::No {
        return "none".to_string();
    }
    let Some(commit) = a.commit.as_deref().and_then(|c| Oid::from_str(c).ok()) else {
        return "unknown".to_string();
    };
    for e in &q.ahead {
        let Ok(tip) = Oid::from_str(&e.commit) else {
            continue;
        };
        match ask(repo, histories, shallow, tip, "queue entry", commit).answer {
            Answer::Yes => {
                return format!("{} queued ahead", entry_name(e)).replacen('#', "request #", 1);
            }
            Answer::No => {}
            Answer::Unknown => return "unknown".to_string(),
        }
    }
    let on_head = q
        .own
        .head
        .as_deref()
        .and_then(|h| Oid::from_str(h).ok())
        .map(|h| ask(repo, histories, shallow, h, "head", commit).answer);
    match on_head {
        Some(Answer::Yes) => "this request's head".to_string(),
        Some(Answer::Unknown) => "unknown".to_string(),
        _ => "this request's entry".to_string(),
    }
}

/// In a shallow clone, a commit that is not there may be in the history that was cut away.
fn missing_in_shallow(t: &Tested, r: Reasoned) -> Reasoned {
    match &t.commit {
        Some(m) => Reasoned::new(
            Answer::Unknown,
            format!(
                "{}; the repository is a shallow clone: fetch the {}'s history: `git fetch --unshallow origin {m}`",
                r.reason,
                t.tip_name()
            ),
        ),
        None => r,
    }
}

/// A revision the repository does not hold: unknown, saying whether the log names it.
fn not_in_repository(
    shallow: &Shallow,
    shas: &[LogSha],
    t: &Tested,
    rev: &str,
    r: Reasoned,
) -> Reasoned {
    if shallow.is_shallow() {
        return missing_in_shallow(t, r);
    }
    let rev_l = rev.to_ascii_lowercase();
    let named = (rev.len() >= 4 && is_hex(rev))
        .then(|| {
            shas.iter().find(|n| {
                n.sha.len() >= 4 && (n.sha.starts_with(&rev_l) || rev_l.starts_with(n.sha.as_str()))
            })
        })
        .flatten();
    match named {
        Some(n) => {
            let sha = if is_full_sha(&n.sha) {
                n.sha.as_str()
            } else {
                rev
            };
            let fetch = match (n.repository.as_deref(), t.repository.as_deref()) {
                (Some(other), Some(tested)) if other != tested => format!(
                    "that step checked out {other}, not {tested}: fetch it from {other} if that is the repository meant"
                ),
                _ => format!("fetch it: `git fetch origin {sha}`"),
            };
            Reasoned::new(
                Answer::Unknown,
                format!(
                    "missing object: {rev} is not in the repository, though the log names it ({}); {fetch}",
                    n.at
                ),
            )
        }
        None => Reasoned::new(
            Answer::Unknown,
            format!(
                "not found in the repository or the log: {rev} is no commit of this repository and no checkout in the log names it; {}",
                if is_full_sha(rev) {
                    format!(
                        "if it is a commit of this project, fetch it: `git fetch origin {rev}`; else check the revision (a mistyped sha, another repository's commit)"
                    )
                } else {
                    "check the revision (a mistyped sha, another repository's commit), or fetch the branch that holds it".to_string()
                }
            ),
        ),
    }
}

fn answer<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    shas: &[LogSha],
    t: &Tested,
    label: &str,
    rev: &str,
) -> CommitAnswer {
    let ci_merge = t.kind.is_some_and(TestedKind::has_roles);
    let tip = |which: &str, sha: &Option<String>| -> Result<Oid, Reasoned> {
        if let Some(p) = &t.problem {
            return Err(p.clone());
        }
        match sha.as_deref().and_then(|s| Oid::from_str(s).ok()) {
            Some(oid) => Ok(oid),
            None => Err(t.missing.clone().unwrap_or_else(|| {
                Reasoned::new(
                    Answer::Unknown,
                    format!("the job's {which} is not known from the log"),
                )
            })),
        }
    };
    let (commit, in_base, in_tested) = match resolve(repo, rev) {
        Err(r) if r.reason.starts_with("missing object") => {
            let r = not_in_repository(shallow, shas, t, rev, r);
            (None, ci_merge.then(|| r.clone()), r)
        }
        Err(r) => (None, ci_merge.then(|| r.clone()), r),
        Ok(oid) => {
            let in_base = ci_merge.then(|| match tip("base", &t.base) {
                Ok(b) => ask(repo, histories, shallow, b, "base", oid),
                Err(r) => r,
            });
            let in_tested = match &in_base {
                Some(b) if b.answer == Answer::Yes => {
                    Reasoned::new(Answer::Yes, "in the base, the merge's first parent")
                }
                _ => match tip(t.tip_name(), &t.commit) {
                    Ok(m) if t.missing.is_none() => {
                        ask(repo, histories, shallow, m, t.tip_name(), oid)
                    }
                    Ok(_) => t.missing.clone().unwrap_or_else(|| {
                        Reasoned::new(
                            Answer::Unknown,
                            "the tested commit is not in the repository",
                        )
                    }),
                    Err(r) => r,
                },
            };
            (Some(oid.to_string()), in_base, in_tested)
        }
    };
    CommitAnswer {
        label: label.to_string(),
        rev: rev.to_string(),
        commit,
        in_base,
        in_tested,
        came_with: None,
    }
}

/// The tested head (a CI-made merge's second parent, or the commit the job tested itself)
/// against the pull request's current head.
fn head_check<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    t: &Tested,
    rev: &str,
) -> HeadCheck {
    let unknown = |commit: Option<String>, reason: String| HeadCheck {
        rev: rev.to_string(),
        commit,
        state: HeadState::Unknown,
        reason,
    };
    let current = match resolve(repo, rev) {
        Ok(oid) => oid,
        Err(r) => return unknown(None, r.reason),
    };
    let commit = Some(current.to_string());
    let ci_merge = t.kind.is_some_and(TestedKind::has_roles);
    let (what, tested) = if ci_merge {
        ("tested head", t.head.as_deref())
    } else {
        ("tested commit", t.commit.as_deref())
    };
    let tested = match (&t.problem, tested) {
        (Some(p), _) => return unknown(commit, p.reason.clone()),
        (None, None) if ci_merge => {
            return unknown(
                commit,
                "the tested merge's second parent (the head it tested) is not known".to_string(),
            );
        }
        (None, None) => {
            return unknown(commit, "the tested commit is not known".to_string());
        }
        (None, Some(h)) => h.to_string(),
    };
    let Ok(tested_oid) = Oid::from_str(&tested) else {
        return unknown(commit, format!("the {what} {tested} is not a sha"));
    };
    let since = if ci_merge {
        "after this job's merge was made"
    } else {
        "after the commit this job tested"
    };
    if tested_oid == current {
        return HeadCheck {
            rev: rev.to_string(),
            commit,
            state: HeadState::Current,
            reason: format!("the {what} is the pull request's current head"),
        };
    }
    let r = ask(
        repo,
        histories,
        shallow,
        current,
        "current head",
        tested_oid,
    );
    let (state, reason) = match r.answer {
        Answer::Yes => (
            HeadState::Behind,
            format!(
                "the {what} {} is an older head: an ancestor of the current head {}; commits were pushed {since}",
                short(&tested),
                short(&current.to_string())
            ),
        ),
        Answer::No => (
            HeadState::Replaced,
            format!(
                "the {what} {} is not in the current head {}'s history: the branch was force-pushed {since}",
                short(&tested),
                short(&current.to_string())
            ),
        ),
        Answer::Unknown => (HeadState::Unknown, r.reason),
    };
    HeadCheck {
        rev: rev.to_string(),
        commit,
        state,
        reason,
    }
}

/// The one action when the job tested another head than the current one.
fn head_follows(h: &HeadCheck, t: &Tested, ci: CiKind) -> String {
    let rerun = match ci {
        CiKind::Gitlab => "the pipeline's commit",
        _ => "the event's GITHUB_SHA",
    };
    let current = h.commit.as_deref().map_or("?", short);
    match (h.state, t.kind) {
        (HeadState::Current, Some(TestedKind::CiMerge | TestedKind::Queue)) => format!(
            "the job tested the pull request's current head {}: its result is about the head as it is now",
            t.head.as_deref().map_or("?", short)
        ),
        (HeadState::Current, _) => format!(
            "the job tested the pull request's current head {} itself: its result is about that commit",
            t.commit.as_deref().map_or("?", short)
        ),
        (HeadState::Behind | HeadState::Replaced, Some(TestedKind::Queue)) => format!(
            "the queue tested an entry with an older head ({}), not the current head {current}: its result says nothing \
             about the current head. What to do: read the queue's run for the current head (a push to a queued request \
             takes it out of the queue: queue it again)",
            t.head.as_deref().map_or("?", short)
        ),
        (HeadState::Behind | HeadState::Replaced, Some(TestedKind::CiMerge)) => format!(
            "the job tested a merge with an older head ({}), not the current head {current}: its result says nothing \
             about the current head, whatever the merge's base holds. Re-running this job re-uses the same merge commit \
             ({rerun}), still with the old head. What to do: read the job of the run started by the push of {current}, \
             and ask there whether the commits above are in its base",
            t.head.as_deref().map_or("?", short)
        ),
        (HeadState::Behind | HeadState::Replaced, _) => format!(
            "the job tested commit {}, not the pull request's current head {current}: its result says nothing about \
             the current head. {} What to do: read the job of the run started by the push of {current}",
            t.commit.as_deref().map_or("?", short),
            if t.pinned {
                "Re-running this job tests the same commit again (its checkout names it by sha)."
            } else {
                "Re-running this job checks out its ref again by name and tests whatever the ref names then."
            }
        ),
        (HeadState::Unknown, _) => format!(
            "whether the job tested the pull request's current head cannot be told: {}",
            h.reason
        ),
    }
}

fn follows(
    job: &Job,
    t: &Tested,
    kind: Option<TestedKind>,
    answers: &[CommitAnswer],
    pr_head: Option<&HeadCheck>,
    queue: Option<&Queue>,
) -> Vec<String> {
    let mut out = Vec::new();
    let moved = pr_head.is_some_and(HeadCheck::moved);
    if let Some(h) = pr_head
        && moved
    {
        out.push(head_follows(h, t, job.ci));
    }
    match kind {
        None => out.push(
            "the tested commit is unknown: nothing can be said about what this job's result covers"
                .to_string(),
        ),
        Some(TestedKind::CiMerge | TestedKind::Queue) if t.base.is_none() => out.push(
            "the tested base is unknown: nothing can be said about what this job's result covers"
                .to_string(),
        ),
        _ => {}
    }
    for a in answers {
        let line = match kind {
            None => continue,
            Some(TestedKind::CiMerge | TestedKind::Queue) if t.base.is_none() => continue,
            Some(TestedKind::CiMerge) => merge_line(a, job.status, moved),
            Some(TestedKind::Queue) => match queue {
                Some(q) => queue_line(a, q, job.status, moved),
                None => continue,
            },
            Some(TestedKind::Commit) => commit_line(a, t, job.status, moved),
        };
        out.push(line);
    }
    if let Some(h) = pr_head
        && !moved
    {
        out.push(head_follows(h, t, job.ci));
    }
    out
}

fn unknown_line(a: &CommitAnswer) -> String {
    let reason = match &a.in_base {
        Some(b) if b.answer == Answer::Unknown => &b.reason,
        _ => &a.in_tested.reason,
    };
    format!(
        "{}: cannot say whether the job tested it ({reason}); resolve that before reading the job's result",
        a.label
    )
}

/// What follows for one commit of a job that tested a merge the CI made.
fn merge_line(a: &CommitAnswer, status: JobStatus, head_moved: bool) -> String {
    let l = &a.label;
    if a.is_unknown() {
        return unknown_line(a);
    }
    let in_base = a.in_base.as_ref().map_or(Answer::Unknown, |b| b.answer);
    match (in_base, a.in_tested.answer, status) {
        (Answer::No, Answer::No, _) if head_moved => format!(
            "{l} is not in the tested merge, which holds an older head: nothing follows from it for the current head (see above)"
        ),
        (Answer::No, Answer::No, JobStatus::Red) => format!(
            "{l} is not in the tested base: if it is the fix for this failure, this is a stale base; \
             re-running reuses the same merge ref, so move the base instead (update the branch onto a base that has {l})"
        ),
        (Answer::No, Answer::No, JobStatus::Green) => format!(
            "{l} is not in the tested base: this green says nothing about now; if {l} is a known break, \
             the current base may fail; move the base and run again"
        ),
        (Answer::No, Answer::No, JobStatus::Unknown) => format!(
            "{l} is not in the tested tree: a red result may be a stale base (move the base; re-running reuses the same merge ref), \
             a green one says nothing about a tree with {l}"
        ),
        (Answer::No, _, _) => {
            format!(
                "{l} is not in the base but came with the pull request's head: the job tested it"
            )
        }
        (_, _, JobStatus::Red) => format!(
            "{l} is in the tested base and the job is still red: if {l} is the fix, it did not fix this failure"
        ),
        _ => format!("{l} is in the tested base: the job's result covers it"),
    }
}

/// What follows for one commit of a job that tested a merge queue's or train's entry.
fn queue_line(a: &CommitAnswer, q: &Queue, status: JobStatus, head_moved: bool) -> String {
    let l = &a.label;
    if a.is_unknown() {
        return unknown_line(a);
    }
    let b = &q.base_branch;
    let came = a.came_with.as_deref().unwrap_or("unknown");
    let red = status == JobStatus::Red;
    match came {
        "base" if red => format!(
            "{l} is in the queue's base ({b} at {}) and the job is still red: if {l} is the fix, it did not fix this failure",
            short(&q.base)
        ),
        "base" => format!(
            "{l} is in the queue's base ({b} at {}): the job's result covers it",
            short(&q.base)
        ),
        "none" if head_moved => format!(
            "{l} is not in the tested entry, which holds an older head: nothing follows from it for the current head (see above)"
        ),
        "none" => format!(
            "{l} is in neither the queue's base ({b} at {}), the {} request(s) queued ahead, nor this request: the job never ran with it{}",
            short(&q.base),
            q.ahead.len(),
            if red {
                format!(
                    "; if {l} is the fix for this failure, it must land on {b} (or come with a queued request) before the queue is rebuilt"
                )
            } else {
                format!("; this green says nothing about a tree with {l}")
            }
        ),
        "this request's head" | "this request's entry" if red => format!(
            "{l} came with this request and the job is still red: if {l} is the fix, it did not fix this failure"
        ),
        "this request's head" => format!(
            "{l} is not in the queue's base but came with the pull request's head: the job tested it"
        ),
        "this request's entry" => format!(
            "{l} came with this request's queue entry (a squash or rebase of it): the job tested it"
        ),
        ahead if red => format!(
            "{l} is not in the queue's base: it came with {ahead}, and the job is still red: if {l} is the fix, it did not fix this failure"
        ),
        ahead => format!(
            "{l} is not in the queue's base ({b} at {}): it came only with {ahead} of this request: the job tested it, \
             but this result holds only while that request stays ahead in the queue (if it leaves, the queue is rebuilt \
             without it and tested again)",
            short(&q.base)
        ),
    }
}

/// What follows for one commit of a job that tested a commit itself: only whether the
/// commit holds it.
fn commit_line(a: &CommitAnswer, t: &Tested, status: JobStatus, head_moved: bool) -> String {
    let l = &a.label;
    if a.is_unknown() {
        return unknown_line(a);
    }
    let c = t.commit.as_deref().map_or("?", short);
    match (a.in_tested.answer, status) {
        (Answer::Yes, JobStatus::Red) => format!(
            "{l} is in the tested commit {c} and the job is still red: if {l} is the fix, it did not fix this failure"
        ),
        (Answer::Yes, _) => format!("{l} is in the tested commit {c}: the job's result covers it"),
        (_, _) if head_moved => format!(
            "{l} is not in the tested commit {c}, an older head: nothing follows from it for the current head (see above)"
        ),
        (_, JobStatus::Red) => format!(
            "{l} is not in the tested commit {c}: if {l} is the fix for this failure, the job never ran with it; {} \
             push a commit that contains {l} and read that run",
            if t.pinned {
                "re-running tests the same commit again;"
            } else {
                "re-running checks out the same ref again;"
            }
        ),
        (_, JobStatus::Green) => format!(
            "{l} is not in the tested commit {c}: this green says nothing about a tree with {l}"
        ),
        (_, JobStatus::Unknown) => format!(
            "{l} is not in the tested commit {c}: the job's result says nothing about a tree with {l}"
        ),
    }
}
