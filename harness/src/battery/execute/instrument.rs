//! Switch mode's source instrumentation: mutated bodies behind a run-time switch.
//!
//! Each function that holds mutations gets its original body and every mutated body side by
//! side behind a run-time switch, and the errors of a switched build are traced back to the
//! mutation whose body holds them.
//!
//! The switch: a function holding mutations keeps its original body and each mutated body
//! side by side, and picks one at run time from the environment variable [`SWITCH_ENV`]
//! (read once per function, cached in a function-local atomic):
//!
//! ```text
//! fn add(a: i64, b: i64) -> i64 {
//!     static REACHED: AtomicBool = ...;   // the reach recorder's flag
//!     static SW: AtomicUsize = ...;       // 0 = not read yet, else 1 + the choice
//!     match __harness_switch_TAG(&REACHED, &SW, "m1\n") {   // 0 = original, k = k-th
//!         1 => { a - b }                                     // mutation, MAX = forced fail
//!         usize::MAX => panic!("harness forced-fail control ..."),
//!         _ => { a + b }
//!     }
//! }
//! ```
//!
//! The work behind the switch (reading the variable, the reach recorder, the doc test
//! keeper) is in two functions appended once to each switched file ([`support_items`],
//! named after the file so that two switched files `include!`d into one module do not
//! clash), not repeated in every switched function: that code is compiled once per file,
//! and a switched build of a crate costs little more than a build of the original. A
//! function inside inline modules of the file calls them through `super::` paths, one per
//! module.
//!
//! An `async fn` is switched like any other: its future then holds the states of every body
//! (one at a time), so its auto traits (`Send`, `Sync`) are those of all bodies together. A
//! mutant whose future alone would not be `Send` where the code needs it makes the switched
//! build fail at that place, which no mutated body holds; every switched mutation is then
//! compiled on its own ([`crate::battery::execute::switch`]) and that one comes out
//! UNVIABLE, as in rebuild mode.
//!
//! Function bodies are found by parsing the file with `syn` (spans from `proc-macro2`'s
//! `span-locations`). A mutation is switched when every occurrence of its `find` text lies
//! inside the body of one `fn` (free, inherent, trait-impl or trait default method) that is
//! not `const`; otherwise (an item, a signature, a macro body, occurrences in several
//! functions) it falls back to rebuild mode, in the same scratch copy, and the plan says
//! why. A function returning `impl Trait` is switched too: the switch's `match` compiles
//! when every mutated body's value has the original's type (a mutated closure or `async`
//! block has a type of its own and does not); when the switched build fails, every mutation
//! of such a function goes back to a rebuild before the errors are read, so that a type the
//! `match` cannot join is never taken for a mutant that does not compile.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};

use crate::battery::execute::diagnostics::{self, CompilerError, Relocation};
use crate::battery::select::catalog::PreparedMutation;
use crate::battery::select::functions::{FnSpan, Scope, SelfType, functions};

/// The environment variable that selects the mutant in a switched build: a mutation id,
/// [`FORCED_FAIL`], or unset / anything else for the original code.
pub const SWITCH_ENV: &str = "HARNESS_MUTANT";
/// The switch value of the forced-fail control: every switched function panics.
pub const FORCED_FAIL: &str = "__harness_forced_fail__";

/// A function body found in a source file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnBody {
    /// Path-like name: `name`, `Type::name` for methods, `Trait::name` for trait defaults.
    pub name: String,
    /// Byte range of the body block, braces included.
    pub body: Range<usize>,
    /// Why the body cannot carry a switch (a `const fn`), if so.
    pub unswitchable: Option<String>,
    /// Whether the function returns `impl Trait`: its switch compiles only when every
    /// mutated body's value has the original's type (a closure or an `async` block of its
    /// own does not), so a failed switched build takes its mutations back to rebuilds.
    pub opaque_return: bool,
    /// How many inline modules (`mod m { ... }`) of the file it lies in: the number of
    /// `super::` its switch needs to reach the file's [`support_items`].
    pub module_depth: usize,
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

