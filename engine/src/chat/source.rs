//! Template source preparation: Jinja2 constructs minijinja lacks or treats differently, rewritten onto minijinja ones.
//!
//! - transformers registers a Jinja2 extension (`AssistantTracker`) whose tag
//!   `{% generation %}...{% endgeneration %}` renders its body unchanged (it only records where
//!   the assistant's text lies, for training masks); the body is compiled as the body of a call
//!   block, i.e. in a scope of its own. minijinja has no extension tags, so the tag names are
//!   rewritten to `with`/`endwith`, a block that renders its body unchanged in a scope of its own.
//! - Jinja2 fails on `{% for x in none %}` (Python's `'NoneType' object is not iterable`, e.g. a
//!   tool template rendered without tools), while minijinja iterates none as an empty list. The
//!   iterable of every `for` tag is passed through the filter [`ITERABLE_FILTER`], which refuses
//!   none.
//!
//! Whitespace modifiers (`-`, `+`) and the tags' lines are kept, so error lines still match the
//! source.

/// The filter every `for` iterable goes through: the value unchanged, or an error for none.
pub const ITERABLE_FILTER: &str = "__jinja2_iterable";

/// The source with every `generation`/`endgeneration` block tag renamed to `with`/`endwith`
/// and every `for` iterable wrapped as `(ITER)|__jinja2_iterable`. Text inside comments,
/// `{% raw %}` blocks, expressions and string literals is left alone.
pub fn rewrite_source(source: &str) -> String {
    let bytes = source.as_bytes();
    let mut out = String::with_capacity(source.len());
    let mut copied = 0;
    let mut i = 0;
    while i + 1 < bytes.len() {
        if bytes[i] != b'{' {
            i += 1;
            continue;
        }
        match bytes[i + 1] {
            b'#' => i = find_from(source, i + 2, "#}").map_or(bytes.len(), |e| e + 2),
            b'{' => i = tag_end(source, i + 2, "}}"),
            b'%' => {
                let end = tag_end(source, i + 2, "%}");
                let (name_start, name) = tag_name(source, i + 2);
                match name {
                    "raw" => {
                        // Skip to the matching `{% endraw %}`.
                        i = find_endraw(source, end);
                    }
                    "generation" | "endgeneration"
                        if tag_is_bare(source, name_start + name.len(), end) =>
                    {
                        out.push_str(&source[copied..name_start]);
                        out.push_str(if name == "generation" {
                            "with"
                        } else {
                            "endwith"
                        });
                        copied = name_start + name.len();
                        i = end;
                    }
                    "for" => {
                        if let Some((a, b)) = for_iterable(source, name_start + 3, end) {
                            out.push_str(&source[copied..a]);
                            out.push_str(" (");
                            out.push_str(source[a..b].trim());
                            out.push_str(")|");
                            out.push_str(ITERABLE_FILTER);
                            out.push(' ');
                            copied = b;
                        }
                        i = end;
                    }
                    _ => i = end,
                }
            }
            _ => i += 1,
        }
    }
    out.push_str(&source[copied..]);
    out
}

/// The byte range of a `for` tag's iterable: from after the top-level `in` to the top-level
/// `if` or `recursive` (or the tag's end). `None` when the tag has no top-level `in`.
fn for_iterable(s: &str, from: usize, tag_end: usize) -> Option<(usize, usize)> {
    let b = s.as_bytes();
    let mut close = tag_end.checked_sub(2)?;
    if close > from && (b[close - 1] == b'-' || b[close - 1] == b'+') {
        close -= 1;
    }
    let mut i = from;
    let mut depth = 0i32;
    let mut start = None;
    while i < close {
        let c = b[i];
        match c {
            b'\'' | b'"' => {
                i += 1;
                while i < close && b[i] != c {
                    if b[i] == b'\\' {
                        i += 1;
                    }
                    i += 1;
                }
                i += 1;
            }
            b'(' | b'[' | b'{' => {
                depth += 1;
                i += 1;
            }
            b')' | b']' | b'}' => {
                depth -= 1;
                i += 1;
            }
            c if c.is_ascii_alphanumeric() || c == b'_' => {
                let w = i;
                while i < close && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                let word = &s[w..i];
                let attr = w > 0 && b[w - 1] == b'.';
                if depth == 0 && !attr && !c.is_ascii_digit() {
                    match (start, word) {
                        (None, "in") => start = Some(i),
                        (Some(a), "if" | "recursive") => return Some((a, w)),
                        _ => {}
                    }
                }
            }
            _ => i += 1,
        }
    }
    start.map(|a| (a, close))
}

