//! Text ↔ token ids from a GGUF vocabulary (byte-level BPE or SentencePiece) or a `tokenizer.json`, with streaming decode.
//!
//! The GGUF route reads the keys llama.cpp's `llama_vocab::load` reads (`tokenizer.ggml.*`,
//! see the GGUF specification's "Tokenizer" section) and rebuilds the same tokenizer:
//!
//! - `tokenizer.ggml.model = "llama"`: SentencePiece (Llama 2, Mistral, Phi-3, Gemma), the
//!   score-ordered merge of llama.cpp's `llm_tokenizer_spm` in [`spm`] (tokens with `▁` for a
//!   space, `tokenizer.ggml.scores`, byte tokens `<0xXX>`, `tokenizer.ggml.add_space_prefix`).
//!   Absent keys take llama.cpp's defaults for this model: bos 1, eos 2, unk 0, add_bos true,
//!   add_space_prefix true.
//!
//! The byte-level BPE is built with the `tokenizers` crate:
//!
//! - `tokenizer.ggml.model = "gpt2"`: byte-level BPE. Tokens are stored in the GPT-2 byte-to-unicode
//!   alphabet (`Ġ` for a space, `Ċ` for a newline) and merges as `"left right"` strings, in rank order.
//! - `tokenizer.ggml.pre`: the pre-tokenizer name llama.cpp maps to a list of split regexes
//!   (`llm_tokenizer_bpe` in llama.cpp's `llama-vocab.cpp`). Two families are reproduced here:
//!   the GPT-2 split (`gpt-2`, `phi-2`, `mpt`, `olmo`, `jais`, `exaone4`), and the GPT-2 split preceded
//!   by a split of every numeric character on its own (`smollm`, `starcoder`, `refact`, `command-r`,
//!   `codeshell`, `exaone`, `minerva-7b`), which is `Digits(individual)` then `ByteLevel` here.
//!   Any other name is refused with [`TokenizerError::UnsupportedPreTokenizer`] rather than guessed.
//! - `tokenizer.ggml.token_type`: control (3) and unknown (2) tokens are special tokens and
//!   user-defined (4) tokens are plain added tokens; all of them are recognised as whole units in
//!   input text before the BPE runs, as llama.cpp does with `parse_special = true`.
//! - `tokenizer.ggml.add_bos_token` / `add_eos_token`: a post-processor wraps the ids.
//!
//! Any other `tokenizer.ggml.model` is refused with [`TokenizerError::UnsupportedModel`].

mod spm;

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use tokenizers::SplitDelimiterBehavior;
use tokenizers::models::bpe::{BPE, Vocab};
use tokenizers::pre_tokenizers::byte_level::ByteLevel;
use tokenizers::pre_tokenizers::digits::Digits;
use tokenizers::pre_tokenizers::sequence::Sequence;
use tokenizers::pre_tokenizers::split::{Split, SplitPattern};
use tokenizers::processors::template::TemplateProcessing;
use tokenizers::{AddedToken, PreTokenizerWrapper};

use crate::gguf::{GgufError, Metadata};

/// GGUF key of the tokenizer model name (`gpt2`, `llama`, ...).
pub const KEY_MODEL: &str = "tokenizer.ggml.model";
/// GGUF key of the pre-tokenizer name (`smollm`, `gpt-2`, `llama-bpe`, ...).
pub const KEY_PRE: &str = "tokenizer.ggml.pre";
/// GGUF key of the vocabulary: one string per token id.
pub const KEY_TOKENS: &str = "tokenizer.ggml.tokens";
/// GGUF key of the per-token types (i32, one per token).
pub const KEY_TOKEN_TYPE: &str = "tokenizer.ggml.token_type";
/// GGUF key of the SentencePiece scores (f32, one per token; higher merges first).
pub const KEY_SCORES: &str = "tokenizer.ggml.scores";
/// GGUF key of the SentencePiece "prefix each text with a space" flag.
pub const KEY_ADD_SPACE_PREFIX: &str = "tokenizer.ggml.add_space_prefix";
/// GGUF key of the model's name (llama.cpp keys Phi-3's special-token stripping on it).
pub const KEY_NAME: &str = "general.name";
/// GGUF key of the BPE merges, `"left right"` strings in rank order.
pub const KEY_MERGES: &str = "tokenizer.ggml.merges";
/// GGUF key of the beginning-of-sequence token id.
pub const KEY_BOS: &str = "tokenizer.ggml.bos_token_id";
/// GGUF key of the end-of-sequence token id.
pub const KEY_EOS: &str = "tokenizer.ggml.eos_token_id";
/// GGUF key of the unknown token id.
pub const KEY_UNK: &str = "tokenizer.ggml.unknown_token_id";
/// GGUF key of the padding token id.
pub const KEY_PAD: &str = "tokenizer.ggml.padding_token_id";
/// GGUF key of the "prepend BOS when encoding" flag.
pub const KEY_ADD_BOS: &str = "tokenizer.ggml.add_bos_token";
/// GGUF key of the "append EOS when encoding" flag.
pub const KEY_ADD_EOS: &str = "tokenizer.ggml.add_eos_token";
/// GGUF key of the Jinja chat template.
pub const KEY_CHAT_TEMPLATE: &str = "tokenizer.chat_template";

/// Token type ids of `tokenizer.ggml.token_type` (`llama_token_type` in llama.cpp's `llama.h`).
pub mod token_type {
    /// Not set by the converter.
    pub const UNDEFINED: i32 = 0;
    /// An ordinary vocabulary entry.
    pub const NORMAL: i32 = 1;
    /// The unknown token.
    pub const UNKNOWN: i32 = 2;
    /// A control token such as `<|im_start|>`.
    pub const CONTROL: i32 = 3;
    /// A token added by the model authors, matched verbatim in text.
    pub const USER_DEFINED: i32 = 4;
    /// A reserved, unused slot.
    pub const UNUSED: i32 = 5;
    /// A raw byte token such as `<0x0A>` (SentencePiece vocabularies).
    pub const BYTE: i32 = 6;
}

