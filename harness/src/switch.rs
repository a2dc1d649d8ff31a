//! Compile-once mutation switching (`harness battery --mode switch`): every catalog mutation
//! that lies inside one function body is compiled into a scratch copy of the workspace behind
//! a run-time switch, so the whole battery costs about one build.
//!
//! The switch: a function holding mutations keeps its original body and each mutated body
//! side by side, and picks one at run time from the environment variable [`SWITCH_ENV`]
//! (read once per function, cached in a function-local `OnceLock`):
//!
//! ```text
//! fn add(a: i64, b: i64) -> i64 {
//!     static SW: OnceLock<usize> = ...;   // 0 = original, k = k-th mutation, MAX = forced fail
//!     match *SW.get_or_init(|| match env::var("HARNESS_MUTANT").as_deref() { ... }) {
//!         1 => { a - b }
//!         usize::MAX => panic!("harness forced-fail control ..."),
//!         _ => { a + b }
//!     }
//! }
//! ```
//!
//! Function bodies are found by parsing the file with `syn` (spans from `proc-macro2`'s
//! `span-locations`). A mutation is switched when every occurrence of its `find` text lies
//! inside the body of one `fn` (free, inherent, trait-impl or trait default method) that is
//! not `const` or `async` and does not return `impl Trait`; otherwise (an item, a signature, a
//! macro body, occurrences in several functions, a function nested in another switched one)
//! it falls back to rebuild mode, in the same scratch copy, and the plan says why.
//!
//! Run order: fingerprint the user's tree; sync the scratch copy (`<target_dir>/switch/tree`)
//! and seed its target directory (`<target_dir>/switch/target`) with the user's build
//! products of every package that is not a workspace member ([`crate::scratch`] says why
//! the members are never shared); write the switched files and build once. When that build
//! fails, rustc's JSON diagnostics name the byte spans of each error: an error inside a
//! mutated body is that mutation's own (each mutated body is a verbatim copy of the body the
//! mutated file would hold), so it is UNVIABLE, its error is reported at its place in the
//! mutated file, and the build is repeated without it; an error no mutated body holds sends
//! every remaining switched mutation through a compile check on its own
//! (`cargo check --profile test`) before one last build. The successful build must have
//! rebuilt the package (else STALE-BUILD). Then: list tests (FILTER-DRIFT); the control run
//! with no mutant selected, twice (BASELINE-RED, FLAKY); the forced-fail control (every
//! switched function panics) must fail at least one listed test (else SWITCH-UNREACHED); one
//! test run per switched mutant; then the fallback mutations one rebuild each; finally the
//! user's tree must still have its fingerprint (TREE-DIRTY). The user's tree is only read,
//! and the user's target directory only read from.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::battery::{BatteryError, Options, RunResult, derive_timeout, failure_summary};
use crate::cargo::{CargoCmd, CargoError, Outcome, PackageMeta, TestRun, parse_build_messages};
use crate::catalog::{Catalog, CatalogError, PreparedMutation};
use crate::diagnostics::{self, CompilerError, Relocation};
use crate::progress::Progress;
use crate::report::{
    Baseline, BatteryReport, CatalogInfo, FailedTest, MutationReport, RefusalInfo, Status, Summary,
};
use crate::scratch::{self, SeedStats, list_tree, sync_tree};
use crate::verdict::{self, Expectation, KillMatrix, Observation};
use crate::workspace;
use crate::{EXIT_ALL_MET, EXIT_REFUSED, EXIT_WEAK};

/// The environment variable that selects the mutant in a switched build: a mutation id,
/// [`FORCED_FAIL`], or unset / anything else for the original code.
pub const SWITCH_ENV: &str = "HARNESS_MUTANT";
/// The switch value of the forced-fail control: every switched function panics.
pub const FORCED_FAIL: &str = "__harness_forced_fail__";
/// Schema tag of `switch.json`.
pub const SWITCH_SCHEMA: &str = "harness-switch/2";

/// A function body found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnBody {
    /// Path-like name: `name`, `Type::name` for methods, `Trait::name` for trait defaults.
    pub name: String,
    /// Byte range of the body block, braces included.
    pub body: Range<usize>,
    /// Why the body cannot carry a switch (`const fn`, `impl Trait` return), if so.
    pub unswitchable: Option<String>,
}

/// Errors finding function bodies.
#[derive(Debug, thiserror::Error)]
#[error("{file}: cannot parse as Rust: {message} (line {line}, column {column})")]
pub struct ParseError {
    /// The file.
    pub file: PathBuf,
    /// `syn`'s message.
    pub message: String,
    /// 1-based line.
    pub line: usize,
    /// 0-based column.
    pub column: usize,
}

struct Collector {
    scope: Vec<String>,
    out: Vec<FnBody>,
}

impl Collector {
    fn push(&mut self, ident: &syn::Ident, sig: &syn::Signature, block: &syn::Block) {
        let name = match self.scope.last() {
            Some(s) => format!("{s}::{ident}"),
            None => ident.to_string(),
        };
        let unswitchable = if sig.constness.is_some() {
            Some("a const fn cannot read the switch at run time".to_string())
        } else if sig.asyncness.is_some() {
            Some(
                "an async fn's future holds every body side by side: its type and auto traits \
                 (Send) would differ from those of each mutant on its own"
                    .to_string(),
            )
        } else if returns_impl_trait(&sig.output) {
            Some("returns `impl Trait`: mutated bodies may have distinct types".to_string())
        } else {
            None
        };
        self.out.push(FnBody {
            name,
            body: block.span().byte_range(),
            unswitchable,
        });
    }
}

fn returns_impl_trait(ret: &syn::ReturnType) -> bool {
    struct Finder(bool);
    impl<'ast> Visit<'ast> for Finder {
        fn visit_type_impl_trait(&mut self, _: &'ast syn::TypeImplTrait) {
            self.0 = true;
        }
    }
    let mut f = Finder(false);
    f.visit_return_type(ret);
    f.0
}

impl<'ast> Visit<'ast> for Collector {
    fn visit_item_fn(&mut self, i: &'ast syn::ItemFn) {
        self.push(&i.sig.ident, &i.sig, &i.block);
        syn::visit::visit_item_fn(self, i);
    }
    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        let ty = &i.self_ty;
        let name = quote_type(ty);
        self.scope.push(name);
        syn::visit::visit_item_impl(self, i);
        self.scope.pop();
    }
    fn visit_item_trait(&mut self, i: &'ast syn::ItemTrait) {
        self.scope.push(i.ident.to_string());
        syn::visit::visit_item_trait(self, i);
        self.scope.pop();
    }
    fn visit_impl_item_fn(&mut self, i: &'ast syn::ImplItemFn) {
        self.push(&i.sig.ident, &i.sig, &i.block);
        syn::visit::visit_impl_item_fn(self, i);
    }
    fn visit_trait_item_fn(&mut self, i: &'ast syn::TraitItemFn) {
        if let Some(b) = &i.default {
            self.push(&i.sig.ident, &i.sig, b);
        }
        syn::visit::visit_trait_item_fn(self, i);
    }
}

fn quote_type(ty: &syn::Type) -> String {
    match ty {
        syn::Type::Path(p) => p
            .path
            .segments
            .last()
            .map(|s| s.ident.to_string())
            .unwrap_or_else(|| "impl".into()),
        _ => "impl".into(),
    }
}

