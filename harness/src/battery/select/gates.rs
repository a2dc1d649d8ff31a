//! Module gates: the `cfg` (a feature, a platform, any predicate) that keeps a source file out of a package's build.
//!
//! A file is compiled only when every `mod` declaration on its way from a crate root is,
//! so a `#[cfg(feature = "extra")] mod extra;` in `src/lib.rs` (or a `#![cfg(feature =
//! "extra")]` at the top of `src/extra.rs`) leaves `src/extra.rs` out of every build that
//! does not enable `extra`. [`feature_gate`] finds that gate by reading the package's Rust
//! sources (rustc's module path rules: `mod x;` in a `lib.rs`, `main.rs`, `mod.rs` or a
//! crate root of `src/bin`, `tests`, `examples`, `benches` is `x.rs` or `x/mod.rs` beside
//! it, in any other `a.rs` it is `a/x.rs` or `a/x/mod.rs`; `#[path = "..."]` is relative to
//! the declaring file's folder); [`Gate::enabled`] evaluates its predicate against a set of
//! enabled features where it can (`feature = "x"`, `all`, `any`, `not`; any other
//! predicate is unknown: a platform gate such as `cfg(windows)` is rustc's to decide, see
//! [`crate::battery::execute::cfg_probe`]).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// A `cfg` on the way to a file (on a `mod` declaration that loads it, or its own
/// `#![cfg]`); whether the features decide it is [`Gate::enabled`]'s to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// The file holding the attribute, as given in the scan (absolute when the package
    /// directory is).
    pub file: PathBuf,
    /// 1-based line of the attribute.
    pub line: usize,
    /// The predicate as written, `feature = "extra"`.
    pub predicate: String,
    cfg: Cfg,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Cfg {
    Feature(String),
    All(Vec<Cfg>),
    Any(Vec<Cfg>),
    Not(Box<Cfg>),
    Other,
}

impl Cfg {
    fn mentions_feature(&self) -> bool {
        match self {
            Cfg::Feature(_) => true,
            Cfg::All(v) | Cfg::Any(v) => v.iter().any(Cfg::mentions_feature),
            Cfg::Not(c) => c.mentions_feature(),
            Cfg::Other => false,
        }
    }

    /// `Some(holds)` when the features decide it, `None` when another predicate does.
    fn eval(&self, on: &BTreeSet<String>) -> Option<bool> {
        match self {
            Cfg::Feature(f) => Some(on.contains(f)),
            Cfg::Not(c) => c.eval(on).map(|b| !b),
            Cfg::All(v) => {
                let r: Vec<Option<bool>> = v.iter().map(|c| c.eval(on)).collect();
                if r.contains(&Some(false)) {
                    Some(false)
                } else if r.iter().all(|x| *x == Some(true)) {
                    Some(true)
                } else {
                    None
                }
            }
            Cfg::Any(v) => {
                let r: Vec<Option<bool>> = v.iter().map(|c| c.eval(on)).collect();
                if r.contains(&Some(true)) {
                    Some(true)
                } else if r.iter().all(|x| *x == Some(false)) {
                    Some(false)
                } else {
                    None
                }
            }
            Cfg::Other => None,
        }
    }
}

impl Gate {
    /// Whether the gate lets the file in with the features `on` enabled: `Some(false)` when
    /// they keep it out whatever else holds, `None` when another predicate decides.
    pub fn enabled(&self, on: &BTreeSet<String>) -> Option<bool> {
        self.cfg.eval(on)
    }

    /// The attribute a probe item carries to be compiled exactly where this gate lets code
    /// in: `#[cfg(PREDICATE)]`.
    pub fn attr(&self) -> String {
        format!("#[cfg({})]", self.predicate)
    }

    /// `` `#[cfg(feature = "extra")]` at src/lib.rs:3 `` (the file relative to `root`).
    pub fn describe(&self, root: &Path) -> String {
        format!(
            "`cfg({})` at {}:{}",
            self.predicate,
            self.file.strip_prefix(root).unwrap_or(&self.file).display(),
            self.line
        )
    }
}

