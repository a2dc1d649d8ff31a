//! cargo-mutants as a second opinion: run the pinned tool, import its `outcomes.json`,
//! group generated mutants by function and flag functions no named battery guards.
//!
//! Source format: `mutants.out/outcomes.json` written by cargo-mutants
//! [`CARGO_MUTANTS_VERSION`] (its `LabOutcome`: `outcomes[]` of `{scenario, summary,
//! log_path, diff_path, phase_results[]}`, where `scenario` is `"Baseline"` or
//! `{"Mutant": {name, package, file, function: {function_name, return_type, span}, span,
//! replacement, genre}}`, `summary` one of `Success`, `CaughtMutant`, `MissedMutant`,
//! `Unviable`, `Failure`, `Timeout`, and each phase result `{phase, duration (seconds),
//! process_status, argv}`). Spans are 1-based lines and 1-based char columns.
//!
//! Join with named batteries: a named mutation guards the generated-mutant function whose
//! span (same file, relative to the workspace root) holds the first occurrence of its
//! `find` text. A function with a missed (or timed-out) generated mutant and no named
//! mutation is UNGUARDED.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::battery::report::generated::{GeneratedMutant, Status};
use crate::battery::select::catalog::Catalog;
use crate::system::runner::{Finished, Output, RunError, Runner};

pub mod in_diff;

/// The cargo-mutants version `harness mutants` drives (installed by
/// `scripts/install-cargo-mutants`).
pub const CARGO_MUTANTS_VERSION: &str = "27.1.0";
/// Schema tag of `mutants.json`.
pub const MUTANTS_SCHEMA: &str = "harness-mutants/1";

/// Errors reading cargo-mutants output or running it.
#[derive(Debug, thiserror::Error)]
pub enum MutantsError {
    /// A file could not be read.
    #[error("{path}: cannot read: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// `outcomes.json` is not what cargo-mutants writes.
    #[error("{path}: not a cargo-mutants outcomes file: {message}")]
    Format {
        /// The file.
        path: PathBuf,
        /// serde's message (names the field, line and column).
        message: String,
    },
    /// cargo-mutants is missing or at another version.
    #[error("cargo-mutants {want} is required ({found}); run scripts/install-cargo-mutants")]
    Tool {
        /// The pinned version.
        want: &'static str,
        /// What was found.
        found: String,
    },
    /// cargo-mutants failed without writing outcomes.
    #[error("`{command}` failed ({status}) and wrote no {outcomes}: {stderr}")]
    Run {
        /// Command line.
        command: String,
        /// Exit status.
        status: String,
        /// The outcomes path looked for.
        outcomes: PathBuf,
        /// Last lines of its error output.
        stderr: String,
    },
    /// A catalog could not be loaded.
    #[error(transparent)]
    Catalog(#[from] crate::battery::select::catalog::CatalogError),
    /// A file could not be written.
    #[error("{path}: cannot write: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A signal asked the harness to stop; cargo-mutants' process group was killed.
    #[error(transparent)]
    Interrupted(#[from] crate::system::interrupt::Interrupted),
}

/// `cargo ARGS` in `dir` through the one child runner, without an inherited
/// `CARGO_TARGET_DIR` (cargo-mutants builds each scratch copy in its own target directory;
/// an inherited one would make every copy, and the user's tree, share one).
fn cargo_mutants(dir: &Path, args: &[String], state: Option<&Path>) -> Runner {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    Runner::new(cargo)
        .args(args)
        .dir(dir)
        .env_remove("CARGO_TARGET_DIR")
        .state_dir(state)
}

/// Runs `r`; a failure to start becomes [`MutantsError::Run`] looking for `outcomes`.
fn finish(r: &Runner, outcomes: &Path) -> Result<Finished, MutantsError> {
    r.run().map_err(|e| match e {
        RunError::Interrupted(i) => MutantsError::Interrupted(i),
        RunError::Spawn { command, source } => MutantsError::Run {
            command,
            status: source.to_string(),
            outcomes: outcomes.to_path_buf(),
            stderr: String::new(),
        },
    })
}

fn last_lines(bytes: &[u8], n: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// A 1-based (line, char column) position.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub struct LineColumn {
    /// 1-based line.
    pub line: usize,
    /// 1-based column in chars.
    pub column: usize,
}

/// A source span.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
pub struct SourceSpan {
    /// First position.
    pub start: LineColumn,
    /// Position just past the end.
    pub end: LineColumn,
}

/// The function a generated mutant lies in.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct FunctionInfo {
    /// cargo-mutants' name (`add`, `Type::method`, `<impl Trait for T>::f`).
    pub function_name: String,
    /// Return type as written (`-> i64`), empty for none.
    pub return_type: String,
    /// Span of the whole function.
    pub span: SourceSpan,
}

/// One generated mutant as cargo-mutants describes it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct MutantInfo {
    /// Human name (`src/lib.rs:9:7: replace + with - in add`).
    pub name: String,
    /// Package name.
    pub package: String,
    /// File, relative to the tree root, with slashes.
    pub file: String,
    /// Enclosing function, if any.
    pub function: Option<FunctionInfo>,
    /// The replaced span.
    pub span: SourceSpan,
    /// The replacement text.
    pub replacement: String,
    /// Kind of mutation (`FnValue`, `BinaryOperator`, ...).
    pub genre: String,
}