/// Every function body in `text` (Rust source of `file`), outermost first in source order.
/// A leading byte-order mark or shebang line is blanked (same length) before parsing so that
/// byte offsets stay those of `text`.
///
/// Errors: [`ParseError`] with `syn`'s message and position.
pub fn function_bodies(file: &Path, text: &str) -> Result<Vec<FnBody>, ParseError> {
    let mut src = text.to_string();
    if src.starts_with('\u{feff}') {
        src.replace_range(0..3, "   ");
    }
    if src.starts_with("#!") && !src.starts_with("#![") {
        let end = src.find('\n').unwrap_or(src.len());
        src.replace_range(0..end, &" ".repeat(end));
    }
    let parsed: syn::File = syn::parse_str(&src).map_err(|e| {
        let at = e.span().start();
        ParseError {
            file: file.to_path_buf(),
            message: e.to_string(),
            line: at.line,
            column: at.column,
        }
    })?;
    let mut c = Collector {
        scope: Vec::new(),
        out: Vec::new(),
    };
    c.visit_file(&parsed);
    c.out
        .sort_by_key(|f| (f.body.start, std::cmp::Reverse(f.body.end)));
    Ok(c.out)
}

/// Where a mutation's occurrences lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Every occurrence is inside the body of `bodies[index]` (the innermost such body).
    InBody {
        /// Index into the bodies given to [`place`].
        index: usize,
    },
    /// It cannot be switched; the reason names the line.
    Outside {
        /// Why.
        reason: String,
    },
}

/// Places the occurrences of `find` in `text` among `bodies` (see [`Placement`]).
pub fn place(text: &str, find: &str, bodies: &[FnBody]) -> Placement {
    let mut chosen: Option<usize> = None;
    if find.is_empty() {
        return Placement::Outside {
            reason: "empty find text".into(),
        };
    }
    for (start, _) in text.match_indices(find) {
        let end = start + find.len();
        let line = text[..start].matches('\n').count() + 1;
        let inner = bodies
            .iter()
            .enumerate()
            .filter(|(_, b)| b.body.start < start && end < b.body.end)
            .min_by_key(|(_, b)| b.body.len())
            .map(|(i, _)| i);
        let Some(i) = inner else {
            return Placement::Outside {
                reason: format!("the occurrence at line {line} is outside any function body"),
            };
        };
        match chosen {
            None => chosen = Some(i),
            Some(c) if c == i => {}
            Some(c) => {
                return Placement::Outside {
                    reason: format!(
                        "occurrences lie in more than one function body ({} and {})",
                        bodies[c].name, bodies[i].name
                    ),
                };
            }
        }
    }
    match chosen {
        None => Placement::Outside {
            reason: "the find text does not occur".into(),
        },
        Some(i) => match &bodies[i].unswitchable {
            Some(why) => Placement::Outside {
                reason: format!("function {}: {why}", bodies[i].name),
            },
            None => Placement::InBody { index: i },
        },
    }
}

/// One function to switch: its body range in the original text and its mutants as
/// (mutation id, mutated body text, braces included).
#[derive(Debug, Clone)]
pub struct SwitchedFn {
    /// Function name (for the forced-fail message).
    pub name: String,
    /// Body byte range in the original text.
    pub body: Range<usize>,
    /// (mutation id, mutated body).
    pub mutants: Vec<(String, String)>,
}

/// A switched source file and where each mutated body sits in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SwitchedFile {
    /// The switched source.
    pub text: String,
    /// Per mutant, in the order of the [`SwitchedFn`]s and their mutants: (mutation id, byte
    /// range in `text` of its mutated body, byte offset in the original text of the body it
    /// replaces). The mutated body is byte for byte the body the mutated file holds at that
    /// offset, so a compiler error inside the range is an error of that mutation alone.
    pub arms: Vec<(String, Range<usize>, usize)>,
}

/// The switched source: each function's body replaced by the switch over its original and
/// mutated bodies (see the module docs). Bodies must not overlap.
pub fn switched_source(text: &str, fns: &[SwitchedFn]) -> String {
    switched_file(text, fns).text
}

/// [`switched_source`], with the place of every mutated body ([`SwitchedFile::arms`]).
pub fn switched_file(text: &str, fns: &[SwitchedFn]) -> SwitchedFile {
    let mut order: Vec<&SwitchedFn> = fns.iter().collect();
    order.sort_by_key(|f| f.body.start);
    let mut out = String::with_capacity(text.len() * 2);
    let mut arms = Vec::new();
    let mut at = 0;
    for f in order {
        out.push_str(&text[at..f.body.start]);
        at = f.body.end;
        let original = &text[f.body.clone()];
        out.push_str("{\n#[allow(unreachable_code, unused, clippy::all)]\n");
        out.push_str(
            "static __HARNESS_SWITCH: ::std::sync::OnceLock<usize> = ::std::sync::OnceLock::new();\n",
        );
        out.push_str(&format!(
            "match *__HARNESS_SWITCH.get_or_init(|| match ::std::env::var({SWITCH_ENV:?}).as_deref() {{\n"
        ));
        for (k, (id, _)) in f.mutants.iter().enumerate() {
            out.push_str(&format!(
                "::std::result::Result::Ok({id:?}) => {},\n",
                k + 1
            ));
        }
        out.push_str(&format!(
            "::std::result::Result::Ok({FORCED_FAIL:?}) => usize::MAX,\n_ => 0,\n}}) {{\n"
        ));
        for (k, (id, body)) in f.mutants.iter().enumerate() {
            out.push_str(&format!("{} => ", k + 1));
            let start = out.len();
            out.push_str(body);
            arms.push((id.clone(), start..out.len(), f.body.start));
            out.push('\n');
        }
        out.push_str(&format!(
            "usize::MAX => ::std::panic!(\"harness forced-fail control: reached switched function {}\"),\n",
            f.name.escape_default()
        ));
        out.push_str(&format!("_ => {original}\n}}\n}}"));
    }
    out.push_str(&text[at..]);
    SwitchedFile { text: out, arms }
}

/// How one mutation runs in switch mode.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct PlanEntry {
    /// Mutation id.
    pub id: String,
    /// `switched`, `rebuild` (fallback) or `unviable` (does not compile).
    pub mode: String,
    /// The function whose body holds it (switched and unviable ones).
    pub function: Option<String>,
    /// Why it falls back to rebuild mode, or how it was found UNVIABLE.
    pub reason: Option<String>,
}

/// The plan of a switch run, written next to the battery report as `switch.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SwitchInfo {
    /// [`SWITCH_SCHEMA`].
    pub schema: String,
    /// Scratch copy of the workspace.
    pub scratch: PathBuf,
    /// Per mutation, in catalog order.
    pub plan: Vec<PlanEntry>,
    /// Seconds spent syncing the scratch copy.
    pub sync_seconds: f64,
    /// Seconds spent seeding the scratch target directory with the user's dependency build
    /// products.
    pub seed_seconds: f64,
    /// What the seeding linked, copied and left out.
    pub seed: SeedStats,
    /// Packages whose artifacts cargo reported fresh in the successful switched build
    /// (dependencies reused, not rebuilt), sorted, without duplicates.
    pub fresh_packages: Vec<String>,
    /// Switched builds run: 1 when every switched mutation compiles; one more per round of
    /// mutations found UNVIABLE (and one more after compile checks on their own).
    pub switched_builds: usize,
    /// Seconds of the switched builds that failed and of any compile checks of mutations on
    /// their own, all together (0 when the first switched build succeeds).
    pub check_seconds: f64,
    /// Seconds of the successful switched build.
    pub switched_build_seconds: f64,
    /// Why every switched mutation was compile-checked on its own before the switched build
    /// (a lint level that makes unused code an error; see [`crate::lints`]), if it was.
    pub checked_alone_because: Option<String>,
    /// Listed tests that failed under the forced-fail control (they reach switched code).
    pub forced_fail_failed: Vec<String>,
    /// Listed tests that passed under the forced-fail control (they reach no switched code).
    pub forced_fail_passed: Vec<String>,
    /// Median harness overhead per switched mutant (scratch listing and cleanup), seconds.
    pub overhead_seconds_median: Option<f64>,
}

