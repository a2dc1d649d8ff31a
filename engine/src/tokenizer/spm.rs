//! SentencePiece vocabularies (`tokenizer.ggml.model = "llama"`) tokenized as llama.cpp's `llm_tokenizer_spm`: score-ordered pair merging with byte fallback.
//!
//! The algorithm is llama.cpp's (`llama-vocab.cpp`, `llm_tokenizer_spm_session` and the
//! `LLAMA_VOCAB_TYPE_SPM` branch of `tokenize_impl`), step for step:
//!
//! 1. Special tokens are cut out of the text first (`tokenizer_st_partition`): every control,
//!    unknown and user-defined token, longest text first, splits each remaining text
//!    fragment at each of its occurrences. A token with the right-strip attribute eats the
//!    whitespace after it (llama.cpp sets it, by `general.name`, on Phi-3's special tokens).
//! 2. Each text fragment gets one leading space when `add_space_prefix` is set and it is the
//!    first fragment or follows a special token; then every `' '` becomes `'▁'` (U+2581).
//! 3. The fragment is cut into UTF-8 characters. Every adjacent pair whose concatenation is
//!    a vocabulary entry is a candidate; the candidate whose entry has the highest
//!    `tokenizer.ggml.scores` value is merged, the leftmost among equal scores; the new
//!    neighbours become candidates; until no candidate is left.
//! 4. Each remaining piece that is a vocabulary entry is its id; any other piece (a character
//!    outside the vocabulary) becomes one byte token `<0xXX>` per UTF-8 byte.
//!
//! Decoding is `llama_token_to_piece` with special tokens rendered: a normal token's `'▁'`
//! back to `' '`, a byte token its byte, control, unknown and user-defined tokens their text,
//! unused and undefined tokens nothing. `llama_detokenize` drops one leading space of the
//! first piece when `add_space_prefix` is set (the space step 2 added).

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use super::{TokenizerError, token_type};

/// Token texts llama.cpp's loader makes control tokens whatever their type (its EOT, EOM,
/// FIM and end-of-generation detection lists in `llama_vocab::impl::load`), so that they are
/// cut out of text and rendered verbatim. (llama.cpp marks only the first FIM token of each
/// kind it meets; a vocabulary with two spellings of one FIM kind is not reproduced.)
const CONTROL_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "<end_of_utterance>",
    "<|eom_id|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "</s>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "[e~[",
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<\u{ff5c}fim\u{2581}begin\u{ff5c}>",
    "<PRE>",
    "\u{2581}<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<\u{ff5c}fim\u{2581}hole\u{ff5c}>",
    "<SUF>",
    "\u{2581}<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<\u{ff5c}fim\u{2581}end\u{ff5c}>",
    "<MID>",
    "\u{2581}<MID>",
    "<|code_middle|>",
    "<|middle|>",
    "<|fim_pad|>",
    "<fim-pad>",
    "<fim_pad>",
    "<PAD>",
    "[PAD]",
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
    "<|file_sep|>",
];

/// Token texts llama.cpp's loader lists as ending generation (`special_eog_ids`; the FIM
/// pad, repo and file-separator tokens it adds too are left out).
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<\u{ff5c}end\u{2581}of\u{2581}sentence\u{ff5c}>",
    "[e~[",
];

/// Token texts llama.cpp's loader makes user-defined whatever their type (gpt-oss).
const USER_DEFINED_TEXTS: &[&str] = &["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"];

/// A SentencePiece vocabulary ready to encode and decode (see the module docs).
#[derive(Debug)]
pub(super) struct Spm {
    /// Token text → id, as llama.cpp's `token_to_id` (every token, whatever its type).
    ids: HashMap<String, u32>,
    /// `tokenizer.ggml.scores`, one per id.
    scores: Vec<f32>,
    /// The bytes each id adds to decoded text (`llama_token_to_piece` with `special = true`).
    pieces: Vec<Box<[u8]>>,
    /// The id standing for each byte when a character is outside the vocabulary.
    byte_ids: [Option<u32>; 256],
    /// Tokens cut out of text before merging, longest text first.
    specials: Vec<Special>,
    /// `tokenizer.ggml.add_space_prefix`.
    add_space_prefix: bool,
    /// Ids of the end-of-generation texts present ([`EOG_TEXTS`]).
    eog: Vec<u32>,
}

