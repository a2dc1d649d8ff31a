//! Constrained decoding over random schemas of the supported subset: every output parses and validates (the `jsonschema` crate judges), every value the subset admits can be generated, the trie mask equals the per-token check, and schemas outside the subset are refused by keyword.

use std::sync::Arc;

use engine::constrain::{Constraint, Grammar, MatchState, SchemaError, TokenVocab};
use proptest::prelude::*;
use proptest::test_runner::TestRng;
use serde_json::{Map, Value, json};

use crate::common;

/// A schema of the supported subset, kept as a tree so instances can be drawn from it.
#[derive(Debug, Clone)]
enum S {
    Any,
    Null,
    Boolean,
    Number,
    Integer,
    String,
    Enum(Vec<Value>),
    Const(Value),
    /// Declared properties (name, schema, required), `additionalProperties` given or not.
    Object(Vec<(String, S, bool)>, Option<bool>),
    /// No `properties`: free keys whose values follow the schema (`None`: any value).
    Map(Option<Box<S>>),
    Array(Box<S>, u32, Option<u32>),
}

impl S {
    fn to_json(&self) -> Value {
        match self {
            S::Any => json!({}),
            S::Null => json!({"type": "null"}),
            S::Boolean => json!({"type": "boolean"}),
            S::Number => json!({"type": "number"}),
            S::Integer => json!({"type": "integer"}),
            S::String => json!({"type": "string", "description": "annotations constrain nothing"}),
            S::Enum(vs) => json!({ "enum": vs }),
            S::Const(v) => json!({ "const": v }),
            S::Object(props, extra) => {
                let mut p = Map::new();
                let mut req = Vec::new();
                for (name, s, r) in props {
                    p.insert(name.clone(), s.to_json());
                    if *r {
                        req.push(Value::String(name.clone()));
                    }
                }
                let mut o = json!({"type": "object", "properties": p, "required": req});
                if let Some(e) = extra {
                    o["additionalProperties"] = Value::Bool(*e);
                }
                o
            }
            S::Map(values) => match values {
                Some(s) => json!({"type": "object", "additionalProperties": s.to_json()}),
                None => json!({"type": "object"}),
            },
            S::Array(items, min, max) => {
                let mut o = json!({"type": "array", "items": items.to_json(), "minItems": min});
                if let Some(m) = max {
                    o["maxItems"] = json!(m);
                }
                o
            }
        }
    }
}

fn key_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]{1,6}",
        // Keys the model must escape, and keys sharing a prefix.
        Just("a\"b".to_string()),
        Just("back\\slash".to_string()),
        Just("é日".to_string()),
        Just("ab".to_string()),
        Just("abc".to_string()),
    ]
}

fn literal() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        (-1000i64..1000).prop_map(|n| json!(n)),
        (-100.0f64..100.0).prop_map(|x| json!((x * 8.0).round() / 8.0)),
        "[a-z \"\\\\é]{0,5}".prop_map(Value::String),
    ];
    leaf.prop_recursive(2, 6, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Array),
            prop::collection::btree_map("[a-c]{1,2}", inner, 0..3)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn schema() -> impl Strategy<Value = S> {
    let leaf = prop_oneof![
        Just(S::Any),
        Just(S::Null),
        Just(S::Boolean),
        Just(S::Number),
        Just(S::Integer),
        Just(S::String),
        prop::collection::vec(literal(), 1..5).prop_map(S::Enum),
        literal().prop_map(S::Const),
    ];
    leaf.prop_recursive(3, 16, 4, |inner| {
        prop_oneof![
            (
                prop::collection::vec((key_name(), inner.clone(), any::<bool>()), 0..4),
                prop::option::of(any::<bool>())
            )
                .prop_map(|(props, extra)| {
                    let mut seen = std::collections::HashSet::new();
                    let props = props
                        .into_iter()
                        .filter(|(k, _, _)| seen.insert(k.clone()))
                        .collect();
                    S::Object(props, extra)
                }),
            prop::option::of(inner.clone().prop_map(Box::new)).prop_map(S::Map),
            (inner, 0u32..3, prop::option::of(0u32..4)).prop_map(|(items, min, extra)| {
                S::Array(Box::new(items), min, extra.map(|e| min + e))
            }),
        ]
    })
}

