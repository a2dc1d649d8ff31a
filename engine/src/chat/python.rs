//! Python's text forms of template values: `str()`/`repr()` and `json.dumps`, as Jinja2 under transformers prints them.
//!
//! A chat template rendered by transformers runs on Python objects: `{{ value }}`, the `string`
//! and `join` filters print with `str()` (a list prints as `['a', 1]`, `None` as `None`, a float
//! as `1e-05`), and transformers' `tojson` filter is `json.dumps(value, ensure_ascii=False,
//! indent=None, separators=None, sort_keys=False)`. minijinja's own forms differ (a list prints
//! as `["a", 1]`), so the environment uses these functions instead.

use std::fmt::Write as _;
use std::sync::Arc;

use minijinja::value::{Kwargs, Object, ObjectRepr, ValueKind};
use minijinja::{Error, ErrorKind, State, Value};

/// Jinja2's `Markup`: the string the `safe` filter returns.
///
/// In Jinja2, `Markup + str` (and `str + Markup`) HTML-escapes the plain operand, even with
/// autoescaping off; minijinja's `+` cannot reproduce that, so a `Markup` is a distinct value
/// that prints, joins with `~`, compares and serialises as its text, but on which `+` fails (an
/// error naming the line, see [`explain_markup_error`]) instead of giving a different prompt.
#[derive(Debug)]
pub struct Markup(pub String);

impl Object for Markup {
    fn repr(self: &Arc<Self>) -> ObjectRepr {
        ObjectRepr::Plain
    }

    fn render(self: &Arc<Self>, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }

    fn is_true(self: &Arc<Self>) -> bool {
        !self.0.is_empty()
    }
}

fn markup_text(value: &Value) -> Option<&str> {
    value.downcast_object_ref::<Markup>().map(|m| m.0.as_str())
}

/// The `safe` filter: the text as a [`Markup`] (a value that is already markup stays as it is).
pub fn safe_filter(value: &Value) -> Result<Value, Error> {
    if markup_text(value).is_some() {
        return Ok(value.clone());
    }
    Ok(Value::from_object(Markup(py_str(value)?)))
}

/// A render error caused by `+` on a [`Markup`] value, reworded to name the construct.
pub fn explain_markup_error(e: Error) -> Error {
    let is_markup_add = e.kind() == ErrorKind::InvalidOperation
        && e.detail()
            .is_some_and(|d| d.contains("+ operator") && d.contains("plain object"));
    if !is_markup_add {
        return e;
    }
    let at = match (e.name(), e.line()) {
        (Some(name), Some(line)) => format!(" (at {name}:{line})"),
        _ => String::new(),
    };
    Error::new(
        ErrorKind::InvalidOperation,
        format!(
            "unsupported construct: `+` on a string marked `|safe`{at}: Jinja2 would HTML-escape \
             the other operand, which this renderer does not reproduce"
        ),
    )
}

/// The filter every `for` iterable goes through: the value unchanged, or Python's error for
/// none (`'NoneType' object is not iterable`), which minijinja would iterate as empty.
pub fn iterable_filter(value: Value) -> Result<Value, Error> {
    if value.is_none() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "'NoneType' object is not iterable (a for loop over none)",
        ));
    }
    if let Some(text) = markup_text(&value) {
        return Ok(Value::from(text));
    }
    Ok(value)
}

/// The `length` (and `count`) filter: Python's `len()`, which fails on none.
pub fn length_filter(value: &Value) -> Result<Value, Error> {
    if value.is_none() {
        return Err(Error::new(
            ErrorKind::InvalidOperation,
            "object of type 'NoneType' has no len()",
        ));
    }
    if let Some(text) = markup_text(value) {
        return Ok(Value::from(text.chars().count()));
    }
    value.len().map(Value::from).ok_or_else(|| {
        Error::new(
            ErrorKind::InvalidOperation,
            format!("object of type {} has no len()", value.kind()),
        )
    })
}

