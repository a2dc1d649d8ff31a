//! The tokenizer built from the SmolLM2 GGUF alone reproduces llama.cpp's token ids, round-trips text and streams whole characters.

use std::path::PathBuf;
use std::sync::OnceLock;

use engine::gguf::GgufFile;
use engine::tokenizer::{GgufVocab, Tokenizer, TokenizerError};
use proptest::prelude::*;

use crate::common;
use common::model_path;

fn vocab() -> &'static GgufVocab {
    static V: OnceLock<GgufVocab> = OnceLock::new();
    V.get_or_init(|| {
        let f = GgufFile::open(model_path()).expect("the real model must parse");
        GgufVocab::from_metadata(f.metadata()).expect("tokenizer metadata must read")
    })
}

fn tok() -> &'static Tokenizer {
    static T: OnceLock<Tokenizer> = OnceLock::new();
    T.get_or_init(|| Tokenizer::from_vocab(vocab()).expect("tokenizer must build from the GGUF"))
}

struct Case {
    text: String,
    ids: Vec<u32>,
}

fn ids_of(v: &serde_json::Value) -> Vec<u32> {
    v.as_array()
        .expect("ids array")
        .iter()
        .map(|x| u32::try_from(x.as_u64().expect("id")).expect("u32 id"))
        .collect()
}

/// The reference cases: every `tokenize` entry (text, ids) and every `generate` entry
/// (prompt, prompt_ids), as llama.cpp produced them.
fn reference() -> (Vec<Case>, Vec<Case>, Vec<Vec<u32>>) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../fixtures/reference/smollm2-llamacpp.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    let json: serde_json::Value = serde_json::from_str(&text).expect("reference JSON");
    let tokenize = json["tokenize"]
        .as_array()
        .expect("tokenize array")
        .iter()
        .map(|e| Case {
            text: e["text"].as_str().expect("text").to_string(),
            ids: ids_of(&e["ids"]),
        })
        .collect();
    let generate = json["generate"].as_array().expect("generate array");
    let prompts = generate
        .iter()
        .map(|e| Case {
            text: e["prompt"].as_str().expect("prompt").to_string(),
            ids: ids_of(&e["prompt_ids"]),
        })
        .collect();
    let greedy = generate.iter().map(|e| ids_of(&e["greedy_ids"])).collect();
    (tokenize, prompts, greedy)
}

#[test]
fn gguf_vocab_reads_smollm2_tokenizer_metadata() {
    let v = vocab();
    assert_eq!(v.model, "gpt2");
    assert_eq!(v.pre.as_deref(), Some("smollm"));
    assert_eq!(v.tokens.len(), 49152);
    assert_eq!(v.token_types.len(), 49152);
    assert_eq!(v.merges.len(), 48900);
    assert_eq!(v.merges[0], "Ġ t");
    assert_eq!(
        (v.bos, v.eos, v.unk, v.pad),
        (Some(1), Some(2), Some(0), Some(2))
    );
    assert!(!v.add_bos);
    assert!(!v.add_eos);
    assert_eq!(
        &v.tokens[..3],
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    );
    // 17 control tokens (ids 0..=16), the rest normal.
    assert_eq!(v.token_types.iter().filter(|&&t| t == 3).count(), 17);
    assert!(v.token_types[..17].iter().all(|&t| t == 3));
    assert!(
        v.chat_template
            .as_deref()
            .is_some_and(|t| t.contains("<|im_start|>"))
    );
}

#[test]
fn tokenize_matches_llamacpp_reference_ids_for_every_string() {
    let (cases, _, _) = reference();
    assert_eq!(cases.len(), 12, "the reference holds 12 tokenize strings");
    let failures: Vec<String> = cases
        .iter()
        .filter_map(|c| {
            let got = tok().encode(&c.text).expect("encode");
            (got != c.ids).then(|| format!("{:?}: got {got:?}, want {:?}", c.text, c.ids))
        })
        .collect();
    assert!(failures.is_empty(), "mismatches:\n{}", failures.join("\n"));
}

#[test]
fn tokenize_matches_llamacpp_reference_ids_for_every_generate_prompt() {
    let (_, prompts, _) = reference();
    assert!(!prompts.is_empty());
    for c in &prompts {
        assert_eq!(
            tok().encode(&c.text).expect("encode"),
            c.ids,
            "{:?}",
            c.text
        );
    }
}

