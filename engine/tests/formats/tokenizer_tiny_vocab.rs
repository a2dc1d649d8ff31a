//! Hand-built vocabularies: ids derived by hand, the pre-tokenizer families, and bad metadata refused with errors naming the key and value at fault.

use engine::gguf::{MetaArray, MetaValue, Metadata};
use engine::tokenizer::{GgufVocab, Tokenizer, TokenizerError};

/// A tiny, consistent byte-level BPE vocabulary:
/// 0 `<|end|>` (control), 1 `a`, 2 `b`, 3 `ab`, 4 `Ġ` (space), 5 `Ġa`; merges `a b`, `Ġ a`.
fn tiny() -> Metadata {
    tiny_without(&[])
}

/// [`tiny`] without the listed keys.
fn tiny_without(skip: &[&str]) -> Metadata {
    let entries = [
        (
            "tokenizer.ggml.model",
            MetaValue::String("gpt2".to_string()),
        ),
        (
            "tokenizer.ggml.pre",
            MetaValue::String("smollm".to_string()),
        ),
        (
            "tokenizer.ggml.tokens",
            strings(&["<|end|>", "a", "b", "ab", "Ġ", "Ġa"]),
        ),
        (
            "tokenizer.ggml.token_type",
            MetaValue::Array(MetaArray::I32(vec![3, 1, 1, 1, 1, 1])),
        ),
        ("tokenizer.ggml.merges", strings(&["a b", "Ġ a"])),
        ("tokenizer.ggml.eos_token_id", MetaValue::U32(0)),
    ];
    let mut md = Metadata::new();
    for (key, value) in entries {
        if !skip.contains(&key) {
            md.insert(key, value);
        }
    }
    md
}

fn strings(s: &[&str]) -> MetaValue {
    MetaValue::Array(MetaArray::String(s.iter().map(|x| x.to_string()).collect()))
}

fn build(md: &Metadata) -> Result<Tokenizer, TokenizerError> {
    Tokenizer::from_vocab(&GgufVocab::from_metadata(md)?)
}

fn build_err(md: &Metadata) -> (TokenizerError, String) {
    let err = build(md).expect_err("bad metadata must be refused");
    let msg = err.to_string();
    (err, msg)
}

