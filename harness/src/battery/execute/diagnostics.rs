//! rustc's JSON diagnostics in cargo's message stream: the compiler errors of a build, each
//! located by the byte spans it points at (and the macro call sites those were expanded from).
//!
//! Source format: cargo's `--message-format=json` lines with `"reason":"compiler-message"`
//! carry rustc's JSON diagnostic (rustc book, "JSON Output"): `message.level`,
//! `message.message`, `message.code.code`, `message.rendered`, and `message.spans[]` with
//! `file_name` (as rustc was given it: relative to cargo's working directory, the workspace
//! root, for workspace members), `byte_start`/`byte_end` (0-based byte offsets into the file
//! as it is on disk), `line_start`, `column_start` (1-based), `is_primary`, and `expansion`
//! (`{span, macro_decl_name}` when the span lies in macro-expanded code, `span` being the
//! call site).

use std::ops::Range;

use serde::Deserialize;

/// A place an error points at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Site {
    /// The file, as rustc names it.
    pub file: String,
    /// Byte range in the file.
    pub bytes: Range<usize>,
    /// 1-based line of the start.
    pub line: usize,
    /// 1-based column of the start.
    pub column: usize,
}

/// One compiler error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompilerError {
    /// Error code (`E0308`), if any.
    pub code: Option<String>,
    /// The one-line message (`mismatched types`).
    pub message: String,
    /// rustc's rendered text, as a terminal would show it (without colours).
    pub rendered: String,
    /// Every primary span, then, for each one inside a macro expansion, the call sites it
    /// was expanded from, innermost first. Empty for errors that point nowhere (a linker
    /// failure, a missing crate).
    pub sites: Vec<Site>,
}

#[derive(Deserialize)]
struct Line {
    reason: String,
    message: Option<Diagnostic>,
}

#[derive(Deserialize)]
struct Diagnostic {
    level: String,
    message: String,
    code: Option<Code>,
    rendered: Option<String>,
    #[serde(default)]
    spans: Vec<Span>,
}

#[derive(Deserialize)]
struct Code {
    code: String,
}

#[derive(Deserialize)]
struct Span {
    file_name: String,
    byte_start: usize,
    byte_end: usize,
    line_start: usize,
    column_start: usize,
    is_primary: bool,
    expansion: Option<Box<Expansion>>,
}

#[derive(Deserialize)]
struct Expansion {
    span: Span,
}

fn site(s: &Span) -> Site {
    Site {
        file: s.file_name.clone(),
        bytes: s.byte_start..s.byte_end.max(s.byte_start),
        line: s.line_start,
        column: s.column_start,
    }
}

/// The errors (level `error` or `error: internal compiler error`) in `stdout`, cargo's JSON
/// message stream, in order. rustc's closing summary (`aborting due to N previous errors`)
/// is not an error of its own and is left out; lines that are not JSON are skipped.
pub fn compiler_errors(stdout: &str) -> Vec<CompilerError> {
    let mut out = Vec::new();
    for line in stdout.lines() {
        let Ok(l) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        let Some(d) = l.message.filter(|_| l.reason == "compiler-message") else {
            continue;
        };
        if !d.level.starts_with("error") {
            continue;
        }
        if d.spans.is_empty() && d.message.starts_with("aborting due to") {
            continue;
        }
        let mut sites = Vec::new();
        for s in d.spans.iter().filter(|s| s.is_primary) {
            sites.push(site(s));
            let mut e = s.expansion.as_deref();
            while let Some(x) = e {
                sites.push(site(&x.span));
                e = x.span.expansion.as_deref();
            }
        }
        out.push(CompilerError {
            code: d.code.map(|c| c.code),
            rendered: d
                .rendered
                .unwrap_or_else(|| format!("error: {}", d.message)),
            message: d.message,
            sites,
        });
    }
    out
}

/// 1-based line and char column of byte offset `at` in `text`.
pub fn line_column(text: &str, at: usize) -> (usize, usize) {
    let at = at.min(text.len());
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[start..].chars().count() + 1)
}