/// Token texts llama.cpp treats as end-of-generation wherever they occur in a vocabulary
/// (the EOG auto-detection list in `llama_vocab::impl::load`).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "<|end_of_text|>",
    "<end_of_utterance>",
];

/// Pre-tokenizer names that llama.cpp maps to the plain GPT-2 split regex.
const PRE_GPT2: &[&str] = &["gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4"];
/// Pre-tokenizer names that llama.cpp maps to its `LLAMA3` split regex (and `ignore_merges`:
/// a piece that is a whole vocabulary entry is taken as is). Llama 3.x.
const PRE_LLAMA3: &[&str] = &["llama3", "llama-v3", "llama-bpe", "falcon3", "pixtral"];
/// Pre-tokenizer names that llama.cpp maps to its `QWEN2` split regex (digits one by one).
const PRE_QWEN2: &[&str] = &["qwen2", "deepseek-r1-qwen", "megrez"];
/// llama.cpp's `LLAMA3` split regex (`llama-vocab.cpp`), the one Llama 3's tokenizer.json holds.
const LLAMA3_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// llama.cpp's `QWEN2` split regex: [`LLAMA3_REGEX`] with single digits.
const QWEN2_REGEX: &str = r"(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+";
/// Pre-tokenizer names that llama.cpp maps to "every `\p{N}` alone", then the GPT-2 split regex.
const PRE_DIGITS_GPT2: &[&str] = &[
    "smollm",
    "starcoder",
    "refact",
    "command-r",
    "codeshell",
    "exaone",
    "minerva-7b",
];

/// Everything that can go wrong building or using a [`Tokenizer`]. Each variant names the
/// GGUF key, file, index or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum TokenizerError {
    /// A required GGUF metadata key is absent.
    #[error("GGUF metadata key `{key}` is missing; it is required to build the tokenizer")]
    MissingKey {
        /// The missing key.
        key: &'static str,
    },
    /// A GGUF metadata key is present but could not be read as the expected type.
    #[error("GGUF metadata key `{key}` could not be read: {message}")]
    BadKey {
        /// The key at fault.
        key: &'static str,
        /// What the metadata reader reported.
        message: String,
    },
    /// `tokenizer.ggml.model` names a tokenizer this engine does not implement.
    #[error(
        "tokenizer model `{model}` (GGUF key `tokenizer.ggml.model`) is not supported; only `gpt2` (byte-level BPE) and `llama` (SentencePiece) are"
    )]
    UnsupportedModel {
        /// The model name found.
        model: String,
    },
    /// `tokenizer.ggml.pre` names a pre-tokenizer this engine does not reproduce (or is absent).
    #[error(
        "pre-tokenizer {} (GGUF key `tokenizer.ggml.pre`) is not supported; supported: {}",
        .pre.as_deref().map(|p| format!("`{p}`")).unwrap_or_else(|| "(missing)".to_string()),
        supported_pre_list()
    )]
    UnsupportedPreTokenizer {
        /// The name found, `None` when the key is absent.
        pre: Option<String>,
    },
    /// The vocabulary has no tokens.
    #[error("GGUF metadata key `tokenizer.ggml.tokens` holds no tokens")]
    EmptyVocab,
    /// The vocabulary is larger than a `u32` token id can address.
    #[error(
        "GGUF metadata key `tokenizer.ggml.tokens` holds {len} tokens, more than u32 ids can address"
    )]
    VocabTooLarge {
        /// The number of tokens.
        len: usize,
    },
    /// The same token text occurs twice in the vocabulary.
    #[error(
        "GGUF metadata key `tokenizer.ggml.tokens` holds {text:?} twice (ids {first} and {second})"
    )]
    DuplicateToken {
        /// The repeated text.
        text: String,
        /// Its first id.
        first: u32,
        /// Its second id.
        second: u32,
    },
    /// `tokenizer.ggml.token_type` and `tokenizer.ggml.tokens` disagree in length.
    #[error(
        "GGUF metadata key `tokenizer.ggml.token_type` has {types} entries but `tokenizer.ggml.tokens` has {tokens}"
    )]
    TokenTypeLength {
        /// Length of the token list.
        tokens: usize,
        /// Length of the token-type list.
        types: usize,
    },
    /// A token type outside 0..=6.
    #[error(
        "GGUF metadata key `tokenizer.ggml.token_type`[{index}] = {value} is not a known token type (0..=6)"
    )]
    BadTokenType {
        /// The token id.
        index: usize,
        /// The value found.
        value: i32,
    },
    /// `tokenizer.ggml.scores` and `tokenizer.ggml.tokens` disagree in length.
    #[error(
        "GGUF metadata key `tokenizer.ggml.scores` has {scores} entries but `tokenizer.ggml.tokens` has {tokens}"
    )]
    ScoresLength {
        /// Length of the token list.
        tokens: usize,
        /// Length of the score list.
        scores: usize,
    },
    /// A score that is not a number (merges are ordered by score).
    #[error("GGUF metadata key `tokenizer.ggml.scores`[{index}] = {value} is not a number")]
    BadScore {
        /// The token id.
        index: usize,
        /// The value found.
        value: f32,
    },
    /// A token typed as a byte (6) whose text is not `<0xXX>`.
    #[error(
        "GGUF metadata key `tokenizer.ggml.token_type`[{index}] marks {text:?} as a byte token, but its text is not `<0xXX>`"
    )]
    BadByteToken {
        /// The token id.
        index: usize,
        /// Its text.
        text: String,
    },
    /// A SentencePiece text has a character outside the vocabulary, and the vocabulary has no
    /// token for one of its UTF-8 bytes (neither `<0xXX>` nor the byte itself).
    #[error(
        "GGUF metadata key `tokenizer.ggml.tokens` has no byte token `<0x{byte:02X}>`, needed for a character outside the vocabulary"
    )]
    MissingByteToken {
        /// The byte without a token.
        byte: u8,
    },
    /// A BPE vocabulary without merges.
    #[error(
        "GGUF metadata key `tokenizer.ggml.merges` is missing or empty; a `gpt2` (byte-level BPE) tokenizer needs its merges"
    )]
    NoMerges,
    /// A merge that is not two tokens separated by a single space.
    #[error(
        "GGUF metadata key `tokenizer.ggml.merges`[{index}] = {merge:?} is not two tokens separated by one space"
    )]
    MalformedMerge {
        /// Index of the merge (its rank).
        index: usize,
        /// The merge text.
        merge: String,
    },
    /// A merge whose left, right or merged token is not in the vocabulary.
    #[error(
        "GGUF metadata key `tokenizer.ggml.merges`[{index}] = {merge:?} names token {token:?}, which is not in `tokenizer.ggml.tokens`"
    )]
    UnknownMergeToken {
        /// Index of the merge (its rank).
        index: usize,
        /// The merge text.
        merge: String,
        /// The token (a part, or the merged result) that is missing.
        token: String,
    },
    /// A special token id (bos, eos, ...) outside the vocabulary.
    #[error("GGUF metadata key `{key}` = {id} is outside the vocabulary of {vocab_size} tokens")]
    SpecialIdOutOfRange {
        /// The key holding the id.
        key: &'static str,
        /// The id found.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// `add_bos_token` / `add_eos_token` is set but the token id is not.
    #[error("GGUF metadata key `{flag}` is true but `{key}` is missing")]
    MissingSpecialForFlag {
        /// The flag key.
        flag: &'static str,
        /// The id key that is missing.
        key: &'static str,
    },
    /// A token id outside the vocabulary was given to decode.
    #[error("token id {id} is outside the vocabulary of {vocab_size} tokens")]
    IdOutOfRange {
        /// The id given.
        id: u32,
        /// The vocabulary size.
        vocab_size: usize,
    },
    /// A `tokenizer.json` could not be loaded.
    #[error("tokenizer file {}: {message}", .path.display())]
    TokenizerJson {
        /// The file.
        path: PathBuf,
        /// What the `tokenizers` crate reported.
        message: String,
    },
    /// The `tokenizers` crate failed while building, encoding or decoding.
    #[error("tokenizer library failed while {action}: {message}")]
    Library {
        /// What was being done.
        action: &'static str,
        /// What the library reported.
        message: String,
    },
}