/// The scenario of one outcome.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub enum Scenario {
    /// The unmutated baseline.
    Baseline,
    /// A generated mutant.
    Mutant(Box<MutantInfo>),
}

/// One phase (check, build, test) of a scenario.
#[derive(Debug, Clone, Deserialize)]
pub struct PhaseResult {
    /// `Check`, `Build` or `Test`.
    pub phase: String,
    /// Seconds.
    pub duration: f64,
    /// cargo-mutants' `Exit` (`"Success"`, `{"Failure": 101}`, `"Timeout"`, ...).
    pub process_status: serde_json::Value,
}

/// One scenario outcome.
#[derive(Debug, Clone, Deserialize)]
pub struct ScenarioOutcome {
    /// What ran.
    pub scenario: Scenario,
    /// `Success`, `CaughtMutant`, `MissedMutant`, `Unviable`, `Failure` or `Timeout`.
    pub summary: String,
    /// Diff file relative to the output directory (mutants only).
    pub diff_path: Option<String>,
    /// Phases run.
    pub phase_results: Vec<PhaseResult>,
}

/// `outcomes.json` as written by cargo-mutants.
#[derive(Debug, Clone, Deserialize)]
pub struct Outcomes {
    /// Every scenario, baseline first.
    pub outcomes: Vec<ScenarioOutcome>,
    /// Mutants generated.
    pub total_mutants: usize,
    /// Missed.
    pub missed: usize,
    /// Caught.
    pub caught: usize,
    /// Timed out.
    pub timeout: usize,
    /// Unviable.
    pub unviable: usize,
    /// Tool version.
    pub cargo_mutants_version: String,
}

/// Generated mutants of one function.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct FunctionGroup {
    /// File relative to the tree root.
    pub file: String,
    /// Function name.
    pub function: String,
    /// First line of the function (0 outside a function).
    pub line: usize,
    /// Last line of the function.
    pub end_line: usize,
    /// Counts per status.
    pub caught: usize,
    /// Missed.
    pub missed: usize,
    /// Timed out.
    pub timeout: usize,
    /// Unviable.
    pub unviable: usize,
    /// Crashed or tests missing (harness runner only).
    #[serde(default)]
    pub other: usize,
    /// Named mutations (`catalog:id`) lying in this function.
    pub named: Vec<String>,
    /// A missed or timed-out generated mutant and no named mutation.
    pub unguarded: bool,
}

/// The harness's report of a cargo-mutants run (`mutants.json`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct MutantsReport {
    /// [`MUTANTS_SCHEMA`].
    pub schema: String,
    /// cargo-mutants version that produced the outcomes (or, with `runner` `harness`, listed
    /// the mutants).
    pub cargo_mutants_version: String,
    /// Who built and tested the mutants: `cargo-mutants`, or `harness` (`--via-harness`:
    /// the harness's battery runner, with the tests that failed under each mutant).
    #[serde(default = "default_runner")]
    pub runner: String,
    /// Crashed (harness runner only).
    #[serde(default)]
    pub crashed: usize,
    /// Tests missing (harness runner only).
    #[serde(default)]
    pub tests_missing: usize,
    /// Not compiled under the package's features (harness runner only).
    #[serde(default)]
    pub not_compiled: usize,
    /// Totals.
    pub caught: usize,
    /// Missed.
    pub missed: usize,
    /// Timed out.
    pub timeout: usize,
    /// Unviable.
    pub unviable: usize,
    /// Baseline seconds per phase.
    pub baseline_seconds: BTreeMap<String, f64>,
    /// Sum over mutants of each phase's seconds (cargo-mutants' own durations).
    pub mutant_seconds: BTreeMap<String, f64>,
    /// Every mutant, in cargo-mutants' order.
    pub mutants: Vec<GeneratedMutant>,
    /// Grouped by function, in file and line order.
    pub functions: Vec<FunctionGroup>,
    /// `file: function` of every UNGUARDED function.
    pub unguarded: Vec<String>,
}

fn default_runner() -> String {
    "cargo-mutants".into()
}

/// Builds a [`MutantsReport`] one mutant at a time, grouping by function.
struct Accumulator {
    report: MutantsReport,
    groups: BTreeMap<(String, usize, String), FunctionGroup>,
}

impl Accumulator {
    fn new(version: &str, runner: &str) -> Accumulator {
        Accumulator {
            report: MutantsReport {
                schema: MUTANTS_SCHEMA.into(),
                cargo_mutants_version: version.to_string(),
                runner: runner.to_string(),
                caught: 0,
                missed: 0,
                timeout: 0,
                unviable: 0,
                crashed: 0,
                tests_missing: 0,
                not_compiled: 0,
                baseline_seconds: BTreeMap::new(),
                mutant_seconds: BTreeMap::new(),
                mutants: Vec::new(),
                functions: Vec::new(),
                unguarded: Vec::new(),
            },
            groups: BTreeMap::new(),
        }
    }

