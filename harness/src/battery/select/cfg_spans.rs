//! The `cfg` gates around a byte span of a Rust source file, found with `syn`.
//!
//! A mutation inside a compiled file may still lie in code the compiler never builds: a
//! `#[cfg(feature = "x")]` match arm, block, statement, field or `impl`, a
//! `#[cfg(not(unix))]` function, a module or function whose inner `#![cfg(...)]` shuts it,
//! a `#[cfg_attr(P, cfg(Q))]`, or a branch of a `cfg_if!` invocation. [`gates_around`]
//! lists every such gate on the way from the file's top to the span, each with the
//! attribute a probe item needs to be compiled exactly where that gate lets code in.
//!
//! This module only reads the source: whether a gate holds is never decided here but by
//! rustc under the run's own configuration (features, target, `--cfg` flags, build
//! scripts' `cargo:rustc-cfg`), see [`crate::battery::execute::cfg_probe`]. A `cfg`
//! predicate holds or not for a whole compilation of a crate, so a probe item carrying the
//! same attributes at the end of the same file is compiled exactly when the gated node is.

use std::ops::Range;

use syn::spanned::Spanned;
use syn::visit::Visit;

use crate::battery::select::functions::ParseFailure;

/// One `cfg` gate on the way to a span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanGate {
    /// The attribute as the source writes it, `#[cfg(feature = "x")]` (for a `cfg_if!`
    /// branch, the branch's condition as the macro expands it).
    pub written: String,
    /// What the gate is on: `match arm`, `fn helper`, `impl`, `block`, `cfg_if! branch`...
    pub on: String,
    /// 1-based line of the attribute.
    pub line: usize,
    /// The outer attributes a probe item carries to be compiled exactly where this gate
    /// lets code in, e.g. `#[cfg(feature = "x")]`; several for a `cfg_if!` branch (the
    /// earlier branches' conditions negated, then its own).
    pub probe: Vec<String>,
}

impl SpanGate {
    /// `` `#[cfg(feature = "x")]` on the match arm at line 12 ``.
    pub fn describe(&self) -> String {
        format!(
            "`{}` on the {} at line {}",
            self.written, self.on, self.line
        )
    }
}

/// Every `cfg` gate on the way from the top of `text` (Rust source) to the bytes `span`
/// (an empty span is a position), outermost first. Attributes on nodes that hold the span
/// count: items (functions, `impl`s, inline modules, traits, ...), `impl` and trait items,
/// statements, expressions (blocks included), match arms, struct fields and enum variants,
/// field initialisers and patterns, and the branches of a `cfg_if!` invocation (an item or a
/// statement macro whose path ends in `cfg_if`). A span inside an attribute is governed by
/// the gates around the node, not by that node's own attributes. A leading byte-order mark
/// or shebang line is blanked before parsing, so offsets are those of `text`.
///
/// Errors: [`ParseFailure`] when `text` does not parse.
pub fn gates_around(text: &str, span: Range<usize>) -> Result<Vec<SpanGate>, ParseFailure> {
    Ok(Parsed::of(text)?.gates_around(span))
}

/// A source file parsed once, to ask [`Parsed::gates_around`] about many spans (a file's
/// mutations).
pub struct Parsed {
    src: String,
    file: syn::File,
}

impl Parsed {
    /// `text` (Rust source) parsed, a leading byte-order mark or shebang line blanked so
    /// that offsets stay those of `text`. Errors: [`ParseFailure`].
    pub fn of(text: &str) -> Result<Parsed, ParseFailure> {
        let src = crate::battery::select::inert::parsable(text);
        let file = crate::battery::select::functions::parse(&src)?;
        Ok(Parsed { src, file })
    }

    /// [`gates_around`] of this file.
    pub fn gates_around(&self, span: Range<usize>) -> Vec<SpanGate> {
        let mut f = Finder {
            src: &self.src,
            span,
            out: Vec::new(),
            seen: std::collections::BTreeSet::new(),
        };
        f.attrs(&self.file.attrs, "file");
        for item in &self.file.items {
            f.visit_item(item);
        }
        f.out
    }
}