/// How a `gpt2` vocabulary's text is cut before BPE (llama.cpp's pre-tokenizer types).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PreKind {
    /// The GPT-2 split regex.
    Gpt2,
    /// Every `\p{N}` alone, then the GPT-2 split regex.
    DigitsGpt2,
    /// This split regex, then byte-level mapping without a regex of its own.
    Regex(&'static str),
}

fn supported_pre_list() -> String {
    PRE_DIGITS_GPT2
        .iter()
        .chain(PRE_GPT2)
        .chain(PRE_LLAMA3)
        .chain(PRE_QWEN2)
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn lib_err(action: &'static str) -> impl FnOnce(tokenizers::Error) -> TokenizerError {
    move |e| TokenizerError::Library {
        action,
        message: e.to_string(),
    }
}

/// The tokenizer part of a GGUF file's metadata, as stored (no validation beyond types).
///
/// `tokens[i]` is the text of id `i` (byte-level alphabet for `gpt2` models); `token_types`
/// is parallel to it (see [`token_type`]), or empty when the file has no types; `merges` are
/// `"left right"` strings in rank order. Special ids are `None` when their key is absent.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufVocab {
    /// `tokenizer.ggml.model`, e.g. `gpt2`.
    pub model: String,
    /// `tokenizer.ggml.pre`, e.g. `smollm`.
    pub pre: Option<String>,
    /// `tokenizer.ggml.tokens`.
    pub tokens: Vec<String>,
    /// `tokenizer.ggml.token_type` (empty when absent: every token is then normal).
    pub token_types: Vec<i32>,
    /// `tokenizer.ggml.merges` (empty when absent).
    pub merges: Vec<String>,
    /// `tokenizer.ggml.scores` (empty when absent; an i32 array is read as f32, as llama.cpp).
    pub scores: Vec<f32>,
    /// `tokenizer.ggml.add_space_prefix` (absent: true for `llama`, false otherwise).
    pub add_space_prefix: bool,
    /// `general.name`, e.g. `Phi3` (llama.cpp sets right-strip on Phi-3's special tokens).
    pub name: Option<String>,
    /// `tokenizer.ggml.bos_token_id`.
    pub bos: Option<u32>,
    /// `tokenizer.ggml.eos_token_id`.
    pub eos: Option<u32>,
    /// `tokenizer.ggml.unknown_token_id`.
    pub unk: Option<u32>,
    /// `tokenizer.ggml.padding_token_id`.
    pub pad: Option<u32>,
    /// `tokenizer.ggml.add_bos_token` (absent: true for `llama`, false otherwise).
    pub add_bos: bool,
    /// `tokenizer.ggml.add_eos_token` (false when absent).
    pub add_eos: bool,
    /// `tokenizer.chat_template`.
    pub chat_template: Option<String>,
}

/// `Ok(None)` when the key is absent; any other metadata error names the key.
fn optional<T>(key: &'static str, r: Result<T, GgufError>) -> Result<Option<T>, TokenizerError> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(GgufError::MissingKey { .. }) => Ok(None),
        Err(e) => Err(TokenizerError::BadKey {
            key,
            message: e.to_string(),
        }),
    }
}

