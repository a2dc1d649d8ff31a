//! UNGUARDED-IN-DIFF: the functions a `--since` diff changes that no catalog mutation's
//! occurrence touches.
//!
//! Guarded code is the Rust source under each workspace member's `src/` folder (as `cargo
//! metadata` names the members), outside `#[cfg(test)]` items and `#[test]` functions:
//! integration tests, benches, examples and build scripts are test or build code, not code
//! the tests guard. A function is a `fn` item (free, nested, in an inline module) or a
//! method with a body in an `impl` or a `trait`; each changed line of the working tree's
//! side belongs to the innermost function holding it. A function counts as changed when its
//! tokens differ from those of the function of the same path (and rank among functions of
//! that path) at the merge base, the tokens of functions nested in it left out and doc
//! comments, comments and whitespace ignored: a change of comments or formatting alone is
//! not a change. A function absent at the merge base (new, renamed, in a new or untracked
//! file) is changed; a deleted function is not in the working tree and is never listed.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::battery::select::diffscope::{DiffLines, SinceError, occurrence_lines};
use crate::battery::select::functions::{FnSpan, ParseFailure, Scope, SelfType, functions};

/// A changed function no catalog mutation touches (`battery.json`'s `unguarded_in_diff`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnguardedFn {
    /// The file, relative to the workspace root.
    pub file: PathBuf,
    /// Path of the function inside its file: `name`, `Type::name` for an inherent method,
    /// `<Type as Trait>::name` for a trait impl's, `Trait::name` for a trait's default body,
    /// prefixed by inline modules and enclosing functions (`outer::inner`).
    pub function: String,
    /// First line of the function (its attributes included), 1-based.
    pub line: usize,
    /// Last line of the function.
    pub end_line: usize,
    /// The changed lines inside it that belong to no function nested in it: 1-based
    /// inclusive ranges of the working tree's side.
    pub changed_lines: Vec<(usize, usize)>,
}

/// One function found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnItem {
    /// See [`UnguardedFn::function`].
    pub path: String,
    /// 1-based first and last line, attributes included.
    pub lines: (usize, usize),
    /// Byte range of the whole item.
    pub bytes: Range<usize>,
}

/// Every function of `text` (Rust source) outside test code, in source order (see
/// [`functions`] for what a function is and how `text` is read).
///
/// Errors: [`ParseFailure`] when `text` does not parse.
pub fn fn_items(text: &str) -> Result<Vec<FnItem>, ParseFailure> {
    Ok(functions(text)?
        .into_iter()
        .filter(|f| !f.test_code)
        .map(|f| FnItem {
            path: path_of(&f),
            lines: f.lines,
            bytes: f.item,
        })
        .collect())
}

/// [`UnguardedFn::function`] of `f`.
fn path_of(f: &FnSpan) -> String {
    let mut path: Vec<String> = f
        .scope
        .iter()
        .map(|s| match s {
            Scope::Module(n) | Scope::Function(n) | Scope::Trait(n) => n.clone(),
            Scope::Impl {
                self_type,
                trait_name: Some(t),
            } => format!("<{} as {t}>", type_name(self_type)),
            Scope::Impl {
                self_type,
                trait_name: None,
            } => type_name(self_type),
        })
        .collect();
    path.push(f.name.clone());
    path.join("::")
}

/// An `impl`'s self type as a function's path spells it: its name, through references;
/// `_` for any other type.
fn type_name(t: &SelfType) -> String {
    match t {
        SelfType::Named(n) => n.clone(),
        SelfType::Reference(t) => type_name(t),
        SelfType::Other => "_".into(),
    }
}

/// The tokens of `items[k]` in `text` with the functions nested in it cut out (comments,
/// doc comments and whitespace are not tokens).
fn own_tokens(text: &str, items: &[FnItem], k: usize) -> Option<Vec<String>> {
    let outer = &items[k].bytes;
    let mut own = String::new();
    let mut at = outer.start;
    for (j, inner) in items.iter().enumerate() {
        let r = &inner.bytes;
        if j == k || r.start < at || r.end > outer.end || r.start < outer.start {
            continue;
        }
        own.push_str(text.get(at..r.start)?);
        own.push(' ');
        at = r.end;
    }
    own.push_str(text.get(at..outer.end)?);
    crate::battery::select::inert::code_tokens(&own)
}

