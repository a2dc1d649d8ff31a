//! The answers for each job: is each named commit in the tested base and merge, did the pull request's head move, and what follows.

use git2::{Oid, Repository};
use serde::Serialize;

use super::history::{Answer, Histories, Reasoned, Shallow, ask, resolve};
use super::joblog::{Job, JobStatus};
use super::tested::{Tested, tested};

/// JSON schema identifier of [`BaseReport`].
pub const BASE_SCHEMA: &str = "harness.base-check/2";

/// A named commit's answers for one job.
#[derive(Debug, Clone, Serialize)]
pub struct CommitAnswer {
    /// Its label (`--commit LABEL=REV`).
    pub label: String,
    /// The revision as given.
    pub rev: String,
    /// The commit it resolved to.
    pub commit: Option<String>,
    /// Whether it is in the tested base.
    pub in_base: Reasoned,
    /// Whether it is in the tested merge.
    pub in_merge: Reasoned,
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

/// The tested head against `--pr-head`.
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

/// One job's answers.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// The job as read from the log, with every checkout step.
    pub job: Job,
    /// The step whose commit is the tested merge (1-based), when one was chosen.
    pub tested_step: Option<usize>,
    /// The tested merge commit (or the tested commit, for a job that tested no merge).
    pub merge: Option<String>,
    /// The base: the merge's first parent.
    pub base: Option<String>,
    /// The pull/merge request head: the merge's second parent.
    pub head: Option<String>,
    /// Why merge or base is missing, or where they came from.
    pub notes: Vec<String>,
    /// The tested head against `--pr-head`, when given.
    pub pr_head: Option<HeadCheck>,
    /// One per `--commit`.
    pub answers: Vec<CommitAnswer>,
    /// What follows for this job.
    pub follows: Vec<String>,
}