fn parse_cfg(meta: &syn::Meta) -> Cfg {
    match meta {
        syn::Meta::NameValue(nv) if nv.path.is_ident("feature") => match &nv.value {
            syn::Expr::Lit(syn::ExprLit {
                lit: syn::Lit::Str(s),
                ..
            }) => Cfg::Feature(s.value()),
            _ => Cfg::Other,
        },
        syn::Meta::List(l) => {
            let inner = || -> Vec<Cfg> {
                l.parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                )
                .map(|p| p.iter().map(parse_cfg).collect())
                .unwrap_or_else(|_| vec![Cfg::Other])
            };
            if l.path.is_ident("all") {
                Cfg::All(inner())
            } else if l.path.is_ident("any") {
                Cfg::Any(inner())
            } else if l.path.is_ident("not") {
                let mut v = inner();
                if v.len() == 1 {
                    Cfg::Not(Box::new(v.remove(0)))
                } else {
                    Cfg::Other
                }
            } else {
                Cfg::Other
            }
        }
        _ => Cfg::Other,
    }
}

/// The `cfg` gates among `attrs` (`#[cfg(...)]` or `#![cfg(...)]`, any predicate: those
/// the features do not decide evaluate to `None`).
fn gates_of(attrs: &[syn::Attribute], file: &Path) -> Vec<Gate> {
    attrs
        .iter()
        .filter(|a| a.path().is_ident("cfg"))
        .filter_map(|a| {
            let syn::Meta::List(list) = &a.meta else {
                return None;
            };
            let meta: syn::Meta = a.parse_args().ok()?;
            let cfg = parse_cfg(&meta);
            Some(Gate {
                file: file.to_path_buf(),
                line: a.pound_token.spans[0].start().line,
                predicate: list.tokens.to_string(),
                cfg,
            })
        })
        .collect()
}

/// Whether `mod x;` in `file` looks for `x` beside `file` (a `lib.rs`, `main.rs`, `mod.rs`
/// or a crate root under `src/bin`, `tests`, `examples`, `benches`), not in a folder named
/// after it.
fn is_mod_rs(file: &Path) -> bool {
    let name = file.file_name().and_then(|n| n.to_str()).unwrap_or("");
    if matches!(name, "lib.rs" | "main.rs" | "mod.rs" | "build.rs") {
        return true;
    }
    let parent = file
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str());
    matches!(parent, Some("bin" | "tests" | "examples" | "benches"))
}

/// One `mod NAME;` declaration found in a file: the paths it may load and the gates on it.
struct Decl {
    candidates: Vec<PathBuf>,
    gates: Vec<Gate>,
}

fn collect_decls(
    items: &[syn::Item],
    file: &Path,
    dir: &Path,
    outer: &[Gate],
    out: &mut Vec<Decl>,
) {
    let here = file.parent().unwrap_or(Path::new("."));
    for item in items {
        let syn::Item::Mod(m) = item else { continue };
        let mut gates = outer.to_vec();
        gates.extend(gates_of(&m.attrs, file));
        let path_attr = m.attrs.iter().find_map(|a| {
            if !a.path().is_ident("path") {
                return None;
            }
            match &a.meta {
                syn::Meta::NameValue(nv) => match &nv.value {
                    syn::Expr::Lit(syn::ExprLit {
                        lit: syn::Lit::Str(s),
                        ..
                    }) => Some(s.value()),
                    _ => None,
                },
                _ => None,
            }
        });
        let name = m.ident.to_string();
        match &m.content {
            None => {
                let candidates = match &path_attr {
                    Some(p) => vec![here.join(p)],
                    None => vec![
                        dir.join(format!("{name}.rs")),
                        dir.join(&name).join("mod.rs"),
                    ],
                };
                out.push(Decl { candidates, gates });
            }
            Some((_, inner)) => {
                let sub = match &path_attr {
                    Some(p) => here.join(p),
                    None => dir.join(&name),
                };
                collect_decls(inner, file, &sub, &gates, out);
            }
        }
    }
}

/// Every `.rs` file under `dir` (not following links, not entering `target`).
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let Ok(t) = e.file_type() else { continue };
        if t.is_dir() {
            if e.file_name() != "target" && e.file_name() != ".git" {
                rust_files(&p, out);
            }
        } else if t.is_file() && p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The `cfg` gates on the way to `file` (absolute) in the package whose folder is
/// `package_dir`: the file's own `#![cfg(...)]`, the gates on a `mod` declaration that
/// loads it, and (through a declaring file that is itself gated) those further up. Empty
/// when nothing on its way is gated, or when the sources do not parse.
pub fn feature_gate(package_dir: &Path, file: &Path) -> Vec<Gate> {
    ModuleGates::of(package_dir).on_the_way_to(file)
}

