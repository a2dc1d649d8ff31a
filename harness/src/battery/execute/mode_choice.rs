//! The mode of a battery run given no `--mode`: rebuild mode for a selection so small that switch mode's fixed runs cost more than the rebuilds they save, switch mode otherwise.
//!
//! Both modes give the same verdicts and kill matrix; only their cost differs. Rebuild mode
//! pays, per mutation, one build of the mutated package (and what depends on it) and one
//! run of every listed test. Switch mode pays, once, a build of the scratch copy (every
//! workspace member when the scratch target directory is cold), the forced-fail control
//! (one run of every listed test) and the reach run (every listed test on its own, one
//! process each); then, per mutation the switch holds, only the tests that reach it. A
//! mutation the switch cannot hold (outside any function body) is rebuilt in either mode.
//!
//! So switch mode pays once about one build plus one process per listed test, and saves
//! about one build and one run of every listed test per mutation it holds. The rule counts
//! both in rebuilds: a mutation the switch holds saves one; the reach run costs one per
//! [`TESTS_PER_REBUILD`] listed tests; the scratch build and the forced-fail control cost
//! [`FIXED_REBUILDS`]. Switch mode runs when the mutations it would hold number at least
//! `max(FIXED_REBUILDS, ceil(listed tests / TESTS_PER_REBUILD))`; rebuild mode otherwise,
//! and always when the switch would hold none. Measured (2 cores, docs/battery-report.md):
//! on the sample fixture (7 tests) one mutation ran in 1.25 s in rebuild mode and 1.57 s in
//! switch mode with a cold scratch copy, two in 2.30 s and 1.90 s; on the admission battery
//! (about 45 tests, about 26 s a rebuild) switch mode's fixed cost was about five rebuilds
//! cold; on a crate whose 2-mutation catalog runs tests that spawn its binary, switch mode
//! took 99.6 s and rebuild mode 59.3 s. The rule reads neither earlier timings nor whether
//! the scratch copy is warm: it is a count, the same on every machine, printed with its
//! figures, and `--mode` overrides it.

use std::collections::BTreeMap;
use std::path::PathBuf;

use crate::battery::Mode;
use crate::battery::execute::instrument::{FnBody, Placement, function_bodies, place};
use crate::battery::report::schema::{ChosenBy, ModeChoice};
use crate::battery::select::catalog::{Catalog, PreparedMutation};

/// Listed tests whose reach-run processes cost about one rebuild of the mutated package.
pub const TESTS_PER_REBUILD: usize = 10;
/// Switch mode's scratch build and forced-fail control, counted in rebuilds.
pub const FIXED_REBUILDS: usize = 2;

/// How many of `selected` the switch can hold: each whose every occurrence changes bytes
/// inside one function body ([`place`]), as switch mode's plan decides it. A file that does
/// not parse holds none.
pub fn switchable(selected: &[&PreparedMutation], catalog: &Catalog) -> usize {
    let mut bodies: BTreeMap<PathBuf, Vec<FnBody>> = BTreeMap::new();
    selected
        .iter()
        .filter(|pm| {
            let m = &catalog.spec.mutations[pm.index];
            let text = String::from_utf8_lossy(&pm.original);
            let fns = bodies
                .entry(pm.rel_path.clone())
                .or_insert_with(|| function_bodies(&pm.rel_path, &text).unwrap_or_default());
            matches!(
                place(&text, &m.find, &m.replace, fns),
                Placement::InBody { .. }
            )
        })
        .count()
}

/// The mode for `selected` mutations of which `held` the switch can hold, with `tests`
/// listed tests: see the module documentation for the rule. Returns it with the reason.
pub fn choose(selected: usize, held: usize, tests: usize) -> (Mode, String) {
    let needed = FIXED_REBUILDS.max(tests.div_ceil(TESTS_PER_REBUILD));
    let counts = format!(
        "{held} of {selected} selected mutation(s) the switch can hold, {tests} listed test(s)"
    );
    if held == 0 {
        return (
            Mode::Rebuild,
            format!("chosen by size: {counts}; every mutation is rebuilt in either mode"),
        );
    }
    if held >= needed {
        (
            Mode::Switch,
            format!(
                "chosen by size: {counts}; switch mode pays from max({FIXED_REBUILDS}, {tests}/{TESTS_PER_REBUILD}) = {needed} (its scratch build, forced-fail control and one reach process per test, counted in rebuilds)"
            ),
        )
    } else {
        (
            Mode::Rebuild,
            format!(
                "chosen by size: {counts}; below max({FIXED_REBUILDS}, {tests}/{TESTS_PER_REBUILD}) = {needed}, switch mode's scratch build, forced-fail control and reach run would cost more than the rebuilds they save"
            ),
        )
    }
}

/// The mode of a run asked for `asked`: `asked` itself when it names one (`--mode`), else
/// [`choose`] over the mutations `opts` selects (`--only`, `--shard`, `--since`) in
/// `catalog`. A catalog whose mutations cannot be prepared (a file missing, a `find` text
/// drifted) runs in rebuild mode, whose opening then refuses it as it would anyway.
pub fn resolve(
    asked: Mode,
    catalog: &Catalog,
    opts: &crate::battery::Options,
    diff: Option<&crate::battery::select::diffscope::DiffLines>,
) -> ModeChoice {
    if asked != Mode::Auto {
        return ModeChoice {
            mode: asked,
            by: ChosenBy::Option,
            reason: format!("--mode {}", asked.word()),
        };
    }
    let (mode, reason) = match catalog.prepare() {
        Ok(prepared) => {
            let picked: Vec<&PreparedMutation> =
                crate::battery::execute::run::selected_indices(catalog, &prepared, opts, diff)
                    .into_iter()
                    .map(|k| &prepared[k])
                    .collect();
            let held = switchable(&picked, catalog);
            choose(picked.len(), held, catalog.spec.tests.len())
        }
        Err(e) => (
            Mode::Rebuild,
            format!("chosen by size: the mutations could not be counted ({e})"),
        ),
    };
    ModeChoice {
        mode,
        by: ChosenBy::Size,
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_handful_rebuilds_and_a_battery_switches() {
        // No mutation the switch can hold: rebuild, whatever the size.
        assert_eq!(choose(40, 0, 7).0, Mode::Rebuild);
        // Few tests: switch mode pays from two held mutations.
        assert_eq!(choose(1, 1, 7).0, Mode::Rebuild);
        assert_eq!(choose(2, 2, 7).0, Mode::Switch);
        assert_eq!(choose(6, 6, 7).0, Mode::Switch);
        // Many tests: the reach run costs more, so more held mutations are needed.
        assert_eq!(choose(4, 4, 45).0, Mode::Rebuild);
        assert_eq!(choose(5, 5, 45).0, Mode::Switch);
        assert_eq!(choose(29, 28, 45).0, Mode::Switch);
        // Mutations the switch cannot hold count for neither side.
        assert_eq!(choose(10, 1, 7).0, Mode::Rebuild);
    }

    #[test]
    fn the_reason_gives_the_counts_and_the_threshold() {
        let (_, why) = choose(3, 2, 45);
        assert_eq!(
            why,
            "chosen by size: 2 of 3 selected mutation(s) the switch can hold, 45 listed test(s); below max(2, 45/10) = 5, switch mode's scratch build, forced-fail control and reach run would cost more than the rebuilds they save"
        );
    }
}
