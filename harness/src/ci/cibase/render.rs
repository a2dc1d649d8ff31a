//! The base-check report as a plain-text table and as Markdown for a pull-request comment.

use std::fmt::Write as _;

use super::history::Answer;
use super::joblog::{CheckoutStep, CiKind, JobStatus};
use super::report::{BaseReport, CommitAnswer, JobReport, short};
use super::tested::TestedKind;
use crate::ci::audit::table;

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

fn opt(s: &Option<String>) -> &str {
    s.as_deref().unwrap_or("?")
}

/// One row per checkout step: step, line, repository, ref, path, depth, short, full, subject.
fn step_row(s: &CheckoutStep, tested: Option<usize>) -> [String; 9] {
    [
        if tested == Some(s.index) {
            format!("{} (tested)", s.index)
        } else {
            s.index.to_string()
        },
        s.line.to_string(),
        opt(&s.repository).to_string(),
        opt(&s.ref_name).to_string(),
        s.place().to_string(),
        s.depth.map_or("full".to_string(), |d| d.to_string()),
        s.short.clone().unwrap_or_else(|| "-".to_string()),
        s.commit().unwrap_or("-").to_string(),
        s.subject.clone().unwrap_or_else(|| "-".to_string()),
    ]
}

const STEP_HEADERS: [&str; 9] = [
    "STEP",
    "LINE",
    "REPOSITORY",
    "REF",
    "PATH",
    "DEPTH",
    "SHORT",
    "SHA",
    "SUBJECT",
];

fn reason_text(a: &CommitAnswer) -> String {
    match &a.in_base {
        Some(b) if b.answer != Answer::Yes && b.reason != a.in_tested.reason => {
            format!("base: {}; merge: {}", b.reason, a.in_tested.reason)
        }
        Some(b) => b.reason.clone(),
        None => a.in_tested.reason.clone(),
    }
}

/// The tested commit and its roles, in one line.
fn tested_line(j: &JobReport, code: fn(&str) -> String) -> String {
    let s = |x: &Option<String>| code(x.as_deref().map_or("?", short));
    match j.kind {
        Some(TestedKind::CiMerge) => format!(
            "tested merge {}, made by the CI{}: base {}, head {}",
            s(&j.tested),
            j.tested_ref
                .as_deref()
                .map_or(String::new(), |r| format!(" ({})", code(r))),
            s(&j.base),
            s(&j.head)
        ),
        Some(TestedKind::Queue) => format!(
            "tested queue entry {}, made by the {}{}: base {}, head {}{}",
            s(&j.tested),
            if j.job.ci == CiKind::Gitlab {
                "merge train"
            } else {
                "merge queue"
            },
            j.tested_ref
                .as_deref()
                .map_or(String::new(), |r| format!(" ({})", code(r))),
            s(&j.base),
            s(&j.head),
            j.queue.as_ref().map_or(String::new(), |q| {
                let ahead: Vec<String> = q
                    .ahead
                    .iter()
                    .map(|e| match e.request {
                        Some(n) => format!("#{n} {}", code(short(&e.commit))),
                        None => code(short(&e.commit)),
                    })
                    .collect();
                format!(
                    "; queued ahead: {}",
                    if ahead.is_empty() {
                        "none".to_string()
                    } else {
                        ahead.join(", ")
                    }
                )
            })
        ),
        Some(TestedKind::Commit) => format!(
            "tested commit {}, checked out {}: not a merge the CI made, the job tested this commit itself",
            s(&j.tested),
            j.tested_ref.as_deref().map_or(
                "by a ref the log does not name".to_string(),
                |r| format!("from {}", code(r))
            )
        ),
        None => format!("tested commit {}", s(&j.tested)),
    }
}

fn plain(s: &str) -> String {
    s.to_string()
}

fn backticked(s: &str) -> String {
    format!("`{s}`")
}

fn ci_merge(j: &JobReport) -> bool {
    j.kind.is_some_and(TestedKind::has_roles)
}

/// What brought each answer into a queue entry (empty outside a queue).
fn came_with_word(a: &CommitAnswer) -> String {
    a.came_with.clone().unwrap_or_else(|| "-".to_string())
}

fn in_base_word(a: &CommitAnswer) -> &'static str {
    a.in_base.as_ref().map_or("-", |b| answer_word(b.answer))
}

fn ci_word(ci: CiKind) -> &'static str {
    match ci {
        CiKind::Github => "GitHub Actions",
        CiKind::Gitlab => "GitLab CI",
        CiKind::Unknown => "unknown CI",
    }
}

fn indented<const M: usize>(out: &mut String, headers: &[&str; M], rows: &[[String; M]]) {
    let mut t = String::new();
    table(&mut t, headers, rows);
    for l in t.lines() {
        let _ = writeln!(out, "  {l}");
    }
}

const N: usize = 9;

