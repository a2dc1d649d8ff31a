//! Mutations that change nothing the compiler reads: a `find` text wholly inside comments,
//! doc comments, whitespace or a string literal whose value is discarded.
//!
//! The original and the mutated Rust file are each cut into tokens (`proc-macro2`, as
//! rustc's lexer would: ordinary comments and whitespace are not tokens); doc comments are
//! left out. When both token sequences are equal, the mutation touches only comments, doc
//! comments or whitespace. When they differ only in string literals that nothing reads (a
//! literal that is a whole expression statement, `"text";`, or the value of `let _ = ...`),
//! the mutation changes only text that is thrown away. Either way no test can tell the
//! mutant from the original, and a surviving verdict would blame the tests for a mistake of
//! the catalog.

use std::collections::BTreeSet;
use std::ops::Range;

use proc_macro2::{Delimiter, TokenStream, TokenTree};
use syn::spanned::Spanned;
use syn::visit::Visit;

/// One token as the comparison sees it: its text, and its byte range in the source when it
/// is a string literal.
struct Tok {
    text: String,
    literal: Option<Range<usize>>,
}

/// Blanks a leading byte-order mark or shebang line (same length), so that byte offsets
/// stay those of `text`.
pub(crate) fn parsable(text: &str) -> String {
    let mut src = text.to_string();
    if src.starts_with('\u{feff}') {
        src.replace_range(0..3, "   ");
    }
    if src.starts_with("#!") && !src.starts_with("#![") {
        let end = src.find('\n').unwrap_or(src.len());
        src.replace_range(0..end, &" ".repeat(end));
    }
    src
}

/// Whether the token at `r` in `src` is (part of) a doc comment: the lexer turns `/// x`
/// into `#[doc = " x"]` tokens that all carry the comment's span.
fn is_doc(src: &str, r: &Range<usize>) -> bool {
    src.get(r.clone())
        .is_some_and(|s| s.starts_with("//") || s.starts_with("/*"))
}

fn flatten(src: &str, ts: TokenStream, out: &mut Vec<Tok>) {
    for tt in ts {
        let r = tt.span().byte_range();
        if is_doc(src, &r) {
            continue;
        }
        match tt {
            TokenTree::Group(g) => {
                let (open, close) = match g.delimiter() {
                    Delimiter::Parenthesis => ("(", ")"),
                    Delimiter::Brace => ("{", "}"),
                    Delimiter::Bracket => ("[", "]"),
                    Delimiter::None => ("", ""),
                };
                out.push(Tok {
                    text: open.into(),
                    literal: None,
                });
                flatten(src, g.stream(), out);
                out.push(Tok {
                    text: close.into(),
                    literal: None,
                });
            }
            TokenTree::Literal(l) => {
                let text = l.to_string();
                let is_str = text.ends_with('"') || text.ends_with('#');
                out.push(Tok {
                    text,
                    literal: is_str.then_some(r),
                });
            }
            TokenTree::Punct(p) => out.push(Tok {
                text: p.as_char().to_string(),
                literal: None,
            }),
            TokenTree::Ident(i) => out.push(Tok {
                text: i.to_string(),
                literal: None,
            }),
        }
    }
}

fn tokens(text: &str) -> Option<Vec<Tok>> {
    let src = parsable(text);
    let ts: TokenStream = src.parse().ok()?;
    let mut out = Vec::new();
    flatten(&src, ts, &mut out);
    Some(out)
}

/// The tokens of `text` as the compiler reads them (comments, doc comments and whitespace
/// left out), or `None` when it does not lex.
pub(crate) fn code_tokens(text: &str) -> Option<Vec<String>> {
    tokens(text).map(|t| t.into_iter().map(|t| t.text).collect())
}