fn find_from(s: &str, from: usize, pat: &str) -> Option<usize> {
    s.get(from..)?.find(pat).map(|p| p + from)
}

/// The index just past the tag's closing delimiter, skipping string literals inside the tag
/// (the end of the source when unclosed: the compiler then reports the error).
fn tag_end(s: &str, from: usize, close: &str) -> usize {
    let b = s.as_bytes();
    let mut i = from;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        match quote {
            Some(q) => {
                if b[i] == b'\\' {
                    i += 1;
                } else if b[i] == q {
                    quote = None;
                }
            }
            None => {
                if b[i] == b'\'' || b[i] == b'"' {
                    quote = Some(b[i]);
                } else if s[i..].starts_with(close) {
                    return i + close.len();
                }
            }
        }
        i += 1;
    }
    b.len()
}

/// The first identifier of a block tag (after the `-`/`+` modifier and spaces) and where it starts.
fn tag_name(s: &str, from: usize) -> (usize, &str) {
    let b = s.as_bytes();
    let mut i = from;
    if i < b.len() && (b[i] == b'-' || b[i] == b'+') {
        i += 1;
    }
    while i < b.len() && b[i].is_ascii_whitespace() {
        i += 1;
    }
    let start = i;
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
        i += 1;
    }
    (start, &s[start..i])
}

/// True when only spaces and a `-`/`+` modifier stand between the tag name and `%}`.
fn tag_is_bare(s: &str, after_name: usize, end: usize) -> bool {
    let inner = &s[after_name..end.saturating_sub(2).max(after_name)];
    inner.trim().trim_end_matches(['-', '+']).trim().is_empty()
}

fn find_endraw(s: &str, from: usize) -> usize {
    let mut i = from;
    while let Some(p) = find_from(s, i, "{%") {
        let (start, name) = tag_name(s, p + 2);
        if name == "endraw" {
            return tag_end(s, start, "%}");
        }
        i = p + 2;
    }
    s.len()
}

#[cfg(test)]
mod tests {
    #[test]
    fn wraps_for_iterables_up_to_a_top_level_if_or_recursive() {
        use super::rewrite_source as rw;
        assert_eq!(
            rw("{%- for m in messages -%}"),
            "{%- for m in (messages)|__jinja2_iterable -%}"
        );
        assert_eq!(
            rw("{% for k, v in d.items() if k != 'in' %}"),
            "{% for k, v in (d.items())|__jinja2_iterable if k != 'in' %}"
        );
        assert_eq!(
            rw("{% for x in (a if b else c) recursive %}"),
            "{% for x in ((a if b else c))|__jinja2_iterable recursive %}"
        );
        assert_eq!(
            rw("{% for x in f('%}', [1, 2])+y.if_x %}"),
            "{% for x in (f('%}', [1, 2])+y.if_x)|__jinja2_iterable %}"
        );
    }

    use super::rewrite_source as rw;

    #[test]
    fn renames_bare_generation_tags_keeping_modifiers() {
        assert_eq!(
            rw("a{% generation %}b{%- endgeneration -%}c"),
            "a{% with %}b{%- endwith -%}c"
        );
        assert_eq!(
            rw("{%+generation+%}x{%endgeneration%}"),
            "{%+with+%}x{%endwith%}"
        );
    }

    #[test]
    fn leaves_strings_comments_raw_and_other_tags_alone() {
        for s in [
            "{{ '{% generation %}' }}",
            "{# {% generation %} #}",
            "{% raw %}{% generation %}{% endraw %}",
            "{% set generation = 1 %}",
            "{% if x == '%}' %}{% endif %}",
            "{{ 'for x in y' }}",
        ] {
            assert_eq!(rw(s), s);
        }
        assert_eq!(
            rw("{% raw %}{% generation %}{% endraw %}{% generation %}{% endgeneration %}"),
            "{% raw %}{% generation %}{% endraw %}{% with %}{% endwith %}"
        );
    }
}