/// The source text at `r` with its whitespace runs made single spaces (an attribute as
/// written, on one line); empty when `r` is not in `src`.
pub(crate) fn source_text(src: &str, r: Range<usize>) -> String {
    src.get(r)
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

struct Finder<'s> {
    src: &'s str,
    span: Range<usize>,
    out: Vec<SpanGate>,
    /// Byte offsets of the attributes recorded (a statement's attributes are read from
    /// the statement and again from its leftmost operand, where `syn` keeps them).
    seen: std::collections::BTreeSet<usize>,
}

impl Finder<'_> {
    fn holds(&self, r: Range<usize>) -> bool {
        r.start <= self.span.start && self.span.end <= r.end
    }

    fn text(&self, r: Range<usize>) -> String {
        source_text(self.src, r)
    }
    /// Records the gates among `attrs` of a node (`on`) that holds the span, unless the
    /// span lies inside one of the attributes themselves.
    fn attrs(&mut self, attrs: &[syn::Attribute], on: &str) {
        if attrs.iter().any(|a| self.holds(a.span().byte_range())) {
            return;
        }
        for a in attrs {
            if !self.seen.insert(a.span().byte_range().start) {
                continue;
            }
            let line = a.pound_token.spans[0].start().line;
            let written = self.text(a.span().byte_range());
            if a.path().is_ident("cfg") {
                let syn::Meta::List(l) = &a.meta else {
                    continue;
                };
                let pred = self.text(l.tokens.span().byte_range());
                let pred = if pred.is_empty() {
                    l.tokens.to_string()
                } else {
                    pred
                };
                self.out.push(SpanGate {
                    written,
                    on: on.to_string(),
                    line,
                    probe: vec![format!("#[cfg({pred})]")],
                });
            } else if a.path().is_ident("cfg_attr")
                && let Some(probe) = self.cfg_attr_probe(&a.meta)
            {
                self.out.push(SpanGate {
                    written,
                    on: on.to_string(),
                    line,
                    probe: vec![probe],
                });
            }
        }
    }

    /// `#[cfg_attr(P, cfg(Q))]` for a `cfg_attr` whose attributes include a `cfg` (its
    /// other attributes dropped), or `None`.
    fn cfg_attr_probe(&self, meta: &syn::Meta) -> Option<String> {
        let inner = self.cfg_attr_inner(meta)?;
        Some(format!("#[{inner}]"))
    }

    fn cfg_attr_inner(&self, meta: &syn::Meta) -> Option<String> {
        let syn::Meta::List(l) = meta else {
            return None;
        };
        let args = l
            .parse_args_with(
                syn::punctuated::Punctuated::<syn::Meta, syn::Token![,]>::parse_terminated,
            )
            .ok()?;
        let mut it = args.iter();
        let pred = self.text(it.next()?.span().byte_range());
        let kept: Vec<String> = it
            .filter_map(|m| {
                if m.path().is_ident("cfg") {
                    Some(self.text(m.span().byte_range()))
                } else if m.path().is_ident("cfg_attr") {
                    self.cfg_attr_inner(m)
                } else {
                    None
                }
            })
            .collect();
        (!kept.is_empty()).then(|| format!("cfg_attr({pred}, {})", kept.join(", ")))
    }

    /// A macro invocation holding the span: the branches of a `cfg_if!` are gates.
    fn mac(&mut self, mac: &syn::Macro) {
        let is_cfg_if = mac
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "cfg_if");
        if !is_cfg_if || !self.holds(mac.delimiter.span().join().byte_range()) {
            return;
        }
        let toks: Vec<proc_macro2::TokenTree> = mac.tokens.clone().into_iter().collect();
        let mut earlier: Vec<String> = Vec::new();
        let mut i = 0;
        while i < toks.len() {
            let t = &toks[i];
            if matches!(t, proc_macro2::TokenTree::Ident(id) if id == "if" || id == "else") {
                i += 1;
                continue;
            }
            // `#[cfg(P)] { ... }` or a final `{ ... }`.
            let mut cond: Option<(String, usize)> = None;
            if let proc_macro2::TokenTree::Punct(p) = t
                && p.as_char() == '#'
                && let Some(proc_macro2::TokenTree::Group(g)) = toks.get(i + 1)
            {
                let inner: Vec<proc_macro2::TokenTree> = g.stream().into_iter().collect();
                if let (
                    Some(proc_macro2::TokenTree::Ident(id)),
                    Some(proc_macro2::TokenTree::Group(args)),
                ) = (inner.first(), inner.get(1))
                    && id == "cfg"
                {
                    let pred = self.text(args.span().byte_range());
                    let pred = pred
                        .strip_prefix('(')
                        .and_then(|p| p.strip_suffix(')'))
                        .map(str::trim)
                        .map(str::to_string)
                        .unwrap_or_else(|| args.stream().to_string());
                    cond = Some((pred, p.span().start().line));
                }
                i += 2;
            }
            let Some(proc_macro2::TokenTree::Group(body)) = toks.get(i) else {
                i += 1;
                continue;
            };
            if body.delimiter() != proc_macro2::Delimiter::Brace {
                i += 1;
                continue;
            }
            let here = body.span().byte_range();
            if self.holds(here.clone()) {
                let mut probe: Vec<String> = earlier
                    .iter()
                    .map(|p| format!("#[cfg(not({p}))]"))
                    .collect();
                let (written, line) = match &cond {
                    Some((p, line)) => {
                        probe.push(format!("#[cfg({p})]"));
                        (format!("#[cfg({p})]"), *line)
                    }
                    None => (
                        format!("else (none of {})", earlier.join(", ")),
                        body.span().start().line,
                    ),
                };
                if !(cond.is_none() && earlier.is_empty()) {
                    self.out.push(SpanGate {
                        written,
                        on: "cfg_if! branch".into(),
                        line,
                        probe,
                    });
                }
                self.tokens_in(body.stream());
                return;
            }
            if let Some((p, _)) = cond {
                earlier.push(p);
            }
            i += 1;
        }
    }

    /// Walks a macro body's tokens as items, else as statements.
    fn tokens_in(&mut self, ts: proc_macro2::TokenStream) {
        if let Ok(file) = syn::parse2::<syn::File>(ts.clone()) {
            self.attrs(&file.attrs, "cfg_if! branch");
            for item in &file.items {
                self.visit_item(item);
            }
        } else if let Ok(stmts) = syn::parse::Parser::parse2(syn::Block::parse_within, ts) {
            for s in &stmts {
                self.visit_stmt(s);
            }
        }
    }
}