#[test]
fn special_tokens_bos_eos_and_end_of_generation() {
    let t = tok();
    assert_eq!(t.vocab_size(), 49152);
    assert_eq!((t.bos(), t.eos()), (Some(1), Some(2)));
    // `<|im_end|>` (eos) and `<|endoftext|>` end generation; `<|im_start|>` and text do not.
    assert!(t.is_eog(2));
    assert!(t.is_eog(0));
    assert!(!t.is_eog(1));
    assert!(!t.is_eog(504));
    assert!(!t.is_eog(49151));
    // add_bos_token is false: nothing is prepended.
    assert_eq!(t.encode("Hello, world!").unwrap()[0], 19556);
    assert_eq!(t.encode("").unwrap(), Vec::<u32>::new());
    assert_eq!(t.token_to_piece(1).unwrap(), "<|im_start|>");
    assert_eq!(t.token_to_piece(216).unwrap(), " ");
    assert_eq!(t.token_to_piece(198).unwrap(), "\n");
}

#[test]
fn decode_round_trips_reference_strings_and_greedy_ids() {
    let (cases, prompts, greedy) = reference();
    for c in cases.iter().chain(&prompts) {
        assert_eq!(tok().decode(&c.ids).unwrap(), c.text);
    }
    // The reference continuations re-encode to themselves once decoded (no special tokens
    // inside them except a final eos).
    for ids in greedy {
        let text = tok().decode(&ids).unwrap();
        assert_eq!(tok().encode(&text).unwrap(), ids, "{text:?}");
    }
}

#[test]
fn decode_rejects_an_id_outside_the_vocabulary() {
    let err = tok().decode(&[19556, 49152]).unwrap_err();
    assert!(matches!(
        err,
        TokenizerError::IdOutOfRange {
            id: 49152,
            vocab_size: 49152
        }
    ));
    let msg = err.to_string();
    assert!(msg.contains("49152") && msg.contains("vocabulary"), "{msg}");
    let err = tok().token_to_piece(u32::MAX).unwrap_err();
    assert!(err.to_string().contains(&u32::MAX.to_string()), "{err}");
    let mut s = tok().stream_decoder();
    let err = s.push(70000).unwrap_err();
    assert!(err.to_string().contains("70000"), "{err}");
}

/// GPT-2's byte ↔ unicode alphabet, written out independently: printable Latin-1 bytes stand
/// for themselves; the other 68 bytes, in order, become U+0100, U+0101, ...
fn byte_of_char() -> std::collections::HashMap<char, u8> {
    let keeps = |b: u8| (b'!'..=b'~').contains(&b) || (0xA1..=0xAC).contains(&b) || b >= 0xAE;
    let mut map = std::collections::HashMap::new();
    let mut next = 0u32;
    for b in 0..=255u8 {
        let c = if keeps(b) {
            char::from(b)
        } else {
            let c = char::from_u32(256 + next).unwrap();
            next += 1;
            c
        };
        map.insert(c, b);
    }
    map
}

/// The raw bytes of each token, from the vocabulary strings (reference, not engine code).
fn token_bytes(id: u32) -> Vec<u8> {
    static MAP: OnceLock<std::collections::HashMap<char, u8>> = OnceLock::new();
    let map = MAP.get_or_init(byte_of_char);
    let text = &vocab().tokens[id as usize];
    if vocab().token_types[id as usize] == 3 {
        return text.as_bytes().to_vec();
    }
    text.chars().map(|c| map[&c]).collect()
}

/// Streams `ids` and checks after every push that exactly the complete-UTF-8 prefix is out:
/// when the bytes so far end on a character boundary everything is emitted, otherwise what was
/// emitted before stays unchanged.
fn check_stream(ids: &[u32]) -> Result<(), TestCaseError> {
    let mut dec = tok().stream_decoder();
    let mut emitted = String::new();
    let mut bytes = Vec::new();
    for &id in ids {
        bytes.extend(token_bytes(id));
        if let Some(piece) = dec
            .push(id)
            .map_err(|e| TestCaseError::fail(e.to_string()))?
        {
            emitted.push_str(&piece);
        }
        match std::str::from_utf8(&bytes) {
            Ok(all) => prop_assert_eq!(&emitted, all),
            Err(e) => {
                prop_assert!(e.error_len().is_none(), "input text is valid UTF-8");
                prop_assert!(bytes[..e.valid_up_to()].starts_with(emitted.as_bytes()));
            }
        }
    }
    if let Some(rest) = dec
        .finish()
        .map_err(|e| TestCaseError::fail(e.to_string()))?
    {
        emitted.push_str(&rest);
    }
    prop_assert_eq!(emitted.as_bytes(), &bytes[..]);
    Ok(())
}

