//! Tool-call syntaxes against the real chat templates of `fixtures/chat-templates/`: the
//! format each template teaches, the calls parsed out of what transformers renders for an
//! assistant turn with a call, and the grammar of a forced call (it takes the templates'
//! own spelling and random valid calls, and refuses calls its schema rejects).

use std::path::PathBuf;

use engine::chat::ChatTemplate;
use engine::chat::tools::{Function, ParsedCall, ToolFormat, teach_smollm2};
use engine::constrain::{Grammar, MatchState};
use proptest::prelude::*;
use serde_json::{Value, json};

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/chat-templates")
}

fn template_source(name: &str) -> String {
    std::fs::read_to_string(corpus().join("templates").join(format!("{name}.jinja"))).unwrap()
}

/// The conversation with a tool call and its result.
fn conversation() -> Value {
    let text =
        std::fs::read_to_string(corpus().join("conversations/tools-call-and-result.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn functions() -> Vec<Function> {
    conversation()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| Function {
            name: t["function"]["name"].as_str().unwrap().to_string(),
            parameters: t["function"]["parameters"].clone(),
        })
        .collect()
}

/// Which format each template teaches, read off the templates by hand: how each renders
/// an assistant turn's `tool_calls`.
const FORMATS: &[(&str, Option<ToolFormat>)] = &[
    (
        "HuggingFaceTB-SmolLM2-135M-Instruct",
        Some(ToolFormat::SmolLM2),
    ),
    ("Qwen-Qwen2.5-7B-Instruct", Some(ToolFormat::Hermes)),
    ("Qwen-Qwen3-0.6B", Some(ToolFormat::Hermes)),
    ("Qwen-QwQ-32B", Some(ToolFormat::Hermes)),
    (
        "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use",
        Some(ToolFormat::Hermes),
    ),
    (
        "NousResearch-Hermes-3-Llama-3.1-8B-tool_use",
        Some(ToolFormat::Hermes),
    ),
    ("meta-llama-Llama-3.1-8B-Instruct", Some(ToolFormat::Llama3)),
    ("meta-llama-Llama-3.2-3B-Instruct", Some(ToolFormat::Llama3)),
    (
        "meta-llama-Llama-3.3-70B-Instruct",
        Some(ToolFormat::Llama3),
    ),
    (
        "mistralai-Mistral-Nemo-Instruct-2407",
        Some(ToolFormat::MistralJson),
    ),
    (
        "Mistral-Small-3.2-24B-Instruct-2506",
        Some(ToolFormat::MistralArgs),
    ),
    (
        "unsloth-mistral-Devstral-Small-2507",
        Some(ToolFormat::MistralArgs),
    ),
    (
        "mistralai-Ministral-3-14B-Reasoning-2512",
        Some(ToolFormat::MistralArgs),
    ),
    // Their own syntaxes, not parsed: refused rather than misread.
    ("GLM-4.6", None),
    ("moonshotai-Kimi-K2", None),
    ("openai-gpt-oss-120b", None),
    ("google-gemma-4-31B-it", None),
];

#[test]
fn each_template_teaches_its_format() {
    for &(name, want) in FORMATS {
        assert_eq!(ToolFormat::detect(&template_source(name)), want, "{name}");
    }
}

/// The assistant turn with the call, as transformers rendered it for `template`: the text
/// between the end of the user's question (and the assistant's header) and the turn's end.
fn rendered_call(template: &str, format: ToolFormat) -> String {
    let question = "What's the weather like in Zürich?";
    let (open, close) = match format {
        ToolFormat::Hermes | ToolFormat::SmolLM2 => {
            ("<|im_end|>\n<|im_start|>assistant\n", "<|im_end|>")
        }
        ToolFormat::Llama3 => (
            "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
            "<|eot_id|>",
        ),
        ToolFormat::MistralJson | ToolFormat::MistralArgs => ("[/INST]", "</s>"),
    };
    let text = if format == ToolFormat::SmolLM2 {
        // SmolLM2's template renders no calls: the server writes them in (its model card's
        // syntax), then the template renders the turns.
        let c = conversation();
        let mut messages = c["messages"].as_array().unwrap().clone();
        teach_smollm2(&mut messages, Some(c["tools"].as_array().unwrap()));
        let t = ChatTemplate::new(&template_source(template), "", "").unwrap();
        let req = engine::chat::ChatRequest {
            messages: minijinja::Value::from_serialize(&messages),
            ..engine::chat::ChatRequest::new(&[], true)
        };
        t.render_request(&req).unwrap()
    } else {
        std::fs::read_to_string(
            corpus()
                .join("expected")
                .join(template)
                .join("tools-call-and-result.txt"),
        )
        .unwrap()
    };
    let at = text.find(question).unwrap() + question.len();
    let rest = text[at..].strip_prefix(open).unwrap_or_else(|| {
        panic!(
            "{template}: no assistant turn after the question: {:?}",
            &text[at..]
        )
    });
    rest[..rest.find(close).unwrap()].to_string()
}

fn weather_call() -> (String, Value) {
    (
        "get_weather".to_string(),
        json!({"location": "Zürich", "unit": "celsius"}),
    )
}

fn as_pairs(calls: &[ParsedCall]) -> Vec<(String, Value)> {
    calls
        .iter()
        .map(|c| (c.name.clone(), serde_json::from_str(&c.arguments).unwrap()))
        .collect()
}

/// The call each template renders parses back to the conversation's call.
#[test]
fn the_calls_templates_render_parse_back() {
    for &(name, format) in FORMATS {
        let Some(format) = format else { continue };
        let text = rendered_call(name, format);
        let parsed = format
            .parse(&text)
            .unwrap_or_else(|| panic!("{name}: {text:?} does not parse"));
        assert_eq!(
            as_pairs(&parsed.calls),
            vec![weather_call()],
            "{name}: {text:?}"
        );
        assert_eq!(parsed.content, "", "{name}");
    }
}

fn accepts(g: &Grammar, text: &str) -> bool {
    let mut m = MatchState::new(g);
    m.feed_all(g, text.as_bytes()) && m.is_complete(g)
}

/// The grammar of a forced call takes the templates' own spelling of the call (those
/// without a call id in it: an id is no part of what the model is asked to write).
#[test]
fn the_forced_call_grammar_takes_the_templates_spelling() {
    for &(name, format) in FORMATS {
        let Some(format) = format else { continue };
        let text = rendered_call(name, format);
        if text.contains("abc123DEF") {
            continue;
        }
        let g = format.grammar(&functions(), true).unwrap();
        assert!(accepts(&g, &text), "{name}: {text:?}");
        let one = format.grammar(&functions(), false).unwrap();
        assert!(accepts(&one, &text), "{name} (one call): {text:?}");
    }
}

/// The calls in a format's spelling, written here from the templates.
fn spell(format: ToolFormat, calls: &[(String, Value)]) -> String {
    let obj = |key: &str, (n, a): &(String, Value)| {
        format!("{{\"name\": {}, \"{key}\": {}}}", json!(n), a)
    };
    match format {
        ToolFormat::Hermes => calls
            .iter()
            .map(|c| format!("<tool_call>\n{}\n</tool_call>", obj("arguments", c)))
            .collect::<Vec<_>>()
            .join("\n"),
        ToolFormat::Llama3 => obj("parameters", &calls[0]),
        ToolFormat::MistralJson => format!(
            "[TOOL_CALLS][{}]",
            calls
                .iter()
                .map(|c| obj("arguments", c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ToolFormat::MistralArgs => calls
            .iter()
            .map(|(n, a)| format!("[TOOL_CALLS]{n}[ARGS]{a}"))
            .collect(),
        ToolFormat::SmolLM2 => format!(
            "<tool_call>[{}]</tool_call>",
            calls
                .iter()
                .map(|c| obj("arguments", c))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    }
}

const ALL: [ToolFormat; 5] = [
    ToolFormat::Hermes,
    ToolFormat::Llama3,
    ToolFormat::MistralJson,
    ToolFormat::MistralArgs,
    ToolFormat::SmolLM2,
];

fn call_strategy() -> impl Strategy<Value = (String, Value)> {
    let text = "[a-zA-Zé ,.'0-9\"\\\\]{0,12}";
    prop_oneof![
        (
            text,
            prop::option::of(prop_oneof![Just("celsius"), Just("fahrenheit")])
        )
            .prop_map(|(loc, unit)| {
                let mut a = json!({"location": loc});
                if let Some(u) = unit {
                    a["unit"] = u.into();
                }
                ("get_weather".to_string(), a)
            }),
        (text, prop::option::of(-1000i64..1000)).prop_map(|(q, n)| {
            let mut a = json!({"query": q});
            if let Some(n) = n {
                a["max_results"] = n.into();
            }
            ("search".to_string(), a)
        }),
    ]
}

proptest! {
    /// Random valid calls, spelt as each format spells them: the forced-call grammar takes
    /// them (several only when parallel calls are on and the format has them), and they
    /// parse back to the same calls.
    #[test]
    fn valid_calls_are_taken_and_parse_back(
        calls in prop::collection::vec(call_strategy(), 1..4),
    ) {
        for format in ALL {
            let calls = if format.parallel() { calls.clone() } else { calls[..1].to_vec() };
            let text = spell(format, &calls);
            let parallel = format.grammar(&functions(), true).unwrap();
            prop_assert!(accepts(&parallel, &text), "{:?}: {:?}", format, text);
            let one = format.grammar(&functions(), false).unwrap();
            prop_assert_eq!(accepts(&one, &text), calls.len() == 1, "{:?} one call: {:?}", format, text);
            let parsed = format.parse(&text).unwrap();
            prop_assert_eq!(as_pairs(&parsed.calls), calls.clone());
            // Named: only that function's calls are taken.
            let weather_only: Vec<Function> =
                functions().into_iter().filter(|f| f.name == "get_weather").collect();
            let named = format.grammar(&weather_only, true).unwrap();
            prop_assert_eq!(
                accepts(&named, &text),
                calls.iter().all(|(n, _)| n == "get_weather"),
                "{:?} named: {:?}", format, text
            );
        }
    }

    /// Content before a call is released as it streams; no byte of the call's opening is.
    #[test]
    fn content_before_a_call_is_released_and_the_call_held(
        before in "[a-zA-Z .,!<\\[]{0,20}",
        call in call_strategy(),
    ) {
        for format in ALL {
            let calls = vec![call.clone()];
            let spelt = spell(format, &calls);
            let full = if format == ToolFormat::Llama3 { spelt.clone() } else { format!("{before}{spelt}") };
            let start = full.len() - spelt.len();
            for end in (0..=full.len()).filter(|&e| full.is_char_boundary(e)) {
                let released = format.call_start(&full[..end]).unwrap_or(end);
                prop_assert!(released <= start, "{:?}: {:?} released {}", format, &full[..end], released);
            }
            // The text before the call, alone, is released whole once it cannot start one.
            let plain = format!("{before}.");
            if format != ToolFormat::Llama3 && !plain.contains('<') && !plain.contains('[') {
                prop_assert_eq!(format.call_start(&plain), None);
            }
        }
    }
}

/// Calls the schema rejects are refused: an unknown function, a missing required argument,
/// a value outside an `enum`, a wrong type, a call that is not closed.
#[test]
fn invalid_calls_are_refused() {
    let bad = [
        ("get_wether".to_string(), json!({"location": "x"})),
        ("get_weather".to_string(), json!({"unit": "celsius"})),
        (
            "get_weather".to_string(),
            json!({"location": "x", "unit": "kelvin"}),
        ),
        (
            "search".to_string(),
            json!({"query": "x", "max_results": 1.5}),
        ),
        ("search".to_string(), json!({"query": 3})),
    ];
    for format in ALL {
        let g = format.grammar(&functions(), true).unwrap();
        for call in &bad {
            let text = spell(format, std::slice::from_ref(call));
            assert!(!accepts(&g, &text), "{format:?} took {text:?}");
        }
        let good = spell(format, &[weather_call()]);
        assert!(accepts(&g, &good), "{format:?}: {good:?}");
        let cut = &good[..good.len() - 1];
        assert!(!accepts(&g, cut), "{format:?} took the unclosed {cut:?}");
    }
}

/// A function whose parameters the engine cannot enforce is refused by name (fails
/// closed), never compiled in part.
#[test]
fn unenforceable_parameters_are_refused_naming_the_function() {
    let f = vec![Function {
        name: "when".into(),
        parameters: json!({"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}),
    }];
    let e = ToolFormat::Hermes
        .grammar(&f, true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("`when`") && e.contains("`format`"), "{e}");
}

/// The text nodes on their own: a repetition takes `min` to `max` items with the
/// separator between them and nothing else; a choice goes by its opening bytes and refuses
/// openings it could not tell apart; text takes its bytes exactly, without whitespace.
#[test]
fn text_nodes_take_exactly_their_language() {
    use engine::constrain::GrammarBuilder;
    let mut b = GrammarBuilder::new();
    let int = b.schema(&json!({"type": "integer"})).unwrap();
    let x = b.text(b"x=").unwrap();
    let y = b.text(b"yes").unwrap();
    let item_x = b.seq(vec![x, int]).unwrap();
    let choice = b
        .choice(vec![(b"<a>".to_vec(), item_x), (b"<b>".to_vec(), y)])
        .unwrap();
    let rep = b.repeat(choice, b";", 2, 3).unwrap();
    let open = b.text(b"[").unwrap();
    let close = b.text(b"]").unwrap();
    let root = b.seq(vec![open, rep, close]).unwrap();
    let g = b.build(root);
    for good in [
        "[<a>x=1;<b>yes]",
        "[<b>yes;<b>yes;<a>x=-20]",
        "[<a>x= 7;<a>x=0]",
    ] {
        assert!(accepts(&g, good), "{good}");
    }
    for bad in [
        "[<a>x=1]",
        "[<b>yes;<b>yes;<b>yes;<b>yes]",
        "[<c>yes;<b>yes]",
        "[<a>x=1.5;<b>yes]",
        "[<b>yes; <b>yes]",
        " [<b>yes;<b>yes]",
        "[<b>yes;<b>yes];",
        "[<a>yes;<b>yes]",
    ] {
        assert!(!accepts(&g, bad), "{bad}");
    }
    let mut b = GrammarBuilder::new();
    let y = b.text(b"y").unwrap();
    assert!(
        b.choice(vec![(b"ab".to_vec(), y), (b"abc".to_vec(), y)])
            .is_err()
    );
    assert!(b.repeat(y, b"", 1, 2).is_err());
    assert!(b.repeat(y, b",", 3, 2).is_err());
    assert!(b.text(b"").is_err());
    assert!(b.seq(vec![]).is_err());
}