fn item_attrs(i: &syn::Item) -> (&[syn::Attribute], String) {
    use syn::Item as I;
    match i {
        I::Const(x) => (&x.attrs, format!("const {}", x.ident)),
        I::Enum(x) => (&x.attrs, format!("enum {}", x.ident)),
        I::ExternCrate(x) => (&x.attrs, "extern crate".into()),
        I::Fn(x) => (&x.attrs, format!("fn {}", x.sig.ident)),
        I::ForeignMod(x) => (&x.attrs, "extern block".into()),
        I::Impl(x) => (&x.attrs, "impl".into()),
        I::Macro(x) => (&x.attrs, "macro invocation".into()),
        I::Mod(x) => (&x.attrs, format!("mod {}", x.ident)),
        I::Static(x) => (&x.attrs, format!("static {}", x.ident)),
        I::Struct(x) => (&x.attrs, format!("struct {}", x.ident)),
        I::Trait(x) => (&x.attrs, format!("trait {}", x.ident)),
        I::TraitAlias(x) => (&x.attrs, format!("trait {}", x.ident)),
        I::Type(x) => (&x.attrs, format!("type {}", x.ident)),
        I::Union(x) => (&x.attrs, format!("union {}", x.ident)),
        I::Use(x) => (&x.attrs, "use".into()),
        _ => (&[], String::new()),
    }
}

