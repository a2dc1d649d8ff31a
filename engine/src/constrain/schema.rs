//! The JSON Schema subset the engine enforces, compiled into a node graph for the matcher; anything outside it is refused by keyword.
//!
//! Supported (JSON Schema 2020-12 meanings):
//!
//! - `type`: one of `object`, `array`, `string`, `number`, `integer`, `boolean`, `null`
//!   (a list of types is refused); no `type` and no other keyword means any JSON value;
//! - `enum` (at most 64 values) and `const`, of any JSON type, with no other keyword but
//!   `type` (values of another type are dropped);
//! - objects: `properties`, `required` (each a declared property), `additionalProperties`
//!   (`false`, `true` or a schema). With `properties`, only declared properties are
//!   generated (at most 64, in any order, each at most once, the object closing only once
//!   every `required` one is in); without, keys are free and values follow
//!   `additionalProperties` (`false`: only `{}`);
//! - arrays: `items` (a schema), `minItems`, `maxItems`;
//! - `$ref` to a schema in the same document (`#/$defs/Name`, `#/definitions/Name`, any
//!   local JSON pointer; what pydantic and OpenAI's client send for nested models), with
//!   annotations beside it; a reference to itself (a recursive schema) or outside the
//!   document is refused;
//! - annotations, which constrain nothing: `title`, `description`, `$schema`, `$id`,
//!   `$comment`, `default`, `examples`, `deprecated`, `readOnly`, `writeOnly`, and the
//!   `$defs` / `definitions` containers.
//!
//! Every other keyword (`anyOf`, `pattern`, `minLength`, `minimum`, `format`, ...)
//! is a [`SchemaError::Unsupported`] naming it and where it sits, so a schema is never
//! silently enforced in part. Generation may produce a subset of what the schema admits
//! (declared properties only, compact numbers), never a value it rejects.

use std::collections::HashMap;

use serde_json::Value;

/// Index of a [`Node`] in a [`Grammar`].
pub type NodeId = u32;

/// Maximum properties of one object schema, and values of one `enum` (bit masks of `u64`).
pub const MAX_ALTERNATIVES: usize = 64;

/// Maximum nesting of object and array schemas.
pub const MAX_DEPTH: usize = 12;

/// One compiled schema.
#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    /// Any JSON value.
    Any,
    /// `null`.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A JSON number.
    Number,
    /// A number without fraction or exponent.
    Integer,
    /// A string.
    String,
    /// An object.
    Object {
        /// Declared properties: the key as its JSON string body (escaped, without the
        /// quotes) and the value's node. Empty: keys are free.
        props: Vec<(Vec<u8>, NodeId)>,
        /// Bit `i`: `props[i]` is required.
        required: u64,
        /// With no declared properties, the node of every value (`None`: no member at all,
        /// `additionalProperties: false`).
        extra: Option<NodeId>,
    },
    /// An array.
    Array {
        /// The node of every item.
        items: NodeId,
        /// `minItems`.
        min: u32,
        /// `maxItems` (`u32::MAX`: no limit).
        max: u32,
    },
    /// One of these compact JSON texts (`enum`, `const`, and the literals `true`, `false`,
    /// `null`).
    Literals(Vec<Vec<u8>>),
    /// Exactly these bytes, no whitespace around them: text around JSON values (a tool
    /// call's `<tool_call>` tags, its fixed `{"name": "f", "arguments": ` opening).
    Text(Vec<u8>),
    /// The parts one after the other (at least one).
    Seq(Vec<NodeId>),
    /// One alternative, chosen by its opening bytes: `(opening, rest)` matches the opening
    /// then `rest`. At most 64; no opening is empty or a prefix of another, so the opening's
    /// last byte decides ([`GrammarBuilder::choice`]).
    Choice(Vec<(Vec<u8>, NodeId)>),
    /// `item`, then `sep` and `item` again, `min` to `max` items in all. Right after an item
    /// the separator's first byte goes on; any other byte ends the repetition, so what
    /// follows must not start with that byte.
    Repeat {
        /// The node of every item.
        item: NodeId,
        /// The bytes between two items (not empty).
        sep: Vec<u8>,
        /// Fewest items (at least 1).
        min: u32,
        /// Most items.
        max: u32,
    },
}