#[test]
fn tiny_vocabulary_builds_and_encodes_by_hand_derived_ids() {
    let t = build(&tiny()).unwrap();
    // "ab" merges to 3; " a" is "Ġa" (5); the control text is one token.
    assert_eq!(t.encode("ab a<|end|>b").unwrap(), vec![3, 5, 0, 2]);
    assert_eq!(t.decode(&[3, 5, 0, 2]).unwrap(), "ab a<|end|>b");
    assert!(t.is_eog(0));
    assert_eq!(t.bos(), None);

    let mut md = tiny();
    md.insert("tokenizer.ggml.bos_token_id", MetaValue::U32(0));
    md.insert("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    assert_eq!(build(&md).unwrap().encode("ab").unwrap(), vec![0, 3]);
    md.insert("tokenizer.ggml.add_eos_token", MetaValue::Bool(true));
    assert_eq!(build(&md).unwrap().encode("ab").unwrap(), vec![0, 3, 0]);
}

/// Digits with merges between them: `1`, `2`, `12`, `Ġ`, `Ġ1`; merges `1 2`, `Ġ 1`.
fn digits(pre: &str) -> Tokenizer {
    let mut md = Metadata::new();
    md.insert(
        "tokenizer.ggml.model",
        MetaValue::String("gpt2".to_string()),
    );
    md.insert("tokenizer.ggml.pre", MetaValue::String(pre.to_string()));
    md.insert(
        "tokenizer.ggml.tokens",
        strings(&["1", "2", "12", "Ġ", "Ġ1"]),
    );
    md.insert("tokenizer.ggml.merges", strings(&["1 2", "Ġ 1"]));
    build(&md).unwrap()
}

#[test]
fn smollm_pre_tokenizer_splits_every_digit_before_bpe_and_gpt2_does_not() {
    // `smollm` (llama.cpp: `\p{N}` split first): every digit stands alone, so no merge can
    // join digits or attach the space to one.
    assert_eq!(digits("smollm").encode("12 1").unwrap(), vec![0, 1, 3, 0]);
    // `gpt-2`: " 1" and "12" are single pre-tokens and merge.
    assert_eq!(digits("gpt-2").encode("12 1").unwrap(), vec![2, 4]);
}

#[test]
fn unknown_tokenizer_model_names_the_model() {
    let mut md = tiny();
    md.insert("tokenizer.ggml.model", MetaValue::String("t5".to_string()));
    let (err, msg) = build_err(&md);
    assert!(matches!(err, TokenizerError::UnsupportedModel { ref model } if model == "t5"));
    assert!(
        msg.contains("`t5`") && msg.contains("tokenizer.ggml.model"),
        "{msg}"
    );
}

/// A tiny SentencePiece vocabulary (`tokenizer.ggml.model = "llama"`), ids by hand:
/// 0 `<unk>` (unknown), 1 `<s>` (control), 2 `</s>` (control), 3 `<0xC3>`, 4 `<0xA9>`
/// (bytes), 5 `▁`, 6 `a`, 7 `aa` (score -1), 8 `b`, 9 `c`, 10 `ab` (-3), 11 `bc` (-2),
/// 12 `▁a` (-4), 13 `<user>` (user-defined); single characters score -10. `é` is not a
/// token (byte fallback). add_bos and add_space_prefix false.
fn spm_tiny() -> Metadata {
    let tokens = [
        "<unk>",
        "<s>",
        "</s>",
        "<0xC3>",
        "<0xA9>",
        "\u{2581}",
        "a",
        "aa",
        "b",
        "c",
        "ab",
        "bc",
        "\u{2581}a",
        "<user>",
    ];
    let scores = [
        0.0, 0.0, 0.0, 0.0, 0.0, -10.0, -10.0, -1.0, -10.0, -10.0, -3.0, -2.0, -4.0, 0.0,
    ];
    let types = [2, 3, 3, 6, 6, 1, 1, 1, 1, 1, 1, 1, 1, 4];
    let mut md = Metadata::new();
    md.insert(
        "tokenizer.ggml.model",
        MetaValue::String("llama".to_string()),
    );
    md.insert("tokenizer.ggml.tokens", strings(&tokens));
    md.insert(
        "tokenizer.ggml.scores",
        MetaValue::Array(MetaArray::F32(scores.to_vec())),
    );
    md.insert(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(types.to_vec())),
    );
    md.insert("tokenizer.ggml.add_bos_token", MetaValue::Bool(false));
    md.insert("tokenizer.ggml.add_space_prefix", MetaValue::Bool(false));
    md
}

