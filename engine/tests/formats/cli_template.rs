//! `genai template render` prints exactly the prompt transformers renders (expected files of fixtures/chat-templates/), and nothing else on stdout.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::common;
use common::model_path;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn corpus(rel: &str) -> PathBuf {
    root().join("fixtures/chat-templates").join(rel)
}

/// Writes the `messages` (and `tools`) of a corpus conversation to files of their own, as a
/// user would pass them, keeping the JSON text of each as written.
fn split_conversation(dir: &Path, case: &str) -> (PathBuf, Option<PathBuf>) {
    let text = std::fs::read_to_string(corpus(&format!("conversations/{case}.json"))).unwrap();
    let conv: minijinja::Value = serde_json::from_str(&text).unwrap();
    let write = |name: &str| -> Option<PathBuf> {
        let v = conv.get_attr(name).ok().filter(|v| !v.is_undefined())?;
        let p = dir.join(format!("{case}.{name}.json"));
        std::fs::write(&p, serde_json::to_string(&v).unwrap()).unwrap();
        Some(p)
    };
    (write("messages").unwrap(), write("tools"))
}

fn genai(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_genai"))
        .args(args)
        .output()
        .expect("genai runs")
}

fn expected(template: &str, case: &str) -> Vec<u8> {
    std::fs::read(corpus(&format!("expected/{template}/{case}.txt"))).unwrap()
}

#[test]
fn renders_the_models_own_template_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let (messages, _) = split_conversation(dir.path(), "non-ascii-whitespace");
    let model = model_path();
    let out = genai(&[
        "template",
        "render",
        "--model",
        model.to_str().unwrap(),
        "--messages",
        messages.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.stdout,
        expected(
            "HuggingFaceTB-SmolLM2-135M-Instruct",
            "non-ascii-whitespace"
        )
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn template_file_tools_kwargs_date_and_no_generation_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let model = model_path();
    let qwen3 = corpus("templates/Qwen-Qwen3-0.6B.jinja");
    let (messages, tools) = split_conversation(dir.path(), "tools-available");
    let out = genai(&[
        "template",
        "render",
        "-m",
        model.to_str().unwrap(),
        "--template",
        qwen3.to_str().unwrap(),
        "--messages",
        messages.to_str().unwrap(),
        "--tools",
        tools.unwrap().to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, expected("Qwen-Qwen3-0.6B", "tools-available"));

    let (messages, _) = split_conversation(dir.path(), "thinking-disabled");
    let out = genai(&[
        "template",
        "render",
        "--template",
        qwen3.to_str().unwrap(),
        "--messages",
        messages.to_str().unwrap(),
        "--kwargs",
        r#"{"enable_thinking": false}"#,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, expected("Qwen-Qwen3-0.6B", "thinking-disabled"));

    // Granite 3.3 writes today's date with strftime_now; --date fixes it as the capture did.
    let granite = corpus("templates/ibm-granite-granite-3.3-2B-Instruct.jinja");
    let (messages, _) = split_conversation(dir.path(), "multi-turn-no-prompt");
    let out = genai(&[
        "template",
        "render",
        "--template",
        granite.to_str().unwrap(),
        "--messages",
        messages.to_str().unwrap(),
        "--date",
        "2026-01-15",
        "--no-generation-prompt",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        out.stdout,
        expected(
            "ibm-granite-granite-3.3-2B-Instruct",
            "multi-turn-no-prompt"
        )
    );
}

#[test]
fn a_template_error_is_printed_once_naming_the_line_and_nothing_goes_to_stdout() {
    let dir = tempfile::tempdir().unwrap();
    let (messages, _) = split_conversation(dir.path(), "single-user");
    let bad = dir.path().join("bad.jinja");
    std::fs::write(
        &bad,
        "{% for m in messages %}\n{{ m.content | no_such_filter }}\n{% endfor %}",
    )
    .unwrap();
    let out = genai(&[
        "template",
        "render",
        "--template",
        bad.to_str().unwrap(),
        "--messages",
        messages.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    assert!(out.stdout.is_empty());
    let err = String::from_utf8(out.stderr).unwrap();
    assert_eq!(err.matches("no_such_filter").count(), 1, "{err}");
    assert!(err.contains("tokenizer.chat_template:2"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bad_inputs_are_refused_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    let (messages, _) = split_conversation(dir.path(), "single-user");
    let not_a_list = dir.path().join("object.json");
    std::fs::write(&not_a_list, r#"{"role": "user", "content": "hi"}"#).unwrap();
    for (args, needle) in [
        (
            vec!["--messages", not_a_list.to_str().unwrap()],
            "messages must be a JSON array of objects",
        ),
        (
            vec!["--messages", messages.to_str().unwrap(), "--kwargs", "[1]"],
            "--kwargs: expected a JSON object",
        ),
        (
            vec![
                "--messages",
                messages.to_str().unwrap(),
                "--date",
                "2026-02-30",
            ],
            "invalid date '2026-02-30'",
        ),
    ] {
        let mut all = vec!["template", "render"];
        all.extend(args);
        let out = genai(&all);
        assert!(!out.status.success());
        assert!(out.stdout.is_empty());
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(err.contains(needle), "{needle:?} not in {err}");
    }
}