/// `str(value)` as Python prints it. Strings are themselves; undefined prints as nothing (as
/// Jinja2's `Undefined` does).
pub fn py_str(value: &Value) -> Result<String, Error> {
    let mut out = String::new();
    match value.kind() {
        ValueKind::String => out.push_str(value.as_str().unwrap_or_default()),
        ValueKind::Undefined => {}
        _ => match markup_text(value) {
            Some(text) => out.push_str(text),
            None => write_repr(&mut out, value)?,
        },
    }
    Ok(out)
}

/// `repr(value)` as Python writes it: `'text'`, `None`, `True`, `1.5`, `[1, 'a']`, `{'k': 'v'}`.
///
/// Errors: a value Python has no plain literal for (an iterator, a callable, bytes).
pub fn py_repr(value: &Value) -> Result<String, Error> {
    let mut out = String::new();
    write_repr(&mut out, value)?;
    Ok(out)
}

fn write_repr(out: &mut String, value: &Value) -> Result<(), Error> {
    match value.kind() {
        ValueKind::Undefined => {}
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => write_number(out, value, false),
        ValueKind::String => write_str_repr(out, value.as_str().unwrap_or_default()),
        ValueKind::Seq => {
            out.push('[');
            for (i, item) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &item)?;
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            for (i, key) in value.try_iter()?.enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                write_repr(out, &key)?;
                out.push_str(": ");
                write_repr(out, &value.get_item(&key)?)?;
            }
            out.push('}');
        }
        kind => match markup_text(value) {
            Some(text) => {
                out.push_str("Markup(");
                write_str_repr(out, text);
                out.push(')');
            }
            None => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("cannot print a {kind} value as Python would print it"),
                ));
            }
        },
    }
    Ok(())
}

/// Python's `repr` of a string: single quotes unless the text holds a `'` and no `"`.
fn write_str_repr(out: &mut String, s: &str) {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) || c == '\u{ad}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if is_unprintable(c) => {
                let _ = if (c as u32) <= 0xffff {
                    write!(out, "\\u{:04x}", c as u32)
                } else {
                    write!(out, "\\U{:08x}", c as u32)
                };
            }
            c => out.push(c),
        }
    }
    out.push(quote);
}

/// Characters Python's `str.isprintable` rejects beyond the C0/C1 controls: format characters,
/// separators other than the space, private-use and unassigned-looking code points.
fn is_unprintable(c: char) -> bool {
    matches!(c as u32,
        0x2000..=0x200f | 0x2028..=0x202f | 0x205f..=0x206f | 0xfeff | 0xfff9..=0xfffb
        | 0x3000 | 0x1680 | 0x00a0 | 0xe000..=0xf8ff | 0xf0000..=0x10ffff)
}

/// Python's `repr` of an int or float (`1`, `1.0`, `1e-05`, `1.5e+20`, `inf`, `nan`). With
/// `json`, the non-finite floats are written as `json.dumps` writes them (`Infinity`, `NaN`).
fn write_number(out: &mut String, value: &Value, json: bool) {
    if value.is_integer() {
        out.push_str(&value.to_string());
        return;
    }
    let f = f64::try_from(value.clone()).unwrap_or(f64::NAN);
    out.push_str(&py_float_repr(f, json));
}