/// A token matched verbatim in text (control, unknown or user-defined).
#[derive(Debug)]
struct Special {
    text: String,
    id: u32,
    /// Whitespace after the token is dropped (llama.cpp's `LLAMA_TOKEN_ATTR_RSTRIP`).
    rstrip: bool,
}

/// One part of the text while special tokens are cut out: a byte range of raw text, or a
/// special token's id.
#[derive(Debug, Clone, Copy)]
enum Fragment {
    Text(usize, usize),
    Token(u32),
}

/// A merge candidate: symbols `left` and `right` whose concatenation (`size` bytes) is a
/// vocabulary entry of score `score`.
#[derive(Debug)]
struct Bigram {
    score: f32,
    left: usize,
    right: usize,
    size: usize,
}

impl PartialEq for Bigram {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Bigram {}

impl PartialOrd for Bigram {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Bigram {
    /// The max-heap's order: higher score first, then the leftmost pair (llama.cpp's
    /// `llm_bigram_spm::comparator`). Scores are never NaN (checked when building).
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// A piece of the text being merged: `len` bytes from `start`, linked to its neighbours
/// (`None` at the ends). A piece merged into its left neighbour has `len == 0`.
#[derive(Debug, Clone, Copy)]
struct Symbol {
    start: usize,
    len: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// C's `isspace` on one byte, as llama.cpp's strip attributes test it.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

/// The byte a `<0xXX>` token stands for.
fn byte_of_token_text(text: &str) -> Option<u8> {
    let hex = text.strip_prefix("<0x")?.strip_suffix('>')?;
    (hex.len() == 2)
        .then(|| u8::from_str_radix(hex, 16).ok())
        .flatten()
}

impl Spm {
    /// Builds the vocabulary. `tokens` are already checked non-empty and duplicate-free,
    /// `types` is empty (every token normal) or one per token, within `0..=6`, `scores` one
    /// per token. `rstrip_specials`: llama.cpp's Phi-3 rule (right-strip on every special
    /// token except `<unk>`, `<s>` and `<|endoftext|>`).
    ///
    /// Errors: [`TokenizerError::BadScore`] for a NaN score;
    /// [`TokenizerError::BadByteToken`] for a byte-typed token whose text is not `<0xXX>`.
    pub(super) fn new(
        tokens: &[String],
        types: &[i32],
        scores: &[f32],
        add_space_prefix: bool,
        rstrip_specials: bool,
    ) -> Result<Spm, TokenizerError> {
        if let Some((index, &value)) = scores.iter().enumerate().find(|(_, s)| s.is_nan()) {
            return Err(TokenizerError::BadScore { index, value });
        }
        let stored = |id: usize| types.get(id).copied().unwrap_or(token_type::NORMAL);
        let has = |t: &str| tokens.iter().any(|x| x == t);
        // Gemma 4 and PLaMo keep `</s>` a normal token (llama.cpp's loader).
        let normal_s = has("<|tool_response>") || has("<|plamo:eos|>");
        let ty = |id: usize| {
            let text = tokens[id].as_str();
            if USER_DEFINED_TEXTS.contains(&text) {
                token_type::USER_DEFINED
            } else if text == "</s>" && normal_s {
                token_type::NORMAL
            } else if CONTROL_TEXTS.contains(&text) && stored(id) != token_type::USER_DEFINED {
                token_type::CONTROL
            } else {
                stored(id)
            }
        };
        let mut ids = HashMap::with_capacity(tokens.len());
        let mut pieces = Vec::with_capacity(tokens.len());
        let mut specials = Vec::new();
        for (id, text) in tokens.iter().enumerate() {
            // llama.cpp renames an empty token so that it never matches text.
            let text = if text.is_empty() {
                format!("[EMPTY_{id}]")
            } else {
                text.clone()
            };
            let piece: Box<[u8]> = match ty(id) {
                token_type::NORMAL => text.replace('\u{2581}', " ").into_bytes().into(),
                token_type::BYTE => {
                    let b =
                        byte_of_token_text(&text).ok_or_else(|| TokenizerError::BadByteToken {
                            index: id,
                            text: text.clone(),
                        })?;
                    Box::new([b])
                }
                token_type::CONTROL | token_type::UNKNOWN | token_type::USER_DEFINED => {
                    text.as_bytes().into()
                }
                _ => Box::default(),
            };
            pieces.push(piece);
            if matches!(
                ty(id),
                token_type::CONTROL | token_type::UNKNOWN | token_type::USER_DEFINED
            ) {
                let rstrip =
                    rstrip_specials && !matches!(text.as_str(), "<unk>" | "<s>" | "<|endoftext|>");
                specials.push(Special {
                    text: text.clone(),
                    id: id as u32,
                    rstrip,
                });
            }
            ids.insert(text, id as u32);
        }
        // Longest first; llama.cpp's sort is not stable, equal lengths keep id order here.
        specials.sort_by(|a, b| b.text.len().cmp(&a.text.len()).then(a.id.cmp(&b.id)));
        let mut byte_ids = [None; 256];
        for (b, slot) in byte_ids.iter_mut().enumerate() {
            *slot = ids.get(&format!("<0x{b:02X}>")).copied().or_else(|| {
                // llama.cpp falls back to the byte itself as a one-byte token text.
                (b < 0x80)
                    .then(|| ids.get(&char::from(b as u8).to_string()).copied())
                    .flatten()
            });
        }
        let eog = EOG_TEXTS
            .iter()
            .filter(|t| !(normal_s && **t == "</s>"))
            .filter_map(|t| ids.get(*t).copied())
            .collect();
        Ok(Spm {
            eog,
            ids,
            scores: scores.to_vec(),
            pieces,
            byte_ids,
            specials,
            add_space_prefix,
        })
    }