    fn add(
        &mut self,
        m: &MutantInfo,
        status: Status,
        killed_by: Vec<String>,
        diff: Option<String>,
        phases: BTreeMap<String, f64>,
    ) {
        let report = &mut self.report;
        for (k, v) in &phases {
            *report.mutant_seconds.entry(k.clone()).or_default() += v;
        }
        match status {
            Status::Caught => report.caught += 1,
            Status::Missed => report.missed += 1,
            Status::Timeout => report.timeout += 1,
            Status::Unviable => report.unviable += 1,
            Status::Crashed => report.crashed += 1,
            Status::TestsMissing => report.tests_missing += 1,
            Status::NotCompiled => report.not_compiled += 1,
        }
        let (fname, line, end_line) = match &m.function {
            Some(f) => (f.function_name.clone(), f.span.start.line, f.span.end.line),
            None => ("(no function)".to_string(), 0, 0),
        };
        let g = self
            .groups
            .entry((m.file.clone(), line, fname.clone()))
            .or_insert_with(|| FunctionGroup {
                file: m.file.clone(),
                function: fname.clone(),
                line,
                end_line,
                caught: 0,
                missed: 0,
                timeout: 0,
                unviable: 0,
                other: 0,
                named: Vec::new(),
                unguarded: false,
            });
        match status {
            Status::Caught => g.caught += 1,
            Status::Missed => g.missed += 1,
            Status::Timeout => g.timeout += 1,
            Status::Unviable => g.unviable += 1,
            Status::Crashed | Status::TestsMissing | Status::NotCompiled => g.other += 1,
        }
        report.mutants.push(GeneratedMutant {
            name: m.name.clone(),
            package: m.package.clone(),
            file: m.file.clone(),
            function: fname,
            line: m.span.start.line,
            replacement: m.replacement.clone(),
            genre: m.genre.clone(),
            status,
            killed_by,
            diff,
            phase_seconds: phases,
        });
    }

    /// The report, with each function's named mutations and UNGUARDED flag.
    fn finish(mut self, named: &[NamedSite]) -> MutantsReport {
        for g in self.groups.values_mut() {
            if g.line > 0 {
                g.named = named
                    .iter()
                    .filter(|(f, l, _)| *f == g.file && (g.line..=g.end_line).contains(l))
                    .map(|(_, _, id)| id.clone())
                    .collect();
            }
            g.unguarded = (g.missed + g.timeout) > 0 && g.named.is_empty();
            if g.unguarded {
                self.report
                    .unguarded
                    .push(format!("{}: {}", g.file, g.function));
            }
        }
        self.report.functions = self.groups.into_values().collect();
        self.report
    }
}

/// The generated mutants `listed` (in `cargo mutants --list` order) as the harness's
/// battery runner judged them in `battery` (the run of [`generated_catalog`]'s catalog,
/// whose mutation `gen-N` is `listed[N-1]`), in their own terms: KILLED is caught (with the
/// failing tests), SURVIVED missed, UNVIABLE unviable, TIMEOUT timeout, CRASHED crashed,
/// TESTS_MISSING tests missing. Mutants the run did not reach are left out. `version` is the
/// cargo-mutants version that listed them; `named` as for [`import`].
///
/// `batteries` are the runs of one such catalog per package (the mutants of several
/// packages are each tested with their own package's tests); their mutations keep the
/// numbering of `listed`, and the report lists them in `listed` order.
pub fn from_battery(
    batteries: &[&crate::battery::report::schema::BatteryReport],
    listed: &[MutantInfo],
    version: &str,
    named: &[NamedSite],
) -> MutantsReport {
    use crate::battery::report::verdict::Verdict;
    let mut acc = Accumulator::new(version, "harness");
    for battery in batteries {
        if let Some(b) = &battery.baseline {
            *acc.report
                .baseline_seconds
                .entry("build".into())
                .or_default() += b.build_seconds;
            *acc.report
                .baseline_seconds
                .entry("test".into())
                .or_default() += b.run_seconds.iter().sum::<f64>();
        }
    }
    let mut ran: Vec<(
        usize,
        &crate::battery::report::schema::BatteryReport,
        &crate::battery::report::schema::MutationReport,
    )> = batteries
        .iter()
        .flat_map(|b| b.mutations.iter().map(move |r| (b, r)))
        .filter_map(|(b, r)| {
            let n = r.id.strip_prefix("gen-")?.parse::<usize>().ok()?;
            Some((n, *b, r))
        })
        .collect();
    ran.sort_by_key(|(n, _, _)| *n);
    for (n, battery, r) in ran {
        let Some(m) = listed.get(n.wrapping_sub(1)) else {
            continue;
        };
        let status = match r.verdict {
            Verdict::Killed => Status::Caught,
            Verdict::Survived => Status::Missed,
            Verdict::Unviable => Status::Unviable,
            Verdict::Timeout => Status::Timeout,
            Verdict::Crashed => Status::Crashed,
            Verdict::TestsMissing => Status::TestsMissing,
            Verdict::NotCompiled => Status::NotCompiled,
            // cargo-mutants runs the tests and finds them passing: missed.
            Verdict::NoCoverage => Status::Missed,
        };
        let diff = (status == Status::Missed).then(|| {
            let name = r.file.display().to_string();
            let find = battery_find(battery, &r.id).unwrap_or_default();
            similar::TextDiff::from_lines(find.as_str(), r.replace.as_str())
                .unified_diff()
                .context_radius(3)
                .header(&format!("a/{name}"), &format!("b/{name}"))
                .to_string()
        });
        let phases = BTreeMap::from([
            ("build".to_string(), r.build_seconds),
            ("test".to_string(), r.test_seconds),
        ]);
        let killers = r.failed_tests.iter().map(|f| f.name.clone()).collect();
        acc.add(m, status, killers, diff, phases);
    }
    acc.finish(named)
}