fn job_table(out: &mut String, j: &JobReport) {
    let _ = writeln!(
        out,
        "{}: {}, {}, {} checkout step(s)",
        j.job.label(),
        ci_word(j.job.ci),
        status_word(j.job.status),
        j.job.steps.len()
    );
    if !j.job.steps.is_empty() {
        let rows: Vec<[String; N]> = j
            .job
            .steps
            .iter()
            .map(|s| step_row(s, j.tested_step))
            .collect();
        indented(out, &STEP_HEADERS, &rows);
    }
    let _ = writeln!(out, "  {}", tested_line(j, plain));
    for n in &j.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if let Some(h) = &j.pr_head {
        let _ = writeln!(out, "  pr head {}: {}", h.rev, h.reason);
    }
    if !j.answers.is_empty() && j.kind == Some(TestedKind::Queue) {
        let rows: Vec<[String; 7]> = j
            .answers
            .iter()
            .map(|a| {
                [
                    a.label.clone(),
                    a.rev.clone(),
                    a.commit.as_deref().map_or("-", short).to_string(),
                    in_base_word(a).to_string(),
                    answer_word(a.in_tested.answer).to_string(),
                    came_with_word(a),
                    reason_text(a),
                ]
            })
            .collect();
        indented(
            out,
            &[
                "LABEL",
                "REV",
                "COMMIT",
                "IN BASE",
                "IN TESTED",
                "CAME WITH",
                "REASON",
            ],
            &rows,
        );
    } else if !j.answers.is_empty() && ci_merge(j) {
        let rows: Vec<[String; 6]> = j
            .answers
            .iter()
            .map(|a| {
                [
                    a.label.clone(),
                    a.rev.clone(),
                    a.commit.as_deref().map_or("-", short).to_string(),
                    in_base_word(a).to_string(),
                    answer_word(a.in_tested.answer).to_string(),
                    reason_text(a),
                ]
            })
            .collect();
        indented(
            out,
            &["LABEL", "REV", "COMMIT", "IN BASE", "IN MERGE", "REASON"],
            &rows,
        );
    } else if !j.answers.is_empty() {
        let rows: Vec<[String; 5]> = j
            .answers
            .iter()
            .map(|a| {
                [
                    a.label.clone(),
                    a.rev.clone(),
                    a.commit.as_deref().map_or("-", short).to_string(),
                    answer_word(a.in_tested.answer).to_string(),
                    reason_text(a),
                ]
            })
            .collect();
        indented(
            out,
            &["LABEL", "REV", "COMMIT", "IN TESTED COMMIT", "REASON"],
            &rows,
        );
    }
    for f in &j.follows {
        let _ = writeln!(out, "  => {f}");
    }
    out.push('\n');
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

fn job_markdown(out: &mut String, j: &JobReport) {
    let _ = writeln!(
        out,
        "\n### {} ({})\n\n{}\n",
        j.job.label(),
        status_word(j.job.status),
        md(&tested_line(j, backticked))
    );
    if !j.job.steps.is_empty() {
        let _ = writeln!(
            out,
            "| Step | Line | Repository | Ref | Path | Depth | Short | Sha | Subject |"
        );
        let _ = writeln!(
            out,
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
        );
        for s in &j.job.steps {
            let cells: Vec<String> = step_row(s, j.tested_step)
                .iter()
                .enumerate()
                .map(|(i, c)| {
                    if (3..8).contains(&i) && c != "-" {
                        format!("`{c}`")
                    } else {
                        md(c)
                    }
                })
                .collect();
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
        out.push('\n');
    }
    for n in &j.notes {
        let _ = writeln!(out, "- note: {}", md(n));
    }
    if let Some(h) = &j.pr_head {
        let _ = writeln!(out, "- pull request head `{}`: {}", h.rev, md(&h.reason));
    }
    if !j.answers.is_empty() && j.kind == Some(TestedKind::Queue) {
        let _ = writeln!(
            out,
            "\n| Commit | Rev | In base | In tested | Came with | Reason |"
        );
        let _ = writeln!(out, "| --- | --- | --- | --- | --- | --- |");
        for a in &j.answers {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} | {} |",
                md(&a.label),
                a.rev,
                in_base_word(a),
                answer_word(a.in_tested.answer),
                md(&came_with_word(a)),
                md(&reason_text(a))
            );
        }
    } else if !j.answers.is_empty() && ci_merge(j) {
        let _ = writeln!(out, "\n| Commit | Rev | In base | In merge | Reason |");
        let _ = writeln!(out, "| --- | --- | --- | --- | --- |");
        for a in &j.answers {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} | {} |",
                md(&a.label),
                a.rev,
                in_base_word(a),
                answer_word(a.in_tested.answer),
                md(&reason_text(a))
            );
        }
    } else if !j.answers.is_empty() {
        let _ = writeln!(out, "\n| Commit | Rev | In tested commit | Reason |");
        let _ = writeln!(out, "| --- | --- | --- | --- |");
        for a in &j.answers {
            let _ = writeln!(
                out,
                "| {} | `{}` | {} | {} |",
                md(&a.label),
                a.rev,
                answer_word(a.in_tested.answer),
                md(&reason_text(a))
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

impl BaseReport {
    /// Render as a plain-text table: per job, its checkout steps, the tested commit (with a
    /// base and a head only for a merge the CI made), the answers.
    pub fn to_table(&self) -> String {
        let mut out = String::new();
        for j in &self.jobs {
            job_table(&mut out, j);
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
            job_markdown(&mut out, j);
        }
        out
    }
}
