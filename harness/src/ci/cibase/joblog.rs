//! Reading a raw CI log into jobs, each with every checkout step it ran and that step's own evidence.
//!
//! Log formats read (one raw log may hold several jobs, one after the other):
//! - GitHub Actions raw logs: every line starts with an ISO-8601 timestamp; `##[group]` /
//!   `##[endgroup]` markers; a job starts with `Current runner version: '...'` and may
//!   name itself with `Complete job name: ...`; a step starts with `##[group]Run <uses or
//!   command>`. An actions/checkout step (v2 to v4) prints its `with:` inputs (`repository`,
//!   `ref`, `path`, `fetch-depth`), `Syncing repository: <owner/name>`, `Working directory
//!   is '<dir>'`, the fetch (`... --depth=1 origin +<sha>:refs/remotes/pull/<n>/merge`), the
//!   checkout (`git checkout --progress --force <ref>` or `-B <branch> <start>`), git's
//!   `HEAD is now at <abbrev> <subject>` (a merge ref's subject is `Merge <head> into
//!   <base>`) and the full sha after `git log -1 --format='%H'` (quoted up to v3.5,
//!   `--format=%H` unquoted since). A failed step prints `##[error]Process completed with
//!   exit code N.`
//! - GitLab CI job logs: a job starts with `Running with gitlab-runner ...`; the runner
//!   prints `Checking out <sha8> as detached HEAD (ref is <ref>)...`, where the ref is
//!   `refs/merge-requests/<iid>/merge` (merged results), `.../train` (merge train),
//!   `.../head` (a merge request pipeline) or a branch name (a branch pipeline);
//!   `Fetching changes with git depth set to N...`. It ends with `Job succeeded` or
//!   `ERROR: Job failed: ...`.
//!
//! Evidence never moves between steps: a sha printed in one step is that step's only.

use serde::Serialize;

use crate::ci::testlog::clean_line;

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

/// One checkout step of a job and what its own lines say.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CheckoutStep {
    /// 1-based position among the job's checkout steps.
    pub index: usize,
    /// 1-based line where the step starts.
    pub line: usize,
    /// The step's action or command (`actions/checkout@v4`), when the log names it.
    pub action: Option<String>,
    /// The repository checked out (`Syncing repository:` or the `repository` input).
    pub repository: Option<String>,
    /// The ref checked out (`refs/remotes/pull/12/merge`, `refs/remotes/origin/main`,
    /// `refs/merge-requests/7/merge`, a sha), from the checkout command or the fetch.
    pub ref_name: Option<String>,
    /// The `path` input: where in the workspace the step checked out (none: the root).
    pub path: Option<String>,
    /// `Working directory is '...'`.
    pub directory: Option<String>,
    /// The fetch's `--depth=N` (GitLab: `git depth set to N`); none when not printed.
    pub depth: Option<u32>,
    /// The sha the fetch named for the ref (`+<sha>:refs/remotes/pull/<n>/merge`,
    /// `+<sha>:refs/remotes/origin/<branch>`): the step checked out a commit fixed before it ran.
    pub fetched: Option<String>,
    /// The abbreviated sha of `HEAD is now at` / `Checking out`.
    pub short: Option<String>,
    /// The full sha printed by `git log -1` (or a full sha on the checkout line).
    pub full: Option<String>,
    /// The commit's subject from `HEAD is now at <abbrev> <subject>`.
    pub subject: Option<String>,
    /// 1-based line of the `HEAD is now at` / `Checking out` line.
    pub checkout_line: Option<usize>,
    /// 1-based line of the full sha.
    pub sha_line: Option<usize>,
}

impl CheckoutStep {
    /// The pull or merge request number when the step checked out a merge the CI made:
    /// GitHub's merge ref (`refs/pull/<n>/merge`, fetched as `refs/remotes/pull/<n>/merge`),
    /// GitLab's merged-results ref (`refs/merge-requests/<n>/merge`) or merge-train ref
    /// (`refs/merge-requests/<n>/train`). `None` for every other checkout, among them the
    /// request's own head (`refs/pull/<n>/head`, `refs/merge-requests/<n>/head`) and branches.
    pub fn merge_request(&self) -> Option<u64> {
        let r = self.ref_name.as_deref()?;
        if let Some(rest) = r
            .strip_prefix("refs/remotes/pull/")
            .or_else(|| r.strip_prefix("refs/pull/"))
        {
            return rest.strip_suffix("/merge")?.parse().ok();
        }
        let rest = r.strip_prefix("refs/merge-requests/")?;
        rest.strip_suffix("/merge")
            .or_else(|| rest.strip_suffix("/train"))?
            .parse()
            .ok()
    }

