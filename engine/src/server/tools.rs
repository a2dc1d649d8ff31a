//! A chat request's tools at the server: the prompt its template renders (with SmolLM2's taught syntax written in), the grammar of a forced call, and the parsed calls in OpenAI's shapes.

use std::sync::Arc;

use serde_json::{Value, json};

use super::openai::{Common, ToolChoice, ToolRequest, Turn, Unsupported};
use crate::chat::tools::{
    Parsed, ToolFormat, ToolGrammarError, arguments_as_objects, teach_smollm2,
};
use crate::chat::{self, ChatTemplate};

/// How to read a reply for tool calls: the model's syntax, and whether several calls are
/// allowed (`parallel_tool_calls`; without, only the first call is kept).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ToolParse {
    pub(super) format: ToolFormat,
    pub(super) parallel: bool,
}

impl ToolParse {
    /// The calls of `text` ([`ToolFormat::parse`]), the first only without parallel calls.
    pub(super) fn parse(self, text: &str) -> Option<Parsed> {
        let mut p = self.format.parse(text)?;
        if !self.parallel {
            p.calls.truncate(1);
        }
        Some(p)
    }
}

/// The formats parsed, for error messages.
const FORMATS: &str = "hermes (<tool_call>), llama3-json, mistral-json ([TOOL_CALLS][...]), \
                       mistral-args ([TOOL_CALLS]f[ARGS]), smollm2";

/// The prompt of a chat request, and the tool-call syntax to parse out of its reply
/// (`None` when the model is not asked to call: no tools, or `tool_choice: "none"`).
/// With `tool_choice` `"required"` or a named function, `common.constraint` becomes the
/// grammar of the call(s) in that syntax, so the reply is always one. Tool-call arguments
/// in the turns reach the template as objects ([`arguments_as_objects`]).
///
/// # Errors
/// [`Unsupported`] on `tool_choice` when the template teaches a syntax not parsed here; on
/// `tools[i].function.parameters` for a forced function whose schema is outside the
/// enforced subset (never run unconstrained); on `response_format` beside a forced call;
/// on `messages` when the template refuses the conversation.
pub(super) fn chat_prompt(
    template: &ChatTemplate,
    turns: &[Turn],
    tools: &ToolRequest,
    common: &mut Common,
) -> Result<(String, Option<ToolParse>), Unsupported> {
    let refuse = |field: String, message: String| Unsupported { field, message };
    let asked = tools.choice != ToolChoice::None;
    let format = template.tool_format();
    let format = match (asked, format) {
        (false, _) => None,
        (true, Some(f)) => Some(f),
        (true, None) => {
            return Err(refuse(
                "tool_choice".into(),
                format!(
                    "this model's chat template teaches a tool-call syntax the server does not \
                     parse (it parses {FORMATS}); send tool_choice: \"none\""
                ),
            ));
        }
    };
    if let (Some(f), Some(forced)) = (format, tools.forced()) {
        if common.constraint.is_some() {
            return Err(refuse(
                "response_format".into(),
                "a JSON response_format cannot be combined with a forced tool call \
                 (tool_choice \"required\" or a named function)"
                    .into(),
            ));
        }
        let grammar = f.grammar(&forced, tools.parallel).map_err(|e| {
            let field = match &e {
                ToolGrammarError::Schema { name, .. } => {
                    let i = tools
                        .functions
                        .iter()
                        .position(|g| &g.name == name)
                        .unwrap_or(0);
                    format!("tools[{i}].function.parameters")
                }
                ToolGrammarError::Build(_) => "tools".into(),
            };
            refuse(field, e.to_string())
        })?;
        common.constraint = Some(Arc::new(grammar));
    }
    let mut messages: Vec<Value> = turns
        .iter()
        .map(|t| serde_json::to_value(t).expect("a turn serializes"))
        .collect();
    arguments_as_objects(&mut messages);
    if template.tool_format() == Some(ToolFormat::SmolLM2) {
        let offered = tools.tools.as_deref().filter(|_| asked);
        teach_smollm2(&mut messages, offered);
    }
    let request = chat::ChatRequest {
        messages: minijinja::Value::from_serialize(&messages),
        tools: tools.tools.as_ref().map(minijinja::Value::from_serialize),
        ..chat::ChatRequest::new(&[], true)
    };
    let text = template
        .render_request(&request)
        .map_err(|e| refuse("messages".into(), e.to_string()))?;
    let parse = format.map(|format| ToolParse {
        format,
        parallel: tools.parallel,
    });
    Ok((text, parse))
}

/// The id of call `index` of response `response_id`: 9 letters and digits (what Mistral's
/// templates require of an id sent back), distinct per response and call.
pub(super) fn call_id(response_id: &str, index: usize) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    // FNV-1a over the response id, then splitmix64 with the index.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in response_id.bytes() {
        h = (h ^ b as u64).wrapping_mul(0x100_0000_01b3);
    }
    let mut z = h.wrapping_add((index as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^= z >> 31;
    (0..9)
        .map(|_| {
            let c = ALPHABET[(z % ALPHABET.len() as u64) as usize] as char;
            z /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// `message.tool_calls` of a reply (OpenAI's shape).
pub(super) fn message_calls(parsed: &Parsed, response_id: &str) -> Value {
    parsed
        .calls
        .iter()
        .enumerate()
        .map(|(i, c)| {
            json!({"id": call_id(response_id, i), "type": "function",
                   "function": {"name": c.name, "arguments": c.arguments}})
        })
        .collect()
}

/// The streamed deltas of the calls (OpenAI's streaming shape, which clients accumulate
/// by `index`): per call, one delta with its `id`, `type` and `name` (empty `arguments`),
/// then one with its `arguments`.
pub(super) fn call_deltas(parsed: &Parsed, response_id: &str) -> Vec<Value> {
    let mut out = Vec::with_capacity(2 * parsed.calls.len());
    for (i, c) in parsed.calls.iter().enumerate() {
        out.push(
            json!({"tool_calls": [{"index": i, "id": call_id(response_id, i),
            "type": "function", "function": {"name": c.name, "arguments": ""}}]}),
        );
        out.push(json!({"tool_calls": [{"index": i, "function": {"arguments": c.arguments}}]}));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without `parallel_tool_calls` a reply's first call only is kept.
    #[test]
    fn without_parallel_calls_only_the_first_is_kept() {
        let text = "<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n\
                    <tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": 1}}\n</tool_call>";
        let names = |parallel| -> Vec<String> {
            ToolParse {
                format: ToolFormat::Hermes,
                parallel,
            }
            .parse(text)
            .unwrap()
            .calls
            .into_iter()
            .map(|c| c.name)
            .collect()
        };
        assert_eq!(names(true), ["a", "b"]);
        assert_eq!(names(false), ["a"]);
    }

    #[test]
    fn call_ids_are_nine_alphanumerics_and_distinct() {
        let ids: Vec<String> = (0..50)
            .flat_map(|i| [call_id("chatcmpl-1", i), call_id("chatcmpl-2", i)])
            .collect();
        assert!(
            ids.iter()
                .all(|id| id.len() == 9 && id.bytes().all(|b| b.is_ascii_alphanumeric()))
        );
        let mut unique = ids.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), ids.len());
    }
}