/// Every gate of one package's sources, read once: each file's own `#![cfg(...)]` and each
/// `mod` declaration with its gates ([`feature_gate`] asks it about one file; a caller
/// asking about many files of a package reads the package once).
pub struct ModuleGates {
    /// Per file, its own inner gates.
    inner: Vec<(PathBuf, Vec<Gate>)>,
    /// Per declaring file, each `mod` declaration in it.
    decls: Vec<(PathBuf, Decl)>,
}

impl ModuleGates {
    /// Parses every `.rs` file under `package_dir` (a file that does not parse adds
    /// nothing).
    pub fn of(package_dir: &Path) -> ModuleGates {
        let mut files = Vec::new();
        rust_files(package_dir, &mut files);
        let mut decls: Vec<(PathBuf, Decl)> = Vec::new();
        let mut inner: Vec<(PathBuf, Vec<Gate>)> = Vec::new();
        for f in &files {
            let Ok(text) = std::fs::read_to_string(f) else {
                continue;
            };
            let Ok(ast) = syn::parse_file(&text) else {
                continue;
            };
            inner.push((f.clone(), gates_of(&ast.attrs, f)));
            let dir = if is_mod_rs(f) {
                f.parent().map(Path::to_path_buf).unwrap_or_default()
            } else {
                f.with_extension("")
            };
            let mut found = Vec::new();
            collect_decls(&ast.items, f, &dir, &[], &mut found);
            decls.extend(found.into_iter().map(|d| (f.clone(), d)));
        }
        ModuleGates { inner, decls }
    }

    /// The feature gates on the way to `file` (absolute), as [`feature_gate`] gives them.
    pub fn on_the_way_to(&self, file: &Path) -> Vec<Gate> {
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        let mut todo = vec![file.to_path_buf()];
        while let Some(f) = todo.pop() {
            if !seen.insert(f.clone()) {
                continue;
            }
            if let Some((_, g)) = self.inner.iter().find(|(p, _)| *p == f) {
                out.extend(g.iter().cloned());
            }
            for (declaring, d) in &self.decls {
                if d.candidates.iter().any(|c| lexical_eq(c, &f)) {
                    out.extend(d.gates.iter().cloned());
                    todo.push(declaring.clone());
                }
            }
        }
        out
    }
}

fn lexical_eq(a: &Path, b: &Path) -> bool {
    let norm = |p: &Path| {
        let mut out = PathBuf::new();
        for c in p.components() {
            match c {
                std::path::Component::CurDir => {}
                std::path::Component::ParentDir => {
                    out.pop();
                }
                c => out.push(c),
            }
        }
        out
    };
    norm(a) == norm(b)
}

/// The features a catalog's build enables in a package: its `features` (a dependency's
/// `dep/feature` left out) and, unless `no_default_features`, the package's `default`
/// feature with everything it enables, followed through the package's own features
/// (`cargo metadata`'s `features` table, `name -> [enabled...]`).
pub fn enabled_features(
    table: &std::collections::BTreeMap<String, Vec<String>>,
    features: &[String],
    no_default_features: bool,
) -> BTreeSet<String> {
    let mut todo: Vec<String> = features
        .iter()
        .flat_map(|f| f.split([',', ' ']))
        .filter(|f| !f.is_empty() && !f.contains('/'))
        .map(str::to_string)
        .collect();
    if !no_default_features && table.contains_key("default") {
        todo.push("default".into());
    }
    let mut on = BTreeSet::new();
    while let Some(f) = todo.pop() {
        if !on.insert(f.clone()) {
            continue;
        }
        for g in table.get(&f).into_iter().flatten() {
            if !g.contains('/') && !g.starts_with("dep:") {
                todo.push(g.clone());
            }
        }
    }
    on
}

/// A `cfg` attribute inside a source file that the default features leave shut
/// ([`left_out_by_default`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    /// 1-based line of the attribute.
    pub line: usize,
    /// The attribute as written, `#[cfg(feature = "extra")]`.
    pub written: String,
    /// The features its predicate names, in order of appearance.
    pub features: Vec<String>,
}

