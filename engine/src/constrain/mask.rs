//! The token mask: which vocabulary tokens keep the output a prefix of a value the grammar admits, by one walk of a byte trie of the vocabulary.
//!
//! [`TokenVocab`] holds every token's bytes ([`crate::tokenizer::Tokenizer::token_bytes`])
//! in a trie laid out in preorder (each node knows where its subtree ends), so one linear
//! scan visits the nodes whose bytes the matcher takes and skips every subtree it refuses
//! at its first byte. Inside a plain string almost every token is string text that leaves
//! the matcher unchanged; those are precomputed ([`TokenVocab`]'s string-safe set) and only
//! the rest (tokens with `"`, `\`, control bytes or a partial UTF-8 character) are walked.
//!
//! Added tokens (`<|im_start|>` and the like) are never allowed inside the value; the
//! end-of-generation tokens are allowed exactly when the value is complete.

use super::matcher::MatchState;
use super::schema::Grammar;

/// A vocabulary prepared for constrained decoding.
#[derive(Debug)]
pub struct TokenVocab {
    bytes: Vec<Box<[u8]>>,
    eog: Vec<u32>,
    all: Trie,
    not_string_safe: Trie,
    string_safe: Vec<u64>,
}

/// A byte trie in preorder: node 0 is the root; node `i`'s subtree is `i..end[i]`.
#[derive(Debug, Default)]
struct Trie {
    byte: Vec<u8>,
    depth: Vec<u16>,
    end: Vec<u32>,
    /// Tokens ending at node `i`: `ids[first[i]..first[i + 1]]`.
    first: Vec<u32>,
    ids: Vec<u32>,
}

impl Trie {
    /// The trie of `tokens` (id, bytes), none empty.
    fn build(mut tokens: Vec<(u32, &[u8])>) -> Trie {
        tokens.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(&b.0)));
        let mut t = Trie::default();
        // The root.
        t.byte.push(0);
        t.depth.push(0);
        t.end.push(0);
        t.first.push(0);
        // The path of nodes to the previous token.
        let mut path: Vec<usize> = vec![0];
        let mut prev: &[u8] = &[];
        for (id, bytes) in tokens {
            let common = prev.iter().zip(bytes).take_while(|(a, b)| a == b).count();
            // Close the nodes deeper than the shared prefix.
            while path.len() > common + 1 {
                let n = path.pop().expect("path holds the root");
                t.end[n] = t.byte.len() as u32;
            }
            for (d, &b) in bytes.iter().enumerate().skip(common) {
                t.byte.push(b);
                t.depth.push((d + 1) as u16);
                t.end.push(0);
                t.first.push(t.ids.len() as u32);
                path.push(t.byte.len() - 1);
            }
            // Ids are appended in node order: this token ends at the last node.
            t.ids.push(id);
            prev = bytes;
        }
        while let Some(n) = path.pop() {
            t.end[n] = t.byte.len() as u32;
        }
        // In sorted order a token's prefixes come before it, so the tokens ending at a node
        // are pushed before any node after it is created: `first` is monotone.
        t.first.push(t.ids.len() as u32);
        t
    }

    /// Set in `mask` every token whose bytes `state` takes.
    fn walk(&self, g: &Grammar, state: &MatchState, stack: &mut Vec<MatchState>, mask: &mut [u64]) {
        stack.clear();
        stack.push(state.clone());
        let mut i = 1;
        let n = self.byte.len();
        while i < n {
            let d = self.depth[i] as usize;
            stack.truncate(d);
            let mut s = stack[d - 1].clone();
            if s.feed(g, self.byte[i]) {
                for &id in &self.ids[self.first[i] as usize..self.first[i + 1] as usize] {
                    mask[id as usize / 64] |= 1 << (id % 64);
                }
                stack.push(s);
                i += 1;
            } else {
                i = self.end[i] as usize;
            }
        }
    }
}

/// Bytes that a plain string takes without changing its state: printable ASCII but `"` and
/// `\`, and whole UTF-8 characters.
fn string_safe(bytes: &[u8]) -> bool {
    match std::str::from_utf8(bytes) {
        Ok(s) => s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\'),
        Err(_) => false,
    }
}

impl TokenVocab {
    /// The vocabulary of `vocab` tokens: `bytes(id)` gives a token's bytes, or `None` for
    /// a token never generated inside a value (an added token); `eog` are the
    /// end-of-generation ids.
    pub fn new(
        vocab: usize,
        mut bytes: impl FnMut(u32) -> Option<Vec<u8>>,
        eog: Vec<u32>,
    ) -> TokenVocab {
        let bytes: Vec<Box<[u8]>> = (0..vocab as u32)
            .map(|id| {
                if eog.contains(&id) {
                    return Box::default();
                }
                bytes(id).unwrap_or_default().into_boxed_slice()
            })
            .collect();
        let mut string_safe_bits = vec![0u64; vocab.div_ceil(64)];
        let mut all = Vec::new();
        let mut rest = Vec::new();
        for (id, b) in bytes.iter().enumerate() {
            if b.is_empty() {
                continue;
            }
            all.push((id as u32, &b[..]));
            if string_safe(b) {
                string_safe_bits[id / 64] |= 1 << (id % 64);
            } else {
                rest.push((id as u32, &b[..]));
            }
        }
        let all = Trie::build(all);
        let not_string_safe = Trie::build(rest);
        TokenVocab {
            bytes,
            eog,
            all,
            not_string_safe,
            string_safe: string_safe_bits,
        }
    }

    /// Number of token ids.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// No token at all.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes token `id` adds under a constraint (empty: never allowed in a value).
    pub fn bytes(&self, id: u32) -> &[u8] {
        self.bytes.get(id as usize).map_or(&[], |b| &b[..])
    }

    /// Whether `id` is an end-of-generation token.
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.contains(&id)
    }

    /// Whether token `id` is allowed after `state`: its bytes keep the text a prefix of a
    /// value, or it ends generation and the value is complete.
    pub fn allows(&self, g: &Grammar, state: &MatchState, id: u32) -> bool {
        if self.is_eog(id) {
            return state.is_complete(g);
        }
        let b = self.bytes(id);
        !b.is_empty() && state.clone().feed_all(g, b)
    }

    /// The allowed tokens after `state` as a bit set (`mask[id / 64] >> (id % 64) & 1`),
    /// `vocab.div_ceil(64)` words. `scratch` is reused between calls.
    pub fn mask(
        &self,
        g: &Grammar,
        state: &MatchState,
        scratch: &mut Vec<MatchState>,
        mask: &mut Vec<u64>,
    ) {
        mask.clear();
        mask.resize(self.bytes.len().div_ceil(64), 0);
        if state.in_plain_string() {
            mask.copy_from_slice(&self.string_safe);
            self.not_string_safe.walk(g, state, scratch, mask);
        } else if !state.is_done() {
            self.all.walk(g, state, scratch, mask);
        }
        if state.is_complete(g) {
            for &id in &self.eog {
                if (id as usize) < self.bytes.len() {
                    mask[id as usize / 64] |= 1 << (id % 64);
                }
            }
        }
    }
}
