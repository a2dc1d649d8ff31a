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

/// A top-level token tree of a file: where its first byte lies and where its tokens begin
/// in the flattened token list.
#[derive(Clone, Copy)]
struct Top {
    byte: usize,
    tok: usize,
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
    tokens_and_tops(text).map(|(t, _)| t)
}

/// The tokens of `text` and its top-level token trees (doc comments left out of both).
fn tokens_and_tops(text: &str) -> Option<(Vec<Tok>, Vec<Top>)> {
    let src = parsable(text);
    let ts: TokenStream = src.parse().ok()?;
    let mut out = Vec::new();
    let mut tops = Vec::new();
    for tt in ts {
        let r = tt.span().byte_range();
        if is_doc(&src, &r) {
            continue;
        }
        tops.push(Top {
            byte: r.start,
            tok: out.len(),
        });
        flatten(&src, TokenStream::from(tt), &mut out);
    }
    Some((out, tops))
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
    let (a, b) = (tokens(original)?, tokens(mutated)?);
    let first_diff = original
        .bytes()
        .zip(mutated.bytes())
        .position(|(a, b)| a != b)
        .unwrap_or(original.len().min(mutated.len()));
    judge(original, first_diff, &a, &b)
}

/// [`inert_change`] for many mutants of one file: the original is cut into tokens once, and
/// each mutant only around its change (see [`Inert::why`]).
pub struct Inert {
    original: String,
    /// The original's tokens and top-level trees; `None` when it does not lex.
    lexed: Option<(Vec<Tok>, Vec<Top>)>,
}

impl Inert {
    /// Cuts `original` (a Rust source file) into tokens.
    pub fn new(original: &str) -> Inert {
        Inert {
            original: original.to_string(),
            lexed: tokens_and_tops(original),
        }
    }

    /// The same answer as [`inert_change`]`(original, mutated)`, found by cutting into
    /// tokens only the stretch of `mutated` between two top-level token trees around the
    /// change. The stretch begins at the start of the last top-level tree that starts
    /// before the first changed byte and is preceded by whitespace (else the file's start),
    /// and ends at the start of the first one that starts after the last changed byte and
    /// is preceded by a newline (else the file's end). Before the stretch the two files are
    /// the same bytes, so the lexer reaches the stretch in the same state (between tokens,
    /// outside any group). When the mutated stretch lexes on its own it ends between tokens
    /// too (a newline last, which ends a line comment; no open block comment, string or
    /// group), so the rest lexes as in the original. The whole mutated file is lexed
    /// instead when its stretch does not lex on its own.
    pub fn why(&self, mutated: &str) -> Option<String> {
        let original = self.original.as_str();
        let (a, tops) = self.lexed.as_ref()?;
        let (o, m) = (original.as_bytes(), mutated.as_bytes());
        let common = o.len().min(m.len());
        let first_diff = o.iter().zip(m).position(|(x, y)| x != y).unwrap_or(common);
        let same_tail = o
            .iter()
            .rev()
            .zip(m.iter().rev())
            .take(common - first_diff)
            .take_while(|(x, y)| x == y)
            .count();
        let changed_end = o.len() - same_tail;
        let after_space = |at: usize| at == 0 || o[at - 1].is_ascii_whitespace();
        // A line comment ends only at a newline, so the stretch must end with one.
        let after_newline = |at: usize| o[at - 1] == b'\n';
        let begin = tops
            .iter()
            .rev()
            .find(|t| t.byte < first_diff && after_space(t.byte))
            .copied()
            .unwrap_or(Top { byte: 0, tok: 0 });
        let end = tops
            .iter()
            .find(|t| t.byte > changed_end && after_newline(t.byte))
            .copied()
            .unwrap_or(Top {
                byte: o.len(),
                tok: a.len(),
            });
        let stretch_end = end.byte + m.len() - o.len();
        let stretch = &mutated[begin.byte..stretch_end];
        let local = if begin.byte == 0 || !stretch.starts_with("#!") {
            tokens(stretch)
        } else {
            None
        };
        let Some(local) = local else {
            return judge(original, first_diff, a, &tokens(mutated)?);
        };
        // Before and after the stretch both files have the same tokens.
        judge(original, first_diff, &a[begin.tok..end.tok], &local)
    }
}

