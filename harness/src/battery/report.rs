//! Battery reports: the versioned JSON document, the Markdown pull-request comment, the
//! Stryker mutation-testing-report-schema document and the terminal table.
//!
//! JSON schema `harness-battery/1` is documented field by field on [`BatteryReport`] and in
//! `docs/battery-report.md`. Stryker mapping (mutation-testing-report-schema 3.x,
//! `schemaVersion` "2"): KILLED -> `Killed`, SURVIVED -> `Survived`, UNVIABLE ->
//! `CompileError`, TIMEOUT -> `Timeout`; one mutant per catalog mutation, located at the
//! first occurrence of its `find` text; `killedBy` holds the failing listed tests,
//! `statusReason` the expectation and its reasons, `mutatorName` the role.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::battery::catalog::Role;
use crate::battery::verdict::{Expectation, KillMatrix, Verdict};
use crate::cargo::Outcome;
use crate::system::exit::ExitCode;

/// Identifier of the JSON report format; bumped on any incompatible change.
pub const SCHEMA: &str = "harness-battery/1";

/// The battery's JSON report (`reports/<catalog>/battery.json`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct BatteryReport {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Harness version that wrote it.
    pub harness_version: String,
    /// The catalog that ran.
    pub catalog: CatalogInfo,
    /// `complete`, `refused`, or `interrupted`.
    pub status: Status,
    /// Set when `status` is `refused`.
    pub refusal: Option<RefusalInfo>,
    /// The ids given with `--only`, if any (UNFALSIFIED is then not computed).
    pub only: Option<Vec<String>>,
    /// The revision given with `--since`, if any: only the mutations meeting the diff ran
    /// (UNFALSIFIED is then not computed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<String>,
    /// With `--since`: UNGUARDED-IN-DIFF, the functions of the members' `src/` the diff
    /// changes that no mutation of the command's catalogs touches (file and line order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unguarded_in_diff: Option<Vec<super::unguarded::UnguardedFn>>,
    /// `--require-guarded`: a function UNGUARDED-IN-DIFF makes the exit code 1.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub require_guarded: bool,
    /// With `--since --mutants`: cargo-mutants' generated mutants inside the diff, run
    /// through the switch runner and reported in their own terms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generated_in_diff: Option<crate::mutants::in_diff::GeneratedInDiff>,
    /// Set on a shard's report (`--shard K/N`): what `harness merge` checks. Absent from
    /// unsharded and merged reports.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<super::shard::ShardManifest>,
    /// Set on an `--incremental` run: the cache, the re-check sample's seed and ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incremental: Option<IncrementalInfo>,
    /// How the host lock was held: `own` or `ancestor pid N`.
    pub lock: String,
    /// Start time, seconds since the Unix epoch.
    pub started_unix: u64,
    /// Wall seconds of the whole battery.
    pub wall_seconds: f64,
    /// Baseline build and runs (absent if the battery refused before them).
    pub baseline: Option<Baseline>,
    /// One entry per mutation that ran, in run order.
    pub mutations: Vec<MutationReport>,
    /// Tests x mutations.
    pub kill_matrix: KillMatrix,
    /// Listed tests no mutation killed; `null` when not computed (refusal, `--only` or a
    /// shard).
    pub unfalsified: Option<Vec<String>>,
    /// Counts.
    pub summary: Summary,
    /// The process exit code this report implies (0, 1, 2 or 130).
    pub exit_code: ExitCode,
}

/// Battery status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Every selected mutation ran.
    Complete,
    /// The battery refused (see `refusal`) and ran nothing more.
    Refused,
    /// A signal stopped it (the tree was restored).
    Interrupted,
}

/// The catalog as run.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CatalogInfo {
    /// Battery name.
    pub name: String,
    /// Catalog path as given.
    pub path: PathBuf,
    /// Canonical workspace root.
    pub workspace: PathBuf,
    /// Package.
    pub package: String,
    /// Test targets.
    pub test_targets: Vec<String>,
    /// Whether `--lib` tests are included.
    pub lib_tests: bool,
    /// Binary targets whose unit tests are included (`--bin`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub bin_targets: Vec<String>,
    /// Whether the library's doc tests are included (`--doc`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub doc_tests: bool,
    /// Selection pattern.
    pub select: String,
    /// The listed tests.
    pub tests: Vec<String>,
}

