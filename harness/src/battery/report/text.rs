//! The battery report as text: `battery.md` and the terminal table.
//!
//! The Markdown pull-request comment and the table each end with the headline.

use crate::battery::report::schema::{BatteryReport, MutationReport, Status};
use crate::battery::report::verdict::{Expectation, Verdict};
use crate::battery::select::catalog::Role;
use crate::system::exit::ExitCode;

fn headline(r: &BatteryReport) -> String {
    match (&r.status, &r.refusal) {
        (Status::Refused, Some(f)) => format!("REFUSED {}: {}", f.kind, f.detail),
        (Status::Interrupted, _) => "INTERRUPTED (tree restored)".to_string(),
        _ => {
            let s = &r.summary;
            // The verdicts without a kill and without a survivor are named when they occur.
            let mut rare = String::new();
            if s.crashed > 0 {
                rare.push_str(&format!(", {} crashed", s.crashed));
            }
            if s.tests_missing > 0 {
                rare.push_str(&format!(", {} tests missing", s.tests_missing));
            }
            if s.no_coverage > 0 {
                rare.push_str(&format!(", {} no coverage", s.no_coverage));
            }
            if s.not_compiled > 0 {
                rare.push_str(&format!(", {} not compiled", s.not_compiled));
            }
            format!(
                "{} mutations: {} killed, {} survived, {} unviable, {} timeout{rare}; {} met, {} unmet; {}",
                s.mutations,
                s.killed,
                s.survived,
                s.unviable,
                s.timeout,
                s.met,
                s.unmet,
                match (&r.unfalsified, &r.shard) {
                    (Some(u), _) => format!("{} unfalsified", u.len()),
                    (None, Some(sh)) => format!(
                        "shard {}/{}: unfalsified computed by `harness merge`",
                        sh.k, sh.n
                    ),
                    (None, None) if r.since.is_some() && r.only.is_none() => {
                        "unfalsified not computed (--since)".to_string()
                    }
                    (None, None) => "unfalsified not computed (--only)".to_string(),
                }
            ) + &diff_scope_headline(r)
        }
    }
}

/// What `--since` adds to the headline: the UNGUARDED-IN-DIFF count and the generated
/// mutants' counts (empty without `--since`).
fn diff_scope_headline(r: &BatteryReport) -> String {
    let mut s = String::new();
    if let Some(u) = &r.unguarded_in_diff {
        s.push_str(&format!(
            "; {} changed function(s) unguarded in diff{}",
            u.len(),
            if r.require_guarded {
                " (--require-guarded)"
            } else {
                ""
            }
        ));
    }
    if let Some(g) = &r.generated_in_diff {
        match &g.refusal {
            Some(f) => s.push_str(&format!(
                "; generated mutants in diff: battery refused {}",
                f.kind
            )),
            None => s.push_str(&format!(
                "; {} generated mutant(s) in diff: {} caught, {} missed, {} unviable, {} timeout",
                g.listed, g.caught, g.missed, g.unviable, g.timeout
            )),
        }
    }
    s
}