/// `float.__repr__`: the shortest digits that round-trip, positional for exponents -4..16,
/// scientific (`1e-05`, `1.5e+16`) outside that range.
pub fn py_float_repr(f: f64, json: bool) -> String {
    if f.is_nan() {
        return if json { "NaN" } else { "nan" }.to_string();
    }
    if f.is_infinite() {
        let s = if json { "Infinity" } else { "inf" };
        return if f < 0.0 {
            format!("-{s}")
        } else {
            s.to_string()
        };
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0.0" } else { "0.0" }.to_string();
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. `1.2345e-7`.
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci
        .split_once('e')
        .expect("`{:e}` always writes an exponent");
    let exp: i32 = exp.parse().expect("`{:e}` writes a decimal exponent");
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(m) => ("-", m),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(|c| *c != '.').collect();
    if (-4..16).contains(&exp) {
        let n = digits.len() as i32;
        let body = if exp < 0 {
            format!("0.{}{digits}", "0".repeat((-exp - 1) as usize))
        } else if exp + 1 >= n {
            format!("{digits}{}.0", "0".repeat((exp + 1 - n) as usize))
        } else {
            let (int, frac) = digits.split_at((exp + 1) as usize);
            format!("{int}.{frac}")
        };
        format!("{sign}{body}")
    } else {
        let (first, rest) = digits.split_at(1);
        let mant = if rest.is_empty() {
            first.to_string()
        } else {
            format!("{first}.{rest}")
        };
        format!(
            "{sign}{mant}e{}{:02}",
            if exp < 0 { '-' } else { '+' },
            exp.abs()
        )
    }
}

/// The options of Python's `json.dumps` that transformers' `tojson` passes through; the default
/// is transformers' (compact, non-ASCII kept, insertion order).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JsonOptions {
    /// Escape every non-ASCII character as `\uXXXX` (transformers' default: false).
    pub ensure_ascii: bool,
    /// Pretty-print with this indent text per level (`indent=2` is two spaces); `None` is compact.
    pub indent: Option<String>,
    /// Item and key separators; `None` is Python's default (`", "`/`": "` compact, `","`/`": "`
    /// when indented).
    pub separators: Option<(String, String)>,
    /// Write object keys in sorted order (transformers' default: false, insertion order).
    pub sort_keys: bool,
}

/// `json.dumps(value, ...)` with the given options, byte for byte as Python writes it.
///
/// Errors: undefined values, iterators, callables and bytes are not serialisable (Python raises
/// `TypeError: Object of type ... is not JSON serializable`); so are map keys that are not
/// strings, numbers, booleans or none.
pub fn json_dumps(value: &Value, opts: &JsonOptions) -> Result<String, Error> {
    let (item_sep, key_sep) = match &opts.separators {
        Some((i, k)) => (i.clone(), k.clone()),
        None if opts.indent.is_some() => (",".to_string(), ": ".to_string()),
        None => (", ".to_string(), ": ".to_string()),
    };
    let mut w = JsonWriter {
        out: String::new(),
        opts,
        item_sep,
        key_sep,
    };
    w.value(value, 0)?;
    Ok(w.out)
}

struct JsonWriter<'a> {
    out: String,
    opts: &'a JsonOptions,
    item_sep: String,
    key_sep: String,
}