    /// The id of a token text, if it is in the vocabulary.
    pub(super) fn token_to_id(&self, text: &str) -> Option<u32> {
        self.ids.get(text).copied()
    }

    /// Ids whose text llama.cpp treats as ending generation (besides eos).
    pub(super) fn eog_ids(&self) -> &[u32] {
        &self.eog
    }

    /// Whether `id` is matched verbatim in text (control, unknown or user-defined), never
    /// produced by merging.
    pub(super) fn is_special(&self, id: u32) -> bool {
        self.specials.iter().any(|s| s.id == id)
    }

    /// The bytes `id` adds to decoded text (empty for unused and undefined tokens).
    pub(super) fn piece(&self, id: u32) -> &[u8] {
        &self.pieces[id as usize]
    }

    /// Number of ids.
    pub(super) fn len(&self) -> usize {
        self.pieces.len()
    }

    /// Encodes `text` (no bos/eos) to ids, appending to `out`.
    ///
    /// Errors: [`TokenizerError::MissingByteToken`] when a character outside the
    /// vocabulary needs a byte the vocabulary has no token for.
    pub(super) fn encode(&self, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut prev_special = true;
        for fragment in self.partition(text) {
            match fragment {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(start, end) => {
                    let mut piece = String::with_capacity(end - start + 3);
                    if self.add_space_prefix && prev_special {
                        piece.push(' ');
                    }
                    piece.push_str(&text[start..end]);
                    let escaped = piece.replace(' ', "\u{2581}");
                    self.merge(&escaped, out)?;
                    prev_special = false;
                }
            }
        }
        Ok(())
    }

