//! Constrained decoding: output that stays a prefix of JSON a schema admits, alone or inside fixed text (the schema subset, the byte matcher, the token mask).
//!
//! A request with a constraint carries a compiled [`Grammar`] ([`Grammar::json_object`] for
//! OpenAI's `json_object`, [`Grammar::from_schema`] for `json_schema`). The decode loop keeps
//! one [`Constraint`] per sequence: before each token it masks the logits to the tokens
//! [`TokenVocab::mask`] allows (greedy decoding first tries the unmasked argmax, which the
//! mask would keep whenever it is allowed), and after it feeds the token's bytes.

pub mod mask;
pub mod matcher;
pub mod schema;

use std::sync::Arc;

pub use mask::TokenVocab;
pub use matcher::MatchState;
pub use schema::{BuildError, Grammar, GrammarBuilder, SchemaError};

/// One sequence's constraint: its grammar and the matcher's state over the output so far.
#[derive(Debug, Clone)]
pub struct Constraint {
    grammar: Arc<Grammar>,
    state: MatchState,
    scratch: Vec<MatchState>,
    mask: Vec<u64>,
}

impl Constraint {
    /// The constraint before the first output byte.
    pub fn new(grammar: Arc<Grammar>) -> Constraint {
        let state = MatchState::new(&grammar);
        Constraint {
            grammar,
            state,
            scratch: Vec::new(),
            mask: Vec::new(),
        }
    }

    /// Whether token `id` may come next.
    pub fn allows(&self, vocab: &TokenVocab, id: u32) -> bool {
        vocab.allows(&self.grammar, &self.state, id)
    }

    /// The tokens that may come next, as a bit set over the vocabulary.
    pub fn mask(&mut self, vocab: &TokenVocab) -> &[u64] {
        vocab.mask(
            &self.grammar,
            &self.state,
            &mut self.scratch,
            &mut self.mask,
        );
        &self.mask
    }

    /// `logits` (`[vocab]`) with every token the constraint refuses set to `-inf`, written
    /// to `out`; `false` when it refuses every token.
    pub fn mask_logits(&mut self, vocab: &TokenVocab, logits: &[f32], out: &mut Vec<f32>) -> bool {
        let mask = self.mask(vocab);
        out.clear();
        out.extend_from_slice(logits);
        let mut any = false;
        for (i, l) in out.iter_mut().enumerate() {
            let word = mask.get(i / 64).copied().unwrap_or(0);
            if word >> (i % 64) & 1 == 0 {
                *l = f32::NEG_INFINITY;
            } else {
                any = true;
            }
        }
        any
    }

    /// Take token `id` if the constraint allows it (an end-of-generation token adds no byte
    /// and is allowed on a complete value only); a refused token leaves the state as it was.
    ///
    /// # Errors
    /// The constraint refuses the token (the caller sampled a token the mask refused).
    pub fn advance(&mut self, vocab: &TokenVocab, id: u32) -> Result<(), ConstraintError> {
        if vocab.is_eog(id) {
            return if self.is_complete() {
                Ok(())
            } else {
                Err(ConstraintError::Refused { id })
            };
        }
        let bytes = vocab.bytes(id);
        let mut next = self.state.clone();
        if !bytes.is_empty() && next.feed_all(&self.grammar, bytes) {
            self.state = next;
            Ok(())
        } else {
            Err(ConstraintError::Refused { id })
        }
    }

    /// The output so far is a complete value.
    pub fn is_complete(&self) -> bool {
        self.state.is_complete(&self.grammar)
    }
}

/// A constraint that cannot go on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintError {
    /// A token outside the mask was taken.
    #[error("token {id} does not continue the constrained JSON output")]
    Refused {
        /// The token.
        id: u32,
    },
    /// No token of the vocabulary continues the output.
    #[error("no token of the vocabulary continues the constrained JSON output")]
    NoToken,
}