/// llama.cpp's merge order by hand: the highest-scoring pair first, the leftmost of equal
/// scores; characters outside the vocabulary as their UTF-8 bytes' tokens.
#[test]
fn sentencepiece_merges_by_score_leftmost_first_with_byte_fallback() {
    let t = build(&spm_tiny()).unwrap();
    // "aaa": both pairs are `aa` (-1): the left one merges, then `aa`+`a` is not a token.
    assert_eq!(t.encode("aaa").unwrap(), vec![7, 6]);
    // "abc": `bc` (-2) beats `ab` (-3).
    assert_eq!(t.encode("abc").unwrap(), vec![6, 11]);
    // "abab": `ab` twice; "aab": `aa` (-1) before `ab` (-3).
    assert_eq!(t.encode("abab").unwrap(), vec![10, 10]);
    assert_eq!(t.encode("aab").unwrap(), vec![7, 8]);
    // A space is `▁`; `▁a` (-4) is the only pair of " a".
    assert_eq!(t.encode("a a").unwrap(), vec![6, 12]);
    // `é` is not a token: its two bytes are.
    assert_eq!(t.encode("aé").unwrap(), vec![6, 3, 4]);
    assert_eq!(t.decode(&[6, 3, 4]).unwrap(), "aé");
    // Control and user-defined texts are cut out first.
    assert_eq!(t.encode("a<s>b<user>c").unwrap(), vec![6, 1, 8, 13, 9]);
    assert_eq!(t.decode(&[6, 1, 8, 13, 9]).unwrap(), "a<s>b<user>c");
    assert_eq!(t.token_bytes(5).unwrap(), b" ");
    assert_eq!(t.token_bytes(3).unwrap(), [0xC3]);

    // With add_space_prefix each text (and each text after a special token) starts with
    // `▁`, and decode drops the first token's space; add_bos prepends `<s>` (id 1).
    let mut md = spm_tiny();
    md.insert("tokenizer.ggml.add_space_prefix", MetaValue::Bool(true));
    md.insert("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    let t = build(&md).unwrap();
    // "▁aa": `aa` (-1) beats `▁a` (-4), and `▁aa` is not a token.
    assert_eq!(t.encode("aa").unwrap(), vec![1, 5, 7]);
    assert_eq!(t.encode("b<s>a").unwrap(), vec![1, 5, 8, 1, 12]);
    assert_eq!(t.decode(&[5, 7]).unwrap(), "aa");
    assert_eq!(t.decode_continuation(&[5, 7]).unwrap(), " aa");
}

/// A malformed SentencePiece vocabulary is refused naming the key: scores missing, of
/// another length or not a number, a byte token that is not `<0xXX>`; a byte the text needs
/// without its token fails the encoding naming `tokenizer.ggml.tokens` and the byte.
#[test]
fn malformed_sentencepiece_vocabulary_names_the_key() {
    let mut md = spm_tiny();
    md.insert(
        "tokenizer.ggml.scores",
        MetaValue::Array(MetaArray::F32(vec![0.0; 13])),
    );
    let (err, msg) = build_err(&md);
    assert!(
        matches!(
            err,
            TokenizerError::ScoresLength {
                tokens: 14,
                scores: 13
            }
        ),
        "{err:?}"
    );
    assert!(
        msg.contains("tokenizer.ggml.scores") && msg.contains("13"),
        "{msg}"
    );

    let mut md = spm_tiny();
    let mut nan = vec![0.0f32; 14];
    nan[7] = f32::NAN;
    md.insert(
        "tokenizer.ggml.scores",
        MetaValue::Array(MetaArray::F32(nan)),
    );
    let (err, msg) = build_err(&md);
    assert!(
        matches!(err, TokenizerError::BadScore { index: 7, .. }),
        "{err:?}"
    );
    assert!(msg.contains("tokenizer.ggml.scores`[7]"), "{msg}");

    let mut md = Metadata::new();
    for (k, v) in spm_tiny().iter() {
        if k != "tokenizer.ggml.scores" {
            md.insert(k, v.clone());
        }
    }
    let (err, msg) = build_err(&md);
    assert!(
        matches!(
            err,
            TokenizerError::MissingKey {
                key: "tokenizer.ggml.scores"
            }
        ),
        "{err:?}"
    );
    assert!(msg.contains("tokenizer.ggml.scores"), "{msg}");

    let mut md = spm_tiny();
    let mut tokens: Vec<String> = match md.get_str_array("tokenizer.ggml.tokens") {
        Ok(t) => t.to_vec(),
        Err(e) => panic!("{e}"),
    };
    tokens[4] = "<0xZZ>".to_string();
    md.insert(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::String(tokens.clone())),
    );
    let (err, msg) = build_err(&md);
    assert!(
        matches!(err, TokenizerError::BadByteToken { index: 4, .. }),
        "{err:?}"
    );
    assert!(
        msg.contains("tokenizer.ggml.token_type`[4]") && msg.contains("<0xZZ>"),
        "{msg}"
    );

    // `<0xA9>` renamed and made normal: "é" needs byte 0xA9 and has no token for it.
    tokens[4] = "xA9".to_string();
    md.insert(
        "tokenizer.ggml.tokens",
        MetaValue::Array(MetaArray::String(tokens)),
    );
    md.insert(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(vec![
            2, 3, 3, 6, 1, 1, 1, 1, 1, 1, 1, 1, 1, 4,
        ])),
    );
    let t = build(&md).unwrap();
    assert_eq!(t.encode("aa").unwrap(), vec![7]);
    let err = t.encode("é").unwrap_err();
    assert!(
        matches!(err, TokenizerError::MissingByteToken { byte: 0xA9 }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("tokenizer.ggml.tokens") && msg.contains("<0xA9>"),
        "{msg}"
    );
}

