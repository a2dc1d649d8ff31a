//! Base check: from a raw CI job log, find the merge commit each job tested and its base, and answer whether named commits are in them.
//!
//! Log formats read (one raw log may hold several jobs, one after the other):
//! - GitHub Actions raw logs: every line starts with an ISO-8601 timestamp; `##[group]` /
//!   `##[endgroup]` markers; a job starts with `Current runner version: '...'` and may
//!   name itself with `Complete job name: ...`. actions/checkout prints the fetch
//!   (`... +<sha>:refs/remotes/pull/<n>/merge`), `HEAD is now at <abbrev> Merge <head> into
//!   <base>` (the merge's first parent is the base), and the full sha after
//!   `git log -1 --format='%H'`. A failed step prints `##[error]Process completed with exit code N.`
//! - GitLab CI job logs: a job starts with `Running with gitlab-runner ...`; a
//!   merged-results pipeline prints `Checking out <sha8> as detached HEAD (ref is
//!   refs/merge-requests/<iid>/merge)...` and no parent shas, so base and head are read
//!   from the repository (first and second parent). It ends with `Job succeeded` or
//!   `ERROR: Job failed: ...`.
//!
//! Answers are yes, no or unknown. Unknown is never folded into no: a shallow history
//! whose walk stops at a shallow boundary, a missing object, and an abbreviation shared
//! by several objects are each unknown, with the reason.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use git2::{ErrorCode, Oid, Repository};
use serde::Serialize;

use crate::audit::{OutputFormat, table};
use crate::testlog::clean_line;

/// JSON schema identifier of [`BaseReport`].
pub const BASE_SCHEMA: &str = "harness.base-check/1";

/// Errors that stop a base check (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum BaseError {
    /// The log could not be read.
    #[error("cannot read CI log {path}: {source}")]
    Log {
        /// The log's path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The repository could not be opened.
    #[error("cannot open git repository {path}: {message}")]
    Repo {
        /// The path given with `--repo`.
        path: PathBuf,
        /// libgit2's message.
        message: String,
    },
    /// A `--commit` argument is not `LABEL=REV`.
    #[error("--commit {arg}: expected LABEL=REV (a full or abbreviated sha, branch or tag)")]
    CommitArg {
        /// The argument as given.
        arg: String,
    },
}

/// Which CI printed a job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CiKind {
    /// GitHub Actions.
    Github,
    /// GitLab CI.
    Gitlab,
    /// No CI marker seen.
    Unknown,
}

/// The job's result as its log states it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum JobStatus {
    /// Failed (`##[error]Process completed with exit code N`, `ERROR: Job failed`).
    Red,
    /// Succeeded (`Job succeeded`, or a GitHub job that reached its cleanup with no error).
    Green,
    /// The log does not say.
    Unknown,
}

/// What a job's log says about its checkout.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Checkout {
    /// 1-based line of the checkout line (`HEAD is now at` / `Checking out`).
    pub line: usize,
    /// That line, cleaned.
    pub evidence: String,
    /// The abbreviated sha printed on it.
    pub abbrev: Option<String>,
    /// The full sha of the checked-out commit (`git log -1`, else the fetched merge ref).
    pub full: Option<String>,
    /// `Merge <head> into <base>`: the pull request's head.
    pub head: Option<String>,
    /// `Merge <head> into <base>`: the base.
    pub base: Option<String>,
    /// The ref checked out (`refs/remotes/pull/<n>/merge`, `refs/merge-requests/<iid>/merge`).
    pub ref_name: Option<String>,
}

/// One job found in a log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Job {
    /// 1-based position in the log.
    pub index: usize,
    /// `Complete job name:` when printed.
    pub name: Option<String>,
    /// 1-based line where the job starts.
    pub start_line: usize,
    /// Which CI printed it.
    pub ci: CiKind,
    /// Its checkout, when the log shows one.
    pub checkout: Option<Checkout>,
    /// Its result.
    pub status: JobStatus,
}

impl Job {
    fn new(index: usize, start_line: usize) -> Self {
        Job {
            index,
            name: None,
            start_line,
            ci: CiKind::Unknown,
            checkout: None,
            status: JobStatus::Unknown,
        }
    }

    /// `job N (name)` for messages.
    pub fn label(&self) -> String {
        match &self.name {
            Some(n) => format!("job {} ({n})", self.index),
            None => format!("job {}", self.index),
        }
    }
}

fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

fn is_full_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && is_hex(s)
}

#[derive(Default)]
struct JobParser {
    jobs: Vec<Job>,
    current: Option<Job>,
    /// The current job began with a start marker.
    marked: bool,
    /// The previous line ran `git log -1`: the next sha-only line is the checkout's full sha.
    want_log_sha: bool,
    /// A fetched merge ref seen before the checkout line: (sha, ref).
    fetched: Option<(String, String)>,
    log_sha: Option<String>,
    cleanup_seen: bool,
}

impl JobParser {
    fn job(&mut self, line_no: usize) -> &mut Job {
        let next = self.jobs.len() + 1;
        self.current.get_or_insert_with(|| Job::new(next, line_no))
    }

    fn close(&mut self) {
        if let Some(mut job) = self.current.take() {
            if let Some(c) = job.checkout.as_mut() {
                if c.full.is_none() {
                    c.full = self
                        .log_sha
                        .clone()
                        .or_else(|| self.fetched.as_ref().map(|f| f.0.clone()));
                }
                if c.ref_name.is_none() {
                    c.ref_name = self.fetched.as_ref().map(|f| f.1.clone());
                }
            }
            if job.status == JobStatus::Unknown && job.ci == CiKind::Github && self.cleanup_seen {
                job.status = JobStatus::Green;
            }
            self.jobs.push(job);
        }
        self.marked = false;
        self.want_log_sha = false;
        self.fetched = None;
        self.log_sha = None;
        self.cleanup_seen = false;
    }

    fn line(&mut self, line_no: usize, raw: &str) {
        let cleaned = clean_line(raw);
        let mut t = cleaned.trim();
        for marker in ["##[group]", "##[endgroup]", "##[section]"] {
            if let Some(rest) = t.strip_prefix(marker) {
                t = rest.trim();
            }
        }
        let start = if t.starts_with("Current runner version:") {
            Some(CiKind::Github)
        } else if t.starts_with("Running with gitlab-runner") {
            Some(CiKind::Gitlab)
        } else {
            None
        };
        if let Some(ci) = start {
            if self.marked || self.current.as_ref().is_some_and(|j| j.checkout.is_some()) {
                self.close();
            }
            self.marked = true;
            let job = self.job(line_no);
            job.ci = ci;
            return;
        }
        if self.want_log_sha && !t.is_empty() {
            self.want_log_sha = false;
            let sha = t.trim_matches(|c| c == '\'' || c == '"');
            if is_full_sha(sha) {
                let sha = sha.to_ascii_lowercase();
                self.log_sha = Some(sha.clone());
                if let Some(c) = self.job(line_no).checkout.as_mut() {
                    c.full = Some(sha);
                }
                return;
            }
        }
        if let Some(name) = t.strip_prefix("Complete job name:") {
            self.job(line_no).name = Some(name.trim().to_string());
            return;
        }
        if t.contains("git log -1") {
            self.want_log_sha = true;
            return;
        }
        if t.contains(" fetch ") || t.starts_with("git fetch") {
            for tok in t.split_whitespace() {
                let tok = tok.trim_matches(|c| c == '\'' || c == '"');
                if let Some((sha, r)) = tok.strip_prefix('+').and_then(|x| x.split_once(':'))
                    && is_full_sha(sha)
                    && r.contains("/pull/")
                {
                    self.fetched = Some((sha.to_ascii_lowercase(), r.to_string()));
                }
            }
            return;
        }
        if let Some(rest) = t.strip_prefix("HEAD is now at ") {
            let (abbrev, subject) = rest.split_once(' ').unwrap_or((rest, ""));
            if !is_hex(abbrev) {
                return;
            }
            let mut c = Checkout {
                line: line_no,
                evidence: t.to_string(),
                abbrev: Some(abbrev.to_ascii_lowercase()),
                ..Checkout::default()
            };
            if let Some(m) = subject.strip_prefix("Merge ")
                && let Some((head, base)) = m.split_once(" into ")
                && is_full_sha(head.trim())
                && is_full_sha(base.trim())
            {
                c.head = Some(head.trim().to_ascii_lowercase());
                c.base = Some(base.trim().to_ascii_lowercase());
            }
            let job = self.job(line_no);
            if job.ci == CiKind::Unknown {
                job.ci = CiKind::Github;
            }
            if job.checkout.is_none() {
                job.checkout = Some(c);
            }
            return;
        }
        if let Some(rest) = t.strip_prefix("Checking out ")
            && let Some((sha, rest)) = rest.split_once(" as ")
            && is_hex(sha)
        {
            let ref_name = rest
                .split_once("(ref is ")
                .and_then(|(_, r)| r.split_once(')'))
                .map(|(r, _)| r.trim().to_string())
                .or_else(|| {
                    let r = rest.trim_end_matches("...").trim();
                    (!r.starts_with("detached")).then(|| r.to_string())
                });
            let c = Checkout {
                line: line_no,
                evidence: t.to_string(),
                abbrev: (!is_full_sha(sha)).then(|| sha.to_ascii_lowercase()),
                full: is_full_sha(sha).then(|| sha.to_ascii_lowercase()),
                ref_name,
                ..Checkout::default()
            };
            let job = self.job(line_no);
            if job.ci == CiKind::Unknown {
                job.ci = CiKind::Gitlab;
            }
            if job.checkout.is_none() {
                job.checkout = Some(c);
            }
            return;
        }
        if t.starts_with("##[error]Process completed with exit code")
            || t.starts_with("ERROR: Job failed")
        {
            self.job(line_no).status = JobStatus::Red;
            return;
        }
        if t == "Job succeeded" {
            let job = self.job(line_no);
            if job.status == JobStatus::Unknown {
                job.status = JobStatus::Green;
            }
            return;
        }
        if t.starts_with("Cleaning up orphan processes") {
            self.cleanup_seen = true;
        }
    }
}

