//! SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`) of `fixtures/arch/` against llama.cpp's tokenize, detokenize and token pieces, and the encode→decode round trip on arbitrary text.
//!
//! The reference `fixtures/arch/spm-llamacpp.json` is made by `scripts/capture-spm-tokens`
//! (llama.cpp through llama-cpp-python 0.3.36, vocabulary only).

use std::path::PathBuf;
use std::sync::OnceLock;

use engine::gguf::GgufFile;
use engine::tokenizer::{GgufVocab, Tokenizer};
use proptest::prelude::*;
use serde::Deserialize;

#[derive(Deserialize)]
struct Reference {
    files: Vec<FileRef>,
}

#[derive(Deserialize)]
struct FileRef {
    model: String,
    model_sha256: String,
    add_bos: bool,
    add_space_prefix_key: Option<bool>,
    bos: u32,
    eog_ids: Vec<u32>,
    texts: Vec<TextRef>,
}

#[derive(Deserialize)]
struct TextRef {
    text: String,
    ids: Vec<u32>,
    ids_without_special: Vec<u32>,
    decoded: String,
    decoded_without_bos: String,
    pieces: Vec<String>,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn reference() -> &'static Reference {
    static R: OnceLock<Reference> = OnceLock::new();
    R.get_or_init(|| {
        let p = root().join("fixtures/arch/spm-llamacpp.json");
        let text = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        serde_json::from_str(&text).expect("reference JSON parses")
    })
}