impl JsonWriter<'_> {
    fn newline(&mut self, depth: usize) {
        if let Some(indent) = &self.opts.indent {
            self.out.push('\n');
            for _ in 0..depth {
                self.out.push_str(indent);
            }
        }
    }

    fn value(&mut self, value: &Value, depth: usize) -> Result<(), Error> {
        match value.kind() {
            ValueKind::None => self.out.push_str("null"),
            ValueKind::Bool => self
                .out
                .push_str(if value.is_true() { "true" } else { "false" }),
            ValueKind::Number => write_number(&mut self.out, value, true),
            ValueKind::String => self.string(value.as_str().unwrap_or_default()),
            ValueKind::Seq => {
                let items: Vec<Value> = value.try_iter()?.collect();
                if items.is_empty() {
                    self.out.push_str("[]");
                    return Ok(());
                }
                self.out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        let sep = self.item_sep.clone();
                        self.out.push_str(&sep);
                    }
                    self.newline(depth + 1);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push(']');
            }
            ValueKind::Map => {
                let mut pairs = Vec::new();
                for key in value.try_iter()? {
                    let item = value.get_item(&key)?;
                    pairs.push((self.key(&key)?, item));
                }
                if pairs.is_empty() {
                    self.out.push_str("{}");
                    return Ok(());
                }
                if self.opts.sort_keys {
                    pairs.sort_by(|a, b| a.0.cmp(&b.0));
                }
                self.out.push('{');
                for (i, (key, item)) in pairs.iter().enumerate() {
                    if i > 0 {
                        let sep = self.item_sep.clone();
                        self.out.push_str(&sep);
                    }
                    self.newline(depth + 1);
                    self.string(key);
                    let sep = self.key_sep.clone();
                    self.out.push_str(&sep);
                    self.value(item, depth + 1)?;
                }
                self.newline(depth);
                self.out.push('}');
            }
            _ if markup_text(value).is_some() => {
                self.string(markup_text(value).unwrap_or_default());
            }
            kind => {
                let what = if kind == ValueKind::Undefined {
                    "an undefined value".to_string()
                } else {
                    format!("a {kind} value")
                };
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: {what} is not JSON serializable"),
                ));
            }
        }
        Ok(())
    }

    /// A map key as `json.dumps` converts it: strings as they are, numbers by `repr`,
    /// booleans as `true`/`false`, none as `null`.
    fn key(&self, key: &Value) -> Result<String, Error> {
        Ok(match key.kind() {
            ValueKind::String => key.as_str().unwrap_or_default().to_string(),
            ValueKind::Number => {
                let mut s = String::new();
                write_number(&mut s, key, true);
                s
            }
            ValueKind::Bool => if key.is_true() { "true" } else { "false" }.to_string(),
            ValueKind::None => "null".to_string(),
            kind => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson: keys must be str, int, float, bool or None, not {kind}"),
                ));
            }
        })
    }

    /// A JSON string literal with Python's escapes (`\"`, `\\`, `\n`, `\r`, `\t`, `\b`, `\f`,
    /// `\u00XX` for other controls; with `ensure_ascii`, `\uXXXX` (surrogate pairs beyond the
    /// BMP) for everything outside printable ASCII).
    fn string(&mut self, s: &str) {
        let out = &mut self.out;
        out.push('"');
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\r' => out.push_str("\\r"),
                '\t' => out.push_str("\\t"),
                '\u{8}' => out.push_str("\\b"),
                '\u{c}' => out.push_str("\\f"),
                c if (c as u32) < 0x20 => {
                    let _ = write!(out, "\\u{:04x}", c as u32);
                }
                c if self.opts.ensure_ascii && (c as u32) > 0x7e => {
                    let mut units = [0u16; 2];
                    for unit in c.encode_utf16(&mut units) {
                        let _ = write!(out, "\\u{:04x}", unit);
                    }
                }
                c => out.push(c),
            }
        }
        out.push('"');
    }
}

/// The `tojson` filter: `tojson(value, ensure_ascii=False, indent=None, separators=None,
/// sort_keys=False)`, arguments by position or by name as in transformers. The result is a
/// plain string, as `json.dumps` returns (no HTML escaping).
pub fn tojson_filter(value: &Value, args: &[Value], kwargs: Kwargs) -> Result<Value, Error> {
    const NAMES: [&str; 4] = ["ensure_ascii", "indent", "separators", "sort_keys"];
    if args.len() > NAMES.len() {
        return Err(Error::new(
            ErrorKind::TooManyArguments,
            format!("tojson takes at most 4 arguments, got {}", args.len()),
        ));
    }
    let mut given: [Option<Value>; 4] = Default::default();
    for (slot, arg) in given.iter_mut().zip(args) {
        *slot = Some(arg.clone());
    }
    for (i, name) in NAMES.iter().enumerate() {
        if let Some(v) = kwargs.get::<Option<Value>>(name)? {
            if given[i].is_some() {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("tojson got multiple values for argument '{name}'"),
                ));
            }
            given[i] = Some(v);
        }
    }
    kwargs.assert_all_used()?;
    let [ensure_ascii, indent, separators, sort_keys] = given;
    let opts = JsonOptions {
        ensure_ascii: ensure_ascii.is_some_and(|v| v.is_true()),
        indent: match indent {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) if v.kind() == ValueKind::String => Some(v.as_str().unwrap_or("").to_string()),
            Some(v) => match v.as_i64() {
                Some(n) if v.is_integer() => Some(" ".repeat(n.max(0) as usize)),
                _ => {
                    return Err(Error::new(
                        ErrorKind::InvalidOperation,
                        format!("tojson: indent must be an integer or a string, not {v}"),
                    ));
                }
            },
        },
        separators: match separators {
            None => None,
            Some(v) if v.is_none() => None,
            Some(v) => {
                let items: Vec<Value> = v.try_iter().map(|i| i.collect()).unwrap_or_default();
                match items.as_slice() {
                    [a, b] if a.as_str().is_some() && b.as_str().is_some() => Some((
                        a.as_str().unwrap_or_default().to_string(),
                        b.as_str().unwrap_or_default().to_string(),
                    )),
                    _ => {
                        return Err(Error::new(
                            ErrorKind::InvalidOperation,
                            "tojson: separators must be a pair of strings (item, key)",
                        ));
                    }
                }
            }
        },
        sort_keys: sort_keys.is_some_and(|v| v.is_true()),
    };
    Ok(Value::from(json_dumps(value, &opts)?))
}