impl Cfg {
    fn feature_names(&self, out: &mut Vec<String>) {
        match self {
            Cfg::Feature(f) => {
                if !out.contains(f) {
                    out.push(f.clone());
                }
            }
            Cfg::All(v) | Cfg::Any(v) => v.iter().for_each(|c| c.feature_names(out)),
            Cfg::Not(c) => c.feature_names(out),
            Cfg::Other => {}
        }
    }
}

/// Every `#[cfg(...)]` or `#![cfg(...)]` of `text` (Rust source; on any item, statement,
/// arm, field...) whose predicate names a feature and that the features `on` decide to be
/// shut (`Some(false)`; a predicate another condition decides is not listed). This is a
/// reading of the source for `harness init`'s advice; a battery's verdicts take rustc's
/// word instead ([`crate::battery::execute::cfg_probe`]). A file that does not parse
/// lists nothing.
pub fn left_out_by_default(text: &str, on: &BTreeSet<String>) -> Vec<LeftOut> {
    struct Attrs<'a> {
        src: &'a str,
        on: &'a BTreeSet<String>,
        out: Vec<LeftOut>,
    }
    impl Attrs<'_> {
        fn text(&self, r: std::ops::Range<usize>) -> String {
            crate::battery::select::cfg_spans::source_text(self.src, r)
        }

        fn push(&mut self, line: usize, written: String, cfgs: &[&Cfg]) {
            let mut features = Vec::new();
            for c in cfgs {
                c.feature_names(&mut features);
            }
            self.out.push(LeftOut {
                line,
                written,
                features,
            });
        }
    }
    impl<'ast> syn::visit::Visit<'ast> for Attrs<'_> {
        fn visit_attribute(&mut self, a: &'ast syn::Attribute) {
            use syn::spanned::Spanned;
            let line = a.pound_token.spans[0].start().line;
            if a.path().is_ident("cfg") {
                let Ok(meta) = a.parse_args::<syn::Meta>() else {
                    return;
                };
                let cfg = parse_cfg(&meta);
                if cfg.mentions_feature() && cfg.eval(self.on) == Some(false) {
                    let written = self.text(a.span().byte_range());
                    self.push(line, written, &[&cfg]);
                }
            } else if a.path().is_ident("cfg_attr") {
                // `cfg_attr(P, cfg(Q))` shuts its item where P holds and Q does not.
                let Ok(args) = a.parse_args_with(
                    syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
                ) else {
                    return;
                };
                let mut it = args.iter();
                let Some(pred) = it.next().map(parse_cfg) else {
                    return;
                };
                for m in it.filter(|m| m.path().is_ident("cfg")) {
                    let Ok(inner) = m.require_list().and_then(|l| l.parse_args::<syn::Meta>())
                    else {
                        continue;
                    };
                    let q = parse_cfg(&inner);
                    if (pred.mentions_feature() || q.mentions_feature())
                        && pred.eval(self.on) == Some(true)
                        && q.eval(self.on) == Some(false)
                    {
                        let written = self.text(a.span().byte_range());
                        self.push(line, written, &[&pred, &q]);
                    }
                }
            }
        }

        fn visit_macro(&mut self, m: &'ast syn::Macro) {
            // The branches of a `cfg_if!`: a branch is shut where its own condition fails
            // or an earlier one holds; the `else` branch where an earlier one holds.
            if m.path.segments.last().is_none_or(|s| s.ident != "cfg_if") {
                return;
            }
            use proc_macro2::TokenTree as T;
            let toks: Vec<T> = m.tokens.clone().into_iter().collect();
            let mut earlier: Vec<Cfg> = Vec::new();
            let mut i = 0;
            while i < toks.len() {
                let (T::Punct(p), Some(T::Group(g))) = (&toks[i], toks.get(i + 1)) else {
                    if let T::Ident(id) = &toks[i]
                        && id == "else"
                        && let Some(T::Group(body)) = toks.get(i + 1)
                        && body.delimiter() == proc_macro2::Delimiter::Brace
                        && earlier.iter().any(|c| c.eval(self.on) == Some(true))
                    {
                        let held: Vec<&Cfg> = earlier.iter().collect();
                        let line = body.span().start().line;
                        self.push(line, "cfg_if! else branch".into(), &held);
                    }
                    i += 1;
                    continue;
                };
                if p.as_char() != '#' {
                    i += 1;
                    continue;
                }
                let inner: Vec<T> = g.stream().into_iter().collect();
                if let (Some(T::Ident(id)), Some(T::Group(args))) = (inner.first(), inner.get(1))
                    && id == "cfg"
                    && let Ok(meta) = syn::parse2::<syn::Meta>(args.stream())
                {
                    let cfg = parse_cfg(&meta);
                    let shut = cfg.eval(self.on) == Some(false)
                        || earlier.iter().any(|c| c.eval(self.on) == Some(true));
                    let mentions =
                        cfg.mentions_feature() || earlier.iter().any(Cfg::mentions_feature);
                    if shut && mentions {
                        let written = format!(
                            "cfg_if! branch {}",
                            self.text(p.span().byte_range().start..g.span().byte_range().end)
                        );
                        let mut all: Vec<&Cfg> = earlier.iter().collect();
                        all.push(&cfg);
                        self.push(p.span().start().line, written, &all);
                    }
                    earlier.push(cfg);
                }
                i += 2;
            }
        }
    }
    let src = crate::battery::select::inert::parsable(text);
    let Ok(file) = syn::parse_file(&src) else {
        return Vec::new();
    };
    let mut v = Attrs {
        src: &src,
        on,
        out: Vec::new(),
    };
    syn::visit::Visit::visit_file(&mut v, &file);
    v.out.sort_by_key(|l| l.line);
    v.out
}