#[test]
fn stream_decoder_holds_partial_characters_of_reference_ids() {
    let (cases, prompts, greedy) = reference();
    for ids in cases
        .iter()
        .chain(&prompts)
        .map(|c| c.ids.clone())
        .chain(greedy)
    {
        check_stream(&ids).unwrap();
    }
    // "🦀" is split over byte tokens: nothing comes out until its last byte arrives.
    let ids = tok().encode("🦀").unwrap();
    assert!(ids.len() > 1, "{ids:?}");
    let mut dec = tok().stream_decoder();
    for &id in &ids[..ids.len() - 1] {
        assert_eq!(dec.push(id).unwrap(), None);
    }
    assert_eq!(dec.push(ids[ids.len() - 1]).unwrap().as_deref(), Some("🦀"));
    assert_eq!(dec.finish().unwrap(), None);
}

/// A stream that stops inside a character (a reply cut by `max_tokens` mid-emoji) ends
/// without it: no U+FFFD the model did not produce reaches the text or a streamed piece.
#[test]
fn stream_decoder_finish_drops_an_unfinished_character() {
    let ids = tok().encode("🦀").unwrap();
    assert!(ids.len() > 1, "{ids:?}");
    // Cut the stream before the character's last byte token.
    let cut = &ids[..ids.len() - 1];
    let partial: Vec<u8> = cut.iter().flat_map(|&id| token_bytes(id)).collect();
    assert!(std::str::from_utf8(&partial).is_err());
    let mut dec = tok().stream_decoder();
    for &id in cut {
        assert_eq!(dec.push(id).unwrap(), None);
    }
    assert_eq!(dec.finish().unwrap(), None);
    // Text released before the cut stays; only the unfinished character goes.
    let mut ids = tok().encode("Hi 🦀").unwrap();
    ids.pop();
    let mut dec = tok().stream_decoder();
    let mut text = String::new();
    for &id in &ids {
        text.push_str(&dec.push(id).unwrap().unwrap_or_default());
    }
    text.push_str(&dec.finish().unwrap().unwrap_or_default());
    assert_eq!(text, "Hi ");
    // finish resets: the decoder starts afresh.
    assert_eq!(dec.push(19556).unwrap().as_deref(), Some("Hello"));
}

fn special_text() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "<|im_start|>",
        "<|im_end|>",
        "<|endoftext|>",
        "\n",
        " ",
        "  ",
        "123",
        "don't",
    ])
    .prop_map(str::to_string)
}

fn mixed_text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            3 => any::<String>(),
            1 => special_text(),
            2 => "[a-zA-Z0-9 '\\n\\t.,é日🦀]{0,12}",
        ],
        0..6,
    )
    // A literal U+FFFD in the text is indistinguishable from an unfinished character to a
    // streaming decoder, so the stream property is stated for text without it.
    .prop_map(|parts| parts.concat().replace('\u{FFFD}', "?"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Byte-level BPE is lossless: any text decodes back to itself, and special-token text
    /// becomes the special ids.
    #[test]
    fn decode_of_encode_is_identity(text in mixed_text()) {
        let ids = tok().encode(&text).unwrap();
        prop_assert_eq!(tok().decode(&ids).unwrap(), text.clone());
        let specials = text.matches("<|im_start|>").count();
        prop_assert_eq!(ids.iter().filter(|&&i| i == 1).count(), specials);
    }

    #[test]
    fn stream_decoder_emits_exactly_the_complete_prefix(text in mixed_text()) {
        let ids = tok().encode(&text).unwrap();
        check_stream(&ids)?;
    }
}

/// The bytes of the tokens of a text, concatenated, are the text's bytes, also where a
/// token holds part of a character (Japanese, emoji); special tokens give their text.
#[test]
fn token_bytes_concatenate_to_the_encoded_text() {
    let t = tok();
    for text in [
        "Hello, world!",
        "  leading and trailing spaces  \n\n\ttab",
        "émigré naïve façade — “quotes” ‘single’",
        "日本語のテキスト 🦀🎉",
        "<|im_start|>user\nhi<|im_end|>",
    ] {
        let ids = t.encode(text).unwrap();
        let bytes: Vec<u8> = ids
            .iter()
            .flat_map(|&id| t.token_bytes(id).unwrap())
            .collect();
        assert_eq!(String::from_utf8(bytes).unwrap(), text, "{ids:?}");
    }
    // A space-prefixed word is one token whose first byte is the space (`Ġ` in the vocab).
    let ids = t.encode(" world").unwrap();
    assert_eq!(ids.len(), 1);
    assert_eq!(t.token_bytes(ids[0]).unwrap(), b" world");
    assert!(matches!(
        t.token_bytes(u32::MAX),
        Err(TokenizerError::IdOutOfRange { .. })
    ));
}