/// The key must be present; a type error names the key.
fn required<T>(key: &'static str, r: Result<T, GgufError>) -> Result<T, TokenizerError> {
    optional(key, r)?.ok_or(TokenizerError::MissingKey { key })
}

impl GgufVocab {
    /// Reads the tokenizer keys (`tokenizer.ggml.*`, `tokenizer.chat_template`) from GGUF metadata.
    ///
    /// `tokenizer.ggml.model` and `tokenizer.ggml.tokens` are required; every other key is
    /// optional (absent lists are empty, absent ids `None`, absent flags false), except that a
    /// `llama` (SentencePiece) vocabulary takes llama.cpp's defaults for it: bos 1, eos 2,
    /// unk 0, add_bos true, add_space_prefix true. Nothing is cross-checked here:
    /// [`Tokenizer::from_vocab`] validates the vocabulary.
    ///
    /// Errors: [`TokenizerError::MissingKey`] for a required key; [`TokenizerError::BadKey`]
    /// naming the key when a value has the wrong type or does not fit (e.g. a negative id).
    pub fn from_metadata(md: &Metadata) -> Result<GgufVocab, TokenizerError> {
        let model = required(KEY_MODEL, md.get_str(KEY_MODEL))?.to_string();
        let tokens = required(KEY_TOKENS, md.get_str_array(KEY_TOKENS))?.to_vec();
        let pre = optional(KEY_PRE, md.get_str(KEY_PRE))?.map(str::to_string);
        let token_types = optional(KEY_TOKEN_TYPE, md.get_i32_array(KEY_TOKEN_TYPE))?
            .map(<[i32]>::to_vec)
            .unwrap_or_default();
        let merges = optional(KEY_MERGES, md.get_str_array(KEY_MERGES))?
            .map(<[String]>::to_vec)
            .unwrap_or_default();
        let scores = match md.get_f32_array(KEY_SCORES) {
            Ok(s) => s.to_vec(),
            Err(GgufError::MissingKey { .. }) => Vec::new(),
            Err(e) => match md.get_i32_array(KEY_SCORES) {
                Ok(s) => s.iter().map(|&v| v as f32).collect(),
                Err(_) => {
                    return Err(TokenizerError::BadKey {
                        key: KEY_SCORES,
                        message: e.to_string(),
                    });
                }
            },
        };
        let spm = model == "llama";
        let id = |key: &'static str, default: u32| {
            Ok::<_, TokenizerError>(optional(key, md.get_u32(key))?.or(spm.then_some(default)))
        };
        let flag = |key: &'static str, default: bool| {
            Ok::<_, TokenizerError>(optional(key, md.get_bool(key))?.unwrap_or(default))
        };
        Ok(GgufVocab {
            model,
            pre,
            tokens,
            token_types,
            merges,
            scores,
            add_space_prefix: flag(KEY_ADD_SPACE_PREFIX, spm)?,
            name: optional(KEY_NAME, md.get_str(KEY_NAME))?.map(str::to_string),
            bos: id(KEY_BOS, 1)?,
            eos: id(KEY_EOS, 2)?,
            unk: id(KEY_UNK, 0)?,
            pad: optional(KEY_PAD, md.get_u32(KEY_PAD))?,
            add_bos: flag(KEY_ADD_BOS, spm)?,
            add_eos: flag(KEY_ADD_EOS, false)?,
            chat_template: optional(KEY_CHAT_TEMPLATE, md.get_str(KEY_CHAT_TEMPLATE))?
                .map(str::to_string),
        })
    }
}

/// A text tokenizer: encode, decode, streaming decode and special-token queries.
///
/// Wraps a `tokenizers::Tokenizer` (byte-level BPE, `tokenizer.json`) or a SentencePiece
/// vocabulary ([`spm`]); ids are `u32` in `0..vocab_size()`.
pub struct Tokenizer {
    inner: Backend,
    vocab_size: usize,
    bos: Option<u32>,
    eos: Option<u32>,
    eog: HashSet<u32>,
    constraint_vocab: std::sync::OnceLock<crate::constrain::TokenVocab>,
}

impl std::fmt::Debug for Tokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tokenizer")
            .field("vocab_size", &self.vocab_size)
            .field("bos", &self.bos)
            .field("eos", &self.eos)
            .field("eog", &self.eog)
            .finish_non_exhaustive()
    }
}

/// What runs a [`Tokenizer`].
enum Backend {
    /// Byte-level BPE from a GGUF vocabulary, or a `tokenizer.json`: the `tokenizers` crate.
    Hf(Box<tokenizers::Tokenizer>),
    /// A SentencePiece vocabulary, with whether encoding adds bos and eos.
    Spm {
        spm: Box<spm::Spm>,
        bos: Option<u32>,
        eos: Option<u32>,
    },
}

fn check_special(
    key: &'static str,
    id: Option<u32>,
    vocab_size: usize,
) -> Result<(), TokenizerError> {
    match id {
        Some(id) if id as usize >= vocab_size => Err(TokenizerError::SpecialIdOutOfRange {
            key,
            id,
            vocab_size,
        }),
        _ => Ok(()),
    }
}

