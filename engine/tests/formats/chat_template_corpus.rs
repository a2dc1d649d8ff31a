//! Real model chat templates rendered byte for byte as transformers renders them (the corpus of fixtures/chat-templates/).
//!
//! `scripts/render-chat-templates` renders every template of `fixtures/chat-templates/templates/`
//! with every conversation of `conversations/` through transformers' own renderer (Jinja2) and
//! writes `expected/<template>/<conversation>.txt`, or `.error` when transformers raises. Here
//! the engine's renderer must produce the same bytes, or fail too (with the same message when
//! the template called `raise_exception`). The date `strftime_now` reports is the manifest's on
//! both sides.

use std::path::{Path, PathBuf};

use engine::chat::{ChatDate, ChatError, ChatRequest, ChatTemplate, SpecialTokens};
use minijinja::Value;
use sha2::{Digest, Sha256};

use crate::common;

/// Renderings transformers produces but this renderer refuses, naming the construct and its
/// line: Jinja2 HTML-escapes the plain operand of `+` when the other is `|safe` markup, which
/// minijinja's `+` cannot reproduce.
const UNSUPPORTED: [(&str, &str); 2] = [
    (
        "meetkai-functionary-medium-v3.1/tools-available",
        "unsupported construct: `+` on a string marked `|safe` (at tokenizer.chat_template:22)",
    ),
    (
        "mistralai-Ministral-3-14B-Reasoning-2512/tools-call-and-result",
        "unsupported construct: `+` on a string marked `|safe` (at tokenizer.chat_template:112)",
    ),
];

fn corpus() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fixtures/chat-templates")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A conversation file as a request: `messages`, `tools`, `documents`, `kwargs`,
/// `add_generation_prompt`, keys kept in their order.
fn request(conv: &Value, date: ChatDate) -> ChatRequest {
    let field = |name: &str| {
        conv.get_attr(name)
            .ok()
            .filter(|v| !v.is_undefined() && !v.is_none())
    };
    let mut req = ChatRequest {
        messages: field("messages").expect("a conversation has messages"),
        tools: field("tools"),
        documents: field("documents"),
        add_generation_prompt: field("add_generation_prompt").is_some_and(|v| v.is_true()),
        kwargs: Vec::new(),
        date: Some(date),
    };
    if let Some(k) = field("kwargs") {
        for key in k.try_iter().unwrap() {
            let v = k.get_item(&key).unwrap();
            req.kwargs.push((key.as_str().unwrap().to_string(), v));
        }
    }
    req
}

fn special_tokens(entry: &serde_json::Value) -> SpecialTokens {
    let t = |name: &str| entry["special_tokens"][name].as_str().map(str::to_string);
    SpecialTokens {
        bos_token: t("bos_token"),
        eos_token: t("eos_token"),
        unk_token: t("unk_token"),
        sep_token: t("sep_token"),
        pad_token: t("pad_token"),
        cls_token: t("cls_token"),
        mask_token: t("mask_token"),
    }
}

#[test]
fn every_corpus_template_renders_every_conversation_as_transformers_does() {
    let root = corpus();
    let manifest: serde_json::Value =
        serde_json::from_str(&read(&root.join("manifest.json"))).unwrap();
    let date: ChatDate = manifest["date"].as_str().unwrap().parse().unwrap();
    let mut conversations: Vec<(String, Value)> = std::fs::read_dir(root.join("conversations"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            let v: Value = serde_json::from_str(&read(&p)).unwrap();
            (name, v)
        })
        .collect();
    conversations.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(conversations.len() >= 8, "the conversation set is missing");

    let entries = manifest["templates"].as_array().unwrap();
    assert!(
        entries.len() >= 25,
        "the corpus holds {} templates",
        entries.len()
    );
    let (mut failures, mut compared, mut raised, mut refused) = (Vec::new(), 0, 0, 0);
    for entry in entries {
        let file = entry["file"].as_str().unwrap();
        let bytes = std::fs::read(root.join("templates").join(file)).unwrap();
        assert_eq!(
            format!("{:x}", Sha256::digest(&bytes)),
            entry["sha256"].as_str().unwrap(),
            "{file} is not the stored original"
        );
        let source = String::from_utf8(bytes).unwrap();
        let stem = file.strip_suffix(".jinja").unwrap();
        let template = match ChatTemplate::with_special_tokens(&source, special_tokens(entry)) {
            Ok(t) => t,
            Err(e) => {
                failures.push(format!("{stem}: does not compile: {e}"));
                continue;
            }
        };
        for (case, conv) in &conversations {
            let expected_dir = root.join("expected").join(stem);
            let txt = expected_dir.join(format!("{case}.txt"));
            let err = expected_dir.join(format!("{case}.error"));
            let ours = template.render_request(&request(conv, date));
            let at = format!("{stem}/{case}");
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(c, _)| *c == at) {
                assert!(txt.exists(), "{at}: transformers renders it");
                match ours {
                    Err(e) if e.to_string().contains(why) => refused += 1,
                    other => {
                        failures.push(format!("{at}: must be refused with {why:?}, got {other:?}"))
                    }
                }
            } else if txt.exists() {
                compared += 1;
                let want = read(&txt);
                match ours {
                    Ok(got) if got == want => {}
                    Ok(got) => failures.push(format!(
                        "{at}: differs\n--- transformers\n{want:?}\n--- engine\n{got:?}"
                    )),
                    Err(e) => failures.push(format!("{at}: engine failed: {e}")),
                }
            } else if err.exists() {
                raised += 1;
                let recorded = read(&err);
                let recorded = recorded.strip_suffix('\n').unwrap_or(&recorded);
                let (kind, message) = recorded.split_once(": ").unwrap_or((recorded, ""));
                match ours {
                    Ok(got) => failures.push(format!(
                        "{at}: transformers raised {recorded:?}, the engine rendered {got:?}"
                    )),
                    Err(ChatError::Raised { message: m, .. }) if kind == "raise_exception" => {
                        if m != message {
                            failures.push(format!(
                                "{at}: raise_exception message {m:?}, transformers {message:?}"
                            ));
                        }
                    }
                    Err(e) if kind == "raise_exception" => failures.push(format!(
                        "{at}: transformers: raise_exception({message:?}); engine: {e}"
                    )),
                    Err(_) => {}
                }
            } else {
                failures.push(format!(
                    "{at}: no expected file: run scripts/render-chat-templates"
                ));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} renderings disagree with transformers:\n{}",
        failures.len(),
        compared + raised,
        failures.join("\n")
    );
    assert!(compared >= 200, "only {compared} rendered prompts compared");
    assert_eq!(refused, UNSUPPORTED.len());
}

#[test]
fn the_stored_smollm2_template_is_the_fetched_models() {
    let model = common::model_path();
    let f = engine::gguf::GgufFile::open(&model).unwrap();
    let stored = read(&corpus().join("templates/HuggingFaceTB-SmolLM2-135M-Instruct.jinja"));
    assert_eq!(
        f.metadata().get_str("tokenizer.chat_template").unwrap(),
        stored
    );
}