/// Builds a [`Grammar`] of JSON Schema values inside text: tool-call syntax such as
/// `<tool_call>{"name": "f", "arguments": ARGS}</tool_call>`, where `ARGS` follows the
/// function's parameter schema.
#[derive(Debug)]
pub struct GrammarBuilder {
    g: Grammar,
}

/// A combination [`GrammarBuilder`] cannot match deterministically.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("grammar: {0}")]
pub struct BuildError(pub String);

impl Default for GrammarBuilder {
    fn default() -> Self {
        GrammarBuilder::new()
    }
}

impl GrammarBuilder {
    /// An empty builder (the fixed nodes only).
    pub fn new() -> GrammarBuilder {
        GrammarBuilder { g: Grammar::base() }
    }

    /// `schema` compiled into this grammar (its `$ref`s resolve inside `schema`).
    ///
    /// # Errors
    /// [`SchemaError`] as [`Grammar::from_schema`].
    pub fn schema(&mut self, schema: &Value) -> Result<NodeId, SchemaError> {
        let mut c = Compiler {
            g: std::mem::replace(&mut self.g, Grammar::base()),
            document: schema,
            compiled: HashMap::new(),
            active: Vec::new(),
        };
        let id = c.compile(schema, "#", 0);
        self.g = c.g;
        id
    }

    /// Exactly `text` (not empty).
    ///
    /// # Errors
    /// [`BuildError`] when `text` is empty.
    pub fn text(&mut self, text: &[u8]) -> Result<NodeId, BuildError> {
        if text.is_empty() {
            return Err(BuildError("an empty text node".into()));
        }
        Ok(self.g.push(Node::Text(text.to_vec())))
    }

    /// `parts` in order (at least one).
    ///
    /// # Errors
    /// [`BuildError`] when `parts` is empty.
    pub fn seq(&mut self, parts: Vec<NodeId>) -> Result<NodeId, BuildError> {
        if parts.is_empty() {
            return Err(BuildError("an empty sequence".into()));
        }
        Ok(self.g.push(Node::Seq(parts)))
    }

    /// One of `alts` (`(opening, rest)`), chosen by the opening.
    ///
    /// # Errors
    /// [`BuildError`] for no alternative, more than 64, an empty opening, or an opening that
    /// is a prefix of another (the matcher could not tell them apart).
    pub fn choice(&mut self, alts: Vec<(Vec<u8>, NodeId)>) -> Result<NodeId, BuildError> {
        if alts.is_empty() || alts.len() > MAX_ALTERNATIVES {
            return Err(BuildError(format!(
                "a choice takes 1 to {MAX_ALTERNATIVES} alternatives, got {}",
                alts.len()
            )));
        }
        for (i, (a, _)) in alts.iter().enumerate() {
            if a.is_empty() {
                return Err(BuildError("an empty opening in a choice".into()));
            }
            if let Some((_, (b, _))) = alts
                .iter()
                .enumerate()
                .find(|&(j, (b, _))| j != i && b.starts_with(a))
            {
                return Err(BuildError(format!(
                    "the opening {:?} is a prefix of {:?}",
                    String::from_utf8_lossy(a),
                    String::from_utf8_lossy(b)
                )));
            }
        }
        Ok(self.g.push(Node::Choice(alts)))
    }

    /// `item` `min` to `max` times, `sep` between two.
    ///
    /// # Errors
    /// [`BuildError`] for an empty `sep`, `min` 0 or `min > max`.
    pub fn repeat(
        &mut self,
        item: NodeId,
        sep: &[u8],
        min: u32,
        max: u32,
    ) -> Result<NodeId, BuildError> {
        if sep.is_empty() || min == 0 || min > max {
            return Err(BuildError(format!(
                "a repetition needs a separator and 1 <= min <= max, got {:?}, {min}, {max}",
                String::from_utf8_lossy(sep)
            )));
        }
        Ok(self.g.push(Node::Repeat {
            item,
            sep: sep.to_vec(),
            min,
            max,
        }))
    }