/// An instance the schema admits, drawn at random; only forms the subset generates
/// (declared properties only; numbers of at most 18 digits and a 2-digit exponent).
fn instance(s: &S, rng: &mut TestRng, depth: usize) -> Value {
    match s {
        S::Any => {
            if depth > 3 {
                return json!(rng.random_range(-5..5));
            }
            match rng.random_range(0..6) {
                0 => Value::Null,
                1 => json!(rng.random::<bool>()),
                2 => json!(rng.random_range(-1e6..1e6)),
                3 => Value::String(text(rng)),
                4 => Value::Array(
                    (0..rng.random_range(0..3))
                        .map(|_| instance(&S::Any, rng, depth + 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..rng.random_range(0..3))
                        .map(|_| (text(rng), instance(&S::Any, rng, depth + 1)))
                        .collect(),
                ),
            }
        }
        S::Null => Value::Null,
        S::Boolean => json!(rng.random::<bool>()),
        S::Number => match rng.random_range(0..4) {
            0 => json!(rng.random_range(-1e9..1e9)),
            1 => json!(rng.random_range(-1e-30..1e-30)),
            2 => json!(rng.random_range(1e20..1e90)),
            _ => json!(rng.random_range(i64::MIN / 10..i64::MAX / 10)),
        },
        S::Integer => json!(rng.random_range(i64::MIN / 10..i64::MAX / 10)),
        S::String => Value::String(text(rng)),
        S::Enum(vs) => vs[rng.random_range(0..vs.len())].clone(),
        S::Const(v) => v.clone(),
        S::Object(props, _) => {
            let mut o = Map::new();
            for (k, s, req) in props {
                if *req || rng.random::<bool>() {
                    o.insert(k.clone(), instance(s, rng, depth + 1));
                }
            }
            Value::Object(o)
        }
        S::Map(values) => Value::Object(
            (0..rng.random_range(0..3))
                .map(|_| {
                    let v = match values {
                        Some(s) => instance(s, rng, depth + 1),
                        None => instance(&S::Any, rng, depth + 1),
                    };
                    (text(rng), v)
                })
                .collect(),
        ),
        S::Array(items, min, max) => {
            let n = rng.random_range(*min..=max.unwrap_or(min + 3));
            Value::Array((0..n).map(|_| instance(items, rng, depth + 1)).collect())
        }
    }
}

/// A short string with characters JSON must escape and multi-byte ones.
fn text(rng: &mut TestRng) -> String {
    const CHARS: &[char] = &[
        'a', 'Z', ' ', '"', '\\', '\n', '\u{1}', 'é', '日', '😀', '/',
    ];
    (0..rng.random_range(0..6))
        .map(|_| CHARS[rng.random_range(0..CHARS.len())])
        .collect()
}

/// Token 0: end of generation. Then every byte alone, then multi-byte pieces of the kind a
/// BPE vocabulary holds (structural runs, literals, digits, escapes, whole and partial
/// UTF-8 characters), several sharing prefixes.
const PIECES: &[&[u8]] = &[
    b"{\"",
    b"\":",
    b"\": ",
    b"\",",
    b"\"}",
    b"\"]",
    b", \"",
    b",\"",
    b"{}",
    b"[]",
    b"}]",
    b"]}",
    b"}}",
    b"true",
    b"false",
    b"null",
    b"nu",
    b"tr",
    b"fal",
    b"12",
    b"123",
    b"-1",
    b"0.",
    b".5",
    b"e+",
    b"E-",
    b"e1",
    b"\\n",
    b"\\\"",
    b"\\u00",
    b"\\u0041",
    b"\\ud83d",
    b"\\ude00",
    b"ab",
    b"abc",
    b"a\"",
    b"  ",
    b"\n  ",
    b"\n\n",
    b"    ",
    "é".as_bytes(),
    "日".as_bytes(),
    b"\xe6\x97",
    b"\xa5",
    b"\xf0\x9f",
    b"\x98\x80",
    b"hello world",
    b"\": \"",
    b"\":\"",
    b"\": {",
    b"\": [",
    b"1,",
    b"0}",
    b"\"a\"",
    b"\"ab\"",
];

const EOG: u32 = 0;

fn synthetic_vocab() -> (TokenVocab, Vec<Vec<u8>>) {
    let mut tokens: Vec<Vec<u8>> = vec![Vec::new()];
    tokens.extend((0..=255u8).map(|b| vec![b]));
    tokens.extend(PIECES.iter().map(|p| p.to_vec()));
    // An added token (never generated inside a value).
    tokens.push(b"<|im_start|>".to_vec());
    let added = tokens.len() as u32 - 1;
    let t = tokens.clone();
    let vocab = TokenVocab::new(
        tokens.len(),
        move |id| (id != added).then(|| t[id as usize].clone()),
        vec![EOG],
    );
    (vocab, tokens)
}

fn bit(mask: &[u64], id: usize) -> bool {
    mask[id / 64] >> (id % 64) & 1 == 1
}

/// Generate with `c` over `vocab`: `random_steps` tokens drawn uniformly from the allowed
/// ones, then an eager policy that closes what is open. At every step the mask must equal
/// the per-token check and must not be empty. Returns the bytes and whether generation
/// ended with end-of-generation.
fn generate(
    c: &mut Constraint,
    vocab: &TokenVocab,
    tokens: &[Vec<u8>],
    rng: &mut TestRng,
    random_steps: usize,
) -> Result<(Vec<u8>, bool), TestCaseError> {
    const CLOSERS: &[&[u8]] = &[b"\"", b"}", b"]", b"0", b":", b"null", b"true", b","];
    let mut out = Vec::new();
    for step in 0..3000 {
        let mask = c.mask(vocab).to_vec();
        let allowed: Vec<u32> = (0..tokens.len() as u32)
            .filter(|&id| bit(&mask, id as usize))
            .collect();
        for id in 0..tokens.len() as u32 {
            prop_assert_eq!(
                bit(&mask, id as usize),
                c.allows(vocab, id),
                "mask and per-token check differ on token {} ({:?}) after {:?}",
                id,
                String::from_utf8_lossy(&tokens[id as usize]),
                String::from_utf8_lossy(&out)
            );
        }
        prop_assert!(
            !allowed.is_empty(),
            "no token continues {:?}",
            String::from_utf8_lossy(&out)
        );
        let pick = if step < random_steps {
            allowed[rng.random_range(0..allowed.len())]
        } else if allowed.contains(&EOG) {
            EOG
        } else if let Some(id) = CLOSERS.iter().find_map(|p| {
            allowed
                .iter()
                .copied()
                .find(|&id| tokens[id as usize] == *p)
        }) {
            id
        } else {
            allowed[rng.random_range(0..allowed.len())]
        };
        c.advance(vocab, pick)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        if pick == EOG {
            return Ok((out, true));
        }
        out.extend_from_slice(&tokens[pick as usize]);
    }
    Ok((out, false))
}

fn check_output(schema: &Value, out: &[u8]) -> Result<(), TestCaseError> {
    let text = std::str::from_utf8(out)
        .map_err(|e| TestCaseError::fail(format!("output is not UTF-8: {e}: {out:?}")))?;
    let value: Value = serde_json::from_str(text)
        .map_err(|e| TestCaseError::fail(format!("output does not parse: {e}: {text}")))?;
    let validator = jsonschema::validator_for(schema)
        .map_err(|e| TestCaseError::fail(format!("jsonschema refuses the schema: {e}")))?;
    if let Err(e) = validator.validate(&value) {
        return Err(TestCaseError::fail(format!(
            "output {text} breaks the schema {schema}: {e}"
        )));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Random schemas, random allowed tokens then eager closing: the output ends (the
    /// constraint lets end-of-generation through only on a complete value), parses and
    /// validates against the schema.
    #[test]
    fn generated_outputs_parse_and_validate(s in schema(), random_steps in 0usize..60, seed in any::<u64>()) {
        let (vocab, tokens) = synthetic_vocab();
        let schema = s.to_json();
        let g = Grammar::from_schema(&schema)
            .map_err(|e| TestCaseError::fail(format!("subset schema refused: {e}: {schema}")))?;
        let mut c = Constraint::new(Arc::new(g));
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes(seed));
        let (out, ended) = generate(&mut c, &vocab, &tokens, &mut rng, random_steps)?;
        prop_assert!(ended, "generation did not end: {:?}", String::from_utf8_lossy(&out));
        check_output(&schema, &out)?;
    }

    /// Every instance the subset generates is reachable: its compact and pretty JSON are
    /// taken byte by byte, and the value is then complete.
    #[test]
    fn every_instance_is_accepted(s in schema(), seed in any::<u64>()) {
        let schema = s.to_json();
        let g = Grammar::from_schema(&schema)
            .map_err(|e| TestCaseError::fail(format!("subset schema refused: {e}: {schema}")))?;
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes(seed));
        let value = instance(&s, &mut rng, 0);
        prop_assert!(jsonschema::is_valid(&schema, &value), "drawn instance {} breaks {}", value, schema);
        for text in [serde_json::to_string(&value).unwrap(), serde_json::to_string_pretty(&value).unwrap()] {
            // Enum and const values are generated in their compact form only.
            if text.contains('\n') && has_literals(&s) {
                continue;
            }
            let mut m = MatchState::new(&g);
            for (i, b) in text.bytes().enumerate() {
                prop_assert!(m.feed(&g, b), "byte {} of {} refused under {}", i, text, schema);
            }
            prop_assert!(m.is_complete(&g), "{} is not complete under {}", text, schema);
        }
    }

    /// `json_object`: any object, and only an object.
    #[test]
    fn json_object_outputs_are_objects(random_steps in 0usize..80, seed in any::<u64>()) {
        let (vocab, tokens) = synthetic_vocab();
        let mut c = Constraint::new(Arc::new(Grammar::json_object()));
        let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes(seed));
        let (out, ended) = generate(&mut c, &vocab, &tokens, &mut rng, random_steps)?;
        prop_assert!(ended);
        check_output(&json!({"type": "object"}), &out)?;
    }
}