#[derive(Debug)]
enum Stop {
    Refused(String, String),
    Interrupted,
}

fn refuse(kind: &str, detail: impl Into<String>) -> Stop {
    Stop::Refused(kind.to_string(), detail.into())
}

impl From<CargoError> for Stop {
    fn from(e: CargoError) -> Stop {
        match e {
            CargoError::Interrupted(_) => Stop::Interrupted,
            e => refuse("HARNESS-FAULT", e.to_string()),
        }
    }
}

impl From<workspace::TreeError> for Stop {
    fn from(e: workspace::TreeError) -> Stop {
        refuse("HARNESS-FAULT", e.to_string())
    }
}

fn io_fault(path: &Path, op: &str, e: std::io::Error) -> Stop {
    refuse("HARNESS-FAULT", format!("{}: {op}: {e}", path.display()))
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Stop> {
    std::fs::write(path, bytes).map_err(|e| io_fault(path, "write", e))
}

/// `cargo HEAD... --manifest-path M -p P --target-dir T [--lib] [--test X]... [features]`:
/// the package and targets of catalog `c`, as [`CargoCmd`] passes them to `cargo test`
/// (the same targets and features, so the test runs find the build fresh).
fn cargo_args(c: &Catalog, head: &[&str]) -> Vec<String> {
    let mut args: Vec<String> = head.iter().map(|s| s.to_string()).collect();
    args.extend([
        "--manifest-path".into(),
        c.root.join("Cargo.toml").display().to_string(),
        "-p".into(),
        c.spec.package.clone(),
        "--target-dir".into(),
        c.target_dir.display().to_string(),
    ]);
    if c.spec.lib_tests {
        args.push("--lib".into());
    }
    for t in &c.spec.test_targets {
        args.push("--test".into());
        args.push(t.clone());
    }
    if !c.spec.features.is_empty() {
        args.push("--features".into());
        args.push(c.spec.features.join(","));
    }
    if c.spec.no_default_features {
        args.push("--no-default-features".into());
    }
    args
}

/// A build of the switched scratch copy, with rustc's errors located.
struct SwitchedBuild {
    build: crate::cargo::Build,
    errors: Vec<CompilerError>,
}

struct Ran {
    run: Option<TestRun>,
    compiler_error: Option<String>,
    build_seconds: f64,
    created: Vec<PathBuf>,
}

struct Ctx<'a> {
    user: &'a Catalog,
    scratch: Catalog,
    state: PathBuf,
    progress: &'a Progress,
    opts: &'a Options,
    exclude: Vec<PathBuf>,
    baseline: Option<Baseline>,
    results: BTreeMap<usize, Ran>,
    info: SwitchInfo,
    /// Original bytes of every scratch file that has held switched code.
    originals: BTreeMap<PathBuf, Vec<u8>>,
}

/// Where the mutated bodies sit in one switched file: (mutation index, byte range in the
/// switched text, byte offset of the body in the original and mutated file, mutated file).
struct Layout {
    text: String,
    arms: Vec<(usize, Range<usize>, usize, String)>,
}

/// Takes mutation `i` out of the switched set.
fn remove_switched(switched: &mut BTreeMap<PathBuf, BTreeMap<usize, Vec<usize>>>, i: usize) {
    for fns in switched.values_mut() {
        for idxs in fns.values_mut() {
            idxs.retain(|&j| j != i);
        }
        fns.retain(|_, v| !v.is_empty());
    }
    switched.retain(|_, v| !v.is_empty());
}

/// The package name in a cargo package id (`registry+https://...#serde@1.0.0` → `serde`,
/// `path+file:///ws/engine#0.1.0` → `engine`).
fn package_name(id: &str) -> String {
    match id.rsplit_once('#') {
        Some((url, frag)) => match frag.split_once('@') {
            Some((name, _)) => name.to_string(),
            None => url.rsplit('/').next().unwrap_or(url).to_string(),
        },
        None => id.split_whitespace().next().unwrap_or(id).to_string(),
    }
}

/// Which switched mutation each compiler error lies in. An error belongs to a mutation when
/// one of its sites (a primary span, or a macro call site it was expanded from) lies inside
/// that mutation's body in a switched file; its rendered text is moved to the mutation's
/// place in the mutated file. Returns (mutation index → its errors) and the errors that lie
/// in no mutated body.
fn blame<'e>(
    errors: &'e [CompilerError],
    root: &Path,
    layouts: &BTreeMap<PathBuf, Layout>,
) -> (BTreeMap<usize, Vec<String>>, Vec<&'e CompilerError>) {
    let mut blamed: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut stray = Vec::new();
    for e in errors {
        let mut hit = false;
        for site in &e.sites {
            let path = Path::new(&site.file);
            let rel = if path.is_absolute() {
                path.strip_prefix(root).ok()
            } else {
                Some(path)
            };
            let Some(layout) = rel.and_then(|r| layouts.get(r)) else {
                continue;
            };
            for (i, range, body_start, mutated) in &layout.arms {
                if range.start <= site.bytes.start && site.bytes.end <= range.end {
                    hit = true;
                    let r = Relocation {
                        file: &site.file,
                        compiled: &layout.text,
                        from: range.clone(),
                        shown: mutated,
                        to: *body_start,
                    };
                    let text = diagnostics::relocate(&e.rendered, &r);
                    let list = blamed.entry(*i).or_default();
                    if !list.contains(&text) {
                        list.push(text);
                    }
                }
            }
            if hit {
                break;
            }
        }
        if !hit {
            stray.push(e);
        }
    }
    (blamed, stray)
}

