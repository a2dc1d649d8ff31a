//! The GGUF chat template renders as Hugging Face renders it: SmolLM2's default system turn, explicit turns, and the Jinja environment.

use engine::chat::{ChatError, ChatTemplate, Message, Role};
use engine::gguf::GgufFile;
use engine::tokenizer::{GgufVocab, Tokenizer};

use crate::common;
use common::model_path;

fn smollm2() -> (ChatTemplate, GgufVocab) {
    let f = GgufFile::open(model_path()).expect("the real model must parse");
    let v = GgufVocab::from_metadata(f.metadata()).expect("tokenizer metadata");
    let source = v
        .chat_template
        .clone()
        .expect("SmolLM2 has a chat template");
    let bos = &v.tokens[v.bos.unwrap() as usize];
    let eos = &v.tokens[v.eos.unwrap() as usize];
    (ChatTemplate::new(&source, bos, eos).unwrap(), v)
}

// Read off the template source: when the first message is not a system turn, the template
// emits this system turn before it.
const DEFAULT_SYSTEM: &str = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n";

#[test]
fn one_user_turn_gets_the_default_system_turn_and_generation_prompt() {
    let (t, _) = smollm2();
    let out = t
        .render(&[Message::user("What is the capital of France?")], true)
        .unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n\
         <|im_start|>user\nWhat is the capital of France?<|im_end|>\n\
         <|im_start|>assistant\n"
    );
}

#[test]
fn explicit_system_turn_replaces_the_default_one() {
    let (t, _) = smollm2();
    let out = t
        .render(
            &[
                Message::system("Answer in one word."),
                Message::user("Capital of Italy?"),
                Message::assistant("Rome."),
                Message::user("And Spain?"),
            ],
            false,
        )
        .unwrap();
    assert_eq!(
        out,
        "<|im_start|>system\nAnswer in one word.<|im_end|>\n\
         <|im_start|>user\nCapital of Italy?<|im_end|>\n\
         <|im_start|>assistant\nRome.<|im_end|>\n\
         <|im_start|>user\nAnd Spain?<|im_end|>\n"
    );
    assert!(!out.contains("SmolLM"));
}

#[test]
fn rendered_prompt_without_default_turn_tokenizes_to_the_reference_prompt_ids() {
    // The reference prompts were written raw with no system turn; the template's output minus
    // its default system turn is exactly that raw prompt, and tokenizes to the same ids.
    let (t, v) = smollm2();
    let tok = Tokenizer::from_vocab(&v).unwrap();
    let out = t
        .render(&[Message::user("What is the capital of France?")], true)
        .unwrap();
    let raw = out
        .strip_prefix(DEFAULT_SYSTEM)
        .expect("default system turn first");
    assert_eq!(
        tok.encode(raw).unwrap(),
        [
            1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198
        ]
    );
}

#[test]
fn empty_conversation_renders_only_the_generation_prompt() {
    let (t, _) = smollm2();
    assert_eq!(t.render(&[], true).unwrap(), "<|im_start|>assistant\n");
    assert_eq!(t.render(&[], false).unwrap(), "");
}

#[test]
fn environment_matches_hugging_face_jinja_settings() {
    // trim_blocks drops the newline after a block tag; lstrip_blocks drops the indentation
    // before one; bos/eos are template variables; roles are lowercase names.
    let src = "{{ bos_token }}\n{% for m in messages %}\n    {% if m.role == 'user' %}\nU:{{ m.content }}\n    {% else %}\nA:{{ m.content }}{{ eos_token }}\n    {% endif %}\n{% endfor %}\n";
    let t = ChatTemplate::new(src, "<s>", "</s>").unwrap();
    let out = t
        .render(&[Message::user("hi"), Message::assistant("yo")], false)
        .unwrap();
    assert_eq!(out, "<s>\nU:hi\nA:yo</s>\n");
}