/// The post-processor that wraps encoded text as `[bos] $A [eos]`, per `add_bos` / `add_eos`.
fn bos_eos_template(v: &GgufVocab) -> Result<TemplateProcessing, TokenizerError> {
    let special = |flag, key, id: Option<u32>| {
        let id = id.ok_or(TokenizerError::MissingSpecialForFlag { flag, key })?;
        Ok::<_, TokenizerError>((v.tokens[id as usize].clone(), id))
    };
    let mut single = Vec::new();
    let mut specials = Vec::new();
    if v.add_bos {
        let (text, id) = special(KEY_ADD_BOS, KEY_BOS, v.bos)?;
        single.push(text.clone());
        specials.push((text, id));
    }
    single.push("$A".to_string());
    if v.add_eos {
        let (text, id) = special(KEY_ADD_EOS, KEY_EOS, v.eos)?;
        single.push(text.clone());
        specials.push((text, id));
    }
    let failed = |message: String| TokenizerError::Library {
        action: "building the bos/eos post-processor",
        message,
    };
    TemplateProcessing::builder()
        .try_single(single)
        .map_err(failed)?
        .special_tokens(specials)
        .build()
        .map_err(|e| failed(e.to_string()))
}

/// End-of-generation ids: `eos` plus every token whose text is on llama.cpp's EOG list.
fn eog_set(eos: Option<u32>, lookup: impl Fn(&str) -> Option<u32>) -> HashSet<u32> {
    let mut eog: HashSet<u32> = EOG_TEXTS.iter().filter_map(|t| lookup(t)).collect();
    eog.extend(eos);
    eog
}

impl Tokenizer {
    /// Builds the tokenizer from a GGUF vocabulary (see the module docs for what each key means).
    ///
    /// Errors: [`TokenizerError::UnsupportedModel`] unless `model` is `gpt2` or `llama`;
    /// [`TokenizerError::UnsupportedPreTokenizer`] for a `gpt2` pre-tokenizer name not
    /// reproduced here; [`TokenizerError::EmptyVocab`], [`TokenizerError::DuplicateToken`],
    /// [`TokenizerError::TokenTypeLength`], [`TokenizerError::BadTokenType`],
    /// [`TokenizerError::SpecialIdOutOfRange`] and [`TokenizerError::MissingSpecialForFlag`]
    /// for an inconsistent vocabulary; for `gpt2`, [`TokenizerError::NoMerges`],
    /// [`TokenizerError::MalformedMerge`] and [`TokenizerError::UnknownMergeToken`]; for
    /// `llama`, [`TokenizerError::MissingKey`] (`tokenizer.ggml.scores`),
    /// [`TokenizerError::ScoresLength`], [`TokenizerError::BadScore`] and
    /// [`TokenizerError::BadByteToken`].
    pub fn from_vocab(v: &GgufVocab) -> Result<Tokenizer, TokenizerError> {
        match v.model.as_str() {
            "gpt2" => Self::from_bpe_vocab(v),
            "llama" => Self::from_spm_vocab(v),
            _ => Err(TokenizerError::UnsupportedModel {
                model: v.model.clone(),
            }),
        }
    }

    /// Checks shared by every vocabulary: size, token types, special ids. Returns the size.
    fn check_vocab(v: &GgufVocab) -> Result<usize, TokenizerError> {
        if v.tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        let n = v.tokens.len();
        if u32::try_from(n).is_err() {
            return Err(TokenizerError::VocabTooLarge { len: n });
        }
        if !v.token_types.is_empty() && v.token_types.len() != n {
            return Err(TokenizerError::TokenTypeLength {
                tokens: n,
                types: v.token_types.len(),
            });
        }
        if let Some((index, &value)) = v
            .token_types
            .iter()
            .enumerate()
            .find(|(_, t)| !(token_type::UNDEFINED..=token_type::BYTE).contains(*t))
        {
            return Err(TokenizerError::BadTokenType { index, value });
        }
        for (key, id) in [
            (KEY_BOS, v.bos),
            (KEY_EOS, v.eos),
            (KEY_UNK, v.unk),
            (KEY_PAD, v.pad),
        ] {
            check_special(key, id, n)?;
        }
        Ok(n)
    }

    /// A `llama` (SentencePiece) vocabulary: see [`spm`].
    fn from_spm_vocab(v: &GgufVocab) -> Result<Tokenizer, TokenizerError> {
        let n = Self::check_vocab(v)?;
        if v.scores.is_empty() {
            return Err(TokenizerError::MissingKey { key: KEY_SCORES });
        }
        if v.scores.len() != n {
            return Err(TokenizerError::ScoresLength {
                tokens: n,
                scores: v.scores.len(),
            });
        }
        let mut seen = std::collections::HashMap::with_capacity(n);
        for (id, text) in v.tokens.iter().enumerate() {
            if let Some(first) = seen.insert(text.as_str(), id as u32) {
                return Err(TokenizerError::DuplicateToken {
                    text: text.clone(),
                    first,
                    second: id as u32,
                });
            }
        }
        let bos = match (v.add_bos, v.bos) {
            (true, None) => {
                return Err(TokenizerError::MissingSpecialForFlag {
                    flag: KEY_ADD_BOS,
                    key: KEY_BOS,
                });
            }
            (add, id) => id.filter(|_| add),
        };
        let eos = match (v.add_eos, v.eos) {
            (true, None) => {
                return Err(TokenizerError::MissingSpecialForFlag {
                    flag: KEY_ADD_EOS,
                    key: KEY_EOS,
                });
            }
            (add, id) => id.filter(|_| add),
        };
        // llama.cpp: `general.name` containing "phi-3" or "phi3" (any case) right-strips
        // whitespace after Phi-3's special tokens.
        let phi3 = v.name.as_deref().is_some_and(|name| {
            let name = name.to_lowercase();
            name.contains("phi-3") || name.contains("phi3")
        });
        let spm = Box::new(spm::Spm::new(
            &v.tokens,
            &v.token_types,
            &v.scores,
            v.add_space_prefix,
            phi3,
        )?);
        let mut eog: HashSet<u32> = spm.eog_ids().iter().copied().collect();
        eog.extend(v.eos);
        Ok(Tokenizer {
            inner: Backend::Spm { spm, bos, eos },
            vocab_size: n,
            bos: v.bos,
            eos: v.eos,
            eog,
            constraint_vocab: std::sync::OnceLock::new(),
        })
    }