/// The `find` text of mutation `id` of the catalog a battery ran (read back from the
/// catalog file), for the diff of a missed generated mutant.
fn battery_find(
    battery: &crate::battery::report::schema::BatteryReport,
    id: &str,
) -> Option<String> {
    let text = std::fs::read_to_string(&battery.catalog.path).ok()?;
    let spec: crate::battery::select::catalog::CatalogSpec = toml::from_str(&text).ok()?;
    spec.mutations
        .into_iter()
        .find(|m| m.id == id)
        .map(|m| m.find)
}

fn read(path: &Path) -> Result<String, MutantsError> {
    std::fs::read_to_string(path).map_err(|source| MutantsError::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// Parses `outcomes.json` text (`path` names it in errors).
///
/// Errors: [`MutantsError::Format`] with serde's message.
pub fn parse_outcomes(path: &Path, text: &str) -> Result<Outcomes, MutantsError> {
    serde_json::from_str(text).map_err(|e| MutantsError::Format {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn status_of(summary: &str) -> Option<Status> {
    match summary {
        "CaughtMutant" => Some(Status::Caught),
        "MissedMutant" => Some(Status::Missed),
        "Timeout" => Some(Status::Timeout),
        "Unviable" => Some(Status::Unviable),
        _ => None,
    }
}

/// A named mutation located in a file: (file relative to the workspace root with slashes,
/// 1-based line of its first occurrence, `catalog:id`).
pub type NamedSite = (String, usize, String);

/// Where the named mutations of the catalog files `paths` lie (see [`NamedSite`]), for the
/// join: each loaded, then [`named_sites`].
///
/// Errors: a catalog that does not load or has drifted.
pub fn named_sites_of(paths: &[PathBuf]) -> Result<Vec<NamedSite>, MutantsError> {
    let mut catalogs = Vec::with_capacity(paths.len());
    for path in paths {
        catalogs.push(Catalog::load(path)?);
    }
    named_sites(&catalogs.iter().collect::<Vec<_>>())
}

/// Where the named mutations of `catalogs` (as loaded) lie (see [`NamedSite`]), for the
/// join.
///
/// Errors: a catalog that has drifted.
pub fn named_sites(catalogs: &[&Catalog]) -> Result<Vec<NamedSite>, MutantsError> {
    let mut out = Vec::new();
    for c in catalogs {
        for pm in c.prepare()? {
            let m = &c.spec.mutations[pm.index];
            out.push((
                pm.rel_path.to_string_lossy().replace('\\', "/"),
                pm.first_at.0,
                format!("{}:{}", c.name, m.id),
            ));
        }
    }
    Ok(out)
}

/// Imports `out_dir/outcomes.json` (and the missed mutants' diffs under `out_dir`) and joins
/// it with the named mutation sites.
///
/// Errors: unreadable or malformed outcomes; a missing diff file of a missed mutant.
pub fn import(out_dir: &Path, named: &[NamedSite]) -> Result<MutantsReport, MutantsError> {
    let path = out_dir.join("outcomes.json");
    let o = parse_outcomes(&path, &read(&path)?)?;
    let mut acc = Accumulator::new(&o.cargo_mutants_version, "cargo-mutants");
    for so in &o.outcomes {
        let phases: BTreeMap<String, f64> = so
            .phase_results
            .iter()
            .map(|p| (p.phase.to_lowercase(), p.duration))
            .collect();
        let m = match &so.scenario {
            Scenario::Baseline => {
                acc.report.baseline_seconds = phases;
                continue;
            }
            Scenario::Mutant(m) => m,
        };
        let Some(status) = status_of(&so.summary) else {
            return Err(MutantsError::Format {
                path: path.clone(),
                message: format!("mutant {:?} has summary {:?}", m.name, so.summary),
            });
        };
        let diff = match (&so.diff_path, status) {
            (Some(d), Status::Missed) => Some(read(&out_dir.join(d))?),
            _ => None,
        };
        acc.add(m, status, Vec::new(), diff, phases);
    }
    Ok(acc.finish(named))
}

/// The Markdown rendering: totals, the per-function table, then each missed mutant's diff.
pub fn markdown(r: &MutantsReport) -> String {
    let title = if r.runner == "harness" {
        format!(
            "## Generated mutants (listed by cargo-mutants {}, run by the harness)",
            r.cargo_mutants_version
        )
    } else {
        format!(
            "## cargo-mutants {} (second opinion)",
            r.cargo_mutants_version
        )
    };
    let mut rare = String::new();
    if r.crashed > 0 {
        rare.push_str(&format!(", {} crashed", r.crashed));
    }
    if r.tests_missing > 0 {
        rare.push_str(&format!(", {} tests missing", r.tests_missing));
    }
    if r.not_compiled > 0 {
        rare.push_str(&format!(", {} not compiled", r.not_compiled));
    }
    let mut s = format!(
        "{title}\n\n{} caught, {} missed, {} timeout, {} unviable{rare}; {} unguarded function(s)\n\n",
        r.caught,
        r.missed,
        r.timeout,
        r.unviable,
        r.unguarded.len()
    );
    s.push_str(
        "| function | file:line | caught | missed | timeout | unviable | named mutations | |\n",
    );
    s.push_str("|---|---|---:|---:|---:|---:|---|---|\n");
    for g in &r.functions {
        s.push_str(&format!(
            "| `{}` | {}:{} | {} | {} | {} | {} | {} | {} |\n",
            g.function.replace('|', "\\|"),
            g.file,
            g.line,
            g.caught,
            g.missed,
            g.timeout,
            g.unviable,
            if g.named.is_empty() {
                "-".to_string()
            } else {
                g.named.join(", ")
            },
            if g.unguarded { "UNGUARDED" } else { "" }
        ));
    }
    if r.runner == "harness" {
        s.push_str("\n### Mutants\n\n| mutant | status | killed by |\n|---|---|---|\n");
        for m in &r.mutants {
            let killers = if m.killed_by.is_empty() {
                "-".to_string()
            } else {
                m.killed_by
                    .iter()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            s.push_str(&format!(
                "| {} | {} | {killers} |\n",
                m.name.replace('|', "\\|"),
                m.status.word()
            ));
        }
    }
    let missed: Vec<&GeneratedMutant> = r
        .mutants
        .iter()
        .filter(|m| m.status == Status::Missed)
        .collect();
    if !missed.is_empty() {
        s.push_str("\n### Missed mutants\n");
        for m in missed {
            s.push_str(&format!("\n{}\n\n```diff\n", m.name));
            s.push_str(m.diff.as_deref().unwrap_or("").trim_end());
            s.push_str("\n```\n");
        }
    }
    s
}

/// The findings of a mutants report on the diff: one per missed mutant, the file relative
/// to the repository that holds `workspace` (the tree the mutants' files are relative to).
pub fn findings(
    r: &MutantsReport,
    workspace: &Path,
) -> Vec<crate::battery::report::findings::Finding> {
    use crate::battery::report::findings;
    let root = findings::repository_root(workspace);
    findings::of_generated("mutants", &r.mutants, workspace, root.as_deref())
}

/// Writes `mutants.json`, `mutants.md`, and its findings (each missed mutant) as
/// `mutants.sarif` and `codequality.json` into `dir`; `workspace` is the tree the mutants'
/// files are relative to. Returns their paths.
pub fn write_reports(
    dir: &Path,
    r: &MutantsReport,
    workspace: &Path,
) -> std::io::Result<Vec<PathBuf>> {
    use crate::battery::report::{codequality, sarif};
    std::fs::create_dir_all(dir)?;
    let found = findings(r, workspace);
    let sarif_path = dir.join("mutants.sarif");
    std::fs::write(
        &sarif_path,
        serde_json::to_string_pretty(&sarif::log(&["mutants".to_string()], &found))
            .expect("serializes")
            + "\n",
    )?;
    let quality = dir.join("codequality.json");
    std::fs::write(
        &quality,
        serde_json::to_string_pretty(&codequality::report(&found)).expect("serializes") + "\n",
    )?;
    let json = dir.join("mutants.json");
    std::fs::write(
        &json,
        serde_json::to_string_pretty(r).expect("report serializes") + "\n",
    )?;
    let md = dir.join("mutants.md");
    std::fs::write(&md, markdown(r))?;
    Ok(vec![json, md, sarif_path, quality])
}

/// Options of [`run_tool`].
#[derive(Debug, Clone, Default)]
pub struct ToolOptions {
    /// The workspace (`--dir`).
    pub workspace: PathBuf,
    /// Where cargo-mutants writes `mutants.out/` (`--output`).
    pub output: PathBuf,
    /// `--package`.
    pub packages: Vec<String>,
    /// `--file` globs.
    pub files: Vec<String>,
    /// `--in-diff`.
    pub in_diff: Option<PathBuf>,
    /// Test targets: cargo-mutants builds and runs only these (`--cargo-arg=--test=T`, which
    /// it gives to its build and its test invocations alike; arguments after `--` would reach
    /// the test invocation only, and every mutant would build every test target).
    pub test_targets: Vec<String>,
    /// Extra: `--timeout` seconds.
    pub timeout: Option<f64>,
    /// cargo-mutants' `--jobs`: how many mutants it builds and tests at once, each in its
    /// own copy of the tree (1, its default, gives no flag).
    pub jobs: usize,
    /// Host state directory: cargo-mutants' process group is recorded there while it runs
    /// (see [`crate::system::process::reap_orphans`]).
    pub state_dir: Option<PathBuf>,
}

/// The installed cargo-mutants version, or the error saying how to install the pinned one.
pub fn check_tool() -> Result<(), MutantsError> {
    let args = ["mutants".to_string(), "--version".to_string()];
    let out = cargo_mutants(Path::new("."), &args, None).run();
    let found = match out {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout).trim().to_string(),
        Ok(o) => format!(
            "`cargo mutants --version` failed: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        ),
        Err(e) => format!("cannot run cargo: {e}"),
    };
    if found.split_whitespace().nth(1) == Some(CARGO_MUTANTS_VERSION) {
        Ok(())
    } else {
        Err(MutantsError::Tool {
            want: CARGO_MUTANTS_VERSION,
            found,
        })
    }
}

/// The cargo-mutants arguments for `opts` (after `cargo`).
pub fn tool_args(opts: &ToolOptions) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "mutants".into(),
        "--no-shuffle".into(),
        "--dir".into(),
        opts.workspace.display().to_string(),
        "--output".into(),
        opts.output.display().to_string(),
    ];
    for p in &opts.packages {
        a.push("--package".into());
        a.push(p.clone());
    }
    for f in &opts.files {
        a.push("--file".into());
        a.push(f.clone());
    }
    if let Some(d) = &opts.in_diff {
        a.push("--in-diff".into());
        a.push(d.display().to_string());
    }
    if let Some(t) = opts.timeout {
        a.push("--timeout".into());
        a.push(format!("{t}"));
    }
    for t in &opts.test_targets {
        a.push(format!("--cargo-arg=--test={t}"));
    }
    if opts.jobs > 1 {
        a.push("--jobs".into());
        a.push(opts.jobs.to_string());
    }
    a
}

/// Runs cargo-mutants (pinned version checked first) through the one child runner: its
/// own process group, recorded under the state directory, killed on interruption, its
/// output teed to the terminal and to `<output>/cargo-mutants.log`. Returns `mutants.out`
/// when it wrote outcomes (exit 0 all caught, 2 missed, 3 timeouts are all results).
///
/// Errors: [`MutantsError::Tool`], [`MutantsError::Run`] (with the log's last lines),
/// [`MutantsError::Interrupted`].
pub fn run_tool(opts: &ToolOptions) -> Result<PathBuf, MutantsError> {
    check_tool()?;
    let args = tool_args(opts);
    let out_dir = opts.output.join("mutants.out");
    let outcomes = out_dir.join("outcomes.json");
    let _ = std::fs::remove_file(&outcomes);
    let log = opts.output.join("cargo-mutants.log");
    std::fs::create_dir_all(&opts.output)
        .and_then(|_| std::fs::write(&log, ""))
        .map_err(|source| MutantsError::Write {
            path: log.clone(),
            source,
        })?;
    let runner = cargo_mutants(&opts.workspace, &args, opts.state_dir.as_deref())
        .output(Output::Tee(log.clone()));
    let o = finish(&runner, &outcomes)?;
    if outcomes.is_file() && matches!(o.status.code(), Some(0 | 2 | 3)) {
        return Ok(out_dir);
    }
    Err(MutantsError::Run {
        command: runner.command_line(),
        status: o.status.to_string(),
        outcomes,
        stderr: last_lines(&std::fs::read(&log).unwrap_or_default(), 20),
    })
}

/// Byte offset of a 1-based (line, char column) position in `text`, if it exists.
pub fn byte_offset(text: &str, at: LineColumn) -> Option<usize> {
    if at.line == 0 || at.column == 0 {
        return None;
    }
    let mut line_start = 0;
    for _ in 1..at.line {
        line_start += text[line_start..].find('\n')? + 1;
    }
    let line_end = text[line_start..]
        .find('\n')
        .map_or(text.len(), |i| line_start + i);
    let line = &text[line_start..line_end];
    let col = at.column - 1;
    if col == line.chars().count() {
        return Some(line_end);
    }
    line.char_indices().nth(col).map(|(i, _)| line_start + i)
}

/// A generated mutant as a catalog mutation: the smallest run of whole lines around its
/// span that occurs exactly once in the file is the `find` text, and the same lines with
/// the span replaced are the `replace` text. The run grows inside the body of the innermost
/// function of `bodies` (see [`crate::battery::execute::instrument::function_bodies`]) that
/// holds the span, first by whole lines, clipped at the braces, so that switch mode can
/// compile it behind its switch; only when no run inside the body is unique does it grow
/// past the body. Generated mutants carry no expected killers: they get role `gap` (the
/// verdicts and the kill matrix are the information, not the expectation).
///
/// Errors: the span does not fit the file, or no window of lines is unique.
pub fn to_catalog_mutation(
    text: &str,
    bodies: &[crate::battery::execute::instrument::FnBody],
    m: &MutantInfo,
    id: &str,
) -> Result<crate::battery::select::catalog::Mutation, String> {
    let bad = || format!("{}: span {:?} does not fit {}", m.name, m.span, m.file);
    let s = byte_offset(text, m.span.start).ok_or_else(bad)?;
    let e = byte_offset(text, m.span.end).ok_or_else(bad)?;
    if e < s {
        return Err(bad());
    }
    let line_start = |at: usize| text[..at].rfind('\n').map_or(0, |i| i + 1);
    let line_end = |at: usize| text[at..].find('\n').map_or(text.len(), |i| at + i);
    // The innermost body holding the span, as the bytes between its braces.
    let inner = bodies
        .iter()
        .filter(|b| b.body.start < s && e < b.body.end)
        .min_by_key(|b| b.body.len())
        .map(|b| (b.body.start + 1, b.body.end - 1));
    let (mut min_lo, mut max_hi) = inner.unwrap_or((0, text.len()));
    let mut lo = line_start(s).max(min_lo);
    let mut hi = line_end(e).min(max_hi);
    loop {
        if text.matches(&text[lo..hi]).count() == 1 {
            break;
        }
        let (up, down) = (lo > min_lo, hi < max_hi);
        if !up && !down {
            if (min_lo, max_hi) == (0, text.len()) {
                return Err(format!(
                    "{}: no unique window of lines in {}",
                    m.name, m.file
                ));
            }
            (min_lo, max_hi) = (0, text.len());
            continue;
        }
        if up {
            lo = line_start(lo.saturating_sub(1)).max(min_lo);
        }
        if down {
            hi = line_end((hi + 1).min(text.len())).min(max_hi);
        }
    }
    let replace = format!("{}{}{}", &text[lo..s], m.replacement, &text[e..hi]);
    Ok(crate::battery::select::catalog::Mutation {
        id: id.to_string(),
        title: m.name.clone(),
        role: crate::battery::select::catalog::Role::Gap,
        file: PathBuf::from(&m.file),
        find: text[lo..hi].to_string(),
        occurrences: 1,
        replace,
        killed_by: Vec::new(),
        expect_message: None,
        rationale: format!("generated by cargo-mutants ({})", m.genre),
    })
}

/// `cargo mutants --list --json` with `opts`' filters: the generated mutants.
///
/// Errors: [`MutantsError::Tool`], [`MutantsError::Run`], [`MutantsError::Format`].
pub fn list_tool(opts: &ToolOptions) -> Result<Vec<MutantInfo>, MutantsError> {
    let mut args = tool_args(&ToolOptions {
        test_targets: Vec::new(),
        ..opts.clone()
    });
    args.push("--list".into());
    args.push("--json".into());
    let runner = cargo_mutants(&opts.workspace, &args, opts.state_dir.as_deref());
    // The version check and the listing run at once (two cargo start-ups overlap); the
    // listing counts only when the version is the pinned one.
    let (checked, out) = std::thread::scope(|scope| {
        let check = scope.spawn(check_tool);
        let out = finish(&runner, Path::new("(--list)"));
        (check.join(), out)
    });
    checked.unwrap_or_else(|panic| std::panic::resume_unwind(panic))?;
    let out = out?;
    if !out.status.success() {
        return Err(MutantsError::Run {
            command: runner.command_line(),
            status: out.status.to_string(),
            outcomes: PathBuf::from("(--list)"),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    serde_json::from_slice(&out.stdout).map_err(|e| MutantsError::Format {
        path: PathBuf::from("cargo mutants --list --json"),
        message: e.to_string(),
    })
}

/// The catalog the harness runs generated mutants from: `base`'s workspace, package, test
/// targets and test list, with one mutation per generated mutant (`gen-1`, ...). Returns
/// the spec and the mutants that could not be expressed (with why).
pub fn generated_catalog(
    base: &Catalog,
    mutants: &[MutantInfo],
) -> (crate::battery::select::catalog::CatalogSpec, Vec<String>) {
    let all: Vec<(usize, &MutantInfo)> = mutants.iter().enumerate().collect();
    let mut spec = base.spec.clone();
    spec.name = Some(format!("{}-generated", base.name));
    generated_mutations(base, spec, &all)
}

/// `spec` (a catalog's run settings: package, targets, tests) with `base`'s workspace
/// root and target directory and one mutation `gen-N` per generated mutant `(N - 1, m)`
/// of `mutants` (the numbering of the whole `cargo mutants --list`, so that the mutants
/// of several packages, run as one catalog each, keep their names). Returns the spec and
/// the mutants that could not be expressed (with why).
pub fn generated_mutations(
    base: &Catalog,
    mut spec: crate::battery::select::catalog::CatalogSpec,
    mutants: &[(usize, &MutantInfo)],
) -> (crate::battery::select::catalog::CatalogSpec, Vec<String>) {
    spec.workspace = base.root.clone();
    spec.target_dir = Some(base.target_dir.clone());
    spec.mutations = Vec::new();
    let mut skipped = Vec::new();
    type Parsed = Option<(String, Vec<crate::battery::execute::instrument::FnBody>)>;
    let mut texts: BTreeMap<String, Parsed> = BTreeMap::new();
    for &(n, m) in mutants {
        let parsed = texts.entry(m.file.clone()).or_insert_with(|| {
            let text = std::fs::read_to_string(base.root.join(&m.file)).ok()?;
            let bodies =
                crate::battery::execute::instrument::function_bodies(Path::new(&m.file), &text)
                    .unwrap_or_default();
            Some((text, bodies))
        });
        let Some((text, bodies)) = parsed else {
            skipped.push(format!("{}: cannot read {}", m.name, m.file));
            continue;
        };
        match to_catalog_mutation(text, bodies, m, &format!("gen-{}", n + 1)) {
            Ok(mu) => spec.mutations.push(mu),
            Err(e) => skipped.push(e),
        }
    }
    (spec, skipped)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lc(line: usize, column: usize) -> LineColumn {
        LineColumn { line, column }
    }

    #[test]
    fn byte_offsets_count_chars_from_one() {
        let t = "ab\néx = 1;\n";
        assert_eq!(byte_offset(t, lc(1, 1)), Some(0));
        assert_eq!(byte_offset(t, lc(2, 2)), Some(5));
        assert_eq!(byte_offset(t, lc(2, 8)), Some(11));
        assert_eq!(byte_offset(t, lc(2, 9)), None);
        assert_eq!(byte_offset(t, lc(4, 1)), None);
    }

    #[test]
    fn generated_mutant_becomes_a_unique_window_of_lines() {
        let text = "fn f() -> i64 {\n    1 + 2\n}\nfn g() -> i64 {\n    1 + 2\n}\n";
        let m = MutantInfo {
            name: "replace + with - in g".into(),
            package: "p".into(),
            file: "src/lib.rs".into(),
            function: None,
            span: SourceSpan {
                start: lc(5, 7),
                end: lc(5, 8),
            },
            replacement: "-".into(),
            genre: "BinaryOperator".into(),
        };
        let mu = to_catalog_mutation(text, &[], &m, "gen-1").unwrap();
        assert_eq!(text.matches(&mu.find).count(), 1);
        let mutated = text.replace(&mu.find, &mu.replace);
        assert_eq!(
            mutated,
            "fn f() -> i64 {\n    1 + 2\n}\nfn g() -> i64 {\n    1 - 2\n}\n"
        );
    }

    #[test]
    fn tool_args_pass_filters_and_test_targets() {
        let a = tool_args(&ToolOptions {
            workspace: "/ws".into(),
            output: "/out".into(),
            packages: vec!["p".into()],
            files: vec!["src/*.rs".into()],
            in_diff: Some("d.diff".into()),
            test_targets: vec!["contract".into()],
            timeout: None,
            jobs: 1,
            state_dir: None,
        });
        let s = a.join(" ");
        assert!(
            s.contains("--package p --file src/*.rs --in-diff d.diff"),
            "{s}"
        );
        assert!(s.ends_with("--cargo-arg=--test=contract"), "{s}");
        assert!(!a.iter().any(|x| x == "--"), "{s}");
        assert!(!s.contains("--jobs"), "{s}");
        let two = tool_args(&ToolOptions {
            workspace: "/ws".into(),
            output: "/out".into(),
            packages: Vec::new(),
            files: Vec::new(),
            in_diff: None,
            test_targets: Vec::new(),
            timeout: None,
            jobs: 2,
            state_dir: None,
        });
        assert!(two.join(" ").ends_with("--jobs 2"), "{two:?}");
    }

    #[test]
    fn unknown_summary_is_a_format_error_naming_the_file() {
        let text = r#"{"outcomes":[{"scenario":{"Mutant":{"name":"n","package":"p","file":"f.rs","function":null,"span":{"start":{"line":1,"column":1},"end":{"line":1,"column":2}},"replacement":"x","genre":"FnValue"}},"summary":"Weird","diff_path":null,"phase_results":[]}],"total_mutants":1,"missed":0,"caught":0,"timeout":0,"unviable":0,"cargo_mutants_version":"27.1.0"}"#;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("outcomes.json"), text).unwrap();
        let e = import(dir.path(), &[]).unwrap_err().to_string();
        assert!(e.contains("outcomes.json") && e.contains("Weird"), "{e}");
    }

    #[test]
    fn the_window_grows_inside_the_function_body_first() {
        // `x + 1` occurs twice; the lines around it inside `g` make it unique without
        // reaching g's signature, so the mutation can go behind the switch.
        let text = "fn f(x: i64) -> i64 {\n    x + 1\n}\nfn g(x: i64) -> i64 {\n    let y = 2;\n    x + 1\n}\n";
        let bodies =
            crate::battery::execute::instrument::function_bodies(Path::new("src/lib.rs"), text)
                .unwrap();
        let m = MutantInfo {
            name: "replace + with - in g".into(),
            package: "p".into(),
            file: "src/lib.rs".into(),
            function: None,
            span: SourceSpan {
                start: lc(6, 7),
                end: lc(6, 8),
            },
            replacement: "-".into(),
            genre: "BinaryOperator".into(),
        };
        let mu = to_catalog_mutation(text, &bodies, &m, "gen-1").unwrap();
        assert_eq!(mu.find, "    let y = 2;\n    x + 1\n");
        assert_eq!(mu.replace, "    let y = 2;\n    x - 1\n");
        assert_eq!(
            crate::battery::execute::instrument::place(text, &mu.find, &mu.replace, &bodies),
            crate::battery::execute::instrument::Placement::InBody { index: 1 }
        );
        // Without the body the window grows both ways and takes in the closing brace; what
        // it changes is still inside g's body, so it is switched there too.
        let wide = to_catalog_mutation(text, &[], &m, "gen-1").unwrap();
        assert_eq!(wide.find, "    let y = 2;\n    x + 1\n}");
        assert_eq!(
            crate::battery::execute::instrument::place(text, &wide.find, &wide.replace, &bodies),
            crate::battery::execute::instrument::Placement::InBody { index: 1 }
        );
        // A one-line function: the window is clipped at the braces.
        let one = "fn a() -> i64 { 1 + 2 }\nfn b() -> i64 { 1 + 2 }\n";
        let bodies =
            crate::battery::execute::instrument::function_bodies(Path::new("src/lib.rs"), one)
                .unwrap();
        let m = MutantInfo {
            span: SourceSpan {
                start: lc(2, 19),
                end: lc(2, 20),
            },
            ..m
        };
        let mu = to_catalog_mutation(one, &bodies, &m, "gen-1").unwrap();
        assert_eq!(one.matches(&mu.find).count(), 1);
        assert_eq!(
            one.replace(&mu.find, &mu.replace),
            "fn a() -> i64 { 1 + 2 }\nfn b() -> i64 { 1 - 2 }\n"
        );
    }
}