/// Split a raw CI log into jobs and read each one's checkout and result.
pub fn parse_jobs(text: &str) -> Vec<Job> {
    let mut p = JobParser::default();
    for (i, raw) in text.lines().enumerate() {
        p.line(i + 1, raw);
    }
    p.close();
    // Content before the first start marker with no checkout is runner preamble, not a job.
    p.jobs
        .retain(|j| j.checkout.is_some() || j.ci != CiKind::Unknown);
    for (i, j) in p.jobs.iter_mut().enumerate() {
        j.index = i + 1;
    }
    p.jobs
}

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
    fn new(answer: Answer, reason: impl Into<String>) -> Self {
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
                    "missing object: {tip_name} {} is not in the repository; fetch it",
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
                    "shallow history: the {tip_name}'s history is cut at {} (shallow clone); run `git fetch --unshallow`",
                    &b.to_string()[..12]
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
type Histories<'r> = std::collections::HashMap<Oid, History<'r>>;

fn ask<'r>(
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

/// One job's answers.
#[derive(Debug, Clone, Serialize)]
pub struct JobReport {
    /// The job as read from the log.
    pub job: Job,
    /// The tested merge commit (or the tested commit, for a job that tested no merge).
    pub merge: Option<String>,
    /// The base: the merge's first parent.
    pub base: Option<String>,
    /// The pull/merge request head: the merge's second parent.
    pub head: Option<String>,
    /// Why merge or base is missing, or where they came from.
    pub notes: Vec<String>,
    /// One per `--commit`.
    pub answers: Vec<CommitAnswer>,
    /// What follows for this job.
    pub follows: Vec<String>,
}

impl JobReport {
    /// Whether every answer is yes or no and the checkout was found.
    pub fn is_definite(&self) -> bool {
        self.base.is_some()
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
    /// One per job with a checkout (or one for the whole log when none has).
    pub jobs: Vec<JobReport>,
    /// Exit code: 0 every answer yes or no, 2 any unknown or a job without checkout.
    pub exit_code: i32,
}

/// Answer the named `commits` (label, rev) for every job of `jobs` against `repo`.
/// `merge_override` replaces the log's merge commit for every job (`--merge`).
pub fn check(
    repo: &Repository,
    jobs: &[Job],
    commits: &[(String, String)],
    merge_override: Option<&str>,
    log_name: &str,
) -> BaseReport {
    let shallow = Shallow::of(repo);
    let mut jobs: Vec<Job> = jobs.to_vec();
    if jobs.is_empty() {
        jobs.push(Job::new(1, 1));
    }
    let mut histories = Histories::new();
    let mut reports = Vec::new();
    for job in jobs {
        reports.push(check_job(
            repo,
            &mut histories,
            &shallow,
            job,
            commits,
            merge_override,
        ));
    }
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

fn short(s: &str) -> &str {
    &s[..s.len().min(12)]
}

fn check_job<'r>(
    repo: &'r Repository,
    histories: &mut Histories<'r>,
    shallow: &Shallow,
    job: Job,
    commits: &[(String, String)],
    merge_override: Option<&str>,
) -> JobReport {
    let mut notes = Vec::new();
    let mut merge: Option<String> = None;
    let mut base: Option<String> = None;
    let mut head: Option<String> = None;
    let mut merge_problem: Option<Reasoned> = None;
    if let Some(m) = merge_override {
        match resolve(repo, m) {
            Ok(oid) => merge = Some(oid.to_string()),
            Err(r) => merge_problem = Some(r),
        }
        notes.push(format!("merge commit given with --merge: {m}"));
    } else if let Some(c) = &job.checkout {
        base = c.base.clone();
        head = c.head.clone();
        if let (Some(full), Some(ab)) = (&c.full, &c.abbrev)
            && !full.starts_with(ab.as_str())
        {
            notes.push(format!(
                "the log's full sha {} does not start with the checkout's abbreviation {ab}; using the full sha",
                short(full)
            ));
        }
        match (&c.full, &c.abbrev) {
            (Some(full), _) => merge = Some(full.clone()),
            (None, Some(ab)) => match resolve(repo, ab) {
                Ok(oid) => merge = Some(oid.to_string()),
                Err(r) => merge_problem = Some(r),
            },
            (None, None) => {}
        }
        if let Some(r) = &c.ref_name {
            notes.push(format!("checked out {r} (line {})", c.line));
        }
    } else {
        notes.push(
            "no checkout line in this job's log (`HEAD is now at ...` or `Checking out ...`)"
                .to_string(),
        );
    }
    if let Some(r) = &merge_problem {
        notes.push(format!("merge commit: {}", r.reason));
    }
    // Parents from the repository when the log did not print them.
    if let Some(m) = &merge
        && let Ok(oid) = Oid::from_str(m)
    {
        match repo.find_commit(oid) {
            Ok(commit) => {
                let parents: Vec<String> = commit.parent_ids().map(|p| p.to_string()).collect();
                match parents.as_slice() {
                    [b, h, ..] => {
                        if base.as_ref().is_some_and(|x| x != b) {
                            notes.push(format!(
                                "the log's base {} differs from the merge's first parent {}; using the first parent",
                                short(base.as_deref().unwrap_or("")),
                                short(b)
                            ));
                        }
                        base = Some(b.clone());
                        head.get_or_insert_with(|| h.clone());
                    }
                    _ if base.is_none() => {
                        notes.push(format!(
                            "{} is not a merge: the job tested that commit itself, taken as its base",
                            short(m)
                        ));
                        base = Some(m.clone());
                    }
                    _ => {}
                }
            }
            Err(_) if base.is_none() => {
                let hint = job
                    .checkout
                    .as_ref()
                    .and_then(|c| c.ref_name.clone())
                    .map(|r| format!(" (fetch {r})"))
                    .unwrap_or_default();
                merge_problem = Some(Reasoned::new(
                    Answer::Unknown,
                    format!(
                        "missing object: merge {} is not in the repository{hint}",
                        short(m)
                    ),
                ));
                notes.push(format!(
                    "merge {} not in the repository: its parents are unknown{hint}",
                    short(m)
                ));
            }
            Err(_) => {}
        }
    }
    let merge_oid = merge.as_deref().and_then(|m| Oid::from_str(m).ok());
    let base_oid = base.as_deref().and_then(|b| Oid::from_str(b).ok());
    let unknown_tip = |what: &str| {
        merge_problem.clone().unwrap_or_else(|| {
            Reasoned::new(
                Answer::Unknown,
                format!("the job's {what} is not known from the log"),
            )
        })
    };
    let mut answers = Vec::new();
    for (label, rev) in commits {
        let resolved = resolve(repo, rev);
        let (commit, in_base, in_merge) = match resolved {
            Err(r) => (None, r.clone(), r),
            Ok(oid) => {
                let in_base = match base_oid {
                    Some(b) => ask(repo, histories, shallow, b, "base", oid),
                    None => unknown_tip("base"),
                };
                let in_merge = if in_base.answer == Answer::Yes {
                    Reasoned::new(Answer::Yes, "in the base, the merge's first parent")
                } else {
                    match merge_oid {
                        Some(m) => ask(repo, histories, shallow, m, "merge", oid),
                        None => unknown_tip("merge"),
                    }
                };
                (Some(oid.to_string()), in_base, in_merge)
            }
        };
        answers.push(CommitAnswer {
            label: label.clone(),
            rev: rev.clone(),
            commit,
            in_base,
            in_merge,
        });
    }
    let follows = follows(&job, base.is_some(), &answers);
    JobReport {
        job,
        merge,
        base,
        head,
        notes,
        answers,
        follows,
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

impl BaseReport {
    fn commits_text(a: &CommitAnswer) -> String {
        a.commit.as_deref().map(short).unwrap_or("-").to_string()
    }

    /// Render as a plain-text table.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for j in &self.jobs {
            let _ = writeln!(
                out,
                "{}: {}, {}, checkout {}",
                j.job.label(),
                match j.job.ci {
                    CiKind::Github => "GitHub Actions",
                    CiKind::Gitlab => "GitLab CI",
                    CiKind::Unknown => "unknown CI",
                },
                status_word(j.job.status),
                j.job
                    .checkout
                    .as_ref()
                    .map_or("not found".to_string(), |c| format!("at line {}", c.line))
            );
            let _ = writeln!(
                out,
                "  merge {}  base {}  head {}",
                j.merge.as_deref().map(short).unwrap_or("?"),
                j.base.as_deref().map(short).unwrap_or("?"),
                j.head.as_deref().map(short).unwrap_or("?")
            );
            for n in &j.notes {
                let _ = writeln!(out, "  note: {n}");
            }
            if !j.answers.is_empty() {
                let rows: Vec<[String; 6]> = j
                    .answers
                    .iter()
                    .map(|a| {
                        [
                            a.label.clone(),
                            a.rev.clone(),
                            Self::commits_text(a),
                            answer_word(a.in_base.answer).to_string(),
                            answer_word(a.in_merge.answer).to_string(),
                            if a.in_base.answer == Answer::Yes
                                || a.in_base.reason == a.in_merge.reason
                            {
                                a.in_base.reason.clone()
                            } else {
                                format!("base: {}; merge: {}", a.in_base.reason, a.in_merge.reason)
                            },
                        ]
                    })
                    .collect();
                let mut t = String::new();
                table(
                    &mut t,
                    &["LABEL", "REV", "COMMIT", "IN BASE", "IN MERGE", "REASON"],
                    &rows,
                );
                for l in t.lines() {
                    let _ = writeln!(out, "  {l}");
                }
            }
            for f in &j.follows {
                let _ = writeln!(out, "  => {f}");
            }
            out.push('\n');
        }
        let _ = writeln!(
            out,
            "base-check: {} jobs, exit {}",
            self.jobs.len(),
            self.exit_code
        );
        out
    }

    /// Render as Markdown for a pull-request comment.
    pub fn to_markdown(&self) -> String {
        let mut out = String::from("## Base check\n");
        for j in &self.jobs {
            let _ = writeln!(
                out,
                "\n### {} ({})\n\nmerge `{}`, base `{}`, head `{}`\n",
                j.job.label(),
                status_word(j.job.status),
                j.merge.as_deref().map(short).unwrap_or("?"),
                j.base.as_deref().map(short).unwrap_or("?"),
                j.head.as_deref().map(short).unwrap_or("?")
            );
            for n in &j.notes {
                let _ = writeln!(out, "- note: {}", n.replace('|', "\\|"));
            }
            if !j.answers.is_empty() {
                let _ = writeln!(out, "\n| Commit | Rev | In base | In merge | Reason |");
                let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
                for a in &j.answers {
                    let _ = writeln!(
                        out,
                        "| {} | `{}` | {} | {} | {} |",
                        a.label,
                        a.rev,
                        answer_word(a.in_base.answer),
                        answer_word(a.in_merge.answer),
                        a.in_base.reason.replace('|', "\\|")
                    );
                }
            }
            if !j.follows.is_empty() {
                out.push('\n');
                for f in &j.follows {
                    let _ = writeln!(out, "**What follows:** {f}\n");
                }
            }
        }
        out
    }
}

fn status_word(s: JobStatus) -> &'static str {
    match s {
        JobStatus::Red => "red",
        JobStatus::Green => "green",
        JobStatus::Unknown => "result unknown",
    }
}

fn answer_word(a: Answer) -> &'static str {
    match a {
        Answer::Yes => "yes",
        Answer::No => "no",
        Answer::Unknown => "UNKNOWN",
    }
}

