//! A byte-level pushdown matcher: which bytes keep a text a prefix of a JSON value its grammar admits (RFC 8259 syntax, strict UTF-8).
//!
//! The state is a small stack of frames (one per open object, array, key, string, number or
//! literal) plus the current whitespace run. [`MatchState::feed`] takes one byte and says
//! whether the text stays a prefix of some value the [`Grammar`] admits; a refused byte
//! leaves the state unusable, so callers feed a copy (the token mask copies per trie node).
//!
//! What it guarantees, so that every complete output parses (`serde_json`) and validates:
//! strings are valid UTF-8 with no control character and no escape of a lone UTF-16
//! surrogate; numbers have at most 18 digits before and after the point and a 2-digit
//! exponent (so they fit an `f64`, and an `integer` fits an `i64`); whitespace between
//! tokens runs at most [`MAX_WHITESPACE`] bytes (so generation always makes progress); no
//! byte follows the complete value.

use smallvec::SmallVec;

use super::schema::{ANY_ARRAY, ANY_OBJECT, BOOL, Grammar, NULL, Node, NodeId};

/// Longest run of whitespace between JSON tokens, in bytes.
pub const MAX_WHITESPACE: u8 = 16;

/// Deepest frame stack (objects, arrays and the value inside each).
pub const MAX_FRAMES: usize = 32;

const MAX_DIGITS: u8 = 18;
const MAX_EXP_DIGITS: u8 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ObjAt {
    /// After `{`.
    Open,
    /// A key is done (`props` index, or `FREE_KEY`); `:` comes next.
    Key(u8),
    /// The member's value is open (the frame above).
    Value,
    /// After a member's value: `,` or `}`.
    Member,
    /// After `,`: a key.
    Comma,
}