    /// The grammar whose root is `root`.
    pub fn build(mut self, root: NodeId) -> Grammar {
        self.g.root = root;
        self.g
    }
}

/// A compiled schema: nodes and the root.
///
/// Nodes 0 to 4 are fixed: `true`/`false` literals, `null`, any value, any object, any array.
#[derive(Debug, Clone, PartialEq)]
pub struct Grammar {
    pub(crate) nodes: Vec<Node>,
    pub(crate) root: NodeId,
}

/// The `true`/`false` literal node.
pub(crate) const BOOL: NodeId = 0;
/// The `null` literal node.
pub(crate) const NULL: NodeId = 1;
/// Any JSON value.
pub(crate) const ANY: NodeId = 2;
/// Any object.
pub(crate) const ANY_OBJECT: NodeId = 3;
/// Any array.
pub(crate) const ANY_ARRAY: NodeId = 4;

/// Why a schema cannot be enforced.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    /// A keyword outside the supported subset (see the module docs).
    #[error("JSON Schema keyword `{keyword}` at `{path}` is not supported: {why}")]
    Unsupported {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the schema holding it (`#`, `#/properties/name`).
        path: String,
        /// What is supported instead.
        why: String,
    },
    /// A supported keyword with a value it cannot take.
    #[error("JSON Schema keyword `{keyword}` at `{path}` is invalid: {why}")]
    Invalid {
        /// The keyword.
        keyword: String,
        /// JSON pointer of the schema holding it.
        path: String,
        /// What was expected.
        why: String,
    },
}

const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "$comment",
    "default",
    "examples",
    "deprecated",
    "readOnly",
    "writeOnly",
    // Containers of schemas a `$ref` points into: they constrain nothing themselves.
    "$defs",
    "definitions",
];

const OBJECT_KEYWORDS: &[&str] = &["properties", "required", "additionalProperties"];
const ARRAY_KEYWORDS: &[&str] = &["items", "minItems", "maxItems"];

impl Grammar {
    fn base() -> Grammar {
        Grammar {
            nodes: vec![
                Node::Literals(vec![b"true".to_vec(), b"false".to_vec()]),
                Node::Literals(vec![b"null".to_vec()]),
                Node::Any,
                Node::Object {
                    props: Vec::new(),
                    required: 0,
                    extra: Some(ANY),
                },
                Node::Array {
                    items: ANY,
                    min: 0,
                    max: u32::MAX,
                },
            ],
            root: ANY,
        }
    }

    /// Any JSON object (OpenAI's `response_format: {"type": "json_object"}`).
    pub fn json_object() -> Grammar {
        Grammar {
            root: ANY_OBJECT,
            ..Grammar::base()
        }
    }

    /// Compile a JSON Schema (see the module docs for the subset).
    ///
    /// # Errors
    /// [`SchemaError`] naming the first keyword outside the subset or with a bad value.
    pub fn from_schema(schema: &Value) -> Result<Grammar, SchemaError> {
        let mut c = Compiler {
            g: Grammar::base(),
            document: schema,
            compiled: HashMap::new(),
            active: Vec::new(),
        };
        c.g.root = c.compile(schema, "#", 0)?;
        Ok(c.g)
    }

    /// The root node.
    pub fn root(&self) -> NodeId {
        self.root
    }

    /// Node `id`.
    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[id as usize]
    }

    fn push(&mut self, n: Node) -> NodeId {
        self.nodes.push(n);
        (self.nodes.len() - 1) as NodeId
    }
}

/// One schema's compilation: the grammar so far, the document `$ref`s resolve in, the
/// references compiled (shared, not copied) and those being compiled (a cycle is refused).
struct Compiler<'a> {
    g: Grammar,
    document: &'a Value,
    compiled: HashMap<String, NodeId>,
    active: Vec<String>,
}