/// A block of text that sits at `from` (byte offset) in one version of a file and at `to` in
/// another, identical in both: what moves a rendered error from one to the other.
#[derive(Debug, Clone)]
pub struct Relocation<'a> {
    /// The file as rustc names it (`engine/src/runtime.rs`).
    pub file: &'a str,
    /// The version rustc compiled, and the block's byte range in it.
    pub compiled: &'a str,
    /// Byte range of the block in `compiled`.
    pub from: Range<usize>,
    /// The version the reader has.
    pub shown: &'a str,
    /// Byte offset of the block in `shown`.
    pub to: usize,
    /// Byte ranges of `compiled` that are `shown`'s text, each with its offset in `shown`
    /// (a switched file's text between its switches): a line that starts inside one is
    /// moved there too, its column unchanged.
    pub verbatim: &'a [(Range<usize>, usize)],
}

/// `rendered` (rustc's rendered text of an error in [`Relocation::compiled`]) with the
/// locations that fall inside the block, or on a line that starts in a verbatim range,
/// moved to [`Relocation::shown`]: the `--> file:L:C` and `::: file:L:C` headers and the
/// line numbers in the snippet gutter (`L |`) that belong to that file. Everything else is
/// left as it is.
pub fn relocate(rendered: &str, r: &Relocation<'_>) -> String {
    let (first, col_from) = line_column(r.compiled, r.from.start);
    let (last, _) = line_column(r.compiled, r.from.end);
    let (shown_first, col_to) = line_column(r.shown, r.to);
    // Byte offset of each line's start in `compiled` (index 0 is line 1).
    let starts: Vec<usize> = std::iter::once(0)
        .chain(r.compiled.match_indices('\n').map(|(i, _)| i + 1))
        .collect();
    let map = |line: usize, col: usize| -> Option<(usize, usize)> {
        if !(first..=last).contains(&line) {
            let at = *starts.get(line.checked_sub(1)?)?;
            let (range, to) = r.verbatim.iter().find(|(range, _)| range.contains(&at))?;
            let (l, _) = line_column(r.shown, to + (at - range.start));
            return Some((l, col));
        }
        let l = line - first + shown_first;
        let c = if line == first {
            (col + col_to).saturating_sub(col_from)
        } else {
            col
        };
        Some((l, c.max(1)))
    };
    let mut in_file = false;
    let mut out = Vec::new();
    for text in rendered.split('\n') {
        let trimmed = text.trim_start();
        if let Some(rest) = trimmed
            .strip_prefix("--> ")
            .or_else(|| trimmed.strip_prefix("::: "))
        {
            // `path:line:column`; the path may hold ':' itself.
            let mut parts = rest.rsplitn(3, ':');
            let (col, line, path) = (parts.next(), parts.next(), parts.next());
            in_file = path == Some(r.file);
            if let (true, Some(Ok(l)), Some(Ok(c))) = (
                in_file,
                line.map(str::parse::<usize>),
                col.map(str::parse::<usize>),
            ) && let Some((l, c)) = map(l, c)
            {
                let indent = &text[..text.len() - trimmed.len()];
                out.push(format!("{indent}{} {}:{l}:{c}", &trimmed[..3], r.file));
                continue;
            }
            out.push(text.to_string());
            continue;
        }
        if in_file
            && let Some((n, width)) = gutter(text)
            && let Some((l, _)) = map(n, 1)
        {
            out.push(format!("{l:>width$}{}", &text[width..]));
            continue;
        }
        out.push(text.to_string());
    }
    let mut out = join_adjacent(out);
    narrow_gutter(&mut out);
    out.join("\n")
}

/// The line number a snippet line shows in its gutter (optional spaces, digits, a space,
/// `|`: `  12 | code`), and the byte offset in `line` where its digits end; `None` for
/// any other line.
fn gutter(line: &str) -> Option<(usize, usize)> {
    let t = line.trim_start();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    if digits > 0 && t[digits..].trim_start().starts_with('|') {
        let n = t[..digits].parse().ok()?;
        Some((n, line.len() - t.len() + digits))
    } else {
        None
    }
}