/// The verdict on the tokens `a` of `original` and `b` of the mutant whose first changed
/// byte is `first_diff`, or on the stretches of them that can differ (the tokens `a` carry
/// byte ranges in `original`).
fn judge(original: &str, first_diff: usize, a: &[Tok], b: &[Tok]) -> Option<String> {
    let line = line_of(original, first_diff);
    if a.len() != b.len() {
        return None;
    }
    let differing: Vec<&Tok> = a
        .iter()
        .zip(b)
        .filter(|(x, y)| x.text != y.text)
        .map(|(x, _)| x)
        .collect();
    if differing.is_empty() {
        return Some(format!(
            "it changes only comments, doc comments or whitespace (line {line}): nothing the compiler reads"
        ));
    }
    // Parsing the whole file for its discarded literals is worth it only when every
    // differing token is a string literal.
    if differing.iter().any(|t| t.literal.is_none()) {
        return None;
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

    /// A file with several top-level items, comments, doc comments, raw strings and
    /// discarded literals between and inside them.
    const FILE: &str = "//! Crate docs.\n#![allow(dead_code)]\n\n/// One.\npub fn one() -> u8 { 1 }\n/* block\n   comment */\nconst S: &str = r#\"raw \"quoted\" text\"#;\n\nfn two(x: u8) -> u8 {\n    \"note\";\n    let _ = \"gone\";\n    // x + 2\n    x + 2\n}\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn t() { assert_eq!(super::two(1), 3); }\n}\nstruct P { a: u8 }\nimpl P { fn a(&self) -> u8 { self.a } }\n";

    /// A position in [`FILE`]: anywhere, or (as often) a whitespace byte, where a change can
    /// join two tokens or split one at a top-level boundary.
    fn position() -> impl proptest::strategy::Strategy<Value = usize> {
        use proptest::prelude::*;
        let spaces: Vec<usize> = FILE
            .char_indices()
            .filter(|(_, c)| c.is_whitespace())
            .map(|(i, _)| i)
            .collect();
        prop_oneof![0..FILE.len(), proptest::sample::select(spaces)]
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(2048))]
        /// Cutting only the stretch around the change gives the same answer as cutting both
        /// whole files, whatever the change opens or closes (comments, strings, groups) or
        /// joins (a deleted space between two items' tokens).
        #[test]
        fn the_stretch_answers_as_the_whole_file(
            at in position(),
            cut in proptest::prop_oneof![0usize..3, 0usize..12],
            piece in proptest::sample::select(vec![
                "", "", "", " ", "\n", "x", "1", "/*", "*/", "//", "\"", "r#\"", "\"#", "{", "}",
                "(", ")", "'a", "1.", "#!", "#![", "/// d\n", "fn f() {}\n", "x + 3", "\n\n",
                "\u{e9}",
            ]),
        ) {
            let at = (0..=at).rev().find(|&i| FILE.is_char_boundary(i)).unwrap();
            let end = (at + cut).min(FILE.len());
            let end = (end..=FILE.len()).find(|&i| FILE.is_char_boundary(i)).unwrap();
            let mutated = format!("{}{piece}{}", &FILE[..at], &FILE[end..]);
            proptest::prop_assert_eq!(Inert::new(FILE).why(&mutated), inert_change(FILE, &mutated));
        }
    }

    #[test]
    fn the_stretch_finds_inert_and_live_changes() {
        let inert = Inert::new(FILE);
        let comment = FILE.replace("// x + 2", "// x - 2");
        assert!(
            inert
                .why(&comment)
                .is_some_and(|w| w.contains("only comments"))
        );
        let literal = FILE.replace("\"gone\"", "\"went\"");
        assert!(
            inert
                .why(&literal)
                .is_some_and(|w| w.contains("string literal"))
        );
        let code = FILE.replace("    x + 2\n", "    x - 2\n");
        assert_eq!(inert.why(&code), None);
        // A comment opened in one item and closed in another: the stretch does not lex on
        // its own, and the whole file decides.
        let across = FILE
            .replace("pub fn one", "/* pub fn one")
            .replace("const S", "*/ const S");
        assert_eq!(inert.why(&across), inert_change(FILE, &across));
    }
}