#[test]
fn python_string_methods_loop_controls_and_tojson_work() {
    let src = "{% for m in messages %}{% if loop.index > 2 %}{% break %}{% endif %}[{{ m.content.strip().upper() }}|{{ m.content.startswith('  a') }}]{% endfor %}{{ ['x<y', 1, {'k': none}] | tojson }}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    let out = t
        .render(
            &[
                Message::user("  ab  "),
                Message::assistant("c"),
                Message::user("never"),
            ],
            false,
        )
        .unwrap();
    // Booleans print as Python prints them.
    assert_eq!(out, "[AB|True][C|False][\"x<y\", 1, {\"k\": null}]");
}

#[test]
fn raise_exception_is_reported_with_its_message() {
    let src = "{% if messages[0]['role'] == 'assistant' %}{{ raise_exception('Conversation must start with a user turn') }}{% endif %}ok";
    let t = ChatTemplate::new(src, "", "").unwrap();
    assert_eq!(t.render(&[Message::user("x")], false).unwrap(), "ok");
    let err = t.render(&[Message::assistant("x")], false).unwrap_err();
    assert!(
        matches!(err, ChatError::Raised { ref message, line: Some(1) } if message == "Conversation must start with a user turn"),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("must start with a user turn"),
        "{err}"
    );
}

#[test]
fn template_syntax_errors_are_refused_at_construction_naming_the_line() {
    let err =
        ChatTemplate::new("line one\n{% for m in messages %}{{ m.content }}", "", "").unwrap_err();
    assert!(matches!(err, ChatError::Syntax(_)));
    let msg = err.to_string();
    assert!(msg.contains("tokenizer.chat_template:2"), "{msg}");
    assert!(!msg.contains('\n'), "one line: {msg}");
}

#[test]
fn role_names_are_the_template_strings() {
    assert_eq!(Role::System.as_str(), "system");
    assert_eq!(Role::User.as_str(), "user");
    assert_eq!(Role::Assistant.as_str(), "assistant");
    let t = ChatTemplate::new(
        "{% for m in messages %}{{ m['role'] }};{% endfor %}",
        "",
        "",
    )
    .unwrap();
    let msgs = [
        Message::new(Role::System, "a"),
        Message::new(Role::User, "b"),
        Message::new(Role::Assistant, "c"),
    ];
    assert_eq!(t.render(&msgs, false).unwrap(), "system;user;assistant;");
}

#[test]
fn tojson_indent_matches_python_json_dumps() {
    // Python: json.dumps([1, {"a": "é"}], ensure_ascii=False, indent=2)
    let t = ChatTemplate::new("{{ [1, {'a': 'é'}] | tojson(indent=2) }}", "", "").unwrap();
    assert_eq!(
        t.render(&[], false).unwrap(),
        "[\n  1,\n  {\n    \"a\": \"é\"\n  }\n]"
    );
}

#[test]
fn render_failures_other_than_raise_exception_are_render_errors() {
    let t = ChatTemplate::new("{{ messages | no_such_filter }}", "", "").unwrap();
    let err = t.render(&[Message::user("x")], false).unwrap_err();
    assert!(matches!(err, ChatError::Render(_)), "{err:?}");
    assert!(err.to_string().contains("no_such_filter"), "{err}");
}

// The five defects of issue 14, each against the behaviour of transformers' renderer.

#[test]
fn generation_block_renders_its_body() {
    // transformers' AssistantTracker extension: `{% generation %}` renders its body unchanged.
    let src = "{% for m in messages %}{% if m.role == 'assistant' %}{% generation %}A:{{ m.content }}\n{% endgeneration %}{% else %}U:{{ m.content }}\n{% endif %}{% endfor %}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    let out = t
        .render(&[Message::user("hi"), Message::assistant("yo")], false)
        .unwrap();
    assert_eq!(out, "U:hi\nA:yo\n");
}

#[test]
fn strftime_now_is_a_defined_function() {
    let src = "{% if strftime_now is defined %}{{ strftime_now('%Y') | length }}{% else %}fallback{% endif %}";
    let t = ChatTemplate::new(src, "", "").unwrap();
    assert_eq!(t.render(&[], false).unwrap(), "4");
}