impl Compiler<'_> {
    /// `{"$ref": "#/$defs/Name"}` (or `#/definitions/Name`, any local JSON pointer, with
    /// annotations beside it): the schema it points to, compiled once.
    fn compile_ref(
        &mut self,
        obj: &serde_json::Map<String, Value>,
        r: &Value,
        path: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let unsupported = |why: String| SchemaError::Unsupported {
            keyword: "$ref".into(),
            path: path.into(),
            why,
        };
        if let Some(k) = obj
            .keys()
            .find(|k| *k != "$ref" && !ANNOTATIONS.contains(&k.as_str()))
        {
            return Err(SchemaError::Unsupported {
                keyword: k.clone(),
                path: path.into(),
                why: "a `$ref` takes no other keyword but annotations".into(),
            });
        }
        let Some(target) = r.as_str() else {
            return Err(SchemaError::Invalid {
                keyword: "$ref".into(),
                path: path.into(),
                why: format!("expected a string, got {r}"),
            });
        };
        let Some(pointer) = target.strip_prefix('#') else {
            return Err(unsupported(format!(
                "only references inside the schema (`#/$defs/...`) are supported, got \"{target}\""
            )));
        };
        if let Some(&id) = self.compiled.get(pointer) {
            return Ok(id);
        }
        if self.active.iter().any(|p| p == pointer) {
            return Err(unsupported(format!(
                "\"{target}\" refers to itself (recursive schemas are not supported)"
            )));
        }
        let Some(schema) = self.document.pointer(pointer) else {
            return Err(SchemaError::Invalid {
                keyword: "$ref".into(),
                path: path.into(),
                why: format!("\"{target}\" points to nothing in the schema"),
            });
        };
        self.active.push(pointer.to_string());
        let id = self.compile(schema, target, depth + 1);
        self.active.pop();
        let id = id?;
        self.compiled.insert(pointer.to_string(), id);
        Ok(id)
    }

    /// `schema` (at JSON pointer `path`, `depth` schemas deep) compiled into the grammar.
    fn compile(&mut self, schema: &Value, path: &str, depth: usize) -> Result<NodeId, SchemaError> {
        let obj = match schema {
            Value::Bool(true) => return Ok(ANY),
            Value::Bool(false) => {
                return Err(invalid(
                    "false",
                    path,
                    "the schema `false` admits no value".to_string(),
                ));
            }
            Value::Object(o) => o,
            other => {
                return Err(invalid(
                    "schema",
                    path,
                    format!("a schema is an object or a boolean, got {other}"),
                ));
            }
        };
        if let Some(r) = obj.get("$ref") {
            return self.compile_ref(obj, r, path, depth);
        }
        if depth > MAX_DEPTH {
            return Err(invalid(
                "properties",
                path,
                format!("schemas nest at most {MAX_DEPTH} deep"),
            ));
        }
        let ty = schema_type(obj, path)?;
        let literals = enum_or_const(obj, path)?;
        check_keywords(obj, ty, literals.is_some(), path)?;
        if let Some((keyword, values)) = literals {
            return self.compile_literals(keyword, &values, ty, path);
        }
        let object_like = ty == Some("object")
            || (ty.is_none() && OBJECT_KEYWORDS.iter().any(|k| obj.contains_key(*k)));
        let array_like = ty == Some("array")
            || (ty.is_none() && ARRAY_KEYWORDS.iter().any(|k| obj.contains_key(*k)));
        if object_like {
            return self.compile_object(obj, path, depth);
        }
        if array_like {
            let items = match obj.get("items") {
                None => ANY,
                Some(s) => self.compile(s, &format!("{path}/items"), depth + 1)?,
            };
            let count = |k: &str, default: u32| -> Result<u32, SchemaError> {
                match obj.get(k) {
                    None => Ok(default),
                    Some(v) => v
                        .as_u64()
                        .and_then(|n| u32::try_from(n).ok())
                        .filter(|&n| n < u32::MAX)
                        .ok_or_else(|| {
                            invalid(k, path, format!("expected a non-negative integer, got {v}"))
                        }),
                }
            };
            let min = count("minItems", 0)?;
            let max = count("maxItems", u32::MAX)?;
            if min > max {
                return Err(invalid(
                    "minItems",
                    path,
                    format!("minItems {min} is above maxItems {max}"),
                ));
            }
            return Ok(self.g.push(Node::Array { items, min, max }));
        }
        Ok(match ty {
            None => ANY,
            Some("string") => self.g.push(Node::String),
            Some("number") => self.g.push(Node::Number),
            Some("integer") => self.g.push(Node::Integer),
            Some("boolean") => BOOL,
            Some(_) => NULL,
        })
    }

    /// `enum` or `const` (`keyword`): the distinct `values` of type `ty`, as literal texts.
    fn compile_literals(
        &mut self,
        keyword: &str,
        values: &[Value],
        ty: Option<&str>,
        path: &str,
    ) -> Result<NodeId, SchemaError> {
        let fits = |v: &Value| match ty {
            None => true,
            Some("object") => v.is_object(),
            Some("array") => v.is_array(),
            Some("string") => v.is_string(),
            Some("number") => v.is_number(),
            Some("integer") => v.is_i64() || v.is_u64(),
            Some("boolean") => v.is_boolean(),
            Some(_) => v.is_null(),
        };
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for v in values.iter().filter(|v| fits(v)) {
            let t = serde_json::to_vec(v).expect("a JSON value serializes");
            if !texts.contains(&t) {
                texts.push(t);
            }
        }
        if texts.is_empty() {
            return Err(invalid(
                keyword,
                path,
                "no value is left that the schema admits".to_string(),
            ));
        }
        if texts.len() > MAX_ALTERNATIVES {
            return Err(SchemaError::Unsupported {
                keyword: keyword.into(),
                path: path.into(),
                why: format!("at most {MAX_ALTERNATIVES} values are supported"),
            });
        }
        Ok(self.g.push(Node::Literals(texts)))
    }

    /// An object schema: `properties` (at most 64) compiled, `required` among them,
    /// `additionalProperties` `true`, `false` or a schema.
    fn compile_object(
        &mut self,
        obj: &serde_json::Map<String, Value>,
        path: &str,
        depth: usize,
    ) -> Result<NodeId, SchemaError> {
        let mut props = Vec::new();
        if let Some(p) = obj.get("properties") {
            let Value::Object(p) = p else {
                return Err(invalid(
                    "properties",
                    path,
                    format!("expected an object, got {p}"),
                ));
            };
            if p.len() > MAX_ALTERNATIVES {
                return Err(SchemaError::Unsupported {
                    keyword: "properties".into(),
                    path: path.into(),
                    why: format!("at most {MAX_ALTERNATIVES} properties are supported"),
                });
            }
            for (name, s) in p {
                let at = format!("{path}/properties/{}", pointer_escape(name));
                let node = self.compile(s, &at, depth + 1)?;
                let quoted = serde_json::to_vec(name).expect("a string serializes");
                props.push((quoted[1..quoted.len() - 1].to_vec(), node));
            }
        }
        let mut required = 0u64;
        if let Some(r) = obj.get("required") {
            let Value::Array(r) = r else {
                return Err(invalid(
                    "required",
                    path,
                    format!("expected an array, got {r}"),
                ));
            };
            for name in r {
                let Some(name) = name.as_str() else {
                    return Err(invalid(
                        "required",
                        path,
                        format!("expected property names, got {name}"),
                    ));
                };
                let quoted = serde_json::to_vec(name).expect("a string serializes");
                let body = &quoted[1..quoted.len() - 1];
                let Some(i) = props.iter().position(|(k, _)| k == body) else {
                    return Err(invalid(
                        "required",
                        path,
                        format!("\"{name}\" is not in `properties`"),
                    ));
                };
                required |= 1 << i;
            }
        }
        let extra = match obj.get("additionalProperties") {
            None | Some(Value::Bool(true)) => Some(ANY),
            Some(Value::Bool(false)) => None,
            Some(s) => Some(self.compile(s, &format!("{path}/additionalProperties"), depth + 1)?),
        };
        Ok(self.g.push(Node::Object {
            extra: if props.is_empty() { extra } else { None },
            props,
            required,
        }))
    }
}