    /// A GitHub merge queue's branch (`gh-readonly-queue/<base>/pr-<n>-<sha>`, the
    /// `merge_group` event's ref, fetched as `refs/remotes/origin/gh-readonly-queue/...`):
    /// (base branch, pull request number).
    pub fn merge_queue(&self) -> Option<(String, u64)> {
        let r = self.ref_name.as_deref()?;
        let rest = &r[r.find("gh-readonly-queue/")? + "gh-readonly-queue/".len()..];
        let (base, last) = rest.rsplit_once('/')?;
        let n = last.strip_prefix("pr-")?.split('-').next()?.parse().ok()?;
        (!base.is_empty()).then(|| (base.to_string(), n))
    }

    /// Whether the step checked out a GitLab merge train's ref (`refs/merge-requests/<iid>/train`).
    pub fn is_train(&self) -> bool {
        self.ref_name
            .as_deref()
            .is_some_and(|r| r.starts_with("refs/merge-requests/") && r.ends_with("/train"))
    }

    /// Whether the commit the step checked out is one the CI made to test a request: a merge
    /// ref's ([`Self::merge_request`]) or a merge queue's ([`Self::merge_queue`]).
    pub fn ci_made(&self) -> bool {
        self.merge_request().is_some() || self.merge_queue().is_some()
    }

    /// The best full sha of the commit checked out: `git log -1`, else the fetched one.
    pub fn commit(&self) -> Option<&str> {
        self.full.as_deref().or(self.fetched.as_deref())
    }

    /// `Merge <head> into <base>` read from the subject: (head, base).
    pub fn subject_merge(&self) -> Option<(String, String)> {
        let m = self.subject.as_deref()?.strip_prefix("Merge ")?;
        let (head, base) = m.split_once(" into ")?;
        let (head, base) = (head.trim(), base.trim());
        (is_full_sha(head) && is_full_sha(base))
            .then(|| (head.to_ascii_lowercase(), base.to_ascii_lowercase()))
    }

    /// Where the step checked out, for messages: its `path` input, else the workspace root.
    pub fn place(&self) -> &str {
        self.path.as_deref().unwrap_or(".")
    }

    fn has_checkout(&self) -> bool {
        self.short.is_some() || self.full.is_some() || self.ref_name.is_some()
    }
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
    /// Every checkout step, in order.
    pub steps: Vec<CheckoutStep>,
    /// Its result.
    pub status: JobStatus,
}