#[test]
fn dict_literals_keep_their_key_order_through_tojson() {
    // Python dicts keep insertion order; json.dumps writes them in that order.
    let t = ChatTemplate::new("{{ {'b': 1, 'a': {'z': 2, 'y': 3}} | tojson }}", "", "").unwrap();
    assert_eq!(
        t.render(&[], false).unwrap(),
        r#"{"b": 1, "a": {"z": 2, "y": 3}}"#
    );
}

#[test]
fn tojson_accepts_ensure_ascii() {
    let t = ChatTemplate::new(
        "{{ 'é€😀' | tojson(ensure_ascii=False) }} {{ 'é€😀' | tojson(ensure_ascii=True) }}",
        "",
        "",
    )
    .unwrap();
    assert_eq!(
        t.render(&[], false).unwrap(),
        r#""é€😀" "\u00e9\u20ac\ud83d\ude00""#
    );
}

#[test]
fn a_template_error_is_described_once() {
    // Printed as the binary prints errors (anyhow's `{:#}`: the message and its causes).
    let t = ChatTemplate::new("{{ messages | no_such_filter }}", "", "").unwrap();
    let err = t.render(&[Message::user("x")], false).unwrap_err();
    let printed = format!("{:#}", anyhow::Error::new(err));
    assert_eq!(printed.matches("no_such_filter").count(), 1, "{printed}");
    let err = ChatTemplate::new("{% for %}", "", "").unwrap_err();
    let printed = format!("{:#}", anyhow::Error::new(err));
    assert_eq!(
        printed.matches("tokenizer.chat_template:1").count(),
        1,
        "{printed}"
    );
}

#[test]
fn environment_prints_values_and_defines_variables_as_transformers_does() {
    use engine::chat::{ChatRequest, SpecialTokens};
    // Expected text printed by transformers 5.24.0's `render_jinja_template` (Jinja2 3.1.6) for
    // this source, one user turn, add_generation_prompt=True, bos_token="<s>",
    // eos_token="<override>" (a template argument overriding the model's eos).
    let src = "{{ [1, 'a', none, true, 1e-5, {'k': \"it's\"}] }}|{{ [1, none]|string }}|{{ [1, true, 'x']|join('-') }}|{{ tools is none }}|{{ documents is none }}|{{ bos_token }}|{{ eos_token }}|{{ unk_token is defined }}|{{ add_generation_prompt }}|{{ {'b': 1, 'a': [1.5, 'é']}|tojson(indent=2, sort_keys=true) }}|{{ {'b': 1}|tojson(separators=(',', ':')) }}|{{ 'a b  c '.rsplit(none, 1) }}|{{ 'x=y=z'.partition('=')[2] }}";
    let t = ChatTemplate::with_special_tokens(
        src,
        SpecialTokens {
            bos_token: Some("<s>".into()),
            eos_token: Some("</s>".into()),
            ..SpecialTokens::default()
        },
    )
    .unwrap();
    let mut req = ChatRequest::new(&[Message::user("hi")], true);
    req.kwargs.push(("eos_token".into(), "<override>".into()));
    assert_eq!(
        t.render_request(&req).unwrap(),
        "[1, 'a', None, True, 1e-05, {'k': \"it's\"}]|[1, None]|1-True-x|True|True|<s>|<override>|False|True|{\n  \"a\": [\n    1.5,\n    \"é\"\n  ],\n  \"b\": 1\n}|{\"b\":1}|['a b', 'c']|y=z"
    );
}

#[test]
fn whitespace_modifiers_and_the_trailing_newline_follow_jinja2() {
    // Expected texts printed by transformers 5.24.0's `render_jinja_template` (Jinja2 3.1.6).
    for (src, want) in [
        (
            "a\n  {%+ if true %}x{% endif +%}\n  {%- if true -%} y {%- endif %}\n{{ 'z' }}\n",
            "a\n  xyz",
        ),
        ("{{ 'z' }}\n\n", "z\n"),
    ] {
        let t = ChatTemplate::new(src, "", "").unwrap();
        assert_eq!(t.render(&[], false).unwrap(), want, "{src:?}");
    }
}