/// The `string` filter: Python's `str(value)`.
pub fn string_filter(value: &Value) -> Result<Value, Error> {
    if value.kind() == ValueKind::String {
        return Ok(value.clone());
    }
    Ok(Value::from(py_str(value)?))
}

/// The `join` filter as Jinja2 writes it: each item (or its `attribute`) through `str()`,
/// separated by `d`.
pub fn join_filter(
    state: &State,
    value: &Value,
    d: Option<&str>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let attribute: Option<Value> = kwargs.get("attribute")?;
    kwargs.assert_all_used()?;
    if value.is_undefined() || value.is_none() {
        return Ok(Value::from(""));
    }
    let items: Vec<Value> = if let Some(s) = value.as_str() {
        s.chars().map(Value::from).collect()
    } else {
        value.try_iter()?.collect()
    };
    let mut out = String::new();
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(d.unwrap_or(""));
        }
        let item = match &attribute {
            Some(attr) => item_attribute(state, item, attr)?,
            None => item.clone(),
        };
        out.push_str(&py_str(&item)?);
    }
    Ok(Value::from(out))
}

/// `environment.getitem(item, attribute)`, dotted paths (`a.b`) walked one key at a time.
fn item_attribute(_state: &State, item: &Value, attr: &Value) -> Result<Value, Error> {
    match attr.as_str() {
        Some(path) => {
            let mut v = item.clone();
            for part in path.split('.') {
                v = match part.parse::<i64>() {
                    Ok(i) => v.get_item(&Value::from(i))?,
                    Err(_) => v.get_attr(part)?,
                };
            }
            Ok(v)
        }
        None => item.get_item(attr),
    }
}

/// How `{{ expression }}` prints: Python's `str()` of the value.
pub fn format_output(
    out: &mut minijinja::Output,
    _state: &State,
    value: &Value,
) -> Result<(), Error> {
    let text = py_str(value)?;
    out.write_str(&text)
        .map_err(|e| Error::new(ErrorKind::WriteFailure, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn float_repr_matches_python() {
        // Values and their `repr()` printed by CPython 3.11.
        for (f, want) in [
            (1.0, "1.0"),
            (0.1, "0.1"),
            (1e-5, "1e-05"),
            (0.0001, "0.0001"),
            (1e16, "1e+16"),
            (1234567890123456.0, "1234567890123456.0"),
            (1.5e300, "1.5e+300"),
            (-2.5, "-2.5"),
            (123.456, "123.456"),
            (-0.0, "-0.0"),
        ] {
            assert_eq!(py_float_repr(f, false), want, "{f}");
        }
        assert_eq!(py_float_repr(f64::INFINITY, true), "Infinity");
        assert_eq!(py_float_repr(f64::NAN, false), "nan");
    }

    #[test]
    fn repr_of_strings_picks_python_quotes() {
        assert_eq!(py_repr(&Value::from("a'b")).unwrap(), "\"a'b\"");
        assert_eq!(py_repr(&Value::from("a'b\"")).unwrap(), "'a\\'b\"'");
        assert_eq!(py_repr(&Value::from("x\ny\u{1}")).unwrap(), "'x\\ny\\x01'");
        assert_eq!(py_repr(&Value::from("é")).unwrap(), "'é'");
    }
}