fn has_literals(s: &S) -> bool {
    match s {
        S::Enum(_) | S::Const(_) => true,
        S::Object(props, _) => props.iter().any(|(_, s, _)| has_literals(s)),
        S::Map(Some(s)) | S::Array(s, _, _) => has_literals(s),
        _ => false,
    }
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut b = [0u8; 32];
    b[..8].copy_from_slice(&seed.to_le_bytes());
    b
}

/// Texts a strict JSON parser refuses are refused by the matcher at the byte at fault.
#[test]
fn invalid_json_is_refused() {
    let g = Grammar::json_object();
    for bad in [
        "[1]",
        "{\"a\":01}",
        "{\"a\":1.}",
        "{\"a\":.5}",
        "{\"a\":1e}",
        "{\"a\":tru}x",
        "{\"a\" 1}",
        "{\"a\":1,}",
        "{,}",
        "{\"a\":\"\u{1}\"}",
        "{\"a\":\"\\x\"}",
        "{\"a\":\"\\ud800\"}",
        "{\"a\":1}}",
        "{\"a\":1} x",
        "{\"a\":[1,]}",
        "{\"a\":NaN}",
    ] {
        let mut m = MatchState::new(&g);
        assert!(
            !m.feed_all(&g, bad.as_bytes()) || !m.is_complete(&g),
            "{bad} was taken as a complete value"
        );
        assert!(
            serde_json::from_str::<Value>(bad).map_or(true, |v| !v.is_object()),
            "{bad} is a valid object: fix the case"
        );
    }
    // Bytes that are not UTF-8 inside a string.
    for bad in [
        &b"{\"a\":\"\xff\"}"[..],
        b"{\"a\":\"\xc3\x28\"}",
        b"{\"a\":\"\xed\xa0\x80\"}",
    ] {
        let mut m = MatchState::new(&g);
        assert!(!m.feed_all(&g, bad), "{bad:?} was taken");
    }
    // A number longer than an f64's digits, and whitespace without end.
    let mut m = MatchState::new(&g);
    assert!(!m.feed_all(&g, format!("{{\"a\":{}", "9".repeat(19)).as_bytes()));
    let mut m = MatchState::new(&g);
    assert!(!m.feed_all(&g, format!("{{{}", " ".repeat(17)).as_bytes()));
}