/// The rank of `items[k]` among the items of its path (0 for the first).
fn rank(items: &[FnItem], k: usize) -> usize {
    items[..k]
        .iter()
        .filter(|f| f.path == items[k].path)
        .count()
}

/// The functions of `rel` (working tree `text`, merge base `base`, `None` for a new file)
/// that the diff's changed lines `ranges` change, as [`UnguardedFn`]s (not yet checked
/// against the catalog).
///
/// Errors: either version does not parse ([`SinceError::Parse`]).
pub fn changed_functions(
    rev: &str,
    rel: &Path,
    text: &str,
    base: Option<&str>,
    ranges: &[(usize, usize)],
) -> Result<Vec<UnguardedFn>, SinceError> {
    let parse = |side: &'static str, t: &str| {
        fn_items(t).map_err(|e| SinceError::Parse {
            rev: rev.into(),
            side,
            file: rel.to_path_buf(),
            message: e.message,
            line: e.line,
            column: e.column,
        })
    };
    let items = parse("working-tree", text)?;
    let base_items = match base {
        Some(b) => Some(parse("merge-base", b)?),
        None => None,
    };
    // Each changed line goes to the innermost function holding it.
    let mut lines_of: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for &(a, b) in ranges {
        for line in a..=b {
            let inner = items
                .iter()
                .enumerate()
                .filter(|(_, f)| f.lines.0 <= line && line <= f.lines.1)
                .min_by_key(|(_, f)| f.bytes.len());
            if let Some((k, _)) = inner {
                lines_of.entry(k).or_default().push(line);
            }
        }
    }
    let mut out = Vec::new();
    for (k, lines) in lines_of {
        let f = &items[k];
        if let (Some(b), Some(bi)) = (base, &base_items) {
            let r = rank(&items, k);
            let counterpart = bi
                .iter()
                .enumerate()
                .filter(|(_, g)| g.path == f.path)
                .nth(r)
                .map(|(j, _)| j);
            if let Some(j) = counterpart
                && own_tokens(b, bi, j).is_some()
                && own_tokens(b, bi, j) == own_tokens(text, &items, k)
            {
                continue;
            }
        }
        out.push(UnguardedFn {
            file: rel.to_path_buf(),
            function: f.path.clone(),
            line: f.lines.0,
            end_line: f.lines.1,
            changed_lines: ranges_of(&lines),
        });
    }
    Ok(out)
}

/// Sorted lines as inclusive ranges of consecutive lines.
fn ranges_of(lines: &[usize]) -> Vec<(usize, usize)> {
    let mut out: Vec<(usize, usize)> = Vec::new();
    for &l in lines {
        match out.last_mut() {
            Some((_, e)) if *e + 1 == l => *e = l,
            Some((_, e)) if *e == l => {}
            _ => out.push((l, l)),
        }
    }
    out
}

/// A catalog mutation's occurrences: the file (relative to the workspace root) and their
/// 1-based inclusive line ranges.
pub type Guard = (PathBuf, Vec<(usize, usize)>);

/// The occurrences of every mutation of `catalogs` (as loaded), relative to `root` (a
/// catalog of another workspace guards nothing here). A file that cannot be read guards
/// nothing (the battery's drift check refuses it).
pub fn guards(root: &Path, catalogs: &[&crate::battery::select::catalog::Catalog]) -> Vec<Guard> {
    let mut out = Vec::new();
    for c in catalogs {
        for m in &c.spec.mutations {
            let abs = c.root.join(&m.file);
            let Ok(rel) = abs.strip_prefix(root) else {
                continue;
            };
            let Ok(bytes) = std::fs::read(&abs) else {
                continue;
            };
            out.push((rel.to_path_buf(), occurrence_lines(&bytes, &m.find)));
        }
    }
    out
}