/// Why the battery refused.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct RefusalInfo {
    /// Which refusal (CATALOG-DRIFT, FILTER-DRIFT, BASELINE-RED, FLAKY, STALE-BUILD,
    /// TREE-DIRTY, LOCKED or HARNESS-FAULT).
    pub kind: crate::battery::RefusalKind,
    /// What exactly, naming files, tests and mutations.
    pub detail: String,
}

/// The baseline.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Baseline {
    /// Seconds of the baseline build.
    pub build_seconds: f64,
    /// Seconds of each of the two baseline test runs.
    pub run_seconds: Vec<f64>,
    /// The per-mutation test timeout derived from them.
    pub timeout_seconds: f64,
    /// Number of tests the targets hold (listed or not).
    pub tests_in_targets: usize,
    /// Files the baseline runs created in the tree (removed).
    pub created_files: Vec<PathBuf>,
}

/// One failing test.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FailedTest {
    /// Test name.
    pub name: String,
    /// Its failure message (libtest's captured output).
    pub message: String,
}

/// What an `--incremental` run reused and re-checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IncrementalInfo {
    /// The verdict cache file.
    pub cache: PathBuf,
    /// How many reused verdicts were to be re-checked (`--recheck`).
    pub recheck: usize,
    /// The seed of the re-check sample.
    pub seed: u64,
    /// The ids whose evidence matched and that ran again as the re-check, catalog order.
    pub rechecked: Vec<String>,
}

/// One mutation's result.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MutationReport {
    /// Id.
    pub id: String,
    /// Title.
    pub title: String,
    /// Role.
    pub role: Role,
    /// Mutated file, relative to the workspace root.
    pub file: PathBuf,
    /// Occurrences replaced.
    pub occurrences: usize,
    /// 1-based line and column of the first occurrence.
    pub line: usize,
    /// See `line`.
    pub column: usize,
    /// 1-based line and column just past the end of the first occurrence.
    pub end_line: usize,
    /// See `end_line`.
    pub end_column: usize,
    /// The replacement text.
    pub replace: String,
    /// KILLED, SURVIVED, UNVIABLE, TIMEOUT, CRASHED or TESTS_MISSING.
    pub verdict: Verdict,
    /// MET or UNMET.
    pub expectation: Expectation,
    /// Why UNMET (empty when MET).
    pub reasons: Vec<String>,
    /// The catalog's expected killers.
    pub expected_killers: Vec<String>,
    /// Failing listed tests with their messages.
    pub failed_tests: Vec<FailedTest>,
    /// Failing listed tests that are not expected killers.
    pub other_killers: Vec<String>,
    /// Outcome of every listed test (empty when UNVIABLE).
    pub outcomes: BTreeMap<String, Outcome>,
    /// Switch mode's reach run: the listed tests that execute the mutated function, in
    /// catalog order (empty: NO_COVERAGE); `None` when it is not known (rebuild mode, a
    /// rebuild fallback, an unproven switch, a reach run that could not be trusted).
    #[serde(default)]
    pub reached_by: Option<Vec<String>>,
    /// For UNVIABLE: the compiler's first error.
    pub compiler_error: Option<String>,
    /// The test binaries that died before reporting all their tests, each with its exit
    /// status or signal as cargo reports it (empty when none died).
    #[serde(default)]
    pub died: Vec<String>,
    /// When a test binary died before reporting some tests: the end of cargo's stderr.
    pub crash_output: Option<String>,
    /// For TIMEOUT: the tests that had finished.
    pub finished_tests: Option<Vec<String>>,
    /// Files the run created in the tree (removed).
    pub created_files: Vec<PathBuf>,
    /// Seconds of the rebuild.
    pub build_seconds: f64,
    /// Seconds of the test run (0 when UNVIABLE).
    pub test_seconds: f64,
    /// Whether the verdict was reused from the cache (`--incremental`, evidence unchanged)
    /// rather than found by this run.
    #[serde(default)]
    pub reused: bool,
}

