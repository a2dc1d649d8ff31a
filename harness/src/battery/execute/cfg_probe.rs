//! Compiler evidence that a mutation's changed bytes are compiled: probe items behind the
//! same `cfg` gates, checked by rustc once per battery.
//!
//! A mutation inside a compiled file can still lie in code rustc strips before it compiles
//! anything (a `#[cfg(feature = "x")]` match arm, a `#[cfg(not(unix))]` function, a
//! `cfg_if!` branch): every test then runs exactly the unmutated code, and a verdict of
//! SURVIVED or NO_COVERAGE would blame the tests for code that was never built. For each
//! selected mutation with gates around its changed bytes
//! ([`crate::battery::select::cfg_spans::gates_around`]), a copy of the tree gets, at the end
//! of the mutated file, one probe item per occurrence carrying the same gates, and one per
//! gate alone:
//!
//! ```text
//! #[cfg(feature = "x")] const _: &[u8] = include_bytes!("<probe dir>/m3-0");
//! ```
//!
//! plus one ungated control. rustc strips a gated item exactly when it strips the gated
//! node (a `cfg` predicate holds or not for a whole compilation of a crate), and an
//! `include_bytes!` that survives lists its file in the unit's dep-info, which rustc writes
//! right after expansion. The copy is checked (`cargo check`) as the catalog builds it:
//! its package and features, the library and binaries as they are built for the
//! integration tests and doc tests (no dev-dependency needed), and, only when a gate names
//! `test` or `doctest`, once more in test mode (`--profile test`: the unit tests and test
//! targets, with the dev-dependencies). So the gates are decided by rustc under the
//! run's own configuration (features, the target platform, `--cfg` flags and build scripts'
//! `cargo:rustc-cfg`), never by an evaluation of the predicates here. A mutation none of
//! whose probes any unit compiled is NOT_COMPILED, naming the gates whose own probes no unit
//! compiled. Without the control in every probed file's dep-info nothing is concluded.
//!
//! The checks run in a target directory of their own (`<target_dir>/harness-cfg-probe`):
//! cargo names a workspace member's artifacts by its path relative to the workspace root,
//! so the copy's would overwrite the mode's own. Its dependencies are checked once and
//! reused by every later battery. Nothing runs when no selected mutation has a gate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::battery::execute::scratch::sync_tree;
use crate::battery::select::catalog::{Catalog, Mutation, PreparedMutation};
use crate::battery::select::cfg_spans::{Parsed, SpanGate};
use crate::battery::select::gates::Gate;
use crate::battery::tree::{self, TreeScan};
use crate::cargo::{CargoCmd, PackageMeta, parse_dep_info};

/// The folder, under the catalog's target directory, of the probe copy and its target
/// directory.
pub const PROBE_DIR: &str = "harness-cfg-probe";

/// A selected mutation with `cfg` gates on its file's way from a crate root, or around at
/// least one occurrence of its changed bytes.
#[derive(Debug, Clone)]
pub struct Gated {
    /// Index of the mutation in the catalog.
    pub index: usize,
    /// The mutated file, relative to the workspace root.
    pub rel_path: PathBuf,
    /// Per occurrence of `find`: its 1-based line and the gates around its changed bytes
    /// (outermost first; empty for an occurrence in code compiled with its file).
    pub occurrences: Vec<(usize, Vec<SpanGate>)>,
    /// The gates on the file's way from a crate root (on the `mod` declarations that load
    /// it, its own `#![cfg]`), each with the file that holds it, relative to the root.
    pub file_gates: Vec<(PathBuf, Gate)>,
}

/// The gates of `m` (in `pm`'s file, whose bytes are `pm.original`, parsed once as
/// `parsed`): those around each occurrence of its changed bytes, and `file_gates` (see
/// [`Gated::file_gates`]). `None` when there is none, or the file is not UTF-8 or does not
/// parse (`parsed` is `None`: then nothing is concluded about it here).
pub fn gated(
    m: &Mutation,
    pm: &PreparedMutation,
    parsed: Option<&Parsed>,
    file_gates: Vec<(PathBuf, Gate)>,
) -> Option<Gated> {
    let text = std::str::from_utf8(&pm.original).ok()?;
    let parsed = parsed?;
    if m.find.is_empty() {
        return None;
    }
    let span = crate::battery::execute::instrument::changed_span(&m.find, &m.replace);
    let mut occurrences = Vec::new();
    for (at, _) in text.match_indices(m.find.as_str()) {
        let (start, end) = (at + span.start, at + span.end);
        let line = text[..start].matches('\n').count() + 1;
        let gates = parsed.gates_around(start..end);
        occurrences.push((line, gates));
    }
    (!file_gates.is_empty() || occurrences.iter().any(|(_, g)| !g.is_empty())).then(|| Gated {
        index: pm.index,
        rel_path: pm.rel_path.clone(),
        occurrences,
        file_gates,
    })
}