/// A [`SchemaError::Invalid`]: `keyword` at `path` is malformed, `why`.
fn invalid(keyword: &str, path: &str, why: String) -> SchemaError {
    SchemaError::Invalid {
        keyword: keyword.to_string(),
        path: path.to_string(),
        why,
    }
}

/// The schema's `type`: `None` when absent; a list of types or an unknown type is an error.
fn schema_type<'s>(
    obj: &'s serde_json::Map<String, Value>,
    path: &str,
) -> Result<Option<&'s str>, SchemaError> {
    let ty = match obj.get("type") {
        None => None,
        Some(Value::String(t)) => Some(t.as_str()),
        Some(Value::Array(_)) => {
            return Err(SchemaError::Unsupported {
                keyword: "type".into(),
                path: path.into(),
                why: "a list of types is not supported; give one type".into(),
            });
        }
        Some(other) => {
            return Err(invalid(
                "type",
                path,
                format!("expected a string, got {other}"),
            ));
        }
    };
    if let Some(t) = ty
        && !matches!(
            t,
            "object" | "array" | "string" | "number" | "integer" | "boolean" | "null"
        )
    {
        return Err(invalid("type", path, format!("unknown type \"{t}\"")));
    }
    Ok(ty)
}

/// `enum` (`"enum"` and its values) or `const` (`"const"` and its one value), `None` when
/// neither is given; both together, or an `enum` that is not an array, is an error.
fn enum_or_const(
    obj: &serde_json::Map<String, Value>,
    path: &str,
) -> Result<Option<(&'static str, Vec<Value>)>, SchemaError> {
    let literals = match (obj.get("enum"), obj.get("const")) {
        (Some(_), Some(_)) => {
            return Err(SchemaError::Unsupported {
                keyword: "const".into(),
                path: path.into(),
                why: "`enum` and `const` together are not supported".into(),
            });
        }
        (Some(Value::Array(vs)), None) => Some(("enum", vs.clone())),
        (Some(other), None) => {
            return Err(invalid(
                "enum",
                path,
                format!("expected an array, got {other}"),
            ));
        }
        (None, Some(v)) => Some(("const", vec![v.clone()])),
        (None, None) => None,
    };
    Ok(literals)
}

