//! A CI run's job list (GitHub's or GitLab's jobs API), read for the jobs that did not run: a skipped required job reports success on GitHub.
//!
//! Formats read:
//! - GitHub REST "list jobs for a workflow run" (`GET /repos/{owner}/{repo}/actions/runs/{run_id}/jobs`,
//!   as `gh api` prints it): an object with `jobs`, each with `name`, `status` and
//!   `conclusion` (`success`, `failure`, `cancelled`, `skipped`, `neutral`, `timed_out`,
//!   `action_required`, or null while it runs). A job whose `if:` was false, or whose
//!   `needs` failed, concludes `skipped`, and a required status check reported by a
//!   skipped job counts as passing.
//! - GitLab "list pipeline jobs" (`GET /projects/:id/pipelines/:pipeline_id/jobs`): an
//!   array of jobs, each with `name` and `status` (`success`, `failed`, `canceled`,
//!   `skipped`, `manual`, `created`, `pending`, `running`, ...).
//!
//! A job did not run when it concluded `skipped` or `cancelled`/`canceled` before it ran,
//! or (GitLab) it waits as `manual`, `created` or `pending`.

use std::path::{Path, PathBuf};

/// One job of the run and whether it ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CiJob {
    /// The job's name as the CI shows it (`test (ubuntu-latest)`).
    pub name: String,
    /// Its conclusion (GitHub) or status (GitLab), as given.
    pub state: String,
    /// Whether the job's steps never ran.
    pub did_not_run: bool,
}

/// Errors reading a job list.
#[derive(Debug, thiserror::Error)]
pub enum JobsError {
    /// The file could not be read.
    #[error("cannot read job list {path}: {source}")]
    Read {
        /// Its path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a job list of either API.
    #[error("job list {path}: {message}")]
    Format {
        /// Its path.
        path: PathBuf,
        /// What is wrong (the entry and field).
        message: String,
    },
}

fn did_not_run(state: &str) -> bool {
    matches!(
        state,
        "skipped" | "cancelled" | "canceled" | "manual" | "created" | "pending"
    )
}

/// Read a job list (see the module docs).
///
/// # Errors
/// [`JobsError`] for an unreadable file, or one that is neither format (naming the entry).
pub fn load(path: &Path) -> Result<Vec<CiJob>, JobsError> {
    let text = std::fs::read_to_string(path).map_err(|source| JobsError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    parse(&text).map_err(|message| JobsError::Format {
        path: path.to_path_buf(),
        message,
    })
}

/// [`load`] on text.
///
/// # Errors
/// A message naming the entry and field at fault.
pub fn parse(text: &str) -> Result<Vec<CiJob>, String> {
    let v: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let (jobs, github) = match &v {
        serde_json::Value::Object(o) => (
            o.get("jobs").and_then(|j| j.as_array()).ok_or(
                "an object without a `jobs` array (GitHub's list jobs for a workflow run)",
            )?,
            true,
        ),
        serde_json::Value::Array(a) => (a, false),
        _ => return Err("neither GitHub's `{\"jobs\": [...]}` nor GitLab's job array".into()),
    };
    jobs.iter()
        .enumerate()
        .map(|(i, j)| {
            let name = j
                .get("name")
                .and_then(|n| n.as_str())
                .ok_or_else(|| format!("job {}: no `name`", i + 1))?;
            let state = if github {
                match j.get("conclusion").and_then(|c| c.as_str()) {
                    Some(c) => c.to_string(),
                    None => j
                        .get("status")
                        .and_then(|s| s.as_str())
                        .ok_or_else(|| {
                            format!("job {} ({name}): no `conclusion` or `status`", i + 1)
                        })?
                        .to_string(),
                }
            } else {
                j.get("status")
                    .and_then(|s| s.as_str())
                    .ok_or_else(|| format!("job {} ({name}): no `status`", i + 1))?
                    .to_string()
            };
            Ok(CiJob {
                name: name.to_string(),
                did_not_run: did_not_run(&state),
                state,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn github_conclusions_and_gitlab_statuses() {
        let gh = parse(
            r#"{"total_count": 2, "jobs": [
                {"name": "test", "status": "completed", "conclusion": "success"},
                {"name": "nextest", "status": "completed", "conclusion": "skipped"}]}"#,
        )
        .unwrap();
        assert_eq!(
            gh.iter().map(|j| j.did_not_run).collect::<Vec<_>>(),
            [false, true]
        );
        let gl = parse(
            r#"[{"name": "test", "status": "manual"}, {"name": "lint", "status": "failed"}]"#,
        )
        .unwrap();
        assert_eq!(
            gl.iter()
                .map(|j| (j.state.as_str(), j.did_not_run))
                .collect::<Vec<_>>(),
            [("manual", true), ("failed", false)]
        );
        assert_eq!(
            parse(r#"{"jobs": [{"status": "completed"}]}"#).unwrap_err(),
            "job 1: no `name`"
        );
    }
}