    /// Decoded bytes of `ids`: the pieces concatenated, with one leading space of the first
    /// piece dropped when `strip_leading` and `add_space_prefix` are both set.
    pub(super) fn decode_bytes(&self, ids: &[u32], strip_leading: bool) -> Vec<u8> {
        let mut out = Vec::new();
        for (i, &id) in ids.iter().enumerate() {
            let piece = self.piece(id);
            let piece = match piece {
                [b' ', rest @ ..] if i == 0 && strip_leading && self.add_space_prefix => rest,
                _ => piece,
            };
            out.extend_from_slice(piece);
        }
        out
    }

    /// `text` cut into raw-text ranges and special tokens (llama.cpp's
    /// `tokenizer_st_partition`).
    fn partition(&self, text: &str) -> Vec<Fragment> {
        let bytes = text.as_bytes();
        let mut frags = if text.is_empty() {
            Vec::new()
        } else {
            vec![Fragment::Text(0, text.len())]
        };
        for special in &self.specials {
            if !frags.iter().any(|f| matches!(f, Fragment::Text(s, e) if text[*s..*e].contains(special.text.as_str()))) {
                continue;
            }
            let mut next = Vec::with_capacity(frags.len() + 2);
            for frag in frags {
                let Fragment::Text(mut start, end) = frag else {
                    next.push(frag);
                    continue;
                };
                while let Some(found) = text[start..end].find(special.text.as_str()) {
                    let at = start + found;
                    if at > start {
                        next.push(Fragment::Text(start, at));
                    }
                    next.push(Fragment::Token(special.id));
                    start = at + special.text.len();
                    if special.rstrip {
                        while start < end && is_c_space(bytes[start]) {
                            start += 1;
                        }
                    }
                }
                if start < end {
                    next.push(Fragment::Text(start, end));
                }
            }
            frags = next;
        }
        frags
    }

    /// The score-ordered merge of one escaped fragment, then resegmentation into ids.
    fn merge(&self, text: &str, out: &mut Vec<u32>) -> Result<(), TokenizerError> {
        let mut symbols: Vec<Symbol> = Vec::with_capacity(text.len());
        for (start, c) in text.char_indices() {
            let index = symbols.len();
            symbols.push(Symbol {
                start,
                len: c.len_utf8(),
                prev: index.checked_sub(1),
                next: (start + c.len_utf8() < text.len()).then_some(index + 1),
            });
        }
        let mut queue = BinaryHeap::new();
        let candidate = |symbols: &[Symbol], left: Option<usize>, right: Option<usize>| {
            let (left, right) = (left?, right?);
            let (l, r) = (symbols[left], symbols[right]);
            let size = l.len + r.len;
            let id = self.token_to_id(&text[l.start..l.start + size])?;
            Some(Bigram {
                score: self.scores[id as usize],
                left,
                right,
                size,
            })
        };
        for i in 1..symbols.len() {
            queue.extend(candidate(&symbols, Some(i - 1), Some(i)));
        }
        while let Some(b) = queue.pop() {
            let (l, r) = (symbols[b.left], symbols[b.right]);
            if l.len == 0 || r.len == 0 || l.len + r.len != b.size {
                continue;
            }
            symbols[b.left].len += r.len;
            symbols[b.right].len = 0;
            symbols[b.left].next = r.next;
            if let Some(n) = r.next {
                symbols[n].prev = Some(b.left);
            }
            let prev = symbols[b.left].prev;
            queue.extend(candidate(&symbols, prev, Some(b.left)));
            queue.extend(candidate(&symbols, Some(b.left), symbols[b.left].next));
        }
        let mut i = (!symbols.is_empty()).then_some(0);
        while let Some(s) = i {
            let sym = symbols[s];
            let piece = &text[sym.start..sym.start + sym.len];
            match self.token_to_id(piece) {
                Some(id) => out.push(id),
                None => {
                    for &b in piece.as_bytes() {
                        out.push(
                            self.byte_ids[b as usize]
                                .ok_or(TokenizerError::MissingByteToken { byte: b })?,
                        );
                    }
                }
            }
            i = sym.next;
        }
        Ok(())
    }
}