/// Counts over the mutations that ran.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Summary {
    /// Mutations that ran.
    pub mutations: usize,
    /// KILLED.
    pub killed: usize,
    /// SURVIVED.
    pub survived: usize,
    /// UNVIABLE.
    pub unviable: usize,
    /// TIMEOUT.
    pub timeout: usize,
    /// CRASHED.
    #[serde(default)]
    pub crashed: usize,
    /// TESTS_MISSING.
    #[serde(default)]
    pub tests_missing: usize,
    /// NOT_COMPILED.
    #[serde(default)]
    pub not_compiled: usize,
    /// NO_COVERAGE.
    #[serde(default)]
    pub no_coverage: usize,
    /// MET.
    pub met: usize,
    /// UNMET.
    pub unmet: usize,
    /// UNFALSIFIED tests (0 when not computed).
    pub unfalsified: usize,
}

impl Summary {
    /// Counts `mutations`.
    pub fn of(mutations: &[MutationReport], unfalsified: Option<&Vec<String>>) -> Summary {
        let mut s = Summary {
            mutations: mutations.len(),
            unfalsified: unfalsified.map_or(0, Vec::len),
            ..Summary::default()
        };
        for m in mutations {
            match m.verdict {
                Verdict::Killed => s.killed += 1,
                Verdict::Survived => s.survived += 1,
                Verdict::Unviable => s.unviable += 1,
                Verdict::Timeout => s.timeout += 1,
                Verdict::Crashed => s.crashed += 1,
                Verdict::TestsMissing => s.tests_missing += 1,
                Verdict::NotCompiled => s.not_compiled += 1,
                Verdict::NoCoverage => s.no_coverage += 1,
            }
            match m.expectation {
                Expectation::Met => s.met += 1,
                Expectation::Unmet => s.unmet += 1,
            }
        }
        s
    }
}

/// Paths of the three report files for battery `name` under `root`.
pub fn report_dir(root: &Path, name: &str) -> PathBuf {
    root.join(name)
}

/// Writes `battery.json`, `battery.md`, `index.html` and (when the battery completed)
/// `mutation-report.json` into `dir`. Returns the written paths.
pub fn write_all(dir: &Path, r: &BatteryReport) -> std::io::Result<Vec<PathBuf>> {
    let doc = if r.status == Status::Complete {
        Some(stryker(r)?)
    } else {
        None
    };
    write_with(dir, r, doc.as_ref())
}

