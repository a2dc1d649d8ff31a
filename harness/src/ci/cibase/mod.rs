//! Base check: from a raw CI job log, list every checkout step of each job, find the commit the job tested and how it came to be, and answer whether named commits are in it.
//!
//! The log is read by [`joblog`] (GitHub Actions and GitLab CI formats), the tested commit
//! chosen and checked by [`tested`], ancestry answered by [`history`], the answers and
//! what follows made by [`report`] and rendered by [`render`].
//!
//! A job tested a merge with a base and a head only when the CI made that merge (GitHub's
//! `refs/pull/<n>/merge`, GitLab's merged-results `refs/merge-requests/<iid>/merge`) or a
//! merge queue did (GitHub's `merge_group` branch `gh-readonly-queue/<base>/pr-<n>-<sha>`,
//! GitLab's merge-train `.../train`: the base, the requests queued ahead and this one,
//! taken apart by [`queue`]); a job that checked out the request's head ref or a branch
//! tested that commit itself, and is asked only whether a commit is in it.
//!
//! Answers are yes, no or unknown. Unknown is never folded into no: a shallow history
//! whose walk stops at a shallow boundary (with the fetch to run), a missing object (a
//! revision found neither in the repository nor in the log, or one the log names that was
//! not fetched), an abbreviation shared by several objects, and evidence that contradicts
//! itself (two checkouts of the merge ref at different commits, a full sha that does not
//! start with the checkout's abbreviation, a subject whose parents are not the commit's)
//! are each unknown, with the reason.

pub mod history;
pub mod joblog;
pub mod queue;
mod render;
pub mod report;
mod tested;

use std::path::{Path, PathBuf};

use git2::Repository;

use crate::ci::audit::OutputFormat;

pub use history::{Answer, History, Reasoned, Shallow, contains, resolve};
pub use joblog::{CheckoutStep, CiKind, Job, JobStatus, parse_jobs};
pub use report::{
    BASE_SCHEMA, BaseReport, CommitAnswer, HeadCheck, HeadState, JobReport, Questions, check,
};
pub use tested::TestedKind;

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
    /// Use this merge commit instead of the one in the log (taken as a merge the CI made:
    /// first parent the base, second the head).
    #[arg(long, value_name = "SHA")]
    pub merge: Option<String>,
    /// The pull request's current head: say whether the job tested it or an older head
    /// (commits pushed or the branch force-pushed after the job's merge was made).
    #[arg(long, value_name = "SHA")]
    pub pr_head: Option<String>,
    /// A merge queue's or train's base branch (a branch name or any revision), instead of the
    /// one the queue's ref (GitHub) or the train commit's message (GitLab) names.
    #[arg(long, value_name = "BRANCH")]
    pub base_branch: Option<String>,
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
    let questions = Questions {
        commits,
        merge: args.merge.clone(),
        pr_head: args.pr_head.clone(),
        base_branch: args.base_branch.clone(),
    };
    Ok(check(
        &repo,
        &jobs,
        &questions,
        &args.log.display().to_string(),
    ))
}

/// `harness base-check`: print the report; returns the exit code (0 or 2).
///
/// # Errors
/// Any [`BaseError`]: the caller exits with code 2.
pub fn run(args: &BaseCheckArgs) -> anyhow::Result<crate::system::exit::ExitCode> {
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
2026-11-29T10:00:01.0000000Z [command]/usr/bin/git -c protocol.version=2 fetch --no-tags --prune --depth=1 origin +1111111111111111111111111111111111111111:refs/remotes/pull/7/merge
2026-11-29T10:00:02.0000000Z HEAD is now at 1111111 Merge 2222222222222222222222222222222222222222 into 3333333333333333333333333333333333333333
2026-11-29T10:00:03.0000000Z ##[endgroup]
2026-11-29T10:00:09.0000000Z ##[error]Process completed with exit code 101.
2026-11-29T10:01:00.0000001Z Current runner version: '2.321.0'
2026-11-29T10:01:02.0000000Z HEAD is now at 4444444 Merge 5555555555555555555555555555555555555555 into 6666666666666666666666666666666666666666
2026-11-29T10:01:03.0000000Z Cleaning up orphan processes
";
        let jobs = parse_jobs(log);
        assert_eq!(jobs.len(), 2);
        let c = &jobs[0].steps[0];
        assert_eq!(jobs[0].name.as_deref(), Some("test (ubuntu)"));
        assert_eq!(c.commit(), Some("1111111111111111111111111111111111111111"));
        assert_eq!(c.ref_name.as_deref(), Some("refs/remotes/pull/7/merge"));
        assert_eq!(c.merge_request(), Some(7));
        assert_eq!(c.depth, Some(1));
        assert_eq!(
            c.subject_merge().map(|(_, b)| b).as_deref(),
            Some("3333333333333333333333333333333333333333")
        );
        assert_eq!(jobs[0].status, JobStatus::Red);
        assert_eq!(jobs[1].status, JobStatus::Green);
        assert_eq!(jobs[1].steps.len(), 1);
        assert_eq!(jobs[1].steps[0].commit(), None);
    }
}