/// Required properties hold the object open; declared keys come once each, in any order;
/// `additionalProperties: false` without properties admits only `{}`.
#[test]
fn objects_follow_required_and_declared_keys() {
    let g = Grammar::from_schema(&json!({
        "type": "object",
        "properties": {"a": {"type": "integer"}, "ab": {"type": "string"}},
        "required": ["ab"]
    }))
    .unwrap();
    let takes = |text: &str| {
        let mut m = MatchState::new(&g);
        m.feed_all(&g, text.as_bytes()) && m.is_complete(&g)
    };
    assert!(takes(r#"{"ab":"x"}"#));
    assert!(takes(r#"{"ab":"x","a":1}"#));
    assert!(takes(r#"{ "a" : 1 , "ab" : "" }"#));
    assert!(!takes(r#"{"a":1}"#), "closed without the required key");
    assert!(!takes(r#"{}"#));
    assert!(!takes(r#"{"ab":"x","ab":"y"}"#), "a key twice");
    assert!(!takes(r#"{"ab":"x","b":1}"#), "an undeclared key");
    assert!(!takes(r#"{"ab":1}"#), "a value of the wrong type");
    assert!(!takes(r#"{"ab":"x","a":1.5}"#), "a fraction for an integer");
    let empty =
        Grammar::from_schema(&json!({"type": "object", "additionalProperties": false})).unwrap();
    let mut m = MatchState::new(&empty);
    assert!(m.feed_all(&empty, b"{}") && m.is_complete(&empty));
    let mut m = MatchState::new(&empty);
    assert!(!m.feed_all(&empty, b"{\""));
}

/// Arrays hold `minItems` open and close at `maxItems`.
#[test]
fn arrays_follow_item_counts() {
    let g = Grammar::from_schema(
        &json!({"type": "array", "items": {"type": "boolean"}, "minItems": 1, "maxItems": 2}),
    )
    .unwrap();
    let takes = |text: &str| {
        let mut m = MatchState::new(&g);
        m.feed_all(&g, text.as_bytes()) && m.is_complete(&g)
    };
    assert!(!takes("[]"));
    assert!(takes("[true]"));
    assert!(takes("[true, false]"));
    assert!(!takes("[true,false,true]"));
    assert!(!takes("[1]"));
}

/// Each schema outside the subset is refused, naming the keyword and where it sits.
#[test]
fn unsupported_schemas_are_refused_by_keyword() {
    let cases = [
        (
            json!({"anyOf": [{"type": "string"}, {"type": "null"}]}),
            "anyOf",
            "#",
        ),
        (
            json!({"type": "object", "properties": {"a": {"$ref": "#"}}}),
            "$ref",
            "#/properties/a",
        ),
        (json!({"$ref": "https://example.com/a.json"}), "$ref", "#"),
        (
            json!({"$defs": {"a": {"type": "array", "items": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}),
            "$ref",
            "#/$defs/a/items",
        ),
        (
            json!({"$defs": {"a": {}}, "$ref": "#/$defs/a", "type": "object"}),
            "type",
            "#",
        ),
        (json!({"type": "string", "pattern": "^a"}), "pattern", "#"),
        (json!({"type": "string", "minLength": 2}), "minLength", "#"),
        (json!({"type": "string", "format": "date"}), "format", "#"),
        (json!({"type": "integer", "minimum": 0}), "minimum", "#"),
        (json!({"type": ["string", "null"]}), "type", "#"),
        (
            json!({"type": "array", "prefixItems": [{}]}),
            "prefixItems",
            "#",
        ),
        (
            json!({"type": "array", "uniqueItems": true}),
            "uniqueItems",
            "#",
        ),
        (
            json!({"type": "object", "patternProperties": {"a": {}}}),
            "patternProperties",
            "#",
        ),
        (
            json!({"type": "object", "properties": {"a/b": {"type": "array", "items": {"oneOf": []}}}}),
            "oneOf",
            "#/properties/a~1b/items",
        ),
        (
            json!({"type": "string", "properties": {}}),
            "properties",
            "#",
        ),
        (json!({"enum": ["a"], "minLength": 1}), "minLength", "#"),
    ];
    for (schema, keyword, path) in cases {
        match Grammar::from_schema(&schema) {
            Err(SchemaError::Unsupported {
                keyword: k,
                path: p,
                ..
            }) => {
                assert_eq!((k.as_str(), p.as_str()), (keyword, path), "{schema}");
            }
            other => panic!("{schema}: expected Unsupported({keyword}), got {other:?}"),
        }
    }
    let invalid = [
        (
            json!({"type": "object", "properties": {"a": {}}, "required": ["b"]}),
            "required",
        ),
        (
            json!({"type": "array", "minItems": 3, "maxItems": 2}),
            "minItems",
        ),
        (json!({"type": "string", "enum": [1, 2]}), "enum"),
        (json!({"type": "stringy"}), "type"),
        (json!(false), "false"),
        (json!({"type": "array", "minItems": -1}), "minItems"),
        (json!({"$ref": "#/$defs/missing"}), "$ref"),
    ];
    for (schema, keyword) in invalid {
        match Grammar::from_schema(&schema) {
            Err(SchemaError::Invalid { keyword: k, .. }) => assert_eq!(k, keyword, "{schema}"),
            other => panic!("{schema}: expected Invalid({keyword}), got {other:?}"),
        }
    }
}

/// Added tokens never appear inside a value; end-of-generation only after a complete one.
#[test]
fn added_and_end_tokens_follow_completeness() {
    let (vocab, tokens) = synthetic_vocab();
    let added = tokens.len() as u32 - 1;
    let mut c = Constraint::new(Arc::new(
        Grammar::from_schema(&json!({"type": "integer"})).unwrap(),
    ));
    assert!(!c.allows(&vocab, EOG));
    assert!(!c.allows(&vocab, added));
    // Taking either anyway is refused, and leaves the state as it was.
    assert!(c.advance(&vocab, EOG).is_err());
    assert!(c.advance(&vocab, added).is_err());
    assert!(!c.is_complete());
    c.advance(&vocab, u32::from(b'7') + 1).unwrap();
    assert!(c.is_complete());
    assert!(c.allows(&vocab, EOG), "an integer may end after a digit");
    assert!(!c.allows(&vocab, added));
    assert!(c.allows(&vocab, u32::from(b'8') + 1), "or go on");
}

/// SmolLM2's own vocabulary (49152 byte-level BPE tokens): along random constrained
/// generations the trie mask equals the per-token check, and the outputs validate.
#[test]
fn smollm2_vocabulary_masks_match_per_token_checks() {
    use engine::gguf::GgufFile;
    use engine::tokenizer::{GgufVocab, Tokenizer};
    let f = GgufFile::open(common::model_path()).expect("the real model must parse");
    let tok = Tokenizer::from_vocab(&GgufVocab::from_metadata(f.metadata()).unwrap()).unwrap();
    let vocab = tok.constraint_vocab();
    let n = tok.vocab_size() as u32;
    let eog: Vec<u32> = (0..n).filter(|&id| tok.is_eog(id)).collect();
    let schema = json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer"},
            "tags": {"type": "array", "items": {"enum": ["a", "b c", null]}, "maxItems": 3},
            "extra": {"type": "object", "additionalProperties": {"type": "number"}}
        },
        "required": ["name", "age", "tags"]
    });
    let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes(7));
    for (schema, g) in [
        (schema.clone(), Grammar::from_schema(&schema).unwrap()),
        (json!({"type": "object"}), Grammar::json_object()),
    ] {
        let mut c = Constraint::new(Arc::new(g));
        let mut out = Vec::new();
        let mut ended = false;
        for step in 0..400 {
            let mask = c.mask(vocab).to_vec();
            let allowed: Vec<u32> = (0..n).filter(|&id| bit(&mask, id as usize)).collect();
            assert!(
                !allowed.is_empty(),
                "no token continues {:?}",
                String::from_utf8_lossy(&out)
            );
            if step % 8 == 0 {
                for id in 0..n {
                    assert_eq!(
                        bit(&mask, id as usize),
                        c.allows(vocab, id),
                        "token {id} after {:?}",
                        String::from_utf8_lossy(&out)
                    );
                }
            }
            // Random tokens first, then closing ones (an end token first), else a short one.
            const CLOSERS: &[&[u8]] = &[b"\"", b"}", b"]", b"0", b":", b"null", b","];
            let pick = if step < 40 {
                allowed[rng.random_range(0..allowed.len())]
            } else if let Some(&e) = allowed.iter().find(|id| eog.contains(id)) {
                e
            } else if let Some(id) = CLOSERS
                .iter()
                .find_map(|p| allowed.iter().copied().find(|&id| vocab.bytes(id) == *p))
            {
                id
            } else {
                *allowed
                    .iter()
                    .min_by_key(|&&id| (vocab.bytes(id).len(), rng.random::<u8>()))
                    .unwrap()
            };
            c.advance(vocab, pick).unwrap();
            if eog.contains(&pick) {
                ended = true;
                break;
            }
            out.extend_from_slice(vocab.bytes(pick));
        }
        assert!(ended, "did not end: {:?}", String::from_utf8_lossy(&out));
        check_output(&schema, &out).unwrap();
    }
}

/// What pydantic (v2) makes of nested models and OpenAI's client sends as a strict
/// `json_schema`: `$defs` with `$ref`s, titles on every schema. The nested model is compiled
/// once and enforced where each reference sits.
#[test]
fn refs_into_defs_are_enforced_where_they_sit() {
    let schema = json!({
        "$defs": {
            "Address": {
                "properties": {"city": {"title": "City", "type": "string"}},
                "required": ["city"], "title": "Address", "type": "object",
                "additionalProperties": false
            }
        },
        "properties": {
            "name": {"title": "Name", "type": "string"},
            "home": {"$ref": "#/$defs/Address"},
            "past": {"items": {"$ref": "#/$defs/Address"}, "title": "Past", "type": "array"}
        },
        "required": ["name", "home", "past"], "title": "Person", "type": "object",
        "additionalProperties": false
    });
    let g = Grammar::from_schema(&schema).unwrap();
    let takes = |text: &str| {
        let mut m = MatchState::new(&g);
        m.feed_all(&g, text.as_bytes()) && m.is_complete(&g)
    };
    assert!(takes(
        r#"{"name":"A","home":{"city":"Paris"},"past":[{"city":"Lyon"}]}"#
    ));
    assert!(!takes(r#"{"name":"A","home":{"town":"Paris"},"past":[]}"#));
    assert!(!takes(
        r#"{"name":"A","home":{"city":"Paris"},"past":[{}]}"#
    ));
    let (vocab, tokens) = synthetic_vocab();
    let mut rng = TestRng::from_seed(proptest::test_runner::RngAlgorithm::ChaCha, &seed_bytes(3));
    for _ in 0..20 {
        let mut c = Constraint::new(Arc::new(g.clone()));
        let (out, ended) = generate(&mut c, &vocab, &tokens, &mut rng, 30).unwrap();
        assert!(ended);
        check_output(&schema, &out).unwrap();
    }
}