fn expr_attrs(e: &syn::Expr) -> (&[syn::Attribute], &'static str) {
    use syn::Expr as E;
    match e {
        E::Array(x) => (&x.attrs, "array expression"),
        E::Assign(x) => (&x.attrs, "assignment"),
        E::Async(x) => (&x.attrs, "async block"),
        E::Await(x) => (&x.attrs, "await expression"),
        E::Binary(x) => (&x.attrs, "binary expression"),
        E::Block(x) => (&x.attrs, "block"),
        E::Break(x) => (&x.attrs, "break expression"),
        E::Call(x) => (&x.attrs, "call"),
        E::Cast(x) => (&x.attrs, "cast"),
        E::Closure(x) => (&x.attrs, "closure"),
        E::Const(x) => (&x.attrs, "const block"),
        E::Continue(x) => (&x.attrs, "continue expression"),
        E::Field(x) => (&x.attrs, "field access"),
        E::ForLoop(x) => (&x.attrs, "for loop"),
        E::Group(x) => (&x.attrs, "expression"),
        E::If(x) => (&x.attrs, "if expression"),
        E::Index(x) => (&x.attrs, "index expression"),
        E::Infer(x) => (&x.attrs, "expression"),
        E::Let(x) => (&x.attrs, "let expression"),
        E::Lit(x) => (&x.attrs, "literal"),
        E::Loop(x) => (&x.attrs, "loop"),
        E::Macro(x) => (&x.attrs, "macro invocation"),
        E::Match(x) => (&x.attrs, "match expression"),
        E::MethodCall(x) => (&x.attrs, "method call"),
        E::Paren(x) => (&x.attrs, "expression"),
        E::Path(x) => (&x.attrs, "path expression"),
        E::Range(x) => (&x.attrs, "range expression"),
        E::RawAddr(x) => (&x.attrs, "raw address expression"),
        E::Reference(x) => (&x.attrs, "reference expression"),
        E::Repeat(x) => (&x.attrs, "array expression"),
        E::Return(x) => (&x.attrs, "return expression"),
        E::Struct(x) => (&x.attrs, "struct expression"),
        E::Try(x) => (&x.attrs, "try expression"),
        E::TryBlock(x) => (&x.attrs, "try block"),
        E::Tuple(x) => (&x.attrs, "tuple expression"),
        E::Unary(x) => (&x.attrs, "unary expression"),
        E::Unsafe(x) => (&x.attrs, "unsafe block"),
        E::While(x) => (&x.attrs, "while loop"),
        E::Yield(x) => (&x.attrs, "yield expression"),
        _ => (&[], ""),
    }
}