/// Runs the battery in `catalog_path` in switch mode (the caller holds the host lock) and
/// writes its reports (`battery.json`, `battery.md`, `mutation-report.json` as in rebuild
/// mode, plus `switch.json` with the plan). Verdicts, killers and the kill matrix are those
/// rebuild mode gives.
///
/// Errors: as [`crate::battery::run`].
pub fn run(
    catalog_path: &Path,
    opts: &Options,
    progress: &Progress,
) -> Result<RunResult, BatteryError> {
    let started = Instant::now();
    let started_unix = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let catalog = Catalog::load(catalog_path)?;
    if let Some(only) = &opts.only {
        let known: BTreeSet<&str> = catalog
            .spec
            .mutations
            .iter()
            .map(|m| m.id.as_str())
            .collect();
        let unknown: Vec<&str> = only
            .iter()
            .map(String::as_str)
            .filter(|i| !known.contains(i))
            .collect();
        if !unknown.is_empty() {
            return Err(BatteryError::UnknownOnly {
                catalog: catalog_path.to_path_buf(),
                ids: unknown.join(", "),
            });
        }
    }
    let reports_root = opts
        .reports_root
        .clone()
        .unwrap_or_else(|| catalog.root.join("reports"));
    let reports_root = std::fs::create_dir_all(&reports_root)
        .and_then(|_| reports_root.canonicalize())
        .map_err(|source| BatteryError::Reports {
            path: reports_root.clone(),
            source,
        })?;
    let switch_dir = catalog.target_dir.join("switch");
    let mut scratch = catalog.clone();
    scratch.root = switch_dir.join("tree");
    scratch.target_dir = switch_dir.join("target");
    let mut ctx = Ctx {
        user: &catalog,
        scratch,
        state: opts.state_dir.clone(),
        progress,
        opts,
        exclude: vec![catalog.target_dir.clone(), reports_root.clone()],
        baseline: None,
        results: BTreeMap::new(),
        originals: BTreeMap::new(),
        info: SwitchInfo {
            schema: SWITCH_SCHEMA.into(),
            scratch: switch_dir.join("tree"),
            plan: Vec::new(),
            sync_seconds: 0.0,
            seed_seconds: 0.0,
            seed: SeedStats::default(),
            fresh_packages: Vec::new(),
            switched_builds: 0,
            checked_alone_because: None,
            check_seconds: 0.0,
            switched_build_seconds: 0.0,
            forced_fail_failed: Vec::new(),
            forced_fail_passed: Vec::new(),
            overhead_seconds_median: None,
        },
    };
    let stop = ctx.go().err();
    let (status, refusal) = match &stop {
        None => (Status::Complete, None),
        Some(Stop::Interrupted) => (Status::Interrupted, None),
        Some(Stop::Refused(kind, detail)) => (
            Status::Refused,
            Some(RefusalInfo {
                kind: kind.clone(),
                detail: detail.clone(),
            }),
        ),
    };
    // Reports in catalog order, like rebuild mode.
    let prepared = catalog.prepare().unwrap_or_default();
    let mut mutations = Vec::new();
    let mut columns: Vec<(String, Option<BTreeMap<String, Outcome>>)> = Vec::new();
    for pm in &prepared {
        let Some(ran) = ctx.results.get(&pm.index) else {
            continue;
        };
        let m = &catalog.spec.mutations[pm.index];
        let (report, column) = mutation_report(m, pm, ran);
        columns.push((m.id.clone(), column));
        mutations.push(report);
    }
    let cols: Vec<(String, Option<&BTreeMap<String, Outcome>>)> = columns
        .iter()
        .map(|(i, o)| (i.clone(), o.as_ref()))
        .collect();
    let kill_matrix = KillMatrix::build(&catalog.spec.tests, &cols);
    let unfalsified =
        (status == Status::Complete && opts.only.is_none()).then(|| kill_matrix.unfalsified());
    let summary = Summary::of(&mutations, unfalsified.as_ref());
    let exit_code = match status {
        Status::Interrupted => crate::interrupt::EXIT_INTERRUPTED,
        Status::Refused => EXIT_REFUSED,
        Status::Complete if summary.unmet > 0 || summary.unfalsified > 0 => EXIT_WEAK,
        Status::Complete => EXIT_ALL_MET,
    };
    let report = BatteryReport {
        schema: crate::report::SCHEMA.to_string(),
        harness_version: env!("CARGO_PKG_VERSION").to_string(),
        catalog: CatalogInfo {
            name: catalog.name.clone(),
            path: catalog.path.clone(),
            workspace: catalog.root.clone(),
            package: catalog.spec.package.clone(),
            test_targets: catalog.spec.test_targets.clone(),
            lib_tests: catalog.spec.lib_tests,
            select: catalog.spec.select.clone(),
            tests: catalog.spec.tests.clone(),
        },
        status,
        refusal,
        only: opts.only.clone(),
        lock: opts.lock.clone(),
        started_unix,
        wall_seconds: started.elapsed().as_secs_f64(),
        baseline: ctx.baseline.take(),
        mutations,
        kill_matrix,
        unfalsified,
        summary,
        exit_code,
    };
    let dir = crate::report::report_dir(&reports_root, &catalog.name);
    let mut written =
        crate::report::write_all(&dir, &report).map_err(|source| BatteryError::Reports {
            path: dir.clone(),
            source,
        })?;
    let sw = dir.join("switch.json");
    std::fs::write(
        &sw,
        serde_json::to_string_pretty(&ctx.info).expect("switch info serializes") + "\n",
    )
    .map_err(|source| BatteryError::Reports {
        path: sw.clone(),
        source,
    })?;
    written.push(sw);
    Ok(RunResult { report, written })
}

fn mutation_report(
    m: &crate::catalog::Mutation,
    pm: &PreparedMutation,
    ran: &Ran,
) -> (MutationReport, Option<BTreeMap<String, Outcome>>) {
    let obs = match &ran.run {
        None => Observation::Unviable,
        Some(r) => Observation::Ran {
            outcomes: &r.outcomes,
            messages: &r.messages,
            timed_out: r.timed_out,
        },
    };
    let j = verdict::judge(m, &obs);
    let (outcomes, failed_tests, finished, test_seconds) = match &ran.run {
        None => (BTreeMap::new(), Vec::new(), None, 0.0),
        Some(r) => (
            r.outcomes.clone(),
            r.outcomes
                .iter()
                .filter(|(_, o)| verdict::is_kill(**o))
                .map(|(t, _)| FailedTest {
                    name: t.clone(),
                    message: r.messages.get(t).cloned().unwrap_or_default(),
                })
                .collect(),
            r.timed_out.then(|| {
                r.outcomes
                    .iter()
                    .filter(|(_, o)| !matches!(o, Outcome::Unfinished))
                    .map(|(t, _)| t.clone())
                    .collect()
            }),
            r.seconds,
        ),
    };
    let column = ran.run.as_ref().map(|r| r.outcomes.clone());
    let report = MutationReport {
        id: m.id.clone(),
        title: m.title.clone(),
        role: m.role,
        file: pm.rel_path.clone(),
        occurrences: m.occurrences,
        line: pm.first_at.0,
        column: pm.first_at.1,
        end_line: pm.first_end.0,
        end_column: pm.first_end.1,
        replace: m.replace.clone(),
        verdict: j.verdict,
        expectation: j.expectation,
        reasons: j.reasons,
        expected_killers: m.killed_by.clone(),
        failed_tests,
        other_killers: j.other_killers,
        outcomes,
        compiler_error: ran.compiler_error.clone(),
        crash_output: ran
            .run
            .as_ref()
            .filter(|r| r.outcomes.values().any(|o| *o == Outcome::NoResult))
            .map(|r| r.stderr_tail.clone()),
        finished_tests: finished,
        created_files: ran.created.clone(),
        build_seconds: ran.build_seconds,
        test_seconds,
    };
    (report, column)
}

fn owning_package<'p>(packages: &'p [PackageMeta], file: &Path) -> Option<&'p PackageMeta> {
    packages
        .iter()
        .filter(|p| {
            let dir = p.dir.canonicalize().unwrap_or_else(|_| p.dir.clone());
            file.starts_with(dir)
        })
        .max_by_key(|p| p.dir.components().count())
}