impl Job {
    pub(crate) fn new(index: usize, start_line: usize) -> Self {
        Job {
            index,
            name: None,
            start_line,
            ci: CiKind::Unknown,
            steps: Vec::new(),
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

pub(crate) fn is_hex(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_hexdigit())
}

pub(crate) fn is_full_sha(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && is_hex(s)
}

/// Where the parser is within a job.
#[derive(Default)]
struct JobParser {
    jobs: Vec<Job>,
    current: Option<Job>,
    /// The current job began with a start marker.
    marked: bool,
    /// The checkout step being read (pushed to the job when the step ends).
    step: Option<CheckoutStep>,
    /// The name of the step running now (`##[group]Run NAME`).
    running: Option<String>,
    /// Inside an actions/checkout `with:` block.
    in_inputs: bool,
    /// The previous line ran `git log -1`: the next sha-only line is the step's full sha.
    want_log_sha: bool,
    cleanup_seen: bool,
}

impl JobParser {
    fn job(&mut self, line_no: usize) -> &mut Job {
        let next = self.jobs.len() + 1;
        self.current.get_or_insert_with(|| Job::new(next, line_no))
    }

    /// End the checkout step being read, keeping it if it checked something out.
    fn end_step(&mut self) {
        self.want_log_sha = false;
        self.in_inputs = false;
        if let Some(mut step) = self.step.take()
            && (step.has_checkout() || step.repository.is_some())
            && let Some(job) = self.current.as_mut()
        {
            step.index = job.steps.len() + 1;
            job.steps.push(step);
        }
    }

    /// The checkout step to record evidence in; a new one when none is open or when
    /// `starts_new` says the open one already holds this kind of evidence.
    fn step(
        &mut self,
        line_no: usize,
        starts_new: impl Fn(&CheckoutStep) -> bool,
    ) -> &mut CheckoutStep {
        if self.step.as_ref().is_some_and(starts_new) {
            let action = self.step.as_ref().and_then(|s| s.action.clone());
            self.end_step();
            self.step = Some(CheckoutStep {
                line: line_no,
                action,
                ..CheckoutStep::default()
            });
        }
        self.job(line_no);
        let running = self.running.clone();
        self.step.get_or_insert_with(|| CheckoutStep {
            line: line_no,
            action: running,
            ..CheckoutStep::default()
        })
    }

    fn close(&mut self) {
        self.end_step();
        if let Some(mut job) = self.current.take() {
            if job.status == JobStatus::Unknown && job.ci == CiKind::Github && self.cleanup_seen {
                job.status = JobStatus::Green;
            }
            self.jobs.push(job);
        }
        self.marked = false;
        self.running = None;
        self.cleanup_seen = false;
    }

    fn line(&mut self, line_no: usize, raw: &str) {
        let cleaned = clean_line(raw);
        let text = cleaned.trim_end();
        let mut t = text.trim_start();
        let group = t.starts_with("##[group]");
        let endgroup = t.starts_with("##[endgroup]");
        for marker in ["##[group]", "##[endgroup]", "##[section]"] {
            if let Some(rest) = t.strip_prefix(marker) {
                t = rest.trim();
            }
        }
        if self.job_marker(line_no, t) {
            return;
        }
        if endgroup {
            self.in_inputs = false;
            return;
        }
        if group && let Some(name) = t.strip_prefix("Run ") {
            self.step_start(line_no, name.trim());
            return;
        }
        if self.in_inputs {
            self.input(t);
            return;
        }
        if self.want_log_sha && !t.is_empty() {
            self.want_log_sha = false;
            let sha = t.trim_matches(|c| c == '\'' || c == '"');
            if is_full_sha(sha) {
                let step = self.step(line_no, |s| s.full.is_some());
                step.full = Some(sha.to_ascii_lowercase());
                step.sha_line = Some(line_no);
                return;
            }
        }
        if !self.evidence(line_no, t) {
            self.result(line_no, t);
        }
    }

    /// A job start marker or the job's name; true when the line was one.
    fn job_marker(&mut self, line_no: usize, t: &str) -> bool {
        let start = if t.starts_with("Current runner version:") {
            Some(CiKind::Github)
        } else if t.starts_with("Running with gitlab-runner") {
            Some(CiKind::Gitlab)
        } else {
            None
        };
        if let Some(ci) = start {
            self.end_step();
            if self.marked || self.current.as_ref().is_some_and(|j| !j.steps.is_empty()) {
                self.close();
            }
            self.marked = true;
            self.job(line_no).ci = ci;
            return true;
        }
        if let Some(name) = t.strip_prefix("Complete job name:") {
            self.job(line_no).name = Some(name.trim().to_string());
            return true;
        }
        false
    }

    /// `##[group]Run NAME`: a new step; an actions/checkout step opens a checkout step.
    fn step_start(&mut self, line_no: usize, name: &str) {
        self.end_step();
        self.running = Some(name.to_string());
        if name.starts_with("actions/checkout") {
            self.job(line_no);
            self.step = Some(CheckoutStep {
                line: line_no,
                action: Some(name.to_string()),
                ..CheckoutStep::default()
            });
            self.in_inputs = true;
        }
    }

    /// One `key: value` line of an actions/checkout `with:` block.
    fn input(&mut self, t: &str) {
        let Some(step) = self.step.as_mut() else {
            return;
        };
        let Some((key, value)) = t.split_once(':') else {
            return;
        };
        let value = value.trim();
        match key.trim() {
            "repository" => step.repository = Some(value.to_string()),
            "path" if !value.is_empty() => step.path = Some(value.to_string()),
            "fetch-depth" => step.depth = value.parse().ok().filter(|d| *d > 0),
            _ => {}
        }
    }

    /// A checkout step's evidence line; true when the line was one.
    fn evidence(&mut self, line_no: usize, t: &str) -> bool {
        if let Some(repo) = t.strip_prefix("Syncing repository:") {
            let step = self.step(line_no, |s| s.has_checkout());
            step.repository = Some(repo.trim().to_string());
            return true;
        }
        if let Some(dir) = t.strip_prefix("Working directory is ") {
            if let Some(step) = self.step.as_mut() {
                step.directory = Some(dir.trim().trim_matches('\'').to_string());
            }
            return true;
        }
        if t.contains("git log -1") {
            self.want_log_sha = self.step.is_some();
            return true;
        }
        if t.contains(" fetch ") && (t.contains("git ") || t.starts_with("[command]")) {
            self.fetch(line_no, t);
            return true;
        }
        if t.contains("git checkout ") && t.starts_with("[command]") {
            self.checkout_command(line_no, t);
            return true;
        }
        if let Some(rest) = t.strip_prefix("HEAD is now at ") {
            return self.head_is_now_at(line_no, rest);
        }
        if let Some(rest) = t.strip_prefix("Checking out ")
            && let Some((sha, rest)) = rest.split_once(" as ")
            && is_hex(sha)
        {
            self.gitlab_checkout(line_no, sha, rest);
            return true;
        }
        if let Some(rest) = t.strip_prefix("Fetching changes with git depth set to ") {
            let depth = rest.trim_end_matches('.').trim().parse().ok();
            self.step(line_no, |s| s.has_checkout()).depth = depth;
            return true;
        }
        false
    }

    /// A fetch command: its depth and the merge ref's sha or name.
    fn fetch(&mut self, line_no: usize, t: &str) {
        let step = self.step(line_no, |s| s.full.is_some());
        for tok in t.split_whitespace() {
            let tok = tok.trim_matches(|c| c == '\'' || c == '"');
            if let Some(d) = tok.strip_prefix("--depth=") {
                step.depth = d.parse().ok();
            }
            if tok == "--unshallow" {
                step.depth = None;
            }
            let Some((src, dst)) = tok.strip_prefix('+').and_then(|x| x.split_once(':')) else {
                continue;
            };
            // A commit fetched by sha (a pull_request event's merge, a push event's commit).
            if is_full_sha(src) {
                step.fetched = Some(src.to_ascii_lowercase());
            }
            if dst.contains("/pull/")
                || dst.contains("/merge-requests/")
                || dst.contains("gh-readonly-queue/")
            {
                step.ref_name.get_or_insert_with(|| dst.to_string());
            }
        }
    }

    /// `git checkout --progress --force REF` or `... -B BRANCH START`.
    fn checkout_command(&mut self, line_no: usize, t: &str) {
        let args: Vec<&str> = t
            .split_once("checkout ")
            .map(|(_, a)| {
                a.split_whitespace()
                    .filter(|a| !a.starts_with("--"))
                    .collect()
            })
            .unwrap_or_default();
        let target = match args.as_slice() {
            ["-B", _, start, ..] => start,
            [r, ..] => r,
            [] => return,
        };
        let step = self.step(line_no, |s| s.short.is_some() || s.full.is_some());
        step.ref_name = Some(target.to_string());
    }

    fn head_is_now_at(&mut self, line_no: usize, rest: &str) -> bool {
        let (abbrev, subject) = rest.split_once(' ').unwrap_or((rest, ""));
        if !is_hex(abbrev) {
            return false;
        }
        let step = self.step(line_no, |s| s.short.is_some() || s.full.is_some());
        step.short = Some(abbrev.to_ascii_lowercase());
        step.subject = (!subject.is_empty()).then(|| subject.to_string());
        step.checkout_line = Some(line_no);
        let job = self.job(line_no);
        if job.ci == CiKind::Unknown {
            job.ci = CiKind::Github;
        }
        true
    }

    fn gitlab_checkout(&mut self, line_no: usize, sha: &str, rest: &str) {
        let ref_name = rest
            .split_once("(ref is ")
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(r, _)| r.trim().to_string())
            .or_else(|| {
                let r = rest.trim_end_matches("...").trim();
                (!r.starts_with("detached")).then(|| r.to_string())
            });
        let step = self.step(line_no, |s| s.short.is_some() || s.full.is_some());
        let sha = sha.to_ascii_lowercase();
        if is_full_sha(&sha) {
            step.full = Some(sha);
            step.sha_line = Some(line_no);
        } else {
            step.short = Some(sha);
        }
        step.ref_name = ref_name;
        step.checkout_line = Some(line_no);
        let job = self.job(line_no);
        if job.ci == CiKind::Unknown {
            job.ci = CiKind::Gitlab;
        }
    }

    /// The job's result lines.
    fn result(&mut self, line_no: usize, t: &str) {
        if t.starts_with("##[error]Process completed with exit code")
            || t.starts_with("ERROR: Job failed")
        {
            self.job(line_no).status = JobStatus::Red;
        } else if t == "Job succeeded" {
            let job = self.job(line_no);
            if job.status == JobStatus::Unknown {
                job.status = JobStatus::Green;
            }
        } else if t.starts_with("Cleaning up orphan processes") {
            self.cleanup_seen = true;
        }
    }
}

/// Split a raw CI log into jobs and read each one's checkout steps and result.
pub fn parse_jobs(text: &str) -> Vec<Job> {
    let mut p = JobParser::default();
    for (i, raw) in text.lines().enumerate() {
        p.line(i + 1, raw);
    }
    p.close();
    // Content before the first start marker with no checkout is runner preamble, not a job.
    p.jobs
        .retain(|j| !j.steps.is_empty() || j.ci != CiKind::Unknown);
    for (i, j) in p.jobs.iter_mut().enumerate() {
        j.index = i + 1;
    }
    p.jobs
}