/// [`write_all`] with the Stryker document given (`harness merge` joins the shards' own
/// documents instead of reading the sources again); `None` removes a stale one.
pub fn write_with(
    dir: &Path,
    r: &BatteryReport,
    stryker_doc: Option<&serde_json::Value>,
) -> std::io::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir)?;
    let mut out = Vec::new();
    let json = dir.join("battery.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(r).expect("report serializes") + "\n",
    )?;
    out.push(json);
    let md = dir.join("battery.md");
    std::fs::write(&md, markdown(r))?;
    out.push(md);
    let stryker_path = dir.join("mutation-report.json");
    match stryker_doc {
        Some(doc) => {
            std::fs::write(
                &stryker_path,
                serde_json::to_string_pretty(doc).expect("serializes") + "\n",
            )?;
            out.push(stryker_path);
        }
        None => {
            let _ = std::fs::remove_file(&stryker_path);
        }
    }
    let page = dir.join("index.html");
    std::fs::write(&page, super::html::page(r, stryker_doc))?;
    out.push(page);
    Ok(out)
}

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
/// UNFALSIFIED tests and the kill matrix.
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
    if !r.mutations.is_empty() {
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
                if killers.is_empty() {
                    "-".to_string()
                } else {
                    killers
                        .iter()
                        .map(|k| format!("`{k}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            ));
        }
        s.push('\n');
    }
    let unmet: Vec<&MutationReport> = r
        .mutations
        .iter()
        .filter(|m| m.expectation == Expectation::Unmet)
        .collect();
    if !unmet.is_empty() {
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
    if let Some(u) = &r.unfalsified
        && !u.is_empty()
    {
        s.push_str("### Unfalsified tests (no mutation kills them)\n\n");
        for t in u {
            s.push_str(&format!("- `{t}`\n"));
        }
        s.push('\n');
    }
    if let Some(u) = &r.unguarded_in_diff
        && !u.is_empty()
    {
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
    if let Some(g) = &r.generated_in_diff {
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
        if !g.mutants.is_empty() {
            s.push_str("| mutant | file:line | status | killed by |\n|---|---|---|---|\n");
            for m in &g.mutants {
                s.push_str(&format!(
                    "| {} | `{}:{}` | {} | {} |\n",
                    md_escape(&m.name),
                    m.file,
                    m.line,
                    m.status.word(),
                    if m.killed_by.is_empty() {
                        "-".to_string()
                    } else {
                        m.killed_by
                            .iter()
                            .map(|k| format!("`{k}`"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                ));
            }
            s.push('\n');
        }
    }
    if !r.kill_matrix.mutations.is_empty() {
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
    s
}

/// The mutation-testing-report-schema document (see the module docs for the mapping).
pub fn stryker(r: &BatteryReport) -> std::io::Result<serde_json::Value> {
    use serde_json::json;
    let mut files: BTreeMap<String, serde_json::Value> = BTreeMap::new();
    for m in &r.mutations {
        let key = m.file.to_string_lossy().replace('\\', "/");
        if !files.contains_key(&key) {
            let source = std::fs::read_to_string(r.catalog.workspace.join(&m.file))?;
            files.insert(
                key.clone(),
                json!({"language": "rust", "source": source, "mutants": []}),
            );
        }
        let status = match m.verdict {
            Verdict::Killed => "Killed",
            Verdict::Survived => "Survived",
            Verdict::Unviable => "CompileError",
            Verdict::Timeout => "Timeout",
            Verdict::Crashed => "RuntimeError",
            Verdict::TestsMissing => "NoCoverage",
            Verdict::NotCompiled => "Ignored",
            Verdict::NoCoverage => "NoCoverage",
        };
        let reason = match (&m.compiler_error, m.reasons.is_empty()) {
            (Some(e), _) => e.clone(),
            (None, true) => format!("expectation {}", m.expectation),
            (None, false) => format!("expectation {}: {}", m.expectation, m.reasons.join("; ")),
        };
        let completed = m
            .outcomes
            .values()
            .filter(|o| matches!(o, Outcome::Passed | Outcome::Failed))
            .count();
        let mutant = json!({
            "id": m.id,
            "mutatorName": m.role.to_string(),
            "description": m.title,
            "replacement": m.replace,
            "location": {
                "start": {"line": m.line, "column": m.column},
                "end": {"line": m.end_line, "column": m.end_column},
            },
            "status": status,
            "statusReason": reason,
            "killedBy": m.failed_tests.iter().map(|f| f.name.clone()).collect::<Vec<_>>(),
            "coveredBy": m.reached_by.as_ref().unwrap_or(&r.catalog.tests),
            "testsCompleted": completed,
            "duration": (m.test_seconds * 1000.0).round(),
        });
        files
            .get_mut(&key)
            .and_then(|f| f["mutants"].as_array_mut())
            .expect("inserted above")
            .push(mutant);
    }
    let tests: Vec<serde_json::Value> = r
        .catalog
        .tests
        .iter()
        .map(|t| json!({"id": t, "name": t}))
        .collect();
    let test_file = format!(
        "{} ({})",
        r.catalog.package,
        r.catalog.test_targets.join(", ")
    );
    Ok(json!({
        "schemaVersion": "2",
        "thresholds": {"high": 80, "low": 60},
        "projectRoot": r.catalog.workspace,
        "files": files,
        "testFiles": { test_file: {"tests": tests} },
        "config": {"harness_schema": SCHEMA, "battery": r.catalog.name},
    }))
}

/// The NOTE of a mutation's row: its first reason and, when it was killed but not as the
/// catalog expects, the tests that really killed it (a gap's reason names them already).
pub(crate) fn note(m: &MutationReport) -> String {
    let mut n = m.reasons.first().cloned().unwrap_or_default();
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