#[test]
fn unsupported_or_missing_pre_tokenizer_names_it() {
    let mut md = tiny();
    md.insert(
        "tokenizer.ggml.pre",
        MetaValue::String("deepseek-llm".to_string()),
    );
    let (err, msg) = build_err(&md);
    assert!(
        matches!(err, TokenizerError::UnsupportedPreTokenizer { pre: Some(ref p) } if p == "deepseek-llm")
    );
    assert!(
        msg.contains("`deepseek-llm`")
            && msg.contains("tokenizer.ggml.pre")
            && msg.contains("smollm")
            && msg.contains("llama-bpe")
            && msg.contains("qwen2"),
        "{msg}"
    );

    let md = tiny_without(&["tokenizer.ggml.pre"]);
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::UnsupportedPreTokenizer { pre: None }
    ));
    assert!(
        msg.contains("(missing)") && msg.contains("tokenizer.ggml.pre"),
        "{msg}"
    );
}

#[test]
fn missing_vocabulary_or_merges_names_the_key() {
    let md = tiny_without(&["tokenizer.ggml.tokens"]);
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::MissingKey {
            key: "tokenizer.ggml.tokens"
        }
    ));
    assert!(msg.contains("`tokenizer.ggml.tokens`"), "{msg}");

    let md = tiny_without(&["tokenizer.ggml.model"]);
    let (_, msg) = build_err(&md);
    assert!(
        msg.contains("`tokenizer.ggml.model`") && msg.contains("missing"),
        "{msg}"
    );

    let md = tiny_without(&["tokenizer.ggml.merges"]);
    let (err, msg) = build_err(&md);
    assert!(matches!(err, TokenizerError::NoMerges));
    assert!(msg.contains("`tokenizer.ggml.merges`"), "{msg}");

    let mut md = tiny();
    md.insert("tokenizer.ggml.tokens", strings(&[]));
    let (err, msg) = build_err(&md);
    assert!(matches!(err, TokenizerError::EmptyVocab));
    assert!(msg.contains("`tokenizer.ggml.tokens`"), "{msg}");
}

#[test]
fn merge_naming_an_unknown_token_names_merge_and_token() {
    let mut md = tiny();
    md.insert("tokenizer.ggml.merges", strings(&["a b", "a zz"]));
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::UnknownMergeToken { index: 1, ref token, .. } if token == "zz"
    ));
    assert!(
        msg.contains("merges`[1]") && msg.contains("\"a zz\"") && msg.contains("\"zz\""),
        "{msg}"
    );

    // Both parts known, but their concatenation is not a token.
    md.insert("tokenizer.ggml.merges", strings(&["b a"]));
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::UnknownMergeToken { index: 0, ref token, .. } if token == "ba"
    ));
    assert!(msg.contains("\"ba\""), "{msg}");

    md.insert("tokenizer.ggml.merges", strings(&["a b", "ab"]));
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::MalformedMerge { index: 1, .. }
    ));
    assert!(
        msg.contains("merges`[1]") && msg.contains("\"ab\""),
        "{msg}"
    );
}

#[test]
fn token_type_length_mismatch_names_both_lengths() {
    let mut md = tiny();
    md.insert(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(vec![3, 1, 1])),
    );
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::TokenTypeLength {
            tokens: 6,
            types: 3
        }
    ));
    assert!(
        msg.contains("`tokenizer.ggml.token_type` has 3") && msg.contains("has 6"),
        "{msg}"
    );

    md.insert(
        "tokenizer.ggml.token_type",
        MetaValue::Array(MetaArray::I32(vec![3, 1, 1, 9, 1, 1])),
    );
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::BadTokenType { index: 3, value: 9 }
    ));
    assert!(msg.contains("token_type`[3] = 9"), "{msg}");
}