impl<'ast> Visit<'ast> for Finder<'_> {
    fn visit_item(&mut self, i: &'ast syn::Item) {
        if !self.holds(i.span().byte_range()) {
            return;
        }
        let (attrs, on) = item_attrs(i);
        self.attrs(attrs, &on);
        if let syn::Item::Macro(m) = i {
            self.mac(&m.mac);
        }
        syn::visit::visit_item(self, i);
    }
    fn visit_impl_item(&mut self, i: &'ast syn::ImplItem) {
        if !self.holds(i.span().byte_range()) {
            return;
        }
        match i {
            syn::ImplItem::Const(x) => self.attrs(&x.attrs, &format!("const {}", x.ident)),
            syn::ImplItem::Fn(x) => self.attrs(&x.attrs, &format!("fn {}", x.sig.ident)),
            syn::ImplItem::Type(x) => self.attrs(&x.attrs, &format!("type {}", x.ident)),
            syn::ImplItem::Macro(x) => {
                self.attrs(&x.attrs, "macro invocation");
                self.mac(&x.mac);
            }
            _ => {}
        }
        syn::visit::visit_impl_item(self, i);
    }
    fn visit_trait_item(&mut self, i: &'ast syn::TraitItem) {
        if !self.holds(i.span().byte_range()) {
            return;
        }
        match i {
            syn::TraitItem::Const(x) => self.attrs(&x.attrs, &format!("const {}", x.ident)),
            syn::TraitItem::Fn(x) => self.attrs(&x.attrs, &format!("fn {}", x.sig.ident)),
            syn::TraitItem::Type(x) => self.attrs(&x.attrs, &format!("type {}", x.ident)),
            syn::TraitItem::Macro(x) => {
                self.attrs(&x.attrs, "macro invocation");
                self.mac(&x.mac);
            }
            _ => {}
        }
        syn::visit::visit_trait_item(self, i);
    }
    fn visit_foreign_item(&mut self, i: &'ast syn::ForeignItem) {
        if !self.holds(i.span().byte_range()) {
            return;
        }
        match i {
            syn::ForeignItem::Fn(x) => self.attrs(&x.attrs, &format!("fn {}", x.sig.ident)),
            syn::ForeignItem::Static(x) => self.attrs(&x.attrs, &format!("static {}", x.ident)),
            syn::ForeignItem::Type(x) => self.attrs(&x.attrs, &format!("type {}", x.ident)),
            syn::ForeignItem::Macro(x) => self.attrs(&x.attrs, "macro invocation"),
            _ => {}
        }
        syn::visit::visit_foreign_item(self, i);
    }
    fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
        if !self.holds(s.span().byte_range()) {
            return;
        }
        match s {
            syn::Stmt::Local(l) => self.attrs(&l.attrs, "let statement"),
            syn::Stmt::Macro(m) => {
                self.attrs(&m.attrs, "statement");
                self.mac(&m.mac);
            }
            syn::Stmt::Expr(e, _) => {
                // rustc applies a statement's attributes to the whole statement; `syn`
                // keeps those of `#[a] x = y` or `#[a] x + y` on the leftmost operand.
                let mut t = e;
                loop {
                    t = match t {
                        syn::Expr::Assign(x) => &x.left,
                        syn::Expr::Binary(x) => &x.left,
                        syn::Expr::Cast(x) => &x.expr,
                        _ => break,
                    };
                }
                if !std::ptr::eq(t, e) {
                    self.attrs(expr_attrs(t).0, "statement");
                }
            }
            _ => {}
        }
        syn::visit::visit_stmt(self, s);
    }
    fn visit_expr(&mut self, e: &'ast syn::Expr) {
        if !self.holds(e.span().byte_range()) {
            return;
        }
        let (attrs, on) = expr_attrs(e);
        self.attrs(attrs, on);
        if let syn::Expr::Macro(m) = e {
            self.mac(&m.mac);
        }
        syn::visit::visit_expr(self, e);
    }
    fn visit_arm(&mut self, a: &'ast syn::Arm) {
        if !self.holds(a.span().byte_range()) {
            return;
        }
        self.attrs(&a.attrs, "match arm");
        syn::visit::visit_arm(self, a);
    }
    fn visit_field(&mut self, f: &'ast syn::Field) {
        if !self.holds(f.span().byte_range()) {
            return;
        }
        let on = f
            .ident
            .as_ref()
            .map_or_else(|| "field".to_string(), |i| format!("field {i}"));
        self.attrs(&f.attrs, &on);
        syn::visit::visit_field(self, f);
    }
    fn visit_variant(&mut self, v: &'ast syn::Variant) {
        if !self.holds(v.span().byte_range()) {
            return;
        }
        self.attrs(&v.attrs, &format!("variant {}", v.ident));
        syn::visit::visit_variant(self, v);
    }
    fn visit_field_value(&mut self, f: &'ast syn::FieldValue) {
        if !self.holds(f.span().byte_range()) {
            return;
        }
        self.attrs(&f.attrs, "field initialiser");
        syn::visit::visit_field_value(self, f);
    }
    fn visit_field_pat(&mut self, f: &'ast syn::FieldPat) {
        if !self.holds(f.span().byte_range()) {
            return;
        }
        self.attrs(&f.attrs, "field pattern");
        syn::visit::visit_field_pat(self, f);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gates around the first occurrence of `needle` in `src`.
    fn around(src: &str, needle: &str) -> Vec<SpanGate> {
        let at = src.find(needle).expect("needle");
        gates_around(src, at..at + needle.len()).unwrap()
    }

    fn probes(g: &[SpanGate]) -> Vec<String> {
        g.iter().flat_map(|g| g.probe.clone()).collect()
    }

    #[test]
    fn compiled_code_has_no_gate() {
        let src =
            "fn f(x: u8) -> u8 {\n    #[cfg(feature = \"x\")]\n    let _y = 1;\n    x + 1\n}\n";
        assert!(around(src, "x + 1").is_empty());
    }

    #[test]
    fn a_gated_match_arm_block_statement_and_function_are_found() {
        let src = r#"
pub fn kind(n: u8) -> u8 {
    match n {
        0 => 10,
        #[cfg(feature = "extra")]
        1 => 20 + n,
        _ => 30,
    }
}
pub fn block(n: u8) -> u8 {
    let mut v = n;
    #[cfg(feature = "extra")]
    {
        v = v * 3;
    }
    #[cfg(not(unix))]
    v -= 1;
    v
}
#[cfg(not(unix))]
pub fn windows_only(n: u8) -> u8 {
    n ^ 1
}
"#;
        let arm = around(src, "20 + n");
        assert_eq!(arm.len(), 1);
        assert_eq!(arm[0].on, "match arm");
        assert_eq!(arm[0].written, "#[cfg(feature = \"extra\")]");
        assert_eq!(arm[0].line, 5);
        assert_eq!(probes(&arm), ["#[cfg(feature = \"extra\")]"]);
        let b = around(src, "v * 3");
        assert_eq!((b.len(), b[0].on.as_str()), (1, "block"));
        let s = around(src, "v -= 1");
        assert_eq!(probes(&s), ["#[cfg(not(unix))]"]);
        assert_eq!(s[0].on, "statement");
        // The gate holds the whole statement, its right-hand side too, and is named once.
        assert_eq!(around(src, "= 1").len(), 1);
        let f = around(src, "n ^ 1");
        assert_eq!((f.len(), f[0].on.as_str()), (1, "fn windows_only"));
        assert!(around(src, "_ => 30").is_empty());
    }

    #[test]
    fn nested_gates_are_listed_outermost_first_with_inner_attributes_and_impls() {
        let src = r#"
#[cfg(unix)]
mod sys {
    pub struct S { #[cfg(target_os = "linux")] pub fd: i32 }
    #[cfg(feature = "a")]
    impl S {
        pub fn get(&self) -> i32 {
            #![cfg(test)]
            self.fd + 1
        }
    }
}
"#;
        let g = around(src, "self.fd + 1");
        let on: Vec<&str> = g.iter().map(|g| g.on.as_str()).collect();
        assert_eq!(on, ["mod sys", "impl", "fn get"]);
        assert_eq!(
            probes(&g),
            ["#[cfg(unix)]", "#[cfg(feature = \"a\")]", "#[cfg(test)]"]
        );
        let fd = around(src, "pub fd: i32");
        assert_eq!(fd.last().unwrap().on, "field fd");
    }

    #[test]
    fn cfg_attr_keeps_only_its_cfg_and_other_attributes_are_no_gate() {
        let src = r#"
#[cfg_attr(feature = "a", cfg(unix), inline)]
#[cfg_attr(test, derive(Debug))]
#[inline]
fn f() -> u8 { 1 + 1 }
"#;
        let g = around(src, "1 + 1");
        assert_eq!(probes(&g), ["#[cfg_attr(feature = \"a\", cfg(unix))]"]);
    }

    #[test]
    fn a_span_inside_the_gate_itself_is_not_behind_it() {
        let src = "#[cfg(feature = \"a\")]\nfn f() -> u8 { 1 }\n";
        assert!(around(src, "\"a\"").is_empty());
        assert_eq!(around(src, "1 }").len(), 1);
    }

    #[test]
    fn cfg_if_branches_are_gates_with_the_earlier_conditions_negated() {
        let src = r#"
cfg_if::cfg_if! {
    if #[cfg(unix)] {
        fn imp() -> u8 { 1 + 1 }
    } else if #[cfg(windows)] {
        fn imp() -> u8 { 2 + 2 }
    } else {
        fn imp() -> u8 { 3 + 3 }
    }
}
fn body() {
    cfg_if! {
        if #[cfg(feature = "x")] {
            let a = 4 + 4;
        }
    }
}
"#;
        assert_eq!(probes(&around(src, "1 + 1")), ["#[cfg(unix)]"]);
        assert_eq!(
            probes(&around(src, "2 + 2")),
            ["#[cfg(not(unix))]", "#[cfg(windows)]"]
        );
        let e = around(src, "3 + 3");
        assert_eq!(probes(&e), ["#[cfg(not(unix))]", "#[cfg(not(windows))]"]);
        assert_eq!(e[0].on, "cfg_if! branch");
        assert_eq!(probes(&around(src, "4 + 4")), ["#[cfg(feature = \"x\")]"]);
    }

    #[test]
    fn an_empty_span_is_a_position() {
        let src = "fn f() {\n    #[cfg(feature = \"a\")]\n    { g(); }\n}\n";
        let at = src.find("g();").unwrap();
        assert_eq!(gates_around(src, at..at).unwrap().len(), 1);
    }

    #[test]
    fn a_file_that_does_not_parse_is_a_parse_failure() {
        let e = gates_around("fn f( {", 0..1).unwrap_err();
        assert_eq!(e.line, 1);
    }
}