/// Whether `rel` is guarded code: a `.rs` file under one of `src_dirs` (each member's
/// `src/`, relative to the workspace root).
pub fn is_guarded_code(rel: &Path, src_dirs: &[PathBuf]) -> bool {
    rel.extension().is_some_and(|e| e == "rs") && src_dirs.iter().any(|d| rel.starts_with(d))
}

/// UNGUARDED-IN-DIFF: the functions of guarded code (`src_dirs`, see [`is_guarded_code`])
/// under `root` that `diff` changes and that no occurrence in `guards` touches (shares a
/// line with), in file and line order.
///
/// Errors: a changed file that cannot be read or parsed, in either version.
pub fn unguarded_in_diff(
    root: &Path,
    diff: &DiffLines,
    src_dirs: &[PathBuf],
    guards: &[Guard],
) -> Result<Vec<UnguardedFn>, SinceError> {
    let mut out = Vec::new();
    for (rel, ranges) in &diff.files {
        if !is_guarded_code(rel, src_dirs) {
            continue;
        }
        let text = match std::fs::read_to_string(root.join(rel)) {
            Ok(t) => t,
            // Deleted in the working tree: its functions are gone, nothing to list.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                return Err(SinceError::Read {
                    rev: diff.rev.clone(),
                    side: "working-tree",
                    file: rel.clone(),
                    message: e.to_string(),
                });
            }
        };
        let base = diff.base_text(rel)?;
        for f in changed_functions(&diff.rev, rel, &text, base.as_deref(), ranges)? {
            let touched = guards.iter().any(|(g, occ)| {
                g == rel && occ.iter().any(|&(a, b)| a <= f.end_line && f.line <= b)
            });
            if !touched {
                out.push(f);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "\
pub struct S;
impl S {
    /// Doc.
    pub fn admit(&self) -> u32 {
        fn helper() -> u32 { 1 }
        helper() + 1
    }
}
impl Clone for S {
    fn clone(&self) -> S { S }
}
trait T {
    fn decl(&self);
    fn with_default(&self) -> u8 { 0 }
}
mod inner {
    pub fn f() {}
}
#[cfg(test)]
mod tests {
    fn in_tests() {}
}
#[test]
fn a_test() {}
";

    #[test]
    fn functions_are_named_by_their_path_and_tests_left_out() {
        let items = fn_items(SRC).unwrap();
        let names: Vec<(&str, (usize, usize))> =
            items.iter().map(|f| (f.path.as_str(), f.lines)).collect();
        assert_eq!(
            names,
            [
                ("S::admit", (3, 7)),
                ("S::admit::helper", (5, 5)),
                ("<S as Clone>::clone", (10, 10)),
                ("T::with_default", (14, 14)),
                ("inner::f", (17, 17)),
            ]
        );
    }

    #[test]
    fn comment_and_whitespace_edits_change_no_function() {
        let edited = SRC
            .replace("/// Doc.", "/// Other doc.")
            .replace("helper() + 1", "helper()  +  1 // sum");
        let ch = changed_functions("r", Path::new("a.rs"), &edited, Some(SRC), &[(3, 6)]);
        assert_eq!(ch.unwrap(), []);
        let edited = SRC.replace("{ 1 }", "{ 2 }");
        let ch = changed_functions("r", Path::new("a.rs"), &edited, Some(SRC), &[(5, 5)]).unwrap();
        let names: Vec<&str> = ch.iter().map(|f| f.function.as_str()).collect();
        assert_eq!(names, ["S::admit::helper"]);
        // A new file: every function with a changed line.
        let ch = changed_functions("r", Path::new("a.rs"), SRC, None, &[(1, 24)]).unwrap();
        assert_eq!(ch.len(), 5);
        assert_eq!(ch[0].changed_lines, [(3, 4), (6, 7)]);
    }

    #[test]
    fn a_file_that_does_not_parse_is_an_error_naming_it() {
        let e = changed_functions("r", Path::new("src/a.rs"), "fn (", None, &[(1, 1)])
            .unwrap_err()
            .to_string();
        assert!(e.contains("src/a.rs") && e.contains("working-tree"), "{e}");
    }
}