/// Every keyword of `obj` is `type`, an annotation, or one that applies to its type (or to
/// its `enum` or `const`, when `literals`); the first other one is refused by name.
fn check_keywords(
    obj: &serde_json::Map<String, Value>,
    ty: Option<&str>,
    literals: bool,
    path: &str,
) -> Result<(), SchemaError> {
    let allowed: &[&str] = if literals {
        &["enum", "const"]
    } else {
        match ty {
            Some("object") => OBJECT_KEYWORDS,
            Some("array") => ARRAY_KEYWORDS,
            Some(_) => &[],
            None => {
                if OBJECT_KEYWORDS.iter().any(|k| obj.contains_key(*k)) {
                    OBJECT_KEYWORDS
                } else {
                    ARRAY_KEYWORDS
                }
            }
        }
    };
    for key in obj.keys() {
        let k = key.as_str();
        if k == "type" || ANNOTATIONS.contains(&k) || allowed.contains(&k) {
            continue;
        }
        let why = match ty {
            _ if literals => "`enum` and `const` take no other keyword but `type`".to_string(),
            Some(t) if OBJECT_KEYWORDS.contains(&k) || ARRAY_KEYWORDS.contains(&k) => {
                format!("it does not apply to type \"{t}\"")
            }
            None if OBJECT_KEYWORDS.contains(&k) || ARRAY_KEYWORDS.contains(&k) => {
                "object and array keywords together need a `type`".to_string()
            }
            _ => "the engine enforces type, enum, const, properties, required, \
                  additionalProperties, items, minItems, maxItems and local $ref"
                .to_string(),
        };
        return Err(SchemaError::Unsupported {
            keyword: key.clone(),
            path: path.into(),
            why,
        });
    }
    Ok(())
}

/// `name` as a JSON pointer token (RFC 6901: `~` → `~0`, `/` → `~1`).
fn pointer_escape(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}