fn median(mut v: Vec<f64>) -> Option<f64> {
    if v.is_empty() {
        return None;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    Some(v[v.len() / 2])
}

impl Ctx<'_> {
    fn cargo(&self, mutant: Option<&str>) -> CargoCmd {
        let mut c = self.scratch.clone();
        if let Some(id) = mutant {
            c.spec.env.insert(SWITCH_ENV.into(), id.into());
        }
        CargoCmd::new(&c).with_state_dir(&self.state)
    }

    /// Runs cargo with `args` in the scratch copy, in its own process group (recorded in the
    /// state directory while it runs, killed on interruption), with the catalog's
    /// environment. Returns its output and wall seconds.
    fn run_cargo(&self, args: &[String]) -> Result<(std::process::Output, f64), Stop> {
        Ok(self.cargo(None).run_args(args)?)
    }

    /// `cargo check --profile test` of the catalog's package and targets in the scratch copy:
    /// `Ok(None)` when it compiles, `Ok(Some(first error))` when not.
    fn compile_check(&self) -> Result<Option<String>, Stop> {
        let args = cargo_args(
            &self.scratch,
            &["check", "--profile", "test", "--message-format=json"],
        );
        let (out, _) = self.run_cargo(&args)?;
        if out.status.success() {
            return Ok(None);
        }
        let (_, first) = parse_build_messages(&String::from_utf8_lossy(&out.stdout));
        Ok(Some(first.unwrap_or_else(|| {
            String::from_utf8_lossy(&out.stderr).trim().to_string()
        })))
    }

    /// Builds the test targets of the scratch copy (`cargo test --no-run`, the arguments
    /// the test runs use) and locates rustc's errors.
    fn switched_build(&self) -> Result<SwitchedBuild, Stop> {
        let mut args = cargo_args(&self.scratch, &["test"]);
        args.push("--no-run".into());
        args.push("--message-format=json".into());
        let (out, seconds) = self.run_cargo(&args)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (artifacts, first_error) = parse_build_messages(&stdout);
        let success = out.status.success();
        let first_error = (!success).then(|| {
            first_error.unwrap_or_else(|| {
                let err = String::from_utf8_lossy(&out.stderr);
                let lines: Vec<&str> = err.lines().collect();
                lines[lines.len().saturating_sub(20)..].join("\n")
            })
        });
        Ok(SwitchedBuild {
            build: crate::cargo::Build {
                success,
                artifacts,
                first_error,
                seconds,
            },
            errors: if success {
                Vec::new()
            } else {
                diagnostics::compiler_errors(&stdout)
            },
        })
    }

    /// Runs the listed tests in the scratch copy with the switch set to `mutant`, then
    /// removes what the run created in the scratch tree.
    fn run_tests(
        &self,
        mutant: Option<&str>,
        timeout: Duration,
    ) -> Result<(TestRun, Vec<PathBuf>, f64), Stop> {
        let t0 = Instant::now();
        let root = &self.scratch.root;
        let before = list_tree(root).map_err(|e| io_fault(root, "list", e))?;
        let mut overhead = t0.elapsed().as_secs_f64();
        let run = self
            .cargo(mutant)
            .run(&self.user.spec.tests, Some(timeout))?;
        let t1 = Instant::now();
        let after = list_tree(root).map_err(|e| io_fault(root, "list", e))?;
        let created = workspace::remove_created(root, &before, &after)?;
        overhead += t1.elapsed().as_secs_f64();
        Ok((run, created, overhead))
    }

    fn go(&mut self) -> Result<(), Stop> {
        let c = self.user;
        let p = self.progress;
        p.phase("fingerprinting the tree");
        let start_scan = workspace::scan(&c.root, &self.exclude)?;
        let prepared = c.prepare().map_err(|e| match e {
            CatalogError::Drift { .. } => refuse("CATALOG-DRIFT", e.to_string()),
            e => refuse("HARNESS-FAULT", e.to_string()),
        })?;
        let selected: Vec<&PreparedMutation> = prepared
            .iter()
            .filter(|pm| {
                let id = &c.spec.mutations[pm.index].id;
                self.opts.only.as_ref().is_none_or(|o| o.contains(id))
            })
            .collect();

        p.phase("syncing the scratch copy");
        let t = Instant::now();
        let sroot = self.scratch.root.clone();
        sync_tree(&c.root, &start_scan, &sroot).map_err(|e| io_fault(&sroot, "sync", e))?;
        self.info.sync_seconds = t.elapsed().as_secs_f64();
        let packages = self.cargo(None).metadata()?;
        PackageMeta::check_targets(
            &packages,
            &c.spec.package,
            &c.spec.test_targets,
            c.spec.lib_tests,
        )
        .map_err(|e| refuse("CATALOG-DRIFT", format!("{}: {e}", c.path.display())))?;

        // Plan: which mutations go behind the switch, grouped per file and function.
        let mut bodies: BTreeMap<PathBuf, Vec<FnBody>> = BTreeMap::new();
        let mut plan: BTreeMap<usize, PlanEntry> = BTreeMap::new();
        // file -> body index -> mutation indices
        let mut switched: BTreeMap<PathBuf, BTreeMap<usize, Vec<usize>>> = BTreeMap::new();
        for pm in &selected {
            let m = &c.spec.mutations[pm.index];
            let text = String::from_utf8_lossy(&pm.original).into_owned();
            if !bodies.contains_key(&pm.rel_path) {
                let found = function_bodies(&pm.rel_path, &text).unwrap_or_default();
                bodies.insert(pm.rel_path.clone(), found);
            }
            let fns = &bodies[&pm.rel_path];
            let mut entry = PlanEntry {
                id: m.id.clone(),
                mode: "rebuild".into(),
                function: None,
                reason: None,
            };
            match place(&text, &m.find, fns) {
                Placement::Outside { reason } => entry.reason = Some(reason),
                Placement::InBody { index } => {
                    let per_file = switched.entry(pm.rel_path.clone()).or_default();
                    let clash = per_file.keys().find(|&&j| {
                        j != index && {
                            let (a, b) = (&fns[j].body, &fns[index].body);
                            a.start < b.end && b.start < a.end
                        }
                    });
                    if let Some(&j) = clash {
                        entry.reason = Some(format!(
                            "function {} overlaps switched function {}",
                            fns[index].name, fns[j].name
                        ));
                    } else {
                        entry.mode = "switched".into();
                        entry.function = Some(fns[index].name.clone());
                        per_file.entry(index).or_default().push(pm.index);
                    }
                }
            }
            plan.insert(pm.index, entry);
        }

        // Seed the scratch target directory with the user's dependency build products.
        p.phase("seeding the scratch target directory");
        let t = Instant::now();
        let (from, to) = (
            c.target_dir.join("debug"),
            self.scratch.target_dir.join("debug"),
        );
        self.info.seed = scratch::seed_dependencies(&from, &to, &scratch::Members::of(&packages))
            .map_err(|e| {
            refuse(
                "HARNESS-FAULT",
                format!("seeding {} from {}: {e}", to.display(), from.display()),
            )
        })?;
        self.info.seed_seconds = t.elapsed().as_secs_f64();

        // The switched build. Errors inside a mutated body make that mutation UNVIABLE and
        // the build is repeated without it; an error outside every mutated body sends the
        // remaining switched mutations through compile checks on their own, once.
        let by_index: BTreeMap<usize, &PreparedMutation> =
            selected.iter().map(|pm| (pm.index, *pm)).collect();
        for (file, fns) in &switched {
            let i = fns.values().flatten().next().expect("non-empty");
            self.originals
                .insert(file.clone(), by_index[i].original.clone());
        }
        // Where a denied usage lint may be in force, a mutation can compile behind the
        // switch and not on its own (see `crate::lints`): check each on its own first.
        let mut checked_alone = false;
        let owners: BTreeSet<PathBuf> = switched
            .keys()
            .map(|f| {
                owning_package(&packages, &sroot.join(f))
                    .map_or_else(|| sroot.clone(), |o| o.dir.clone())
            })
            .collect();
        if let Some(why) = owners
            .iter()
            .find_map(|dir| crate::lints::strict_usage_lints(&sroot, dir, &self.scratch.spec.env))
        {
            p.line(&format!(
                "a lint level that makes unused code an error may be in force ({why}): checking each switched mutation on its own"
            ));
            self.info.checked_alone_because = Some(why);
            self.check_alone(&mut switched, &mut plan, &by_index)?;
            checked_alone = true;
        }
        let build = loop {
            let layouts = self.write_switched(&switched, &bodies, &by_index)?;
            self.info.switched_builds += 1;
            let n: usize = switched
                .values()
                .flat_map(|f| f.values())
                .map(Vec::len)
                .sum();
            p.phase(&format!("switched build ({n} switched mutations)"));
            let SwitchedBuild { build, errors } = self.switched_build()?;
            if build.success {
                break build;
            }
            self.info.check_seconds += build.seconds;
            let (blamed, stray) = blame(&errors, &sroot, &layouts);
            if !blamed.is_empty() {
                for (i, errs) in blamed {
                    self.mark_unviable(
                        &mut plan,
                        i,
                        "rustc reports an error inside its mutated body in the switched build",
                        errs.join("\n"),
                    );
                    remove_switched(&mut switched, i);
                }
                continue;
            }
            let first = stray
                .first()
                .map(|e| e.rendered.clone())
                .or(build.first_error.clone())
                .unwrap_or_default();
            if checked_alone || switched.is_empty() {
                self.restore_scratch()?;
                return Err(refuse(
                    "HARNESS-FAULT",
                    format!("the switched scratch copy does not build: {first}"),
                ));
            }
            p.line(&format!(
                "the switched build fails outside every mutated body ({}): checking each switched mutation on its own",
                failure_summary(&first)
            ));
            self.check_alone(&mut switched, &mut plan, &by_index)?;
            checked_alone = true;
        };
        self.info.switched_build_seconds = build.seconds;
        self.info.plan = plan.values().cloned().collect();
        let mut fresh: BTreeSet<String> = BTreeSet::new();
        for a in build.artifacts.iter().filter(|a| a.fresh) {
            fresh.insert(package_name(&a.package_id));
        }
        self.info.fresh_packages = fresh.into_iter().collect();
        let rebuilt = |b: &crate::cargo::Build, file: &Path| {
            let owner = owning_package(&packages, file);
            b.artifacts
                .iter()
                .any(|a| !a.fresh && owner.is_none_or(|o| o.id == a.package_id))
        };
        if let Some(file) = switched.keys().next()
            && !rebuilt(&build, &sroot.join(file))
        {
            return Err(refuse(
                "STALE-BUILD",
                format!(
                    "cargo reports the package fresh after the switched {} was written",
                    file.display()
                ),
            ));
        }
        p.phase("listing tests");
        let in_targets = self.cargo(None).list()?;
        let (missing, unlisted) =
            crate::battery::filter_drift(&c.spec.tests, &in_targets, &c.spec.select);
        if !missing.is_empty() || !unlisted.is_empty() {
            return Err(refuse(
                "FILTER-DRIFT",
                format!(
                    "listed but not in the target: [{}]; in the target under the pattern {:?} but not listed: [{}]",
                    missing.join(", "),
                    c.spec.select,
                    unlisted.join(", ")
                ),
            ));
        }

        // Controls: no mutant (twice: the baseline), then forced fail.
        let baseline_timeout =
            Duration::from_secs_f64((c.spec.timeout_floor_secs * 20.0).max(1800.0));
        let mut runs = Vec::new();
        for i in 1..=2 {
            p.phase(&format!("control run {i}/2 (no mutant selected)"));
            runs.push(self.run_tests(None, baseline_timeout)?.0);
        }
        let run_seconds: Vec<f64> = runs.iter().map(|r| r.seconds).collect();
        let timeout = derive_timeout(
            &run_seconds,
            c.spec.timeout_factor,
            c.spec.timeout_floor_secs,
        );
        self.baseline = Some(Baseline {
            build_seconds: build.seconds,
            run_seconds: run_seconds.clone(),
            timeout_seconds: timeout.as_secs_f64(),
            tests_in_targets: in_targets.len(),
            created_files: Vec::new(),
        });
        let differing: Vec<&String> = c
            .spec
            .tests
            .iter()
            .filter(|t| runs[0].outcomes.get(*t) != runs[1].outcomes.get(*t))
            .collect();
        if !differing.is_empty() {
            return Err(refuse(
                "FLAKY",
                format!(
                    "the two control runs (switch compiled in, no mutant) disagree on: {}",
                    differing
                        .iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ));
        }
        let red: Vec<String> = runs[0]
            .outcomes
            .iter()
            .filter(|(_, o)| **o != Outcome::Passed)
            .map(|(t, _)| {
                let msg = runs[0]
                    .messages
                    .get(t)
                    .map(|m| failure_summary(m))
                    .unwrap_or_default();
                format!("{t} ({msg})")
            })
            .collect();
        if !red.is_empty() || runs[0].timed_out {
            return Err(refuse(
                "BASELINE-RED",
                format!(
                    "listed tests are not green with the switch compiled in and no mutant selected: {}",
                    red.join(", ")
                ),
            ));
        }
        p.line(&format!(
            "switched build {:.1}s; control runs {:.1}s and {:.1}s; test timeout {:.1}s",
            build.seconds,
            run_seconds[0],
            run_seconds[1],
            timeout.as_secs_f64()
        ));
        if !switched.is_empty() {
            p.phase("forced-fail control");
            let (ff, _, _) = self.run_tests(Some(FORCED_FAIL), timeout)?;
            for (t, o) in &ff.outcomes {
                if verdict::is_kill(*o) || *o == Outcome::NoResult {
                    self.info.forced_fail_failed.push(t.clone());
                } else {
                    self.info.forced_fail_passed.push(t.clone());
                }
            }
            if self.info.forced_fail_failed.is_empty() {
                return Err(refuse(
                    "SWITCH-UNREACHED",
                    "the forced-fail control passed every listed test: no listed test reaches switched code",
                ));
            }
        }

        // One run per switched mutant.
        let ids: Vec<usize> = switched
            .values()
            .flat_map(|f| f.values().flatten().copied())
            .collect();
        let mut order = ids.clone();
        order.sort();
        p.set_total(selected.len());
        let mut overheads = Vec::new();
        for i in order {
            if crate::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
            let m = &c.spec.mutations[i];
            p.phase(&format!("{}: testing (switched)", m.id));
            let (run, created, overhead) = self.run_tests(Some(&m.id), timeout)?;
            overheads.push(overhead);
            self.log_verdict(i, &run);
            self.results.insert(
                i,
                Ran {
                    run: Some(run),
                    compiler_error: None,
                    build_seconds: 0.0,
                    created,
                },
            );
            p.advance();
        }
        self.info.overhead_seconds_median = median(overheads);
        self.restore_scratch()?;

        // Fallback: rebuild mode in the scratch copy.
        for pm in &selected {
            let i = pm.index;
            if plan.get(&i).is_none_or(|e| e.mode != "rebuild") {
                continue;
            }
            if crate::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
            let m = &c.spec.mutations[i];
            p.line(&format!(
                "{}: rebuild mode ({})",
                m.id,
                plan[&i].reason.clone().unwrap_or_default()
            ));
            p.phase(&format!("{}: building (rebuild fallback)", m.id));
            let dst = sroot.join(&pm.rel_path);
            write_file(&dst, &pm.mutated)?;
            let b = self.cargo(None).build();
            let b = match b {
                Ok(b) => b,
                Err(e) => {
                    write_file(&dst, &pm.original)?;
                    return Err(e.into());
                }
            };
            if b.success && !rebuilt(&b, &dst) {
                write_file(&dst, &pm.original)?;
                return Err(refuse(
                    "STALE-BUILD",
                    format!(
                        "mutation {}: cargo reports the package fresh after {} was mutated",
                        m.id,
                        pm.rel_path.display()
                    ),
                ));
            }
            let ran = if b.success {
                p.phase(&format!("{}: testing (rebuild fallback)", m.id));
                let res = self.run_tests(None, timeout);
                write_file(&dst, &pm.original)?;
                let (run, created, _) = res?;
                self.log_verdict(i, &run);
                Ran {
                    run: Some(run),
                    compiler_error: None,
                    build_seconds: b.seconds,
                    created,
                }
            } else {
                write_file(&dst, &pm.original)?;
                p.line(&format!("{}: UNVIABLE", m.id));
                Ran {
                    run: None,
                    compiler_error: b.first_error.clone(),
                    build_seconds: b.seconds,
                    created: Vec::new(),
                }
            };
            self.results.insert(i, ran);
            p.advance();
        }

        p.phase("final fingerprint");
        let end_scan = workspace::scan(&c.root, &self.exclude)?;
        if end_scan.fingerprint() != start_scan.fingerprint() {
            return Err(refuse(
                "TREE-DIRTY",
                format!(
                    "the tree differs from its state at the start: {}",
                    start_scan.differences(&end_scan).join(", ")
                ),
            ));
        }
        Ok(())
    }

    fn log_verdict(&self, i: usize, run: &TestRun) {
        let m = &self.user.spec.mutations[i];
        let j = verdict::judge(
            m,
            &Observation::Ran {
                outcomes: &run.outcomes,
                messages: &run.messages,
                timed_out: run.timed_out,
            },
        );
        self.progress.line(&format!(
            "{}: {} ({}){}",
            m.id,
            j.verdict,
            j.expectation,
            if j.expectation == Expectation::Unmet {
                format!(": {}", j.reasons.join("; "))
            } else {
                String::new()
            }
        ));
    }

    /// Records mutation `i` as UNVIABLE with compiler error `err`, found `how`.
    fn mark_unviable(
        &mut self,
        plan: &mut BTreeMap<usize, PlanEntry>,
        i: usize,
        how: &str,
        err: String,
    ) {
        self.progress.line(&format!(
            "{}: UNVIABLE ({how}): {}",
            self.user.spec.mutations[i].id,
            failure_summary(&err)
        ));
        if let Some(e) = plan.get_mut(&i) {
            e.mode = "unviable".into();
            e.reason = Some(how.to_string());
        }
        self.results.insert(
            i,
            Ran {
                run: None,
                compiler_error: Some(err),
                build_seconds: 0.0,
                created: Vec::new(),
            },
        );
    }

    /// Compile-checks every switched mutation on its own in the (restored) scratch copy;
    /// those that do not compile are UNVIABLE and leave the switched set.
    fn check_alone(
        &mut self,
        switched: &mut BTreeMap<PathBuf, BTreeMap<usize, Vec<usize>>>,
        plan: &mut BTreeMap<usize, PlanEntry>,
        by_index: &BTreeMap<usize, &PreparedMutation>,
    ) -> Result<(), Stop> {
        let t = Instant::now();
        self.restore_scratch()?;
        let ids: Vec<(PathBuf, usize)> = switched
            .iter()
            .flat_map(|(f, fns)| fns.values().flatten().map(move |&i| (f.clone(), i)))
            .collect();
        for (file, i) in ids {
            if crate::interrupt::requested() {
                return Err(Stop::Interrupted);
            }
            self.progress.phase(&format!(
                "{}: compile check",
                self.user.spec.mutations[i].id
            ));
            let dst = self.scratch.root.join(&file);
            write_file(&dst, &by_index[&i].mutated)?;
            let res = self.compile_check();
            write_file(&dst, &by_index[&i].original)?;
            if let Some(err) = res? {
                self.mark_unviable(plan, i, "does not compile on its own", err);
                remove_switched(switched, i);
            }
        }
        self.info.check_seconds += t.elapsed().as_secs_f64();
        Ok(())
    }

    /// Writes every file of [`Ctx::originals`] into the scratch copy: the switched source
    /// for the files that still hold switched mutations, the original for the others.
    /// Returns where the mutated bodies sit.
    fn write_switched(
        &self,
        switched: &BTreeMap<PathBuf, BTreeMap<usize, Vec<usize>>>,
        bodies: &BTreeMap<PathBuf, Vec<FnBody>>,
        by_index: &BTreeMap<usize, &PreparedMutation>,
    ) -> Result<BTreeMap<PathBuf, Layout>, Stop> {
        let mut layouts = BTreeMap::new();
        for (file, original) in &self.originals {
            let dst = self.scratch.root.join(file);
            let Some(fns) = switched.get(file) else {
                write_file(&dst, original)?;
                continue;
            };
            let text = String::from_utf8_lossy(original).into_owned();
            let fb = &bodies[file];
            let list: Vec<SwitchedFn> = fns
                .iter()
                .map(|(&bi, idxs)| {
                    let b = &fb[bi];
                    let body = &text[b.body.clone()];
                    SwitchedFn {
                        name: b.name.clone(),
                        body: b.body.clone(),
                        mutants: idxs
                            .iter()
                            .map(|&i| {
                                let m = &self.user.spec.mutations[i];
                                (m.id.clone(), body.replace(&m.find, &m.replace))
                            })
                            .collect(),
                    }
                })
                .collect();
            let sw = switched_file(&text, &list);
            write_file(&dst, sw.text.as_bytes())?;
            let index_of: BTreeMap<&str, usize> = fns
                .values()
                .flatten()
                .map(|&i| (self.user.spec.mutations[i].id.as_str(), i))
                .collect();
            let arms = sw
                .arms
                .iter()
                .map(|(id, range, at)| {
                    let i = index_of[id.as_str()];
                    let mutated = String::from_utf8_lossy(&by_index[&i].mutated).into_owned();
                    (i, range.clone(), *at, mutated)
                })
                .collect();
            layouts.insert(
                file.clone(),
                Layout {
                    text: sw.text,
                    arms,
                },
            );
        }
        Ok(layouts)
    }

    /// Writes the original bytes back over every file of the scratch copy that has held
    /// switched code.
    fn restore_scratch(&self) -> Result<(), Stop> {
        for (file, original) in &self.originals {
            write_file(&self.scratch.root.join(file), original)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "//! doc\nconst K: i64 = 1 + 2;\n\nfn add(a: i64, b: i64) -> i64 {\n    a + b\n}\n\nstruct S;\nimpl S {\n    fn twice(&self, x: i64) -> i64 {\n        let f = |y: i64| y + y;\n        f(x)\n    }\n    const fn one() -> i64 { 1 + 0 }\n}\n\ntrait T {\n    fn dflt(&self) -> i64 { 3 + 4 }\n}\n\nfn it() -> impl Iterator<Item = i64> { (0..3).map(|x| x + 1) }\n";

    fn names(b: &[FnBody]) -> Vec<&str> {
        b.iter().map(|f| f.name.as_str()).collect()
    }

    #[test]
    fn finds_free_method_trait_default_bodies() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        assert_eq!(names(&b), ["add", "S::twice", "S::one", "T::dflt", "it"]);
        let add = &b[0];
        assert_eq!(&SRC[add.body.clone()], "{\n    a + b\n}");
        assert!(b[2].unswitchable.as_deref().unwrap().contains("const fn"));
        assert!(b[4].unswitchable.as_deref().unwrap().contains("impl Trait"));
    }

    #[test]
    fn places_occurrences() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        assert_eq!(place(SRC, "a + b", &b), Placement::InBody { index: 0 });
        assert_eq!(place(SRC, "y + y", &b), Placement::InBody { index: 1 });
        match place(SRC, "1 + 2", &b) {
            Placement::Outside { reason } => assert!(reason.contains("line 2"), "{reason}"),
            p => panic!("{p:?}"),
        }
        match place(SRC, " + ", &b) {
            Placement::Outside { reason } => assert!(reason.contains("outside"), "{reason}"),
            p => panic!("{p:?}"),
        }
        match place(SRC, "1 + 0", &b) {
            Placement::Outside { reason } => assert!(reason.contains("const fn"), "{reason}"),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn byte_offsets_survive_crlf_bom_and_multibyte_text() {
        let src = "\u{feff}//! é doc\r\n/// ünïcode\r\nfn f(x: i64) -> i64 {\r\n    \"ß\";\r\n    x * 2\r\n}\r\n";
        let b = function_bodies(Path::new("x.rs"), src).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(&src[b[0].body.clone()], "{\r\n    \"ß\";\r\n    x * 2\r\n}");
    }

    #[test]
    fn parse_errors_name_the_file_and_line() {
        let e = function_bodies(Path::new("bad.rs"), "fn f() {\n  let = ;\n}\n").unwrap_err();
        assert_eq!(e.file, PathBuf::from("bad.rs"));
        assert_eq!(e.line, 2);
    }

    #[test]
    fn switched_source_keeps_both_bodies() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        let f = SwitchedFn {
            name: b[0].name.clone(),
            body: b[0].body.clone(),
            mutants: vec![("m1".into(), "{\n    a - b\n}".into())],
        };
        let out = switched_source(SRC, &[f]);
        assert!(out.contains("Ok(\"m1\") => 1"), "{out}");
        assert!(out.contains("1 => {\n    a - b\n}"), "{out}");
        assert!(out.contains("_ => {\n    a + b\n}"), "{out}");
        assert!(out.contains(FORCED_FAIL));
        // Everything outside the body is untouched, and the result still parses.
        assert!(out.starts_with(&SRC[..b[0].body.start]));
        assert!(out.ends_with(&SRC[b[0].body.end..]));
        syn::parse_file(&out).expect("switched source parses");
    }

    #[test]
    fn arms_hold_the_mutated_bodies_verbatim() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        let fns = [
            SwitchedFn {
                name: b[0].name.clone(),
                body: b[0].body.clone(),
                mutants: vec![
                    ("m1".into(), "{\n    a - b\n}".into()),
                    ("m2".into(), "{\n    a * b\n}".into()),
                ],
            },
            SwitchedFn {
                name: b[3].name.clone(),
                body: b[3].body.clone(),
                mutants: vec![("m3".into(), "{ 3 - 4 }".into())],
            },
        ];
        let sw = switched_file(SRC, &fns);
        assert_eq!(sw.text, switched_source(SRC, &fns));
        let got: Vec<(&str, &str, usize)> = sw
            .arms
            .iter()
            .map(|(id, r, at)| (id.as_str(), &sw.text[r.clone()], *at))
            .collect();
        assert_eq!(
            got,
            [
                ("m1", "{\n    a - b\n}", b[0].body.start),
                ("m2", "{\n    a * b\n}", b[0].body.start),
                ("m3", "{ 3 - 4 }", b[3].body.start),
            ]
        );
        syn::parse_file(&sw.text).expect("switched source parses");
    }

    #[test]
    fn async_fns_are_not_switched() {
        let src = "async fn f() -> i64 { 1 + 2 }\n";
        let b = function_bodies(Path::new("x.rs"), src).unwrap();
        match place(src, "1 + 2", &b) {
            Placement::Outside { reason } => assert!(reason.contains("async fn"), "{reason}"),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn package_names_from_ids() {
        assert_eq!(
            package_name("registry+https://github.com/rust-lang/crates.io-index#serde@1.0.228"),
            "serde"
        );
        assert_eq!(package_name("path+file:///ws/engine#0.1.0"), "engine");
        assert_eq!(package_name("path+file:///ws/x#my-dep@0.2.0"), "my-dep");
    }

    fn error_at(file: &str, bytes: Range<usize>, rendered: &str) -> CompilerError {
        CompilerError {
            code: None,
            message: "mismatched types".into(),
            rendered: rendered.into(),
            sites: vec![diagnostics::Site {
                file: file.into(),
                bytes,
                line: 1,
                column: 1,
            }],
        }
    }

    #[test]
    fn errors_are_blamed_on_the_mutated_body_that_holds_them() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        let fns = [SwitchedFn {
            name: b[0].name.clone(),
            body: b[0].body.clone(),
            mutants: vec![
                ("m1".into(), "{\n    a - b\n}".into()),
                ("m2".into(), "{\n    a == b\n}".into()),
            ],
        }];
        let sw = switched_file(SRC, &fns);
        let m2 = SRC.replace("a + b", "a == b");
        let layout = Layout {
            arms: vec![
                (
                    0,
                    sw.arms[0].1.clone(),
                    sw.arms[0].2,
                    SRC.replace("a + b", "a - b"),
                ),
                (1, sw.arms[1].1.clone(), sw.arms[1].2, m2.clone()),
            ],
            text: sw.text.clone(),
        };
        let layouts: BTreeMap<PathBuf, Layout> = [(PathBuf::from("src/lib.rs"), layout)].into();
        let in_m2 = sw.text.find("a == b").unwrap();
        let (line, col) = diagnostics::line_column(&sw.text, in_m2);
        let rendered =
            |file: &str| format!("error[E0308]: mismatched types\n --> {file}:{line}:{col}\n");
        let in_original = sw.text.rfind("a + b").unwrap();
        let errors = [
            error_at("src/lib.rs", in_m2..in_m2 + 6, &rendered("src/lib.rs")),
            error_at("src/lib.rs", in_m2..in_m2 + 6, &rendered("src/lib.rs")),
            error_at(
                "/ws/src/lib.rs",
                in_m2..in_m2 + 6,
                &rendered("/ws/src/lib.rs"),
            ),
            error_at(
                "src/lib.rs",
                in_original..in_original + 5,
                "error: in the original",
            ),
            error_at("src/other.rs", in_m2..in_m2 + 6, "error: elsewhere"),
        ];
        let (blamed, stray) = blame(&errors, Path::new("/ws"), &layouts);
        // Both spellings of the path land on m2 (index 1); the repeated error is kept once;
        // m1 gets nothing.
        assert_eq!(blamed.keys().copied().collect::<Vec<_>>(), [1]);
        // The location is moved to the mutated file: where `a == b` is there.
        let (l, c) = diagnostics::line_column(&m2, m2.find("a == b").unwrap());
        assert_eq!(
            blamed[&1],
            [
                format!("error[E0308]: mismatched types\n --> src/lib.rs:{l}:{c}\n"),
                format!("error[E0308]: mismatched types\n --> /ws/src/lib.rs:{l}:{c}\n"),
            ]
        );
        assert_ne!((l, c), (line, col));
        let stray: Vec<&str> = stray.iter().map(|e| e.rendered.as_str()).collect();
        assert_eq!(stray, ["error: in the original", "error: elsewhere"]);
    }
}