fn tokenizer(model: &str) -> Tokenizer {
    let p = root().join("fixtures/arch").join(model);
    let f = GgufFile::open(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    Tokenizer::from_vocab(&GgufVocab::from_metadata(f.metadata()).unwrap())
        .unwrap_or_else(|e| panic!("{model}: {e}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The four SentencePiece files (Mistral, Phi-3, Gemma 2, Gemma 3) encode every captured
/// text, multilingual, with runs of whitespace, with special and user-defined tokens, to
/// llama.cpp's ids (bos included as the file asks, and left out as llama.cpp's
/// `add_special = false` leaves it out); decode gives llama.cpp's
/// `llama_detokenize` text, with and without the bos; each token's bytes are llama.cpp's
/// piece; the end-of-generation ids are llama.cpp's. Both settings of `add_space_prefix`
/// are among the files.
#[test]
fn sentencepiece_files_tokenize_and_detokenize_as_llama_cpp() {
    let r = reference();
    let models: Vec<&str> = r.files.iter().map(|f| f.model.as_str()).collect();
    assert_eq!(
        models,
        ["gemma2.gguf", "gemma3.gguf", "mistral.gguf", "phi3.gguf"]
    );
    let prefixes: Vec<Option<bool>> = r.files.iter().map(|f| f.add_space_prefix_key).collect();
    assert!(prefixes.contains(&Some(false)) && prefixes.contains(&None));
    let mut failures = Vec::new();
    for f in &r.files {
        let sha = {
            use sha2::Digest;
            let bytes = std::fs::read(root().join("fixtures/arch").join(&f.model)).unwrap();
            format!("{:x}", sha2::Sha256::digest(bytes))
        };
        assert_eq!(sha, f.model_sha256, "{}: captured on another file", f.model);
        let tok = tokenizer(&f.model);
        assert_eq!(tok.bos(), Some(f.bos), "{}", f.model);
        let eog: Vec<u32> = (0..tok.vocab_size() as u32)
            .filter(|&id| tok.is_eog(id))
            .collect();
        assert_eq!(eog, f.eog_ids, "{}: end-of-generation ids", f.model);
        for t in &f.texts {
            let what = format!("{} {:?}", f.model, t.text);
            let ids = tok.encode(&t.text).unwrap();
            if ids != t.ids {
                failures.push(format!("{what}: ids {ids:?}\n  llama.cpp {:?}", t.ids));
                continue;
            }
            assert_eq!(f.add_bos, ids.first() == Some(&f.bos), "{what}");
            // `/tokenize` without `add_special` (llama.cpp's `add_special = false`).
            let plain = tok.encode_special(&t.text, false).unwrap();
            if plain != t.ids_without_special {
                failures.push(format!(
                    "{what}: ids without specials {plain:?}\n  llama.cpp {:?}",
                    t.ids_without_special
                ));
            }
            let decoded = tok.decode(&ids).unwrap();
            if decoded != t.decoded {
                failures.push(format!("{what}: decode {decoded:?} vs {:?}", t.decoded));
            }
            let without_bos = if f.add_bos { &ids[1..] } else { &ids[..] };
            let decoded = tok.decode(without_bos).unwrap();
            if decoded != t.decoded_without_bos {
                failures.push(format!(
                    "{what}: decode without bos {decoded:?} vs {:?}",
                    t.decoded_without_bos
                ));
            }
            let pieces: Vec<String> = ids
                .iter()
                .map(|&id| hex(&tok.token_bytes(id).unwrap()))
                .collect();
            if pieces != t.pieces {
                failures.push(format!("{what}: pieces {pieces:?} vs {:?}", t.pieces));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Streaming decode of the captured ids one at a time gives llama.cpp's pieces concatenated
/// (what its server streams, leading spaces kept), never a split character; the
/// constrained-decoding vocabulary holds each normal or byte token's piece and no special
/// token.
#[test]
fn sentencepiece_stream_decode_and_constraint_vocabulary_follow_the_pieces() {
    for f in &reference().files {
        let tok = tokenizer(&f.model);
        for t in &f.texts {
            let mut stream = tok.stream_decoder();
            let mut out = String::new();
            for &id in &t.ids {
                if let Some(s) = stream.push(id).unwrap() {
                    assert!(!s.contains('\u{FFFD}'), "{} {:?}: {s:?}", f.model, t.text);
                    out.push_str(&s);
                }
            }
            out.extend(stream.finish().unwrap());
            let bytes: Vec<u8> = t
                .pieces
                .iter()
                .flat_map(|p| {
                    (0..p.len())
                        .step_by(2)
                        .map(|i| u8::from_str_radix(&p[i..i + 2], 16).unwrap())
                })
                .collect();
            let expected = String::from_utf8(bytes).unwrap();
            assert_eq!(out, expected, "{} {:?}", f.model, t.text);
            assert_eq!(tok.decode_continuation(&t.ids).unwrap(), expected);
        }
        let vocab = tok.constraint_vocab();
        assert_eq!(vocab.len(), tok.vocab_size());
        // `<0x0A>` is the newline byte, `▁the` is " the"; `<s>`, `<unk>` never in a value.
        let newline = tok.encode("\n").unwrap();
        let newline = *newline.last().unwrap();
        assert_eq!(vocab.bytes(newline), b"\n", "{}", f.model);
        assert_eq!(tok.token_bytes(newline).unwrap(), b"\n");
        let the = tok.encode(" the").unwrap();
        let the = *the.last().unwrap();
        assert_eq!(vocab.bytes(the), b" the", "{}", f.model);
        assert_eq!(tok.token_to_piece(the).unwrap(), " the");
        assert_eq!(tok.token_to_piece(f.bos).unwrap(), "<s>");
        assert_eq!(vocab.bytes(f.bos), b"", "{}", f.model);
        assert_eq!(vocab.bytes(0), b"", "{}", f.model);
    }
}

/// Characters for the round trip: anything but `▁` (which encodes as a space) and `<`
/// (which could spell a special token, decoded back with llama.cpp's extra space after it).
fn text_strategy() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            4 => prop::char::range(' ', '~'),
            2 => prop::sample::select(vec![' ', '\t', '\n', '\r', '\u{3000}', '\u{a0}']),
            2 => any::<char>(),
            1 => prop::char::range('\u{4e00}', '\u{9fff}'),
            1 => prop::char::range('\u{1f300}', '\u{1faff}'),
        ]
        .prop_filter("not ▁ or <", |c| *c != '\u{2581}' && *c != '<'),
        0..40,
    )
    .prop_map(|cs| cs.into_iter().collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// decode(encode(text)) without the bos gives the text back, with and without the
    /// space prefix (Mistral's and Gemma 2's files); as a continuation the same text, with the
    /// prefix's space in front when the vocabulary adds one.
    #[test]
    fn sentencepiece_encode_decode_round_trips(text in text_strategy()) {
        for (model, prefix) in [("mistral.gguf", true), ("gemma2.gguf", false)] {
            let tok = tokens(model);
            let ids = tok.encode(&text).unwrap();
            prop_assert_eq!(ids.first().copied(), tok.bos());
            prop_assert_eq!(&tok.decode(&ids[1..]).unwrap(), &text);
            let continued = tok.decode_continuation(&ids[1..]).unwrap();
            // An empty text is no fragment: nothing to prefix.
            let expected = if prefix && !text.is_empty() { format!(" {text}") } else { text.clone() };
            prop_assert_eq!(continued, expected);
        }
    }
}

/// One tokenizer per file for the whole run (building one reads 32k tokens).
fn tokens(model: &str) -> &'static Tokenizer {
    static MISTRAL: OnceLock<Tokenizer> = OnceLock::new();
    static GEMMA2: OnceLock<Tokenizer> = OnceLock::new();
    let cell = if model == "mistral.gguf" {
        &MISTRAL
    } else {
        &GEMMA2
    };
    cell.get_or_init(|| tokenizer(model))
}