/// [`gutter`]'s line number alone.
fn gutter_number(line: &str) -> Option<usize> {
    gutter(line).map(|(n, _)| n)
}

/// rustc marks lines it leaves out of a snippet with a `...` line; once the lines around
/// one have moved to adjacent numbers (a switched file's lines between them are not in the
/// mutated file), nothing is left out there, and the mark goes.
fn join_adjacent(lines: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    for (k, line) in lines.iter().enumerate() {
        if line.trim() == "..." {
            let before = out.iter().rev().find_map(|l| gutter_number(l));
            let after = lines[k + 1..].iter().find_map(|l| gutter_number(l));
            if let (Some(b), Some(a)) = (before, after)
                && a == b + 1
            {
                continue;
            }
        }
        out.push(line.clone());
    }
    out
}

/// rustc pads its gutter to the widest line number it shows; after line numbers moved
/// (a switched file is longer than the mutated one), the lines of the error that are
/// indented at least as far as the gutter lose the padding the new numbers no longer need.
fn narrow_gutter(lines: &mut [String]) {
    let Some(width) = lines.iter().find_map(|l| l.find("--> ")) else {
        return;
    };
    let widest = lines
        .iter()
        .filter_map(|l| gutter_number(l))
        .map(|n| n.to_string().len())
        .max();
    let Some(widest) = widest else {
        return;
    };
    let cut = width.saturating_sub(widest);
    if cut == 0 {
        return;
    }
    let pad = " ".repeat(cut);
    for l in lines.iter_mut() {
        if l.starts_with(&pad) {
            l.replace_range(..cut, "");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STREAM: &str = r#"{"reason":"compiler-artifact","package_id":"p","fresh":true}
not json at all
{"reason":"compiler-message","package_id":"p","message":{"$message_type":"diagnostic","level":"warning","message":"unused variable: `x`","code":null,"rendered":"warning: unused","spans":[{"file_name":"src/lib.rs","byte_start":1,"byte_end":2,"line_start":1,"line_end":1,"column_start":2,"column_end":3,"is_primary":true,"expansion":null}],"children":[]}}
{"reason":"compiler-message","package_id":"p","message":{"$message_type":"diagnostic","level":"error","message":"mismatched types","code":{"code":"E0308","explanation":null},"rendered":"error[E0308]: mismatched types","spans":[{"file_name":"src/lib.rs","byte_start":40,"byte_end":45,"line_start":3,"line_end":3,"column_start":5,"column_end":10,"is_primary":true,"expansion":null},{"file_name":"src/lib.rs","byte_start":10,"byte_end":13,"line_start":1,"line_end":1,"column_start":11,"column_end":14,"is_primary":false,"expansion":null}],"children":[]}}
{"reason":"compiler-message","package_id":"p","message":{"$message_type":"diagnostic","level":"error","message":"cannot find value `y`","code":null,"rendered":"error: y","spans":[{"file_name":"/rust/lib/core/src/macros/mod.rs","byte_start":900,"byte_end":910,"line_start":40,"line_end":40,"column_start":1,"column_end":2,"is_primary":true,"expansion":{"macro_decl_name":"assert_eq!","def_site_span":null,"span":{"file_name":"tests/t.rs","byte_start":70,"byte_end":90,"line_start":6,"line_end":6,"column_start":5,"column_end":25,"is_primary":false,"expansion":null}}}],"children":[]}}
{"reason":"compiler-message","package_id":"p","message":{"$message_type":"diagnostic","level":"error","message":"aborting due to 2 previous errors","code":null,"rendered":"error: aborting due to 2 previous errors","spans":[],"children":[]}}
{"reason":"compiler-message","package_id":"p","message":{"$message_type":"diagnostic","level":"error","message":"linking with `cc` failed: exit status: 1","code":null,"rendered":"error: linking with `cc` failed","spans":[],"children":[]}}
"#;

    #[test]
    fn errors_with_primary_spans_and_macro_call_sites() {
        let e = compiler_errors(STREAM);
        assert_eq!(e.len(), 3, "{e:#?}");
        assert_eq!(e[0].code.as_deref(), Some("E0308"));
        assert_eq!(e[0].message, "mismatched types");
        assert_eq!(
            e[0].sites,
            [Site {
                file: "src/lib.rs".into(),
                bytes: 40..45,
                line: 3,
                column: 5
            }]
        );
        let files: Vec<&str> = e[1].sites.iter().map(|s| s.file.as_str()).collect();
        assert_eq!(files, ["/rust/lib/core/src/macros/mod.rs", "tests/t.rs"]);
        assert_eq!(e[1].sites[1].bytes, 70..90);
        assert!(e[2].sites.is_empty());
        assert!(e[2].message.starts_with("linking with"));
    }

    #[test]
    fn line_columns_count_chars() {
        assert_eq!(line_column("ab\néx", 0), (1, 1));
        assert_eq!(line_column("ab\néx", 3), (2, 1));
        assert_eq!(line_column("ab\néx", 5), (2, 2));
    }

    #[test]
    fn relocates_headers_and_gutter_of_the_file_only() {
        // The block "{\n    a - b\n}" sits at line 10 of the compiled file and at line 3
        // (column 30) of the shown one.
        let block = "{\n    a - b\n}";
        let compiled = format!("{}1 => {block}\n", "//\n".repeat(9));
        let from = compiled.find(block).unwrap();
        let shown = format!("//\n//\nfn add(a: i64, b: i64) -> i64 {block}\n");
        let to = shown.find(block).unwrap();
        let r = Relocation {
            file: "src/lib.rs",
            compiled: &compiled,
            from: from..from + block.len(),
            shown: &shown,
            to,
            verbatim: &[],
        };
        let rendered = "error[E0308]: mismatched types\n  --> src/lib.rs:11:5\n   |\n10 | 1 => {\n11 |     a - b\n   |     ^^^^^ expected `bool`\n   |\n  ::: src/other.rs:11:1\n   |\n11 | fn other() {}\n   | - here\n";
        let got = relocate(rendered, &r);
        assert_eq!(
            got,
            "error[E0308]: mismatched types\n  --> src/lib.rs:4:5\n   |\n 3 | 1 => {\n 4 |     a - b\n   |     ^^^^^ expected `bool`\n   |\n  ::: src/other.rs:11:1\n   |\n11 | fn other() {}\n   | - here\n"
        );
        // The gutter narrows when the moved line numbers have fewer digits.
        let wide = "error: x\n    --> src/lib.rs:1002:5\n     |\n1002 |     a - b\n     |     ^\n     = note: n\n";
        let compiled = format!("{}1 => {block}\n", "//\n".repeat(1000));
        let r2 = Relocation {
            compiled: &compiled,
            from: compiled.find(block).unwrap()..compiled.find(block).unwrap() + block.len(),
            ..r
        };
        assert_eq!(
            relocate(wide, &r2),
            "error: x\n --> src/lib.rs:4:5\n  |\n4 |     a - b\n  |     ^\n  = note: n\n"
        );
        // A `...` between lines that are adjacent once moved goes; one between lines that
        // are not stays (and so does the gutter's width, for the line left where it was).
        let elided = "error: x\n    --> src/lib.rs:1002:5\n     |\n1001 | 1 => {\n     |      - here\n...\n1002 |     a - b\n     |     ^\n...\n1004 | \n";
        assert_eq!(
            relocate(elided, &r2),
            "error: x\n    --> src/lib.rs:4:5\n     |\n   3 | 1 => {\n     |      - here\n   4 |     a - b\n     |     ^\n...\n1004 | \n"
        );
        // A location on the block's first line moves its column too.
        let first = "  --> src/lib.rs:10:6\n";
        assert_eq!(relocate(first, &r), "  --> src/lib.rs:3:31\n");
    }
}