/// What the probe found: why each mutation whose changed bytes no unit compiled is
/// NOT_COMPILED, by catalog index; and how long the checks took.
#[derive(Debug, Default)]
pub struct Evidence {
    /// Catalog index -> why (the gates that keep it out, named with file and line).
    pub not_compiled: BTreeMap<usize, String>,
    /// Mutations probed.
    pub probed: usize,
    /// Seconds the copy and the checks took.
    pub seconds: f64,
    /// Set when nothing could be concluded (a check failed, or a control probe is missing
    /// from the dep-info): the reason.
    pub inconclusive: Option<String>,
}

/// Probes `gated` in a copy of the tree at `root` (its file set `scan`), checked as
/// `catalog` builds it with `features`/`no_default` (the catalog's own, or another
/// configuration's) and `package` (the catalog's package as `cargo metadata` of that tree
/// describes it). Errors: an I/O error of the copy or the probe files, naming the path.
pub fn probe(
    catalog: &Catalog,
    package: Option<&PackageMeta>,
    root: &Path,
    scan: &TreeScan,
    gated: &[Gated],
    features: (&[String], bool),
) -> Result<Evidence, tree::TreeError> {
    let started = std::time::Instant::now();
    let mut ev = Evidence {
        probed: gated.len(),
        ..Evidence::default()
    };
    if gated.is_empty() {
        return Ok(ev);
    }
    let base = catalog.target_dir.join(PROBE_DIR);
    std::fs::create_dir_all(&base).map_err(tree::io(&base, "create directory"))?;
    tree::mark_cache_dir(&base)?;
    let copy = base.join("tree");
    let target = base.join("target");
    sync_tree(root, scan, &copy)?;
    // A folder of empty files per run: a dep-info file left by an earlier run names the
    // files of that run's folder, never these.
    let nonce = format!(
        "p-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    clear_old_runs(&base)?;
    let files_dir = base.join(&nonce);
    std::fs::create_dir_all(&files_dir).map_err(tree::io(&files_dir, "create directory"))?;
    let files_dir = files_dir.canonicalize().unwrap_or(files_dir);
    let new_probe = |name: String| -> Result<PathBuf, tree::TreeError> {
        let p = files_dir.join(name);
        std::fs::write(&p, b"").map_err(tree::io(&p, "write"))?;
        Ok(p)
    };
    let mut per_file: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut controls: BTreeMap<PathBuf, PathBuf> = BTreeMap::new();
    // The control of `rel`: an ungated probe, compiled exactly when the file is.
    let mut control_of =
        |rel: &Path, per_file: &mut BTreeMap<PathBuf, String>| -> Result<(), tree::TreeError> {
            if controls.contains_key(rel) {
                return Ok(());
            }
            let p = new_probe(format!("control-{}", controls.len()))?;
            per_file
                .entry(rel.to_path_buf())
                .or_insert_with(|| {
                    "\n// harness: cfg probes (docs/battery-report.md, the run)\n".into()
                })
                .push_str(&probe_item(&[], &p));
            controls.insert(rel.to_path_buf(), p);
            Ok(())
        };
    for g in gated {
        control_of(&g.rel_path, &mut per_file)?;
        for (k, (_, gates)) in g.occurrences.iter().enumerate() {
            let all: Vec<String> = gates.iter().flat_map(|x| x.probe.clone()).collect();
            let p = new_probe(format!("m{}-{k}", g.index))?;
            let mut items = probe_item(&all, &p);
            for (j, gate) in gates.iter().enumerate() {
                let p = new_probe(format!("m{}-{k}-g{j}", g.index))?;
                items.push_str(&probe_item(&gate.probe, &p));
            }
            if let Some(t) = per_file.get_mut(&g.rel_path) {
                t.push_str(&items);
            }
        }
        for (j, (file, gate)) in g.file_gates.iter().enumerate() {
            if *file == g.rel_path {
                // The file's own `#![cfg]`: a probe in it says nothing the control does not.
                continue;
            }
            control_of(file, &mut per_file)?;
            let p = new_probe(format!("f{}-{j}", g.index))?;
            if let Some(t) = per_file.get_mut(file) {
                t.push_str(&probe_item(&[gate.attr()], &p));
            }
        }
    }
    let controls = controls;
    for (rel, items) in &per_file {
        let path = copy.join(rel);
        let mut text = std::fs::read(&path).map_err(tree::io(&path, "read"))?;
        text.extend_from_slice(items.as_bytes());
        std::fs::write(&path, text).map_err(tree::io(&path, "write"))?;
    }
    let cargo = CargoCmd::new(&copy, &catalog.spec.package, &target)
        .with_targets(
            catalog.spec.lib_tests,
            &catalog.spec.bin_targets,
            &catalog.spec.test_targets,
        )
        .with_doc_tests(catalog.spec.doc_tests)
        .with_features(features.0, features.1)
        .with_envs(&catalog.spec.env);
    let (has_lib, has_bins) = package.map_or((true, false), |p| (p.has_lib, !p.bins.is_empty()));
    // The library and binaries as built for the integration and doc tests: no dev-dependency
    // is needed. The test-mode check (`--profile test`, which checks the dev-dependencies
    // too) runs only when a gate's predicate names `test` or `doctest`, the only predicates
    // it decides otherwise.
    let mut checks = vec![cargo.check_built(has_lib, has_bins)];
    if gated.iter().any(names_test) {
        checks.push(cargo.check());
    }
    // The probed files go back to the user's bytes at once: the next sync would anyway.
    for rel in per_file.keys() {
        let (from, to) = (root.join(rel), copy.join(rel));
        let bytes = std::fs::read(&from).map_err(tree::io(&from, "read"))?;
        std::fs::write(&to, bytes).map_err(tree::io(&to, "write"))?;
    }
    for c in &checks {
        match c {
            Ok((true, _, _)) => {}
            Ok((false, _, stderr)) => {
                ev.inconclusive = Some(format!(
                    "cargo check of the probe copy failed: {}",
                    crate::cargo::tail(stderr, 8)
                ));
            }
            Err(e) => ev.inconclusive = Some(format!("cargo check of the probe copy: {e}")),
        }
    }
    let seen = seen_probes(&target, &files_dir);
    let _ = std::fs::remove_dir_all(&files_dir);
    ev.seconds = started.elapsed().as_secs_f64();
    if ev.inconclusive.is_some() {
        return Ok(ev);
    }
    if !controls.values().any(|p| seen.contains(p)) {
        ev.inconclusive = Some(format!(
            "no checked unit compiled the ungated probe of any of {}",
            controls
                .keys()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(ev);
    }
    let on = |name: String| seen.contains(&files_dir.join(name));
    let enabled = if features.0.is_empty() {
        String::new()
    } else {
        format!("; features: {}", features.0.join(", "))
    };
    let package = &catalog.spec.package;
    for g in gated {
        let file = g.rel_path.display();
        if !controls.get(&g.rel_path).is_some_and(|c| seen.contains(c)) {
            // The file itself is compiled into no unit: the gates on its way that rustc
            // shut (their declaring file compiled, their probe not), else its own.
            let mut shut: Vec<String> = Vec::new();
            for (j, (holder, gate)) in g.file_gates.iter().enumerate() {
                let holder_compiled = controls.get(holder).is_some_and(|c| seen.contains(c));
                if *holder != g.rel_path && holder_compiled && !on(format!("f{}-{j}", g.index)) {
                    shut.push(format!(
                        "`{}` at {}:{}",
                        gate.attr(),
                        holder.display(),
                        gate.line
                    ));
                }
            }
            if shut.is_empty() {
                shut = g
                    .file_gates
                    .iter()
                    .filter(|(holder, _)| *holder == g.rel_path)
                    .map(|(holder, gate)| {
                        format!(
                            "`#![cfg({})]` at {}:{}",
                            gate.predicate,
                            holder.display(),
                            gate.line
                        )
                    })
                    .collect();
            }
            if shut.is_empty() {
                // Not compiled, and no gate of its own to blame: not this module's to judge.
                continue;
            }
            ev.not_compiled.insert(
                g.index,
                format!(
                    "{file} is compiled into no unit of package {package} (rustc compiled no probe in it): kept out by {}{enabled}",
                    shut.join(", ")
                ),
            );
            continue;
        }
        let compiled = (0..g.occurrences.len()).any(|k| on(format!("m{}-{k}", g.index)));
        if compiled {
            continue;
        }
        let mut shut: Vec<String> = Vec::new();
        for (k, (_, gates)) in g.occurrences.iter().enumerate() {
            for (j, gate) in gates.iter().enumerate() {
                if !on(format!("m{}-{k}-g{j}", g.index)) {
                    let d = gate.describe();
                    if !shut.contains(&d) {
                        shut.push(d);
                    }
                }
            }
        }
        let (line, _) = g.occurrences[0];
        let why = if shut.is_empty() {
            let all: Vec<String> = g
                .occurrences
                .iter()
                .flat_map(|(_, gs)| gs.iter().map(SpanGate::describe))
                .collect();
            format!(
                "{file}:{line} is compiled into no unit of package {package} (rustc compiled no probe behind its gates together): kept out by {} in {file}{enabled}",
                all.join(" with ")
            )
        } else {
            format!(
                "{file}:{line} is compiled into no unit of package {package} (rustc compiled no probe behind its gates): kept out by {} in {file}{enabled}",
                shut.join(", ")
            )
        };
        ev.not_compiled.insert(g.index, why);
    }
    Ok(ev)
}

/// Whether a gate of `g` names the `test` or `doctest` predicate (as a word outside string
/// literals), which only a check in test mode decides.
fn names_test(g: &Gated) -> bool {
    let words = |p: &str| {
        // Outside string literals: `feature = "test-utils"` names a feature, not `test`.
        let bare: String = p.split('"').step_by(2).collect::<Vec<_>>().join(" ");
        bare.split(|c: char| !(c.is_alphanumeric() || c == '_'))
            .any(|w| w == "test" || w == "doctest")
    };
    g.occurrences
        .iter()
        .flat_map(|(_, gates)| gates.iter().flat_map(|x| x.probe.iter()))
        .any(|p| words(p))
        || g.file_gates.iter().any(|(_, gate)| words(&gate.predicate))
}

/// One probe item: `attrs`, then an unnamed constant holding the bytes of `file` (empty).
fn probe_item(attrs: &[String], file: &Path) -> String {
    let mut s = String::new();
    for a in attrs {
        s.push_str(a);
        s.push(' ');
    }
    s.push_str(&format!(
        "const _: &[u8] = include_bytes!({:?});\n",
        file.to_string_lossy()
    ));
    s
}

/// Removes the probe folders of earlier runs under `base`.
fn clear_old_runs(base: &Path) -> Result<(), tree::TreeError> {
    let Ok(rd) = std::fs::read_dir(base) else {
        return Ok(());
    };
    for e in rd.flatten() {
        if e.file_name().to_string_lossy().starts_with("p-") {
            let p = e.path();
            std::fs::remove_dir_all(&p).map_err(tree::io(&p, "remove"))?;
        }
    }
    Ok(())
}

/// The files under `probes` that some dep-info file under `target` names.
fn seen_probes(target: &Path, probes: &Path) -> BTreeSet<PathBuf> {
    let needle = probes.to_string_lossy().into_owned();
    let mut out = BTreeSet::new();
    let mut stack = vec![target.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let Ok(ft) = e.file_type() else { continue };
            if ft.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "d")
                && let Ok(text) = std::fs::read_to_string(&p)
                && text.contains(&needle)
            {
                out.extend(
                    parse_dep_info(&text)
                        .into_iter()
                        .filter(|f| f.starts_with(probes)),
                );
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_item_carries_every_gate_and_names_its_file() {
        let item = probe_item(
            &["#[cfg(unix)]".into(), "#[cfg(feature = \"x\")]".into()],
            Path::new("/p/m1-0"),
        );
        assert_eq!(
            item,
            "#[cfg(unix)] #[cfg(feature = \"x\")] const _: &[u8] = include_bytes!(\"/p/m1-0\");\n"
        );
    }

    #[test]
    fn only_a_gate_naming_test_or_doctest_asks_for_the_test_mode_check() {
        let span = |probe: &str| SpanGate {
            written: probe.into(),
            on: "block".into(),
            line: 1,
            probe: vec![probe.into()],
        };
        let g = |probes: &[&str]| Gated {
            index: 0,
            rel_path: "src/lib.rs".into(),
            occurrences: vec![(1, probes.iter().map(|p| span(p)).collect())],
            file_gates: Vec::new(),
        };
        assert!(names_test(&g(&["#[cfg(test)]"])));
        assert!(names_test(&g(&["#[cfg(unix)]", "#[cfg(not(doctest))]"])));
        assert!(!names_test(&g(&["#[cfg(feature = \"test-utils\")]"])));
        assert!(!names_test(&g(&[
            "#[cfg(feature = \"testing\")]",
            "#[cfg(unix)]"
        ])));
    }

    #[test]
    fn only_the_files_of_this_run_count_as_seen() {
        let d = tempfile::tempdir().unwrap();
        let deps = d.path().join("t/debug/deps");
        std::fs::create_dir_all(&deps).unwrap();
        let run = d.path().join("p-1");
        std::fs::write(
            deps.join("a-1.d"),
            format!(
                "/x/a.rmeta: src/lib.rs {0}/m1-0 {0}/control-0 /old/p-0/m2-0\n\nsrc/lib.rs:\n",
                run.display()
            ),
        )
        .unwrap();
        std::fs::write(deps.join("b-1.d"), "/x/b.rmeta: /old/p-0/m3-0\n").unwrap();
        let seen = seen_probes(&d.path().join("t"), &run);
        let want: BTreeSet<PathBuf> = [run.join("m1-0"), run.join("control-0")].into();
        assert_eq!(seen, want);
    }
}