impl JobReport {
    /// Whether every answer is yes or no and the tested merge was found.
    pub fn is_definite(&self) -> bool {
        self.base.is_some()
            && self
                .pr_head
                .as_ref()
                .is_none_or(|h| h.state != HeadState::Unknown)
            && self.answers.iter().all(|a| {
                a.in_base.answer != Answer::Unknown && a.in_merge.answer != Answer::Unknown
            })
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
    /// Exit code: 0 every answer yes or no, 2 any unknown or a job whose tested merge is unknown.
    pub exit_code: i32,
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
}

/// Answer `questions` for every job of `jobs` against `repo`.
pub fn check(repo: &Repository, jobs: &[Job], questions: &Questions, log_name: &str) -> BaseReport {
    let shallow = Shallow::of(repo);
    let mut jobs: Vec<Job> = jobs.to_vec();
    if jobs.is_empty() {
        jobs.push(Job::new(1, 1));
    }
    let mut histories = Histories::new();
    let reports: Vec<JobReport> = jobs
        .into_iter()
        .map(|job| check_job(repo, &mut histories, &shallow, job, questions))
        .collect();
    let exit_code = if reports.iter().all(JobReport::is_definite) {
        0
    } else {
        2
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
    job: Job,
    questions: &Questions,
) -> JobReport {
    let t = tested(repo, &job, questions.merge.as_deref());
    let mut notes = t.notes.clone();
    for r in [&t.problem, &t.merge_missing].into_iter().flatten() {
        notes.push(r.reason.clone());
    }
    let answers = questions
        .commits
        .iter()
        .map(|(label, rev)| answer(repo, histories, shallow, &t, label, rev))
        .collect::<Vec<_>>();
    let pr_head = questions
        .pr_head
        .as_deref()
        .map(|rev| head_check(repo, histories, shallow, &t, rev));
    let (base, merge, head) = if t.problem.is_some() {
        (None, None, None)
    } else {
        (t.base.clone(), t.merge.clone(), t.head.clone())
    };
    let mut follows = follows(&job, base.is_some(), &answers);
    if let Some(h) = &pr_head {
        follows.push(head_follows(h, t.head.as_deref()));
    }
    JobReport {
        job,
        tested_step: t.step,
        merge,
        base,
        head,
        notes,
        pr_head,
        answers,
        follows,
    }
}

/// In a shallow clone, a commit that is not there may be in the history that was cut away.
fn missing_in_shallow(shallow: &Shallow, t: &Tested, r: Reasoned) -> Reasoned {
    match (&t.merge, shallow.is_shallow()) {
        (Some(m), true) if r.reason.starts_with("missing object") => Reasoned::new(
            Answer::Unknown,
            format!(
                "{}; the repository is a shallow clone: fetch the merge's history: `git fetch --unshallow origin {m}`",
                r.reason
            ),
        ),
        _ => r,
    }
}

fn answer<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    t: &Tested,
    label: &str,
    rev: &str,
) -> CommitAnswer {
    let tip = |which: &str, sha: &Option<String>| -> Result<Oid, Reasoned> {
        if let Some(p) = &t.problem {
            return Err(p.clone());
        }
        match sha.as_deref().and_then(|s| Oid::from_str(s).ok()) {
            Some(oid) => Ok(oid),
            None => Err(t.merge_missing.clone().unwrap_or_else(|| {
                Reasoned::new(
                    Answer::Unknown,
                    format!("the job's {which} is not known from the log"),
                )
            })),
        }
    };
    let (commit, in_base, in_merge) = match resolve(repo, rev) {
        Err(r) if super::joblog::is_full_sha(rev) && r.reason.starts_with("missing object") => {
            // A full sha absent from a complete repository is in no history the repository
            // holds whole: "no" for each tip that is here, unknown for one that is not.
            let absent = |which: &str, sha: &Option<String>| match tip(which, sha) {
                Ok(oid) if !shallow.is_shallow() && repo.find_commit(oid).is_ok() => Reasoned::new(
                    Answer::No,
                    format!(
                        "not in the repository, whose history of the {which} is complete (not a shallow clone): not an ancestor of the {which}"
                    ),
                ),
                _ => missing_in_shallow(shallow, t, r.clone()),
            };
            let in_base = absent("base", &t.base);
            let in_merge = absent("merge", &t.merge);
            (None, in_base, in_merge)
        }
        Err(r) => {
            let r = missing_in_shallow(shallow, t, r);
            (None, r.clone(), r)
        }
        Ok(oid) => {
            let in_base = match tip("base", &t.base) {
                Ok(b) => ask(repo, histories, shallow, b, "base", oid),
                Err(r) => r,
            };
            let in_merge = if in_base.answer == Answer::Yes {
                Reasoned::new(Answer::Yes, "in the base, the merge's first parent")
            } else {
                match tip("merge", &t.merge) {
                    Ok(m) if t.merge_missing.is_none() => {
                        ask(repo, histories, shallow, m, "merge", oid)
                    }
                    Ok(_) => t.merge_missing.clone().unwrap_or_else(|| {
                        Reasoned::new(Answer::Unknown, "the merge is not in the repository")
                    }),
                    Err(r) => r,
                }
            };
            (Some(oid.to_string()), in_base, in_merge)
        }
    };
    CommitAnswer {
        label: label.to_string(),
        rev: rev.to_string(),
        commit,
        in_base,
        in_merge,
    }
}

/// The tested head (the merge's second parent) against the pull request's current head.
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
    let tested = match (&t.problem, t.head.as_deref()) {
        (Some(p), _) => return unknown(commit, p.reason.clone()),
        (None, None) => {
            return unknown(
                commit,
                "the tested merge's second parent (the head it tested) is not known".to_string(),
            );
        }
        (None, Some(h)) => h.to_string(),
    };
    let Ok(tested_oid) = Oid::from_str(&tested) else {
        return unknown(commit, format!("the tested head {tested} is not a sha"));
    };
    if tested_oid == current {
        return HeadCheck {
            rev: rev.to_string(),
            commit,
            state: HeadState::Current,
            reason: "the tested head is the pull request's current head".to_string(),
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
                "the tested head {} is an older head: an ancestor of the current head {}; commits were pushed after this job's merge was made",
                short(&tested),
                short(&current.to_string())
            ),
        ),
        Answer::No => (
            HeadState::Replaced,
            format!(
                "the tested head {} is not in the current head {}'s history: the branch was force-pushed after this job's merge was made",
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

fn head_follows(h: &HeadCheck, tested: Option<&str>) -> String {
    let tested = tested.map_or("?", short);
    match h.state {
        HeadState::Current => format!(
            "the job tested the pull request's current head {tested}: its result is about the head as it is now"
        ),
        HeadState::Behind | HeadState::Replaced => format!(
            "the job tested an older head ({tested}), not the current {}: its result says nothing about the current head. \
             Re-running this job re-uses its event's merge commit (GITHUB_SHA), still with the old head; the run started \
             by the push of the new head tests it. This is not a stale base: moving the base does not help",
            h.commit.as_deref().map_or("?", short)
        ),
        HeadState::Unknown => format!(
            "whether the job tested the pull request's current head cannot be told: {}",
            h.reason
        ),
    }
}

fn follows(job: &Job, base_known: bool, answers: &[CommitAnswer]) -> Vec<String> {
    let mut out = Vec::new();
    if !base_known {
        out.push(
            "the tested base is unknown: nothing can be said about what this job's result covers"
                .to_string(),
        );
    }
    for a in answers {
        let l = &a.label;
        let line = match (a.in_base.answer, a.in_merge.answer, job.status) {
            (Answer::Unknown, _, _) | (_, Answer::Unknown, _) if base_known => format!(
                "{l}: cannot say whether the job tested it ({}); resolve that before reading the job's result",
                if a.in_base.answer == Answer::Unknown {
                    &a.in_base.reason
                } else {
                    &a.in_merge.reason
                }
            ),
            (Answer::Unknown, _, _) | (_, Answer::Unknown, _) => continue,
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
            (Answer::No, Answer::Yes, _) => format!(
                "{l} is not in the base but came with the pull request's head: the job tested it"
            ),
            (Answer::Yes, _, JobStatus::Red) => format!(
                "{l} is in the tested base and the job is still red: if {l} is the fix, it did not fix this failure"
            ),
            (Answer::Yes, _, _) => format!("{l} is in the tested base: the job's result covers it"),
        };
        out.push(line);
    }
    out
}