const FREE_KEY: u8 = u8::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ArrAt {
    Open,
    Item,
    After,
    Comma,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum NumAt {
    Start,
    Minus,
    Zero,
    Int,
    Dot,
    Frac,
    Exp,
    ExpSign,
    ExpDigits,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Frame {
    /// A value of the node is expected.
    Value(NodeId),
    Object {
        node: NodeId,
        seen: u64,
        at: ObjAt,
    },
    Array {
        node: NodeId,
        count: u32,
        at: ArrAt,
    },
    /// Inside a declared key: the properties still possible and the bytes matched.
    Key {
        node: NodeId,
        cand: u64,
        pos: u16,
    },
    /// Inside a string: `esc` is the escape state (0 none, 1 after `\`, 2..=6 the `\u`
    /// digits), `utf8` the continuation bytes still due and `range` the first one's range.
    Str {
        key: bool,
        esc: u8,
        utf8: u8,
        range: u8,
    },
    Num {
        at: NumAt,
        integer: bool,
        digits: u8,
    },
    /// Inside one of a node's literals: the ones still possible and the bytes matched.
    Lit {
        node: NodeId,
        cand: u64,
        pos: u16,
    },
    /// Inside a [`Node::Text`]: the bytes matched.
    Text {
        node: NodeId,
        pos: u16,
    },
    /// Inside a [`Node::Seq`]: the part open (the frame above).
    Seq {
        node: NodeId,
        at: u16,
    },
    /// Inside the openings of a [`Node::Choice`]: the alternatives still possible and the
    /// bytes matched.
    Choice {
        node: NodeId,
        cand: u64,
        pos: u16,
    },
    /// A [`Node::Repeat`] after `count` items: `sep` bytes of the separator matched (0: right
    /// after an item, or the item open above).
    Repeat {
        node: NodeId,
        count: u32,
        sep: u16,
    },
}

/// The matcher's state over one grammar (the grammar is passed to each call).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchState {
    stack: SmallVec<[Frame; 8]>,
    ws: u8,
    done: bool,
}

fn is_ws(b: u8) -> bool {
    matches!(b, b' ' | b'\n' | b'\t' | b'\r')
}

fn all(n: usize) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// What one byte did to the top frame.
enum Step {
    /// Consumed as whitespace between tokens.
    Space,
    /// Consumed.
    Byte,
    /// The top frame ended before this byte; feed it again to the new top.
    Again,
    /// Refused.
    No,
}

impl MatchState {
    /// The state before the first byte of a value of `g`'s root.
    pub fn new(g: &Grammar) -> MatchState {
        let mut stack = SmallVec::new();
        stack.push(Frame::Value(g.root()));
        MatchState {
            stack,
            ws: 0,
            done: false,
        }
    }

    /// Feed `bytes` in order; `false` as soon as one is refused (the state is then unusable).
    pub fn feed_all(&mut self, g: &Grammar, bytes: &[u8]) -> bool {
        bytes.iter().all(|&b| self.feed(g, b))
    }

    /// Whether the text so far plus `b` is still a prefix of a value `g` admits; on `true`
    /// the state includes `b`.
    pub fn feed(&mut self, g: &Grammar, b: u8) -> bool {
        loop {
            match self.step(g, b) {
                Step::Space => {
                    if self.ws >= MAX_WHITESPACE {
                        return false;
                    }
                    self.ws += 1;
                    return true;
                }
                Step::Byte => {
                    self.ws = 0;
                    return true;
                }
                Step::Again => continue,
                Step::No => return false,
            }
        }
    }

    /// The text so far is a complete value (a number or literal may still be extended, but
    /// ending here is valid).
    pub fn is_complete(&self, g: &Grammar) -> bool {
        let mut s = self.clone();
        loop {
            if s.done {
                return true;
            }
            let closes = match s.stack.last() {
                Some(Frame::Num { at, .. }) => accepting(*at),
                Some(Frame::Lit { node, cand, pos }) => {
                    lit_complete(g, *node, *cand, *pos as usize)
                }
                Some(Frame::Repeat {
                    node,
                    count,
                    sep: 0,
                }) => matches!(g.node(*node), Node::Repeat { min, .. } if count >= min),
                _ => false,
            };
            if !closes {
                return false;
            }
            s.stack.pop();
            s.value_done(g);
        }
    }

    /// No byte can follow: the value is complete and nothing may extend it.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Inside a string, not in an escape or a multi-byte character: every printable ASCII
    /// byte but `"` and `\`, and every complete UTF-8 character, leaves the state unchanged.
    pub fn in_plain_string(&self) -> bool {
        matches!(
            self.stack.last(),
            Some(Frame::Str {
                esc: 0,
                utf8: 0,
                ..
            })
        )
    }

    fn push(&mut self, f: Frame) -> bool {
        if self.stack.len() >= MAX_FRAMES {
            return false;
        }
        self.stack.push(f);
        true
    }

    /// The top frame's value is complete and popped: tell its parent (a sequence moves to its
    /// next part, or ends and tells its own parent).
    fn value_done(&mut self, g: &Grammar) {
        loop {
            match self.stack.last_mut() {
                None => self.done = true,
                Some(Frame::Object { at, .. }) => *at = ObjAt::Member,
                Some(Frame::Array { count, at, .. }) => {
                    *count = count.saturating_add(1);
                    *at = ArrAt::After;
                }
                Some(Frame::Repeat { count, sep, .. }) => {
                    *count = count.saturating_add(1);
                    *sep = 0;
                }
                Some(Frame::Seq { node, at }) => {
                    let Node::Seq(parts) = g.node(*node) else {
                        unreachable!("a sequence frame holds a sequence node")
                    };
                    *at += 1;
                    if let Some(&next) = parts.get(*at as usize) {
                        // Bounded by the grammar's own nesting, not the output's.
                        self.stack.push(Frame::Value(next));
                    } else {
                        self.stack.pop();
                        continue;
                    }
                }
                Some(other) => unreachable!("a value ended inside {other:?}"),
            }
            return;
        }
    }

    /// One byte `b` in the top frame.
    fn step(&mut self, g: &Grammar, b: u8) -> Step {
        let Some(&top) = self.stack.last() else {
            return Step::No;
        };
        match top {
            Frame::Value(node) => self.step_value(g, node, b),
            Frame::Object { node, seen, at } => self.step_object(g, node, seen, at, b),
            Frame::Array { node, count, at } => self.step_array(g, node, count, at, b),
            Frame::Key { node, cand, pos } => self.step_key(g, node, cand, pos, b),
            Frame::Str {
                key,
                esc,
                utf8,
                range,
            } => self.step_str(g, key, esc, utf8, range, b),
            Frame::Num {
                at,
                integer,
                digits,
            } => self.step_num(g, at, integer, digits, b),
            Frame::Lit { node, cand, pos } => self.step_lit(g, node, cand, pos, b),
            Frame::Text { node, pos } => self.step_text(g, node, pos, b),
            Frame::Choice { node, cand, pos } => self.step_choice(g, node, cand, pos, b),
            Frame::Repeat { node, count, sep } => self.step_repeat(g, node, count, sep, b),
            Frame::Seq { .. } => unreachable!("a sequence frame always has its part above it"),
        }
    }

    /// Replaces the top frame (the stack is not empty).
    fn set_top(&mut self, f: Frame) {
        *self.stack.last_mut().expect("a frame is on the stack") = f;
    }

    /// A value of `node` is expected: whitespace, or the byte that opens one of its kinds.
    fn step_value(&mut self, g: &Grammar, node: NodeId, b: u8) -> Step {
        // Text nodes take their bytes as they are: no whitespace before them.
        match g.node(node) {
            Node::Text(_) => {
                self.set_top(Frame::Text { node, pos: 0 });
                return Step::Again;
            }
            Node::Choice(_) => {
                self.set_top(Frame::Choice {
                    node,
                    cand: u64::MAX,
                    pos: 0,
                });
                return Step::Again;
            }
            Node::Seq(parts) => {
                self.set_top(Frame::Seq { node, at: 0 });
                return if self.push(Frame::Value(parts[0])) {
                    Step::Again
                } else {
                    Step::No
                };
            }
            Node::Repeat { item, .. } => {
                self.set_top(Frame::Repeat {
                    node,
                    count: 0,
                    sep: 0,
                });
                return if self.push(Frame::Value(*item)) {
                    Step::Again
                } else {
                    Step::No
                };
            }
            _ => {}
        }
        if is_ws(b) {
            return Step::Space;
        }
        let (frame, consumed) = match (g.node(node), b) {
            (Node::Literals(_), _) => (lit(g, node), false),
            (Node::String | Node::Any, b'"') => (string(false), true),
            (Node::Number | Node::Integer, _) => {
                (num(matches!(g.node(node), Node::Integer)), false)
            }
            (Node::Object { .. }, b'{') => (object(node), true),
            (Node::Array { .. }, b'[') => (array(node), true),
            (Node::Any, b'{') => (object(ANY_OBJECT), true),
            (Node::Any, b'[') => (array(ANY_ARRAY), true),
            (Node::Any, b'-' | b'0'..=b'9') => (num(false), false),
            (Node::Any | Node::Boolean, b't' | b'f') => (lit(g, BOOL), false),
            (Node::Any | Node::Null, b'n') => (lit(g, NULL), false),
            _ => return Step::No,
        };
        self.set_top(frame);
        if consumed { Step::Byte } else { Step::Again }
    }

    /// Inside an object of `node`, with the properties `seen` and at `at`: whitespace, a key,
    /// `:`, `,` or the closing `}` (once every required property is in).
    fn step_object(&mut self, g: &Grammar, node: NodeId, seen: u64, at: ObjAt, b: u8) -> Step {
        let Node::Object {
            props,
            required,
            extra,
        } = g.node(node)
        else {
            unreachable!("an object frame holds an object node")
        };
        let unseen = all(props.len()) & !seen;
        let more = if props.is_empty() {
            extra.is_some()
        } else {
            unseen != 0
        };
        match (at, b) {
            (ObjAt::Open | ObjAt::Member | ObjAt::Comma | ObjAt::Key(_), b) if is_ws(b) => {
                Step::Space
            }
            (ObjAt::Open | ObjAt::Comma, b'"') if more => {
                let f = if props.is_empty() {
                    string(true)
                } else {
                    Frame::Key {
                        node,
                        cand: unseen,
                        pos: 0,
                    }
                };
                if self.push(f) { Step::Byte } else { Step::No }
            }
            (ObjAt::Open | ObjAt::Member, b'}') if required & !seen == 0 => {
                self.stack.pop();
                self.value_done(g);
                Step::Byte
            }
            (ObjAt::Member, b',') if more => {
                self.set_top(Frame::Object {
                    node,
                    seen,
                    at: ObjAt::Comma,
                });
                Step::Byte
            }
            (ObjAt::Key(i), b':') => {
                let child = if i == FREE_KEY {
                    extra.expect("a free key is read only when values are allowed")
                } else {
                    props[i as usize].1
                };
                self.set_top(Frame::Object {
                    node,
                    seen,
                    at: ObjAt::Value,
                });
                if self.push(Frame::Value(child)) {
                    Step::Byte
                } else {
                    Step::No
                }
            }
            _ => Step::No,
        }
    }

    /// Inside an array of `node` with `count` items, at `at`: whitespace, an item, `,` or the
    /// closing `]` (within `minItems` and `maxItems`).
    fn step_array(&mut self, g: &Grammar, node: NodeId, count: u32, at: ArrAt, b: u8) -> Step {
        let Node::Array { items, min, max } = *g.node(node) else {
            unreachable!("an array frame holds an array node")
        };
        match (at, b) {
            (ArrAt::Open | ArrAt::After | ArrAt::Comma, b) if is_ws(b) => Step::Space,
            // At `Open` the count is 0: the array closes empty only when min is 0.
            (ArrAt::Open | ArrAt::After, b']') if count >= min => {
                self.stack.pop();
                self.value_done(g);
                Step::Byte
            }
            (ArrAt::After, b',') if count < max => {
                self.set_top(Frame::Array {
                    node,
                    count,
                    at: ArrAt::Comma,
                });
                Step::Byte
            }
            (ArrAt::Open, _) if max == 0 => Step::No,
            (ArrAt::Open | ArrAt::Comma, _) => {
                self.set_top(Frame::Array {
                    node,
                    count,
                    at: ArrAt::Item,
                });
                if self.push(Frame::Value(items)) {
                    Step::Again
                } else {
                    Step::No
                }
            }
            _ => Step::No,
        }
    }

    /// Inside a declared key of `node`: the properties `cand` still possible after `pos` bytes;
    /// the closing `"` names the property.
    fn step_key(&mut self, g: &Grammar, node: NodeId, cand: u64, pos: u16, b: u8) -> Step {
        let Node::Object { props, .. } = g.node(node) else {
            unreachable!("a key frame holds an object node")
        };
        let pos = pos as usize;
        // The candidates share their first `pos` bytes (an escaped JSON string
        // body): after an odd run of backslashes, `"` is the escaped character, not
        // the key's end.
        let escaped = bits(cand).next().is_some_and(|i| {
            props[i].0[..pos]
                .iter()
                .rev()
                .take_while(|&&c| c == b'\\')
                .count()
                % 2
                == 1
        });
        if b == b'"' && !escaped {
            let Some(i) = bits(cand).find(|&i| props[i].0.len() == pos) else {
                return Step::No;
            };
            self.stack.pop();
            if let Some(Frame::Object { seen, at, .. }) = self.stack.last_mut() {
                *seen |= 1 << i;
                *at = ObjAt::Key(i as u8);
            }
            return Step::Byte;
        }
        let next = bits(cand)
            .filter(|&i| props[i].0.get(pos) == Some(&b))
            .fold(0u64, |m, i| m | 1 << i);
        if next == 0 {
            return Step::No;
        }
        self.set_top(Frame::Key {
            node,
            cand: next,
            pos: (pos + 1) as u16,
        });
        Step::Byte
    }

    /// Inside a string (a free key when `key`): escapes, UTF-8 continuation bytes (`utf8` due,
    /// the first in `range`), printable bytes, the closing `"`.
    fn step_str(&mut self, g: &Grammar, key: bool, esc: u8, utf8: u8, range: u8, b: u8) -> Step {
        let hex = b.is_ascii_hexdigit();
        let (esc, utf8, range) = if esc != 0 {
            let esc = match (esc, b) {
                (1, b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => 0,
                (1, b'u') => 2,
                (2, b'd' | b'D') => 4,
                (2, _) if hex => 3,
                (3, _) if hex => 5,
                // \uD800..\uDFFF: lone surrogates, which a JSON parser refuses.
                (4, b'0'..=b'7') => 5,
                (5, _) if hex => 6,
                (6, _) if hex => 0,
                _ => return Step::No,
            };
            (esc, 0, 0)
        } else if utf8 != 0 {
            let ok = match range {
                1 => (0xA0..=0xBF).contains(&b),
                2 => (0x80..=0x9F).contains(&b),
                3 => (0x90..=0xBF).contains(&b),
                4 => (0x80..=0x8F).contains(&b),
                _ => (0x80..=0xBF).contains(&b),
            };
            if !ok {
                return Step::No;
            }
            (0, utf8 - 1, 0)
        } else {
            match b {
                b'"' => {
                    self.stack.pop();
                    if key {
                        if let Some(Frame::Object { at, .. }) = self.stack.last_mut() {
                            *at = ObjAt::Key(FREE_KEY);
                        }
                    } else {
                        self.value_done(g);
                    }
                    return Step::Byte;
                }
                b'\\' => (1, 0, 0),
                0x00..=0x1F => return Step::No,
                0x20..=0x7F => (0, 0, 0),
                0xC2..=0xDF => (0, 1, 0),
                0xE0 => (0, 2, 1),
                0xED => (0, 2, 2),
                0xE1..=0xEF => (0, 2, 0),
                0xF0 => (0, 3, 3),
                0xF1..=0xF3 => (0, 3, 0),
                0xF4 => (0, 3, 4),
                _ => return Step::No,
            }
        };
        self.set_top(Frame::Str {
            key,
            esc,
            utf8,
            range,
        });
        Step::Byte
    }

    /// Inside a number (an integer when `integer`) at `at`, `digits` digits into its part: the
    /// next character, or the end of the number (the byte is then read again by the parent).
    fn step_num(&mut self, g: &Grammar, at: NumAt, integer: bool, digits: u8, b: u8) -> Step {
        let digit = b.is_ascii_digit();
        let next = match (at, b) {
            (NumAt::Start, b'-') => Some((NumAt::Minus, 0)),
            (NumAt::Start | NumAt::Minus, b'0') => Some((NumAt::Zero, 1)),
            (NumAt::Start | NumAt::Minus, b'1'..=b'9') => Some((NumAt::Int, 1)),
            (NumAt::Int, _) if digit && digits < MAX_DIGITS => Some((NumAt::Int, digits + 1)),
            (NumAt::Zero | NumAt::Int, b'.') if !integer => Some((NumAt::Dot, 0)),
            (NumAt::Zero | NumAt::Int | NumAt::Frac, b'e' | b'E') if !integer => {
                Some((NumAt::Exp, 0))
            }
            (NumAt::Dot, _) if digit => Some((NumAt::Frac, 1)),
            (NumAt::Frac, _) if digit && digits < MAX_DIGITS => Some((NumAt::Frac, digits + 1)),
            (NumAt::Exp, b'+' | b'-') => Some((NumAt::ExpSign, 0)),
            (NumAt::Exp | NumAt::ExpSign, _) if digit => Some((NumAt::ExpDigits, 1)),
            (NumAt::ExpDigits, _) if digit && digits < MAX_EXP_DIGITS => {
                Some((NumAt::ExpDigits, digits + 1))
            }
            _ => None,
        };
        match next {
            Some((at, digits)) => {
                self.set_top(Frame::Num {
                    at,
                    integer,
                    digits,
                });
                Step::Byte
            }
            None if accepting(at) && !digit => {
                self.stack.pop();
                self.value_done(g);
                Step::Again
            }
            None => Step::No,
        }
    }

    /// Inside one of the literals of `node`: those `cand` still possible after `pos` bytes; a
    /// complete one ends (the byte is then read again by the parent).
    fn step_lit(&mut self, g: &Grammar, node: NodeId, cand: u64, pos: u16, b: u8) -> Step {
        let Node::Literals(list) = g.node(node) else {
            unreachable!("a literal frame holds a literal node")
        };
        let p = pos as usize;
        let next = bits(cand)
            .filter(|&i| list[i].get(p) == Some(&b))
            .fold(0u64, |m, i| m | 1 << i);
        if next != 0 {
            self.set_top(Frame::Lit {
                node,
                cand: next,
                pos: pos + 1,
            });
            return Step::Byte;
        }
        if lit_complete(g, node, cand, p) {
            self.stack.pop();
            self.value_done(g);
            return Step::Again;
        }
        Step::No
    }
}

impl MatchState {
    /// Inside a text node, `pos` bytes matched: the next byte of its text.
    fn step_text(&mut self, g: &Grammar, node: NodeId, pos: u16, b: u8) -> Step {
        let Node::Text(text) = g.node(node) else {
            unreachable!("a text frame holds a text node")
        };
        if text.get(pos as usize) != Some(&b) {
            return Step::No;
        }
        if pos as usize + 1 == text.len() {
            self.stack.pop();
            self.value_done(g);
        } else {
            self.set_top(Frame::Text { node, pos: pos + 1 });
        }
        Step::Byte
    }

    /// Inside the openings of a choice, `cand` still possible after `pos` bytes: the byte
    /// narrows them; the one whose opening it completes goes on with its rest.
    fn step_choice(&mut self, g: &Grammar, node: NodeId, cand: u64, pos: u16, b: u8) -> Step {
        let Node::Choice(alts) = g.node(node) else {
            unreachable!("a choice frame holds a choice node")
        };
        let p = pos as usize;
        let next = bits(cand)
            .take_while(|&i| i < alts.len())
            .filter(|&i| alts[i].0.get(p) == Some(&b))
            .fold(0u64, |m, i| m | 1 << i);
        if next == 0 {
            return Step::No;
        }
        // No opening is a prefix of another: one that ends here is the only candidate.
        match bits(next).find(|&i| alts[i].0.len() == p + 1) {
            Some(i) => self.set_top(Frame::Value(alts[i].1)),
            None => self.set_top(Frame::Choice {
                node,
                cand: next,
                pos: pos + 1,
            }),
        }
        Step::Byte
    }

    /// A repetition after `count` items, `sep` bytes of its separator matched: the
    /// separator goes on (then the next item), or, right after an item, any other byte ends
    /// the repetition (read again by the parent) once `min` items are in.
    fn step_repeat(&mut self, g: &Grammar, node: NodeId, count: u32, sep: u16, b: u8) -> Step {
        let Node::Repeat {
            item,
            sep: text,
            min,
            max,
        } = g.node(node)
        else {
            unreachable!("a repeat frame holds a repeat node")
        };
        let at = sep as usize;
        if at == 0 && !(count < *max && text.first() == Some(&b)) {
            if count >= *min {
                self.stack.pop();
                self.value_done(g);
                return Step::Again;
            }
            return Step::No;
        }
        if text.get(at) != Some(&b) {
            return Step::No;
        }
        if at + 1 == text.len() {
            self.set_top(Frame::Repeat {
                node,
                count,
                sep: 0,
            });
            if !self.push(Frame::Value(*item)) {
                return Step::No;
            }
        } else {
            self.set_top(Frame::Repeat {
                node,
                count,
                sep: sep + 1,
            });
        }
        Step::Byte
    }
}

fn accepting(at: NumAt) -> bool {
    matches!(
        at,
        NumAt::Zero | NumAt::Int | NumAt::Frac | NumAt::ExpDigits
    )
}

fn lit_complete(g: &Grammar, node: NodeId, cand: u64, pos: usize) -> bool {
    let Node::Literals(list) = g.node(node) else {
        return false;
    };
    // A literal that is a prefix of a longer one (`1` and `12`) ends when the next byte
    // cannot continue any; the parent then takes that byte or refuses it.
    bits(cand).any(|i| list[i].len() == pos)
}

fn bits(mask: u64) -> impl Iterator<Item = usize> {
    (0..64).filter(move |i| mask & (1 << i) != 0)
}

fn lit(g: &Grammar, node: NodeId) -> Frame {
    let n = match g.node(node) {
        Node::Literals(list) => list.len(),
        _ => 0,
    };
    Frame::Lit {
        node,
        cand: all(n),
        pos: 0,
    }
}

fn string(key: bool) -> Frame {
    Frame::Str {
        key,
        esc: 0,
        utf8: 0,
        range: 0,
    }
}

fn num(integer: bool) -> Frame {
    Frame::Num {
        at: NumAt::Start,
        integer,
        digits: 0,
    }
}

fn object(node: NodeId) -> Frame {
    Frame::Object {
        node,
        seen: 0,
        at: ObjAt::Open,
    }
}

fn array(node: NodeId) -> Frame {
    Frame::Array {
        node,
        count: 0,
        at: ArrAt::Open,
    }
}