/// `harness check`'s warnings, before anything is built: each mutation whose file a
/// feature gate keeps out of the build under the catalog's features (its `features` and,
/// unless `no_default_features`, the package's defaults, as `cargo metadata` gives them),
/// which the battery will judge NOT_COMPILED. A gate another predicate decides
/// (`all(unix, feature = "x")` with `x` on) is not warned about.
pub fn unreachable_mutations(
    c: &crate::battery::select::catalog::Catalog,
    prepared: &[crate::battery::select::catalog::PreparedMutation],
    packages: &[crate::cargo::PackageMeta],
) -> Vec<String> {
    let mut out = Vec::new();
    let mut read: std::collections::BTreeMap<PathBuf, ModuleGates> = Default::default();
    for pm in prepared {
        let Some(owner) = crate::cargo::owning_package(packages, &pm.abs_path) else {
            continue;
        };
        let dir = owner
            .dir
            .canonicalize()
            .unwrap_or_else(|_| owner.dir.clone());
        let (features, no_default): (&[String], bool) = if owner.name == c.spec.package {
            (&c.spec.features, c.spec.no_default_features)
        } else {
            (&[], false)
        };
        let on = enabled_features(&owner.feature_table, features, no_default);
        let gates = read
            .entry(dir.clone())
            .or_insert_with(|| ModuleGates::of(&dir));
        let shut: Vec<String> = gates
            .on_the_way_to(&pm.abs_path)
            .iter()
            .filter(|g| g.enabled(&on) == Some(false))
            .map(|g| g.describe(&c.root))
            .collect();
        if shut.is_empty() {
            continue;
        }
        let on = if on.is_empty() {
            "none".to_string()
        } else {
            on.into_iter().collect::<Vec<_>>().join(", ")
        };
        out.push(format!(
            "mutation {}: {} is compiled only where {} holds, and the catalog's features (enabled: {on}) do not enable it: the battery will judge it NOT_COMPILED",
            c.spec.mutations[pm.index].id,
            pm.rel_path.display(),
            shut.join(", ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gates_the_default_features_shut_are_listed_with_their_features() {
        let src = "#![cfg_attr(docsrs, feature(doc_cfg))]\nfn f(n: u8) -> u8 {\n    match n {\n        #[cfg(feature = \"extra\")]\n        1 => 2,\n        _ => 3,\n    }\n}\n#[cfg(any(feature = \"a\", feature = \"b\"))]\nfn g() {}\n#[cfg(feature = \"std\")]\nfn h() {}\n#[cfg(all(unix, feature = \"extra\"))]\nfn i() {}\n#[cfg(not(feature = \"std\"))]\nfn j() {}\n";
        let on: BTreeSet<String> = ["std".to_string()].into();
        // cfg_attr and cfg_if! branches shut by the features are listed too.
        let more = "#[cfg_attr(not(feature = \"x\"), cfg(any()))]\nfn k() {}\n#[cfg_attr(feature = \"std\", cfg(unix))]\nfn l() {}\ncfg_if::cfg_if! {\n    if #[cfg(feature = \"fast\")] {\n        fn m() {}\n    } else if #[cfg(feature = \"std\")] {\n        fn m() {}\n    } else {\n        fn m() {}\n    }\n}\n";
        let got: Vec<(usize, String, Vec<String>)> = left_out_by_default(more, &on)
            .into_iter()
            .map(|l| (l.line, l.written, l.features))
            .collect();
        assert_eq!(
            got,
            vec![
                (
                    1,
                    "#[cfg_attr(not(feature = \"x\"), cfg(any()))]".to_string(),
                    vec!["x".to_string()]
                ),
                (
                    6,
                    "cfg_if! branch #[cfg(feature = \"fast\")]".to_string(),
                    vec!["fast".to_string()]
                ),
                (
                    10,
                    "cfg_if! else branch".to_string(),
                    vec!["fast".to_string(), "std".to_string()]
                ),
            ]
        );
        let got = left_out_by_default(src, &on);
        let lines: Vec<(usize, &str, Vec<String>)> = got
            .iter()
            .map(|l| (l.line, l.written.as_str(), l.features.clone()))
            .collect();
        assert_eq!(
            lines,
            vec![
                (4, "#[cfg(feature = \"extra\")]", vec!["extra".to_string()]),
                (
                    9,
                    "#[cfg(any(feature = \"a\", feature = \"b\"))]",
                    vec!["a".to_string(), "b".to_string()]
                ),
                (
                    13,
                    "#[cfg(all(unix, feature = \"extra\"))]",
                    vec!["extra".to_string()]
                ),
                (
                    15,
                    "#[cfg(not(feature = \"std\"))]",
                    vec!["std".to_string()]
                ),
            ]
        );
    }

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }

    #[test]
    fn a_gated_mod_declaration_and_an_inner_cfg_are_found() {
        let d = tempfile::tempdir().unwrap();
        let r = d.path();
        write(
            r,
            "src/lib.rs",
            "pub mod open;\n#[cfg(feature = \"extra\")]\npub mod extra;\nmod outer {\n    #[cfg(all(unix, feature = \"deep\"))]\n    mod inner;\n}\n",
        );
        write(r, "src/open.rs", "pub fn f() {}\n");
        write(r, "src/extra.rs", "mod nested;\n");
        write(r, "src/extra/nested.rs", "pub fn g() {}\n");
        write(r, "src/outer/inner.rs", "pub fn h() {}\n");
        write(
            r,
            "src/own.rs",
            "#![cfg(feature = \"own\")]\npub fn k() {}\n",
        );
        assert!(feature_gate(r, &r.join("src/open.rs")).is_empty());
        let g = feature_gate(r, &r.join("src/extra.rs"));
        assert_eq!(g.len(), 1);
        assert_eq!(
            g[0].describe(r),
            "`cfg(feature = \"extra\")` at src/lib.rs:2"
        );
        assert_eq!(g[0].enabled(&BTreeSet::new()), Some(false));
        assert_eq!(
            g[0].enabled(&BTreeSet::from(["extra".to_string()])),
            Some(true)
        );
        // Through the gated parent module.
        let n = feature_gate(r, &r.join("src/extra/nested.rs"));
        assert_eq!(n.len(), 1, "{n:?}");
        // all(unix, feature) is decided by the feature only when it is off.
        let i = feature_gate(r, &r.join("src/outer/inner.rs"));
        assert_eq!(i.len(), 1);
        assert_eq!(i[0].enabled(&BTreeSet::new()), Some(false));
        assert_eq!(i[0].enabled(&BTreeSet::from(["deep".to_string()])), None);
        let o = feature_gate(r, &r.join("src/own.rs"));
        assert_eq!(o[0].describe(r), "`cfg(feature = \"own\")` at src/own.rs:1");
    }

    #[test]
    fn default_features_are_followed() {
        let t = std::collections::BTreeMap::from([
            ("default".to_string(), vec!["a".to_string()]),
            ("a".to_string(), vec!["b".to_string(), "dep/x".to_string()]),
            ("b".to_string(), vec![]),
            ("c".to_string(), vec![]),
        ]);
        let on = enabled_features(&t, &[], false);
        assert!(on.contains("a") && on.contains("b") && !on.contains("c"));
        let off = enabled_features(&t, &["c".into()], true);
        assert_eq!(off, BTreeSet::from(["c".to_string()]));
    }
}