/// Every function body in `text` (Rust source of `file`), outermost first in source order
/// (see [`functions`] for what a function is and how `text` is read). A method is named
/// `Type::name` by its `impl` (`impl::name` when the self type is no path), a trait's default
/// body `Trait::name`.
///
/// Errors: [`ParseError`] with `syn`'s message and position.
pub fn function_bodies(file: &Path, text: &str) -> Result<Vec<FnBody>, ParseError> {
    let fns = functions(text).map_err(|e| ParseError {
        file: file.to_path_buf(),
        message: e.message,
        line: e.line,
        column: e.column,
    })?;
    let mut out: Vec<FnBody> = fns
        .into_iter()
        .map(|f| FnBody {
            name: switch_name(&f),
            unswitchable: f
                .is_const
                .then(|| "a const fn cannot read the switch at run time".to_string()),
            opaque_return: f.opaque_return,
            module_depth: f
                .scope
                .iter()
                .filter(|s| matches!(s, Scope::Module(_)))
                .count(),
            body: f.body,
        })
        .collect();
    out.sort_by_key(|f| (f.body.start, std::cmp::Reverse(f.body.end)));
    Ok(out)
}

/// The name a switched function goes by: its own, after that of the innermost `impl` or
/// trait around it.
fn switch_name(f: &FnSpan) -> String {
    let owner = f.scope.iter().rev().find_map(|s| match s {
        Scope::Impl {
            self_type: SelfType::Named(n),
            ..
        }
        | Scope::Trait(n) => Some(n.as_str()),
        Scope::Impl { .. } => Some("impl"),
        Scope::Module(_) | Scope::Function(_) => None,
    });
    match owner {
        Some(o) => format!("{o}::{}", f.name),
        None => f.name.clone(),
    }
}

/// Where a mutation's occurrences lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Placement {
    /// Every occurrence changes only bytes inside the body of `bodies[index]`: the outermost
    /// switchable body that holds every change (a nested function's mutations are switched
    /// in the function around it, so that no two switched bodies overlap).
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

/// The bytes a replacement of `find` by `replace` changes, relative to the start of an
/// occurrence: `find` less its longest prefix and suffix in common with `replace` (`find`
/// widened to whole lines to be unique, as cargo-mutants' mutants are, changes only the
/// expression in its middle).
pub fn changed_span(find: &str, replace: &str) -> Range<usize> {
    let (f, r) = (find.as_bytes(), replace.as_bytes());
    let prefix = f.iter().zip(r).take_while(|(a, b)| a == b).count();
    let room = f.len().min(r.len()) - prefix;
    let suffix = f
        .iter()
        .rev()
        .zip(r.iter().rev())
        .take(room)
        .take_while(|(a, b)| a == b)
        .count();
    prefix..f.len() - suffix
}