/// `harness base-check` arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct BaseCheckArgs {
    /// A raw CI job log (GitHub Actions or GitLab CI); may hold several jobs.
    #[arg(long, value_name = "JOB.log")]
    pub log: PathBuf,
    /// The git repository to answer from.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// A commit to look for: LABEL=REV (full or abbreviated sha, branch or tag); repeatable.
    #[arg(long = "commit", value_name = "LABEL=REV")]
    pub commits: Vec<String>,
    /// Use this merge commit instead of the one in the log.
    #[arg(long, value_name = "SHA")]
    pub merge: Option<String>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: OutputFormat,
}

/// Read the log and the repository and answer.
///
/// # Errors
/// [`BaseError`] for an unreadable log, an unopenable repository or a malformed `--commit`.
pub fn check_files(args: &BaseCheckArgs) -> Result<BaseReport, BaseError> {
    let mut commits = Vec::new();
    for arg in &args.commits {
        match arg.split_once('=') {
            Some((l, r)) if !l.is_empty() && !r.is_empty() => {
                commits.push((l.to_string(), r.to_string()))
            }
            _ => return Err(BaseError::CommitArg { arg: arg.clone() }),
        }
    }
    let bytes = std::fs::read(&args.log).map_err(|source| BaseError::Log {
        path: args.log.clone(),
        source,
    })?;
    let text = String::from_utf8_lossy(&bytes);
    let repo = Repository::open(&args.repo).map_err(|e| BaseError::Repo {
        path: args.repo.clone(),
        message: e.message().to_string(),
    })?;
    let jobs = parse_jobs(&text);
    Ok(check(
        &repo,
        &jobs,
        &commits,
        args.merge.as_deref(),
        &args.log.display().to_string(),
    ))
}

