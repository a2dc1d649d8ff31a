//! The paged KV cache: fixed-size pages, a free list and a block table per sequence.