#[test]
fn special_ids_and_metadata_types_are_checked_by_key() {
    let mut md = tiny();
    md.insert("tokenizer.ggml.bos_token_id", MetaValue::U32(6));
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::SpecialIdOutOfRange {
            key: "tokenizer.ggml.bos_token_id",
            id: 6,
            vocab_size: 6
        }
    ));
    assert!(msg.contains("`tokenizer.ggml.bos_token_id` = 6"), "{msg}");

    let mut md = tiny();
    md.insert(
        "tokenizer.ggml.eos_token_id",
        MetaValue::String("2".to_string()),
    );
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::BadKey {
            key: "tokenizer.ggml.eos_token_id",
            ..
        }
    ));
    assert!(msg.contains("`tokenizer.ggml.eos_token_id`"), "{msg}");

    let mut md = tiny();
    md.insert("tokenizer.ggml.add_bos_token", MetaValue::Bool(true));
    let (err, msg) = build_err(&md);
    assert!(matches!(err, TokenizerError::MissingSpecialForFlag { .. }));
    assert!(
        msg.contains("`tokenizer.ggml.add_bos_token`")
            && msg.contains("`tokenizer.ggml.bos_token_id`"),
        "{msg}"
    );

    let mut md = tiny();
    md.insert(
        "tokenizer.ggml.tokens",
        strings(&["<|end|>", "a", "b", "ab", "Ġ", "a"]),
    );
    let (err, msg) = build_err(&md);
    assert!(matches!(
        err,
        TokenizerError::DuplicateToken {
            first: 1,
            second: 5,
            ..
        }
    ));
    assert!(msg.contains("\"a\" twice"), "{msg}");
}

#[test]
fn decode_of_an_out_of_range_id_names_the_id() {
    let t = build(&tiny()).unwrap();
    let err = t.decode(&[1, 6]).unwrap_err();
    assert!(matches!(
        err,
        TokenizerError::IdOutOfRange {
            id: 6,
            vocab_size: 6
        }
    ));
    assert!(err.to_string().contains("token id 6"), "{err}");
}

#[test]
fn unreadable_tokenizer_json_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, "{ not json").unwrap();
    let err = Tokenizer::from_tokenizer_json(&path, None, None).unwrap_err();
    assert!(matches!(err, TokenizerError::TokenizerJson { .. }));
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

#[test]
fn tokenizer_json_beside_a_model_loads_with_its_own_specials() {
    // The same tiny vocabulary written as a Hugging Face tokenizer.json.
    let json = r#"{
      "version": "1.0", "truncation": null, "padding": null,
      "added_tokens": [{"id": 0, "content": "<|end|>", "single_word": false, "lstrip": false,
                        "rstrip": false, "normalized": false, "special": true}],
      "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "post_processor": null,
      "decoder": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
      "model": {"type": "BPE", "dropout": null, "unk_token": null, "continuing_subword_prefix": null,
                "end_of_word_suffix": null, "fuse_unk": false, "byte_fallback": false, "ignore_merges": false,
                "vocab": {"<|end|>": 0, "a": 1, "b": 2, "ab": 3, "Ġ": 4, "Ġa": 5},
                "merges": ["a b", "Ġ a"]}
    }"#;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tokenizer.json");
    std::fs::write(&path, json).unwrap();
    let t = Tokenizer::from_tokenizer_json(&path, None, Some(0)).unwrap();
    assert_eq!(t.vocab_size(), 6);
    assert_eq!(t.encode("ab a<|end|>b").unwrap(), vec![3, 5, 0, 2]);
    assert_eq!(t.decode(&[3, 5, 0, 2]).unwrap(), "ab a<|end|>b");
    assert!(t.is_eog(0) && !t.is_eog(3));
    assert_eq!(t.eos(), Some(0));

    let err = Tokenizer::from_tokenizer_json(&path, Some(6), None).unwrap_err();
    assert!(matches!(
        err,
        TokenizerError::SpecialIdOutOfRange { id: 6, .. }
    ));
    assert!(err.to_string().contains("= 6"), "{err}");
}