/// Byte ranges of the string literals whose value is discarded: a literal that is a whole
/// expression statement (`"text";`) or the initializer of `let _ = ...;`.
fn discarded_literals(text: &str) -> BTreeSet<(usize, usize)> {
    struct Finder(BTreeSet<(usize, usize)>);
    impl Finder {
        fn add(&mut self, e: &syn::Expr) {
            if let syn::Expr::Lit(l) = e
                && matches!(
                    l.lit,
                    syn::Lit::Str(_) | syn::Lit::ByteStr(_) | syn::Lit::CStr(_)
                )
            {
                let r = l.span().byte_range();
                self.0.insert((r.start, r.end));
            }
        }
    }
    impl<'ast> Visit<'ast> for Finder {
        fn visit_stmt(&mut self, s: &'ast syn::Stmt) {
            match s {
                syn::Stmt::Expr(e, Some(_)) => self.add(e),
                syn::Stmt::Local(l) if matches!(l.pat, syn::Pat::Wild(_)) => {
                    if let Some(init) = &l.init {
                        self.add(&init.expr);
                    }
                }
                _ => {}
            }
            syn::visit::visit_stmt(self, s);
        }
    }
    let Ok(file) = syn::parse_file(&parsable(text)) else {
        return BTreeSet::new();
    };
    let mut f = Finder(BTreeSet::new());
    f.visit_file(&file);
    f.0
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

/// Why the mutation from `original` to `mutated` (a Rust source file) changes nothing the
/// compiler reads, or `None` when it changes code (or when either text does not lex as
/// Rust: then no claim is made). The reason names the line of the first changed byte.
pub fn inert_change(original: &str, mutated: &str) -> Option<String> {
    let first_diff = original
        .bytes()
        .zip(mutated.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(original.len().min(mutated.len()));
    let line = line_of(original, first_diff);
    let (a, b) = (tokens(original)?, tokens(mutated)?);
    if a.len() != b.len() {
        return None;
    }
    let differing: Vec<&Tok> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x.text != y.text)
        .map(|(x, _)| x)
        .collect();
    if differing.is_empty() {
        return Some(format!(
            "it changes only comments, doc comments or whitespace (line {line}): nothing the compiler reads"
        ));
    }
    let discarded = discarded_literals(original);
    let all_discarded = differing.iter().all(|t| {
        t.literal
            .as_ref()
            .is_some_and(|r| discarded.contains(&(r.start, r.end)))
    });
    if all_discarded {
        let at = differing[0].literal.as_ref().map_or(0, |r| r.start);
        return Some(format!(
            "it changes only a string literal whose value is discarded (line {}): nothing reads it",
            line_of(original, at)
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: &str = "//! Module docs: x * 2.\n\n/// Twice `x` (x * 2).\npub fn double(x: i64) -> i64 {\n    // The doubling: x * 2.\n    /* block: x * 2 */\n    \"note: x * 2\";\n    let _ = \"also x * 2\";\n    let shown = \"shown x * 2\";\n    println!(\"{shown}\");\n    x * 2\n}\n";

    fn mutate(find_nth: usize, find: &str, replace: &str) -> String {
        let (at, _) = SRC.match_indices(find).nth(find_nth).unwrap();
        format!("{}{replace}{}", &SRC[..at], &SRC[at + find.len()..])
    }

    #[test]
    fn comments_doc_comments_and_whitespace_are_inert() {
        for (n, line) in [(0, 1), (1, 3), (2, 5), (3, 6)] {
            let m = mutate(n, "x * 2", "x + 1");
            let why = inert_change(SRC, &m).unwrap_or_else(|| panic!("occurrence {n}"));
            assert!(why.contains("only comments"), "{why}");
            assert!(why.contains(&format!("(line {line})")), "{why}");
        }
        let spaced = SRC.replace("    x * 2\n}", "    x  *  2\n}");
        assert!(inert_change(SRC, &spaced).is_some());
    }

    #[test]
    fn discarded_literals_are_inert_read_ones_are_not() {
        for (n, line) in [(4, 7), (5, 8)] {
            let m = mutate(n, "x * 2", "x + 1");
            let why = inert_change(SRC, &m).unwrap_or_else(|| panic!("occurrence {n}"));
            assert!(why.contains("string literal"), "{why}");
            assert!(why.contains(&format!("(line {line})")), "{why}");
        }
        // A literal bound to a name (and printed) is read; the code itself is code.
        assert_eq!(inert_change(SRC, &mutate(6, "x * 2", "x + 1")), None);
        assert_eq!(inert_change(SRC, &mutate(7, "x * 2", "x + 1")), None);
    }

    #[test]
    fn a_comment_edit_that_breaks_out_into_code_is_not_inert() {
        let m = mutate(1, "x * 2.", "x * 2.\n    let _y = 1;");
        assert_eq!(inert_change(SRC, &m), None);
    }
}
