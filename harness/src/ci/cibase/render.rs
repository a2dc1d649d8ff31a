//! The base-check report as a plain-text table and as Markdown for a pull-request comment.

use std::fmt::Write as _;

use super::history::Answer;
use super::joblog::{CheckoutStep, CiKind, JobStatus};
use super::report::{BaseReport, CommitAnswer, JobReport, short};
use crate::audit::table;

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
    if a.in_base.answer == Answer::Yes || a.in_base.reason == a.in_merge.reason {
        a.in_base.reason.clone()
    } else {
        format!("base: {}; merge: {}", a.in_base.reason, a.in_merge.reason)
    }
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
    let _ = writeln!(
        out,
        "  tested merge {}  base {}  head {}",
        j.merge.as_deref().map_or("?", short),
        j.base.as_deref().map_or("?", short),
        j.head.as_deref().map_or("?", short)
    );
    for n in &j.notes {
        let _ = writeln!(out, "  note: {n}");
    }
    if let Some(h) = &j.pr_head {
        let _ = writeln!(out, "  pr head {}: {}", h.rev, h.reason);
    }
    if !j.answers.is_empty() {
        let rows: Vec<[String; 6]> = j
            .answers
            .iter()
            .map(|a| {
                [
                    a.label.clone(),
                    a.rev.clone(),
                    a.commit.as_deref().map_or("-", short).to_string(),
                    answer_word(a.in_base.answer).to_string(),
                    answer_word(a.in_merge.answer).to_string(),
                    reason_text(a),
                ]
            })
            .collect();
        indented(
            out,
            &["LABEL", "REV", "COMMIT", "IN BASE", "IN MERGE", "REASON"],
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
        "\n### {} ({})\n\ntested merge `{}`, base `{}`, head `{}`\n",
        j.job.label(),
        status_word(j.job.status),
        j.merge.as_deref().map_or("?", short),
        j.base.as_deref().map_or("?", short),
        j.head.as_deref().map_or("?", short)
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
    /// Render as a plain-text table: per job, its checkout steps, the tested merge, the answers.
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