    /// A `gpt2` (byte-level BPE) vocabulary, built with the `tokenizers` crate.
    fn from_bpe_vocab(v: &GgufVocab) -> Result<Tokenizer, TokenizerError> {
        let pre_kind = match v.pre.as_deref() {
            Some(p) if PRE_DIGITS_GPT2.contains(&p) => PreKind::DigitsGpt2,
            Some(p) if PRE_GPT2.contains(&p) => PreKind::Gpt2,
            Some(p) if PRE_LLAMA3.contains(&p) => PreKind::Regex(LLAMA3_REGEX),
            Some(p) if PRE_QWEN2.contains(&p) => PreKind::Regex(QWEN2_REGEX),
            other => {
                return Err(TokenizerError::UnsupportedPreTokenizer {
                    pre: other.map(str::to_string),
                });
            }
        };
        if v.tokens.is_empty() {
            return Err(TokenizerError::EmptyVocab);
        }
        if v.merges.is_empty() {
            return Err(TokenizerError::NoMerges);
        }
        let n = Self::check_vocab(v)?;

        let mut vocab = Vocab::with_capacity(n);
        for (id, text) in v.tokens.iter().enumerate() {
            let id = id as u32;
            if let Some(first) = vocab.insert(text.clone(), id) {
                return Err(TokenizerError::DuplicateToken {
                    text: text.clone(),
                    first,
                    second: id,
                });
            }
        }

        let mut merges = Vec::with_capacity(v.merges.len());
        for (index, merge) in v.merges.iter().enumerate() {
            let malformed = || TokenizerError::MalformedMerge {
                index,
                merge: merge.clone(),
            };
            let (left, right) = merge.split_once(' ').ok_or_else(malformed)?;
            if left.is_empty() || right.is_empty() || right.contains(' ') {
                return Err(malformed());
            }
            let merged = format!("{left}{right}");
            for token in [left, right, merged.as_str()] {
                if !vocab.contains_key(token) {
                    return Err(TokenizerError::UnknownMergeToken {
                        index,
                        merge: merge.clone(),
                        token: token.to_string(),
                    });
                }
            }
            merges.push((left.to_string(), right.to_string()));
        }

        let bpe = BPE::builder()
            .vocab_and_merges(vocab, merges)
            .ignore_merges(pre_kind == PreKind::Regex(LLAMA3_REGEX))
            .build()
            .map_err(lib_err("building the BPE model"))?;
        let mut inner = tokenizers::Tokenizer::new(bpe);

        let byte_level = ByteLevel::new(false, true, true);
        let pre: PreTokenizerWrapper = match pre_kind {
            PreKind::DigitsGpt2 => {
                Sequence::new(vec![Digits::new(true).into(), byte_level.into()]).into()
            }
            PreKind::Gpt2 => byte_level.into(),
            PreKind::Regex(re) => {
                let split = Split::new(
                    SplitPattern::Regex(re.to_string()),
                    SplitDelimiterBehavior::Isolated,
                    false,
                )
                .map_err(lib_err("building the split regex"))?;
                Sequence::new(vec![
                    split.into(),
                    ByteLevel::new(false, true, false).into(),
                ])
                .into()
            }
        };
        inner.with_pre_tokenizer(Some(pre));
        inner.with_decoder(Some(ByteLevel::new(false, true, true)));

        // Control and unknown tokens are special; user-defined tokens are matched verbatim too
        // (llama.cpp's `tokenizer_st_partition`). Their text is raw, not byte-level encoded.
        let mut special = Vec::new();
        let mut user = Vec::new();
        for (text, &ty) in v.tokens.iter().zip(&v.token_types) {
            match ty {
                token_type::CONTROL | token_type::UNKNOWN => {
                    special.push(AddedToken::from(text.clone(), true).normalized(false))
                }
                token_type::USER_DEFINED => {
                    user.push(AddedToken::from(text.clone(), false).normalized(false))
                }
                _ => {}
            }
        }
        inner.add_special_tokens(&special);
        inner.add_tokens(&user);

        if v.add_bos || v.add_eos {
            inner.with_post_processor(Some(bos_eos_template(v)?));
        }

        let eog = eog_set(v.eos, |t| inner.token_to_id(t));
        Ok(Tokenizer {
            inner: Backend::Hf(Box::new(inner)),
            vocab_size: n,
            bos: v.bos,
            eos: v.eos,
            eog,
            constraint_vocab: std::sync::OnceLock::new(),
        })
    }

    /// Loads a Hugging Face `tokenizer.json`; `bos`/`eos` come from the model's metadata.
    ///
    /// Whether encoding adds bos/eos is decided by the file's own post-processor. The vocabulary
    /// size counts added tokens. Errors: [`TokenizerError::TokenizerJson`] naming the file when it
    /// cannot be read or parsed; [`TokenizerError::SpecialIdOutOfRange`] when `bos`/`eos` lie
    /// outside its vocabulary.
    pub fn from_tokenizer_json(
        path: &Path,
        bos: Option<u32>,
        eos: Option<u32>,
    ) -> Result<Tokenizer, TokenizerError> {
        let inner =
            tokenizers::Tokenizer::from_file(path).map_err(|e| TokenizerError::TokenizerJson {
                path: path.to_path_buf(),
                message: e.to_string(),
            })?;
        let vocab_size = inner.get_vocab_size(true);
        check_special(KEY_BOS, bos, vocab_size)?;
        check_special(KEY_EOS, eos, vocab_size)?;
        let eog = eog_set(eos, |t| inner.token_to_id(t));
        Ok(Tokenizer {
            inner: Backend::Hf(Box::new(inner)),
            vocab_size,
            bos,
            eos,
            eog,
            constraint_vocab: std::sync::OnceLock::new(),
        })
    }