/// `harness base-check`: print the report; returns the exit code (0 or 2).
///
/// # Errors
/// Any [`BaseError`]: the caller exits with code 2.
pub fn run(args: &BaseCheckArgs) -> anyhow::Result<i32> {
    let report = check_files(args)?;
    match args.format {
        OutputFormat::Table => print!("{}", report.to_table()),
        OutputFormat::Markdown => print!("{}", report.to_markdown()),
        OutputFormat::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(report.exit_code)
}

/// Open `path` as a repository (for benches and tests that hold a path).
///
/// # Errors
/// [`BaseError::Repo`].
pub fn open_repo(path: &Path) -> Result<Repository, BaseError> {
    Repository::open(path).map_err(|e| BaseError::Repo {
        path: path.to_path_buf(),
        message: e.message().to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_job_boundaries_and_checkout_fields() {
        let log = "\
2026-11-29T10:00:00.0000001Z Current runner version: '2.321.0'
2026-11-29T10:00:00.0000002Z Complete job name: test (ubuntu)
2026-11-29T10:00:01.0000000Z [command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune origin +1111111111111111111111111111111111111111:refs/remotes/pull/7/merge
2026-11-29T10:00:02.0000000Z HEAD is now at 1111111 Merge 2222222222222222222222222222222222222222 into 3333333333333333333333333333333333333333
2026-11-29T10:00:03.0000000Z ##[endgroup]
2026-11-29T10:00:09.0000000Z ##[error]Process completed with exit code 101.
2026-11-29T10:01:00.0000001Z Current runner version: '2.321.0'
2026-11-29T10:01:02.0000000Z HEAD is now at 4444444 Merge 5555555555555555555555555555555555555555 into 6666666666666666666666666666666666666666
2026-11-29T10:01:03.0000000Z Cleaning up orphan processes
";
        let jobs = parse_jobs(log);
        assert_eq!(jobs.len(), 2);
        let c = jobs[0].checkout.as_ref().unwrap();
        assert_eq!(jobs[0].name.as_deref(), Some("test (ubuntu)"));
        assert_eq!(
            c.full.as_deref(),
            Some("1111111111111111111111111111111111111111")
        );
        assert_eq!(c.ref_name.as_deref(), Some("refs/remotes/pull/7/merge"));
        assert_eq!(
            c.base.as_deref(),
            Some("3333333333333333333333333333333333333333")
        );
        assert_eq!(jobs[0].status, JobStatus::Red);
        assert_eq!(jobs[1].status, JobStatus::Green);
        assert_eq!(jobs[1].checkout.as_ref().unwrap().full, None);
    }
}