/// Places the occurrences of `find`, replaced by `replace`, in `text` among `bodies` (see
/// [`Placement`]). What must lie inside a body is the bytes an occurrence changes
/// ([`changed_span`]), not the whole `find` text.
pub fn place(text: &str, find: &str, replace: &str, bodies: &[FnBody]) -> Placement {
    let mut chosen: Option<usize> = None;
    if find.is_empty() {
        return Placement::Outside {
            reason: "empty find text".into(),
        };
    }
    let span = changed_span(find, replace);
    for (at, _) in text.match_indices(find) {
        let (start, end) = (at + span.start, at + span.end);
        let line = text[..start].matches('\n').count() + 1;
        let holding: Vec<usize> = bodies
            .iter()
            .enumerate()
            .filter(|(_, b)| b.body.start < start && end < b.body.end)
            .map(|(i, _)| i)
            .collect();
        let switchable = holding
            .iter()
            .filter(|&&i| bodies[i].unswitchable.is_none())
            .max_by_key(|&&i| bodies[i].body.len());
        let innermost = holding.iter().min_by_key(|&&i| bodies[i].body.len());
        let i = match (switchable, innermost) {
            (Some(&i), _) => i,
            (None, Some(&i)) => {
                let why = bodies[i].unswitchable.as_deref().unwrap_or_default();
                return Placement::Outside {
                    reason: format!("function {}: {why}", bodies[i].name),
                };
            }
            (None, None) => {
                return Placement::Outside {
                    reason: format!("the occurrence at line {line} is outside any function body"),
                };
            }
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
        Some(i) => Placement::InBody { index: i },
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
    /// [`FnBody::module_depth`].
    pub module_depth: usize,
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
    /// Per switched function, in source order: (byte range in the original text of the
    /// body it replaces, byte range in `text` of the whole switch that replaces it). Outside
    /// these ranges `text` is the original, byte for byte.
    pub regions: Vec<(Range<usize>, Range<usize>)>,
}

/// The switched source: each function's body replaced by the switch over its original and
/// mutated bodies (see the module docs), calling the support functions of [`support_items`]
/// for `tag` ([`support_tag`]), which the file must be given after this text. Bodies must
/// not overlap.
pub fn switched_source(text: &str, fns: &[SwitchedFn], tag: &str) -> String {
    switched_file(text, fns, tag).text
}

/// [`switched_source`], with the place of every mutated body ([`SwitchedFile::arms`]).
pub fn switched_file(text: &str, fns: &[SwitchedFn], tag: &str) -> SwitchedFile {
    let mut order: Vec<&SwitchedFn> = fns.iter().collect();
    order.sort_by_key(|f| f.body.start);
    let mut out = String::with_capacity(text.len() * 2);
    let mut arms = Vec::new();
    let mut regions = Vec::new();
    let mut at = 0;
    for f in order {
        out.push_str(&text[at..f.body.start]);
        at = f.body.end;
        let region_start = out.len();
        let original = &text[f.body.clone()];
        out.push_str("{\n");
        let mut ids = String::new();
        for (id, _) in &f.mutants {
            ids.push_str(id);
            ids.push('\n');
        }
        out.push_str(&format!(
            "#[allow(unused, clippy::all)]\n\
             static __HARNESS_REACHED: ::std::sync::atomic::AtomicBool = ::std::sync::atomic::AtomicBool::new(false);\n\
             #[allow(unused, clippy::all)]\n\
             static __HARNESS_SWITCH: ::std::sync::atomic::AtomicUsize = ::std::sync::atomic::AtomicUsize::new(0);\n\
             match {}{SWITCH_FN}{tag}(&__HARNESS_REACHED, &__HARNESS_SWITCH, {ids:?}) {{\n",
            "super::".repeat(f.module_depth)
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
        regions.push((f.body.clone(), region_start..out.len()));
    }
    out.push_str(&text[at..]);
    SwitchedFile {
        text: out,
        arms,
        regions,
    }
}

/// The name (less its [`support_tag`]) of the switch function [`support_items`] defines.
const SWITCH_FN: &str = "__harness_switch_";

/// The tag that names one switched file's support functions ([`support_items`]): 16 hex
/// digits of the FNV-1a hash of its path relative to the workspace root, so that the same
/// file gets the same bytes in every build.
pub fn support_tag(rel: &Path) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in rel.as_os_str().as_encoded_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// The two functions a switched file ends with, for `tag` ([`support_tag`]):
/// `__harness_switch_TAG(reached, switch, ids)`, which each switched function calls first
/// (it runs the reach recorder the first time, then returns the function's choice: `k`
/// when [`SWITCH_ENV`] is the `k`-th of the newline-terminated `ids`, `usize::MAX` for
/// [`FORCED_FAIL`], else 0, read once and cached in `switch` as `1 + choice`), and the
/// reach recorder it calls ([`crate::battery::execute::reach::recorder`]). Every path is
/// absolute and every trait method is called through its trait's path: a `#![no_std]`
/// library that links `std` itself has no `std` prelude.
pub fn support_items(tag: &str) -> String {
    format!(
        "\n// Added by the harness's switch mode: what its switched functions call.\n\
         #[allow(unused, clippy::all)]\n\
         fn {SWITCH_FN}{tag}(reached: &::std::sync::atomic::AtomicBool, switch: &::std::sync::atomic::AtomicUsize, ids: &str) -> usize {{\n\
         if !reached.load(::std::sync::atomic::Ordering::Relaxed) && !reached.swap(true, ::std::sync::atomic::Ordering::Relaxed) {{ {reached}(ids); }}\n\
         let k = switch.load(::std::sync::atomic::Ordering::Relaxed);\n\
         if k != 0 {{ return k - 1; }}\n\
         let k = match ::std::env::var_os({SWITCH_ENV:?}) {{\n\
         ::std::option::Option::Some(v) => {{\n\
         let v = ::std::os::unix::ffi::OsStrExt::as_bytes(::std::ffi::OsString::as_os_str(&v));\n\
         let ids = ids.as_bytes();\n\
         let (mut k, mut n, mut start, mut i) = (if v == {FORCED_FAIL:?}.as_bytes() {{ usize::MAX }} else {{ 0 }}, 1, 0, 0);\n\
         while k == 0 && i < ids.len() {{\n\
         if ids[i] == b'\\n' {{ if &ids[start..i] == v {{ k = n; }} n += 1; start = i + 1; }}\n\
         i += 1;\n\
         }}\n\
         k\n\
         }}\n\
         ::std::option::Option::None => 0,\n\
         }};\n\
         switch.store(k.wrapping_add(1), ::std::sync::atomic::Ordering::Relaxed);\n\
         k\n\
         }}\n{recorder}",
        reached = crate::battery::execute::reach::recorder_name(tag),
        recorder = crate::battery::execute::reach::recorder(tag),
    )
}

/// Where the mutated bodies sit in one switched file: (mutation index, byte range in the
/// switched text, byte offset of the body in the original and mutated file, mutated file).
pub struct Layout {
    /// The switched text.
    pub text: String,
    /// Per mutated body: (mutation index, byte range in `text`, byte offset of the body in
    /// the original and the mutated file, the mutated file).
    pub arms: Vec<(usize, Range<usize>, usize, String)>,
    /// [`SwitchedFile::regions`].
    pub regions: Vec<(Range<usize>, Range<usize>)>,
}

/// The body `b` of `text` (the original file) as the mutated file of `pm` holds it: every
/// byte `pm` changes lies inside `b` ([`place`]), so the mutated file agrees with the
/// original before the body and after it, and the body's end moves by the change in length.
pub fn mutated_body(text: &str, pm: &PreparedMutation, b: &FnBody) -> String {
    let mutated = String::from_utf8_lossy(&pm.mutated);
    let end = (b.body.end + mutated.len()).saturating_sub(text.len());
    mutated[b.body.start..end].to_string()
}

/// An error site's file relative to the scratch copy's `root` (rustc names a member's
/// file relative to the workspace, a path dependency's absolutely); `None` outside it.
pub fn site_path<'a>(file: &'a str, root: &Path) -> Option<&'a Path> {
    let path = Path::new(file);
    if path.is_absolute() {
        path.strip_prefix(root).ok()
    } else {
        Some(path)
    }
}

/// Which switched mutation each compiler error lies in. An error belongs to a mutation when
/// one of its sites (a primary span, or a macro call site it was expanded from) lies inside
/// that mutation's body in a switched file; its rendered text is moved to the mutation's
/// place in the mutated file. Returns (mutation index → its errors) and the errors that lie
/// in no mutated body.
pub fn blame<'e>(
    errors: &'e [CompilerError],
    root: &Path,
    layouts: &BTreeMap<PathBuf, Layout>,
) -> (BTreeMap<usize, Vec<String>>, Vec<&'e CompilerError>) {
    let mut blamed: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let mut stray = Vec::new();
    for e in errors {
        let mut hit = false;
        for site in &e.sites {
            let Some(layout) = site_path(&site.file, root).and_then(|r| layouts.get(r)) else {
                continue;
            };
            for (i, range, body_start, mutated) in &layout.arms {
                if range.start <= site.bytes.start && site.bytes.end <= range.end {
                    hit = true;
                    let verbatim = verbatim(layout, *body_start, mutated.len());
                    let r = Relocation {
                        file: &site.file,
                        compiled: &layout.text,
                        from: range.clone(),
                        shown: mutated,
                        to: *body_start,
                        verbatim: &verbatim,
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

/// The parts of a switched file's text that are the mutated file's, byte for byte, for the
/// mutation whose body starts at `body_start` in the original and whose mutated file is
/// `mutated_len` bytes long: (byte range in [`Layout::text`], byte offset in the mutated
/// file). They are the text between the switches ([`Layout::regions`]); the mutated file
/// is the original up to its body and the original shifted by the change in length after.
fn verbatim(layout: &Layout, body_start: usize, mutated_len: usize) -> Vec<(Range<usize>, usize)> {
    let original_len = layout.text.len()
        - layout
            .regions
            .iter()
            .map(|(body, region)| region.len() - body.len())
            .sum::<usize>();
    let shift = |at: usize| {
        if at > body_start {
            (at + mutated_len).saturating_sub(original_len)
        } else {
            at
        }
    };
    let mut out = Vec::new();
    let (mut compiled_at, mut original_at) = (0, 0);
    for (body, region) in &layout.regions {
        out.push((compiled_at..region.start, shift(original_at)));
        compiled_at = region.end;
        original_at = body.end;
    }
    out.push((compiled_at..layout.text.len(), shift(original_at)));
    out
}

/// What switch mode appends to a crate root that declares `#![no_std]` (or
/// `#![cfg_attr(..., no_std)]`) and names no `extern crate std;` of its own: the switch, the
/// reach recorder and the doc test keeper call `::std`, which such a crate does not link.
/// Appended at the end, it moves no line (doc tests are named by their lines). The tests run
/// on the host, where `std` exists.
pub const STD_FOR_NO_STD: &str = "\n// Added by the harness's switch mode: its code calls `::std`.\n#[allow(unused_extern_crates)]\nextern crate std;\n";

/// Whether switch mode must append [`STD_FOR_NO_STD`] to the crate root `text`: it declares
/// `no_std` among its inner attributes (plainly or under `cfg_attr`) and has no top-level
/// `extern crate std;` (one under a `cfg` counts: a second would clash with it). A root
/// that does not parse gets nothing (its build reports the error as it is).
pub fn needs_std_linked(text: &str) -> bool {
    let Ok(file) = syn::parse_file(text) else {
        return false;
    };
    let no_std = file.attrs.iter().any(|a| {
        matches!(a.style, syn::AttrStyle::Inner(_))
            && (a.path().is_ident("no_std")
                || (a.path().is_ident("cfg_attr")
                    && a.meta.require_list().is_ok_and(|l| {
                        l.tokens
                            .clone()
                            .into_iter()
                            .any(|t| matches!(t, proc_macro2::TokenTree::Ident(i) if i == "no_std"))
                    })))
    });
    let links_std = file.items.iter().any(
        |item| matches!(item, syn::Item::ExternCrate(c) if c.ident == "std" && c.rename.is_none()),
    );
    no_std && !links_std
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_no_std_root_without_std_gets_std_linked_and_no_other_does() {
        assert!(needs_std_linked(
            "//! Docs.\n#![no_std]\nextern crate alloc;\npub fn f() {}\n"
        ));
        assert!(needs_std_linked(
            "#![cfg_attr(not(feature = \"std\"), no_std)]\npub fn f() {}\n"
        ));
        // It links std itself (as `either` does, under a cfg).
        assert!(!needs_std_linked(
            "#![no_std]\n#[cfg(feature = \"use_std\")]\nextern crate std;\n"
        ));
        // A renamed std does not give `::std`.
        assert!(needs_std_linked("#![no_std]\nextern crate std as s;\n"));
        assert!(!needs_std_linked("pub fn f() {}\n"));
        assert!(!needs_std_linked(
            "#![forbid(unsafe_code)]\nmod no_std {}\n"
        ));
        assert!(!needs_std_linked("#![no_std\n"));
        // What is appended parses as items after any file's last item.
        let linked = format!("#![no_std]\npub fn f() {{}} // tail{STD_FOR_NO_STD}");
        assert!(!needs_std_linked(&linked));
    }

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
        // A function returning `impl Trait` is switched; a failed switched build takes its
        // mutations back to rebuilds.
        assert_eq!(b[4].unswitchable, None);
        assert!(b[4].opaque_return && !b[0].opaque_return);
    }

    #[test]
    fn places_occurrences() {
        let b = function_bodies(Path::new("x.rs"), SRC).unwrap();
        assert_eq!(
            place(SRC, "a + b", "a - b", &b),
            Placement::InBody { index: 0 }
        );
        assert_eq!(
            place(SRC, "y + y", "y * y", &b),
            Placement::InBody { index: 1 }
        );
        match place(SRC, "1 + 2", "1 - 2", &b) {
            Placement::Outside { reason } => assert!(reason.contains("line 2"), "{reason}"),
            p => panic!("{p:?}"),
        }
        match place(SRC, " + ", " - ", &b) {
            Placement::Outside { reason } => assert!(reason.contains("outside"), "{reason}"),
            p => panic!("{p:?}"),
        }
        match place(SRC, "1 + 0", "1 - 0", &b) {
            Placement::Outside { reason } => assert!(reason.contains("const fn"), "{reason}"),
            p => panic!("{p:?}"),
        }
    }

    #[test]
    fn the_changed_span_leaves_out_what_find_and_replace_share() {
        assert_eq!(
            changed_span("fn f() {\n    -a\n}", "fn f() {\n    0\n}"),
            13..15
        );
        assert_eq!(changed_span("a == b", "a != b"), 2..3);
        assert_eq!(changed_span("aXa", "a"), 1..3);
        assert_eq!(changed_span("x", "x + 1"), 1..1);
        assert_eq!(changed_span("same", "same"), 4..4);
    }

    /// cargo-mutants widens a mutant's text to whole lines until it is unique: the two
    /// `-a` bodies below are told apart only with their signatures, which lie outside the
    /// bodies. The change itself lies inside, so the mutation is switched.
    #[test]
    fn a_find_text_that_takes_in_the_signature_is_placed_by_what_it_changes() {
        let src = "fn neg_i(a: i32) -> i32 {\n    -a\n}\n\nfn neg_f(a: f32) -> f32 {\n    -a\n}\n";
        let b = function_bodies(Path::new("x.rs"), src).unwrap();
        let find = "fn neg_f(a: f32) -> f32 {\n    -a\n}";
        let replace = "fn neg_f(a: f32) -> f32 {\n    0.0\n}";
        assert_eq!(
            place(src, find, replace, &b),
            Placement::InBody { index: 1 }
        );
        // A change to the signature itself is not in a body.
        match place(src, "a: f32) -> f32", "a: f32) -> f64", &b) {
            Placement::Outside { reason } => assert!(reason.contains("line 5"), "{reason}"),
            p => panic!("{p:?}"),
        }
    }

    /// A nested function's mutations are switched in the function around it (one switch
    /// per outermost body, so no two switched bodies overlap), unless that one cannot hold
    /// a switch.
    #[test]
    fn a_nested_function_is_switched_in_the_outermost_switchable_body() {
        let src = "fn outer() -> u32 {\n    fn inner() -> u32 {\n        12\n    }\n    inner() * inner()\n}\n\nconst fn c() -> u32 {\n    fn d() -> u32 { 7 }\n    3\n}\n";
        let b = function_bodies(Path::new("x.rs"), src).unwrap();
        assert_eq!(names(&b), ["outer", "inner", "c", "d"]);
        assert_eq!(place(src, "12", "0", &b), Placement::InBody { index: 0 });
        assert_eq!(
            place(src, "inner() * inner()", "1", &b),
            Placement::InBody { index: 0 }
        );
        assert_eq!(
            place(src, "{ 7 }", "{ 8 }", &b),
            Placement::InBody { index: 3 }
        );
        match place(src, "    3\n", "    4\n", &b) {
            Placement::Outside { reason } => {
                assert!(reason.contains("function c: a const fn"), "{reason}")
            }
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
            module_depth: 0,
        };
        let out = switched_source(SRC, &[f], "t");
        assert!(
            out.contains(
                "match __harness_switch_t(&__HARNESS_REACHED, &__HARNESS_SWITCH, \"m1\\n\")"
            ),
            "{out}"
        );
        assert!(out.contains("1 => {\n    a - b\n}"), "{out}");
        assert!(out.contains("_ => {\n    a + b\n}"), "{out}");
        assert!(out.contains("usize::MAX => ::std::panic!("), "{out}");
        // Everything outside the body is untouched, and the result still parses.
        assert!(out.starts_with(&SRC[..b[0].body.start]));
        assert!(out.ends_with(&SRC[b[0].body.end..]));
        syn::parse_file(&format!("{out}{}", support_items("t"))).expect("switched source parses");
    }

    /// A switched program, compiled by rustc and run: each mutation id selects its body,
    /// in a function at the top of the file and in one inside an inline module (reached
    /// through `super::`); the forced-fail value panics in every switched function; no
    /// value, or an unknown one, runs the originals; the reach recorder writes each
    /// function's ids once, the first time it runs.
    #[test]
    fn a_switched_program_runs_the_body_its_switch_selects() {
        let src = "fn add(a: i64, b: i64) -> i64 { a + b }\n\
                   mod inner { pub fn twice(x: i64) -> i64 { x * 2 } }\n\
                   fn main() { println!(\"{} {} {}\", add(2, 3), inner::twice(5), add(1, 1)); }\n";
        let b = function_bodies(Path::new("main.rs"), src).unwrap();
        let body = |name: &str| b.iter().find(|f| f.name == name).unwrap();
        assert_eq!(
            (body("add").module_depth, body("twice").module_depth),
            (0, 1)
        );
        let fns = [
            SwitchedFn {
                name: "add".into(),
                body: body("add").body.clone(),
                mutants: vec![
                    ("m1".into(), "{ a - b }".into()),
                    ("m2".into(), "{ a * b }".into()),
                ],
                module_depth: 0,
            },
            SwitchedFn {
                name: "twice".into(),
                body: body("twice").body.clone(),
                mutants: vec![("m3".into(), "{ x * 3 }".into())],
                module_depth: 1,
            },
        ];
        let tag = support_tag(Path::new("src/main.rs"));
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("main.rs");
        let text = format!(
            "{}{}",
            switched_source(src, &fns, &tag),
            support_items(&tag)
        );
        std::fs::write(&file, text).unwrap();
        let exe = d.path().join("switched");
        let built = std::process::Command::new("rustc")
            .args(["--edition", "2021", "-o"])
            .arg(&exe)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            built.status.success(),
            "{}",
            String::from_utf8_lossy(&built.stderr)
        );
        let run = |env: &[(&str, &std::ffi::OsStr)]| {
            let out = std::process::Command::new(&exe)
                .env_remove(SWITCH_ENV)
                .envs(env.iter().copied())
                .output()
                .unwrap();
            (
                out.status.code(),
                String::from_utf8_lossy(&out.stdout).into_owned(),
            )
        };
        let mutant = |id: &str| run(&[(SWITCH_ENV, std::ffi::OsStr::new(id))]);
        assert_eq!(run(&[]), (Some(0), "5 10 2\n".into()));
        assert_eq!(mutant("m1"), (Some(0), "-1 10 0\n".into()));
        assert_eq!(mutant("m2"), (Some(0), "6 10 1\n".into()));
        assert_eq!(mutant("m3"), (Some(0), "5 15 2\n".into()));
        assert_eq!(mutant("m"), (Some(0), "5 10 2\n".into()));
        assert_eq!(mutant("m1\nm2"), (Some(0), "5 10 2\n".into()));
        assert_eq!(mutant(FORCED_FAIL), (Some(101), String::new()));
        let reach = d.path().join("reach");
        let env_reach = crate::battery::execute::reach::REACH_ENV;
        assert_eq!(
            run(&[(env_reach, reach.as_os_str())]),
            (Some(0), "5 10 2\n".into())
        );
        assert_eq!(std::fs::read_to_string(&reach).unwrap(), "m1\nm2\nm3\n");
    }

    #[test]
    fn support_tags_differ_per_file_and_stay_the_same_for_one() {
        let a = support_tag(Path::new("src/lib.rs"));
        assert_eq!(a, support_tag(Path::new("src/lib.rs")));
        assert_ne!(a, support_tag(Path::new("src/main.rs")));
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|c| c.is_ascii_hexdigit()));
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
                module_depth: 0,
            },
            SwitchedFn {
                name: b[3].name.clone(),
                body: b[3].body.clone(),
                mutants: vec![("m3".into(), "{ 3 - 4 }".into())],
                module_depth: 0,
            },
        ];
        let sw = switched_file(SRC, &fns, "t");
        assert_eq!(sw.text, switched_source(SRC, &fns, "t"));
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
    fn async_fns_are_switched_and_keep_their_awaits() {
        let src = "async fn f() -> i64 { g().await + 2 }\n";
        let b = function_bodies(Path::new("x.rs"), src).unwrap();
        assert_eq!(b.len(), 1);
        assert_eq!(b[0].unswitchable, None);
        match place(src, "+ 2", "- 2", &b) {
            Placement::InBody { index: 0 } => {}
            p => panic!("{p:?}"),
        }
        let sw = switched_file(
            src,
            &[SwitchedFn {
                name: "f".into(),
                body: b[0].body.clone(),
                mutants: vec![("m".into(), "{ g().await - 2 }".into())],
                module_depth: 0,
            }],
            "t",
        );
        assert!(sw.text.starts_with("async fn f() -> i64 {"), "{}", sw.text);
        assert!(sw.text.contains("1 => { g().await - 2 }"), "{}", sw.text);
        assert!(sw.text.contains("_ => { g().await + 2 }"), "{}", sw.text);
        syn::parse_file(&sw.text).expect("switched source parses");
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
            module_depth: 0,
        }];
        let sw = switched_file(SRC, &fns, "t");
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
            regions: sw.regions.clone(),
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

        // A note on a line outside every switch (`trait T`, after the switched `add`) moves
        // to where the mutated file has that line; a line inside the switch but outside the
        // mutation's body (the original body's arm) has no place there and is left.
        let line_of = |t: &str, what: &str| diagnostics::line_column(t, t.find(what).unwrap()).0;
        let (tc, tm) = (line_of(&sw.text, "trait T"), line_of(&m2, "trait T"));
        let orig = line_of(&sw.text, "_ => {");
        assert_ne!(tc, tm);
        let note = format!(
            "error[E0277]: x\n --> src/lib.rs:{line}:{col}\n  ::: src/lib.rs:{tc}:1\n{tc} | trait T {{\n{orig} | _ => {{\n"
        );
        let (blamed, _) = blame(
            &[error_at("src/lib.rs", in_m2..in_m2 + 6, &note)],
            Path::new("/ws"),
            &layouts,
        );
        assert_eq!(
            blamed[&1],
            [format!(
                "error[E0277]: x\n --> src/lib.rs:{l}:{c}\n  ::: src/lib.rs:{tm}:1\n{tm:>w$} | trait T {{\n{orig} | _ => {{\n",
                w = tc.to_string().len()
            )]
        );
    }
}