    /// Encodes `text` to token ids. Special and user-defined tokens written in the text
    /// (e.g. `<|im_start|>`, `<s>`) become their single ids (llama.cpp's `parse_special`);
    /// bos/eos are added as configured (`add_bos_token`: false for SmolLM2, true by default
    /// for SentencePiece vocabularies).
    ///
    /// Errors: [`TokenizerError::MissingByteToken`] for a SentencePiece text with a character
    /// outside the vocabulary whose byte has no token; [`TokenizerError::Library`] when the
    /// `tokenizers` crate fails.
    pub fn encode(&self, text: &str) -> Result<Vec<u32>, TokenizerError> {
        self.encode_special(text, true)
    }

    /// [`Tokenizer::encode`] with the configured bos/eos added only when `add_special`
    /// (llama.cpp's `llama_tokenize(.., add_special, parse_special = true)`, which its
    /// server's `/tokenize` calls with `add_special` false unless asked): special tokens
    /// written in the text still become their ids either way. Same errors as `encode`.
    pub fn encode_special(
        &self,
        text: &str,
        add_special: bool,
    ) -> Result<Vec<u32>, TokenizerError> {
        match &self.inner {
            Backend::Hf(inner) => {
                let enc = inner
                    .encode(text, add_special)
                    .map_err(lib_err("encoding text"))?;
                Ok(enc.get_ids().to_vec())
            }
            Backend::Spm { spm, bos, eos } => {
                let mut ids = Vec::with_capacity(text.len() / 2 + 2);
                if add_special {
                    ids.extend(*bos);
                }
                spm.encode(text, &mut ids)?;
                if add_special {
                    ids.extend(*eos);
                }
                Ok(ids)
            }
        }
    }

    /// Decodes ids to text (llama.cpp's `llama_detokenize` with special tokens rendered):
    /// special tokens are rendered as their text (`<|im_end|>`), byte sequences that are not
    /// valid UTF-8 become U+FFFD, and for a SentencePiece vocabulary with `add_space_prefix`
    /// one leading space of the first token is dropped (the space encoding added), so that
    /// `decode(encode(text))` gives `text` back. For generated text, which continues a
    /// prompt, use [`Tokenizer::decode_continuation`].
    ///
    /// Errors: [`TokenizerError::IdOutOfRange`] naming the first id outside the vocabulary.
    pub fn decode(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.decode_with(ids, true)
    }

    /// Decodes ids that continue earlier text: as [`Tokenizer::decode`], but a SentencePiece
    /// token's leading space is kept (the text of each token as llama.cpp's
    /// `llama_token_to_piece` gives it, concatenated: what llama.cpp's server streams). The
    /// same as [`Tokenizer::decode`] for byte-level BPE.
    ///
    /// Errors: [`TokenizerError::IdOutOfRange`] naming the first id outside the vocabulary.
    pub fn decode_continuation(&self, ids: &[u32]) -> Result<String, TokenizerError> {
        self.decode_with(ids, false)
    }

    fn decode_with(&self, ids: &[u32], strip_leading: bool) -> Result<String, TokenizerError> {
        for &id in ids {
            self.check_id(id)?;
        }
        match &self.inner {
            Backend::Hf(inner) => inner.decode(ids, false).map_err(lib_err("decoding ids")),
            Backend::Spm { spm, .. } => {
                Ok(String::from_utf8_lossy(&spm.decode_bytes(ids, strip_leading)).into_owned())
            }
        }
    }

    /// The text of one token on its own (as [`Tokenizer::decode_continuation`] of `[id]`,
    /// llama.cpp's `llama_token_to_piece`): a token holding only part of a multi-byte
    /// character gives U+FFFD; use [`Tokenizer::stream_decoder`] to print generated text.
    pub fn token_to_piece(&self, id: u32) -> Result<String, TokenizerError> {
        self.decode_continuation(&[id])
    }

    /// The bytes of one token, as it adds them to the text: a byte-level token's characters
    /// mapped back through GPT-2's byte-to-unicode table (`Ġ` → `0x20`); a token with a
    /// character outside that table (an added token such as `<fake token>`) gives its text's
    /// UTF-8. A SentencePiece token gives its text with `▁` as a space, a byte token
    /// (`<0x0A>`) its byte, an unused token nothing. A token may hold part of a multi-byte
    /// character: these are the bytes OpenAI's `logprobs.bytes` lists.
    ///
    /// Errors: [`TokenizerError::IdOutOfRange`].
    pub fn token_bytes(&self, id: u32) -> Result<Vec<u8>, TokenizerError> {
        self.check_id(id)?;
        match &self.inner {
            Backend::Hf(inner) => {
                let text = inner.id_to_token(id).unwrap_or_default();
                let bytes: Option<Vec<u8>> = text.chars().map(byte_of_char).collect();
                Ok(bytes.unwrap_or_else(|| text.into_bytes()))
            }
            Backend::Spm { spm, .. } => Ok(spm.piece(id).to_vec()),
        }
    }

    /// The vocabulary prepared for constrained decoding (built on first use, then kept):
    /// each token's [`Tokenizer::token_bytes`], with added tokens (`<|im_start|>` and the
    /// like; a SentencePiece vocabulary's control, unknown and user-defined tokens) never
    /// allowed inside a value, and the end-of-generation ids.
    pub fn constraint_vocab(&self) -> &crate::constrain::TokenVocab {
        self.constraint_vocab.get_or_init(|| {
            let added: HashSet<u32> = match &self.inner {
                Backend::Hf(inner) => inner.get_added_tokens_decoder().into_keys().collect(),
                Backend::Spm { spm, .. } => (0..self.vocab_size as u32)
                    .filter(|&id| spm.is_special(id))
                    .collect(),
            };
            let mut eog: Vec<u32> = self.eog.iter().copied().collect();
            eog.sort_unstable();
            crate::constrain::TokenVocab::new(
                self.vocab_size,
                |id| {
                    (!added.contains(&id))
                        .then(|| self.token_bytes(id).ok())
                        .flatten()
                },
                eog,
            )
        })
    }