/// `file:a-b,c` for a function's changed lines.
fn lines_text(ranges: &[(usize, usize)]) -> String {
    ranges
        .iter()
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The Markdown pull-request comment: headline, per-mutation table, unmet reasons,
/// UNFALSIFIED tests, the `--since` sections and the kill matrix.
pub fn markdown(r: &BatteryReport) -> String {
    let mut s = format!("## Mutation battery `{}`\n\n", r.catalog.name);
    let mark = if r.exit_code == ExitCode::AllMet {
        "PASS"
    } else {
        "FAIL"
    };
    s.push_str(&format!(
        "**{mark}** (exit {}): {}\n\n",
        r.exit_code,
        md_escape(&headline(r))
    ));
    if let Some(c) = &r.mode {
        s.push_str(&format!(
            "Mode: {} ({})\n\n",
            c.mode.word(),
            md_escape(&c.reason)
        ));
    }
    md_mutations(&mut s, r);
    md_unmet(&mut s, r);
    md_timeouts(&mut s, r);
    md_unfalsified(&mut s, r);
    md_skipped(&mut s, r);
    md_unguarded(&mut s, r);
    md_generated(&mut s, r);
    md_kill_matrix(&mut s, r);
    s
}

/// The tests of the targets the catalog leaves out, with their reasons (none when none is).
fn md_skipped(s: &mut String, r: &BatteryReport) {
    if r.catalog.skipped.is_empty() {
        return;
    }
    s.push_str("### Tests the catalog skips\n\n");
    for k in &r.catalog.skipped {
        s.push_str(&format!("- `{}`: {}\n", k.test, md_escape(&k.reason)));
    }
    s.push('\n');
}

/// `names` in backticks, comma-separated; `-` when there is none.
fn code_list<S: AsRef<str>>(names: &[S]) -> String {
    if names.is_empty() {
        return "-".to_string();
    }
    names
        .iter()
        .map(|k| format!("`{}`", k.as_ref()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The per-mutation table (none when no mutation ran).
fn md_mutations(s: &mut String, r: &BatteryReport) {
    if r.mutations.is_empty() {
        return;
    }
    s.push_str("| mutation | role | verdict | expectation | killed by |\n");
    s.push_str("|---|---|---|---|---|\n");
    for m in &r.mutations {
        let killers: Vec<&str> = m.failed_tests.iter().map(|f| f.name.as_str()).collect();
        s.push_str(&format!(
            "| `{}` | {} | {} | {} | {} |\n",
            m.id,
            m.role,
            m.verdict,
            m.expectation,
            code_list(&killers)
        ));
    }
    s.push('\n');
}

/// The unmet expectations with their reasons (and an UNVIABLE one's first compiler line).
fn md_unmet(s: &mut String, r: &BatteryReport) {
    let unmet: Vec<&MutationReport> = r
        .mutations
        .iter()
        .filter(|m| m.expectation == Expectation::Unmet)
        .collect();
    if unmet.is_empty() {
        return;
    }
    s.push_str("### Unmet expectations\n\n");
    for m in unmet {
        s.push_str(&format!(
            "- `{}` ({}): {}\n",
            m.id,
            m.verdict,
            md_escape(&m.reasons.join("; "))
        ));
        if let Some(e) = &m.compiler_error {
            let first = e.lines().next().unwrap_or("");
            s.push_str(&format!("  - compiler: `{}`\n", first.replace('`', "'")));
        }
    }
    s.push('\n');
}

/// The mutants that ran under a test timeout of their own, each with its rule (none when
/// no mutant did: every one ran under the battery's timeout).
fn md_timeouts(s: &mut String, r: &BatteryReport) {
    let own: Vec<(
        &MutationReport,
        f64,
        &crate::battery::report::schema::TimeoutRule,
    )> = r
        .mutations
        .iter()
        .filter_map(|m| Some((m, m.timeout_seconds?, m.timeout_rule.as_ref()?)))
        .collect();
    let Some((_, _, first)) = own.first() else {
        return;
    };
    s.push_str("### Test timeouts of their own\n\n");
    let battery = r
        .baseline
        .as_ref()
        .map_or(String::new(), |b| format!("{:.1} s, ", b.timeout_seconds));
    s.push_str(&format!(
        "Each mutant below ran only the tests that reach it, under a timeout of min(the battery's timeout, {battery}{} x the seconds its tests took on their own in the reach run + {} s):\n\n",
        first.factor, first.margin_seconds
    ));
    s.push_str("| mutation | verdict | its timeout |\n|---|---|---|\n");
    for (m, seconds, rule) in own {
        s.push_str(&format!(
            "| `{}` | {} | {:.2} s = {} x {:.3} s + {} s |\n",
            m.id, m.verdict, seconds, rule.factor, rule.tests_seconds, rule.margin_seconds
        ));
    }
    s.push('\n');
}

/// The UNFALSIFIED tests, when computed and any.
fn md_unfalsified(s: &mut String, r: &BatteryReport) {
    let Some(u) = r.unfalsified.as_ref().filter(|u| !u.is_empty()) else {
        return;
    };
    s.push_str("### Unfalsified tests (no mutation kills them)\n\n");
    for t in u {
        s.push_str(&format!("- `{t}`\n"));
    }
    s.push('\n');
}

/// `--since`: the changed functions no mutation touches, when any.
fn md_unguarded(s: &mut String, r: &BatteryReport) {
    let Some(u) = r.unguarded_in_diff.as_ref().filter(|u| !u.is_empty()) else {
        return;
    };
    s.push_str("### Unguarded in diff (changed functions no mutation touches)\n\n");
    s.push_str("| file | function | lines | changed lines |\n|---|---|---|---|\n");
    for f in u {
        s.push_str(&format!(
            "| `{}` | `{}` | {}-{} | {} |\n",
            f.file.display(),
            md_escape(&f.function),
            f.line,
            f.end_line,
            lines_text(&f.changed_lines)
        ));
    }
    s.push('\n');
}

/// `--since --mutants`: the generated mutants inside the diff, their counts and table.
fn md_generated(s: &mut String, r: &BatteryReport) {
    let Some(g) = &r.generated_in_diff else {
        return;
    };
    s.push_str(&format!(
        "### Generated mutants inside the diff (cargo-mutants {}, switch runner)\n\n",
        g.cargo_mutants_version
    ));
    match &g.refusal {
        Some(f) => s.push_str(&format!(
            "Their battery `{}` refused {}: {}\n\n",
            g.battery.as_deref().unwrap_or("-"),
            f.kind,
            md_escape(&f.detail)
        )),
        None => s.push_str(&format!(
            "{} listed, {} caught, {} missed, {} unviable, {} timeout{}{}\n\n",
            g.listed,
            g.caught,
            g.missed,
            g.unviable,
            g.timeout,
            if g.crashed + g.tests_missing > 0 {
                format!(", {} crashed, {} tests missing", g.crashed, g.tests_missing)
            } else {
                String::new()
            },
            if g.skipped.is_empty() {
                String::new()
            } else {
                format!(
                    " ({} left out: not expressible as a mutation)",
                    g.skipped.len()
                )
            }
        )),
    }
    if g.mutants.is_empty() {
        return;
    }
    s.push_str("| mutant | file:line | status | killed by |\n|---|---|---|---|\n");
    for m in &g.mutants {
        s.push_str(&format!(
            "| {} | `{}:{}` | {} | {} |\n",
            md_escape(&m.name),
            m.file,
            m.line,
            m.status.word(),
            code_list(&m.killed_by)
        ));
    }
    s.push('\n');
}

/// The kill matrix, folded (none when no mutation has a column).
fn md_kill_matrix(s: &mut String, r: &BatteryReport) {
    if r.kill_matrix.mutations.is_empty() {
        return;
    }
    s.push_str("<details><summary>Kill matrix (K killed, . passed, T unfinished at timeout, - not run, i ignored, ? no result: its binary died, x missing under the mutation)</summary>\n\n");
    s.push_str("| test |");
    for m in &r.kill_matrix.mutations {
        s.push_str(&format!(" `{m}` |"));
    }
    s.push_str("\n|---|");
    for _ in &r.kill_matrix.mutations {
        s.push_str("---|");
    }
    s.push('\n');
    for (t, row) in r.kill_matrix.tests.iter().zip(&r.kill_matrix.cells) {
        s.push_str(&format!("| `{t}` |"));
        for c in row {
            s.push_str(&format!(" {} |", c.symbol()));
        }
        s.push('\n');
    }
    s.push_str("\n</details>\n");
}

/// The NOTE of a mutation's row: the `[[config]]` it ran under (when not the catalog's
/// own), its first reason and, when it was killed but not as the catalog expects, the
/// tests that really killed it (a gap's reason names them already).
pub(crate) fn note(m: &MutationReport) -> String {
    let mut n = m
        .config
        .as_ref()
        .map(|c| format!("under configuration {c}"))
        .unwrap_or_default();
    if let Some(r) = m.reasons.first() {
        if !n.is_empty() {
            n.push_str(": ");
        }
        n.push_str(r);
    }
    if m.expectation == Expectation::Unmet
        && m.verdict == Verdict::Killed
        && m.role != Role::Gap
        && !m.other_killers.is_empty()
    {
        n.push_str(&format!(
            "; killed instead by {}",
            m.other_killers.join(", ")
        ));
    }
    n
}

/// The final terminal table: one row per mutation, then the headline.
pub fn table(r: &BatteryReport) -> String {
    let mut rows = vec![[
        "MUTATION".to_string(),
        "ROLE".to_string(),
        "VERDICT".to_string(),
        "EXPECT".to_string(),
        "BUILD s".to_string(),
        "TEST s".to_string(),
        "NOTE".to_string(),
    ]];
    for m in &r.mutations {
        rows.push([
            m.id.clone(),
            m.role.to_string(),
            m.verdict.to_string(),
            m.expectation.to_string(),
            format!("{:.1}", m.build_seconds),
            format!("{:.1}", m.test_seconds),
            note(m),
        ]);
    }
    let mut widths = [0usize; 7];
    for row in &rows {
        for (w, c) in widths.iter_mut().zip(row) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut s = String::new();
    for row in &rows {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .enumerate()
            .map(|(i, (c, w))| {
                // The seconds columns are right-aligned numbers.
                if i == 4 || i == 5 {
                    format!("{c:>w$}")
                } else {
                    format!("{c:<w$}")
                }
            })
            .collect();
        s.push_str(line.join("  ").trim_end());
        s.push('\n');
    }
    if let Some(u) = &r.unfalsified {
        for t in u {
            s.push_str(&format!("UNFALSIFIED  {t}\n"));
        }
    }
    for f in r.unguarded_in_diff.iter().flatten() {
        s.push_str(&format!(
            "UNGUARDED-IN-DIFF  {}: {} (changed lines {})\n",
            f.file.display(),
            f.function,
            lines_text(&f.changed_lines)
        ));
    }
    for m in r.generated_in_diff.iter().flat_map(|g| &g.mutants) {
        s.push_str(&format!(
            "GENERATED  {:<8}  {}{}\n",
            m.status.word().to_uppercase(),
            m.name,
            if m.killed_by.is_empty() {
                String::new()
            } else {
                format!(" (killed by {})", m.killed_by.join(", "))
            }
        ));
    }
    s.push_str(&headline(r));
    s.push('\n');
    s
}
