//! What a token callback answers: keep generating, or stop.

/// What a token callback tells the decode loop ([`crate::batch::Sink::token`]) or the
/// workflow interpreter after each generated token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Keep going.
    Continue,
    /// Stop: the decode loop ends the sequence after this token; the interpreter ends
    /// every enclosing loop after its current iteration.
    Stop,
}