    /// Number of token ids (the model's embedding rows for a GGUF vocabulary).
    pub fn vocab_size(&self) -> usize {
        self.vocab_size
    }

    /// Beginning-of-sequence id, if the model has one.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence id, if the model has one.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// Whether `id` ends generation: eos, and any token whose text is one of llama.cpp's
    /// end-of-generation texts (`<|im_end|>`, `<|endoftext|>`, `<|eot_id|>`, `<end_of_turn>`, ...).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// A decoder that turns ids arriving one by one into complete UTF-8 text.
    pub fn stream_decoder(&self) -> StreamDecoder<'_> {
        StreamDecoder {
            tok: self,
            state: StreamState::default(),
        }
    }

    fn check_id(&self, id: u32) -> Result<(), TokenizerError> {
        let known = match &self.inner {
            Backend::Hf(inner) => inner.id_to_token(id).is_some(),
            Backend::Spm { spm, .. } => (id as usize) < spm.len(),
        };
        if (id as usize) < self.vocab_size && known {
            Ok(())
        } else {
            Err(TokenizerError::IdOutOfRange {
                id,
                vocab_size: self.vocab_size,
            })
        }
    }
}

/// Incremental decoding of generated ids into text that never splits a UTF-8 character.
///
/// [`StreamDecoder::push`] returns `Some(text)` once the ids so far decode to new, complete
/// text, and `None` while the last token leaves a character unfinished. The concatenation of
/// everything returned, plus [`StreamDecoder::finish`], equals
/// [`Tokenizer::decode_continuation`] of all ids (generated text keeps the leading space a
/// SentencePiece token carries).
/// It keeps the previous token as context (decoders may treat a leading token specially) and
/// re-decodes only the ids since then.
pub struct StreamDecoder<'a> {
    tok: &'a Tokenizer,
    state: StreamState,
}

impl StreamDecoder<'_> {
    /// Adds one id; returns the newly completed text, if any.
    ///
    /// Errors: [`TokenizerError::IdOutOfRange`] for an id outside the vocabulary (the
    /// decoder's state is left unchanged).
    pub fn push(&mut self, id: u32) -> Result<Option<String>, TokenizerError> {
        self.state.push(self.tok, id)
    }

    /// Flushes what is still held and resets the decoder. Returns `None` when nothing was
    /// pending. An unfinished character at the end (the stream stopped inside a multi-byte
    /// UTF-8 sequence) is dropped, not flushed as U+FFFD: the model did not produce that
    /// character. (A complete U+FFFD as the very last character is dropped too: in decoded
    /// text the two cannot be told apart.)
    pub fn finish(&mut self) -> Result<Option<String>, TokenizerError> {
        self.state.finish(self.tok)
    }
}

/// The state of a [`StreamDecoder`] without the tokenizer borrow, for a holder that
/// outlives any one borrow (a sequence of a running batch); each call names the tokenizer.
#[derive(Debug, Clone, Default)]
pub struct StreamState {
    /// Ids since the last emission, preceded by one context id once something was emitted.
    ids: Vec<u32>,
    /// Decoded text of the context id (already emitted).
    prefix: String,
}

impl StreamState {
    /// As [`StreamDecoder::push`], decoding with `tok`.
    ///
    /// Errors: [`TokenizerError::IdOutOfRange`] for an id outside the vocabulary.
    pub fn push(&mut self, tok: &Tokenizer, id: u32) -> Result<Option<String>, TokenizerError> {
        tok.check_id(id)?;
        self.ids.push(id);
        let text = tok.decode_continuation(&self.ids)?;
        if text.ends_with('\u{FFFD}') {
            return Ok(None);
        }
        let Some(new) = text.strip_prefix(self.prefix.as_str()) else {
            return Ok(None);
        };
        if new.is_empty() {
            return Ok(None);
        }
        let new = new.to_string();
        let last = *self.ids.last().expect("an id was just pushed");
        self.ids.clear();
        self.ids.push(last);
        self.prefix = tok.decode_continuation(&self.ids)?;
        Ok(Some(new))
    }

    /// As [`StreamDecoder::finish`], decoding with `tok`.
    ///
    /// Errors: the tokenizer's decoding errors.
    pub fn finish(&mut self, tok: &Tokenizer) -> Result<Option<String>, TokenizerError> {
        let text = tok.decode_continuation(&self.ids)?;
        let rest = text
            .strip_prefix(self.prefix.as_str())
            .unwrap_or(text.as_str())
            .trim_end_matches('\u{FFFD}')
            .to_string();
        self.ids.clear();
        self.prefix.clear();
        Ok((!rest.is_empty()).then_some(rest))
    }
}

/// The byte a character of GPT-2's byte-level alphabet stands for (`bytes_to_unicode` of
/// OpenAI's GPT-2 encoder): the printable bytes `!`..=`~`, `¡`..=`¬` and `®`..=`ÿ` stand for
/// themselves; the other 68 bytes, in increasing order, are `U+0100`, `U+0101`, ...
fn byte_of_char(c: char) -> Option<u8> {
    let printable = |b: u32| matches!(b, 0x21..=0x7E | 0xA1..=0xAC | 0xAE..=0xFF);
    let code = c as u32;
    if code <= 0xFF {
        return printable(code).then_some(code as u8);
    }
    let index = code.checked_sub(0x100)?;
    (0u32..=0xFF)
        .filter(|&b| !printable(b))
        .nth(index as usize)
        .map(|b| b as u8)
}
