//! The paged KV cache: fixed-size pages, a free list and a block table per sequence.
//!
//! A page holds `page_tokens` consecutive positions of one sequence, for every layer, K and V:
//! its storage is `[n_layers, 2 (K then V), n_kv_heads, page_tokens, head_dim]` elements, so
//! one KV head's rows of a page are one contiguous run (what attention reads, head by head).
//! A sequence's block table maps its logical page `pos / page_tokens` to a physical page id.
//! Pages are allocated lazily, up to `max_pages`: a page's memory is created the first time it
//! is handed out, then recycled through the free list; it is zeroed whenever it is handed to a
//! sequence, so no sequence ever reads another's data.

use std::collections::HashMap;
use std::ops::Range;

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::kernels::VecOps;
use crate::kernels::attention::{GROUP_PASS, KvSource, group_passes};

/// Element type of the stored keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KvDtype {
    /// 4-byte IEEE single precision: reads return exactly what was written.
    F32,
    /// 2-byte IEEE half precision (`half::f16`): writes round to nearest, halving the memory.
    F16,
}

impl KvDtype {
    /// The type's name: `f32` or `f16`.
    pub fn name(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
        }
    }

    /// Bytes per stored element.
    pub fn size(self) -> usize {
        match self {
            KvDtype::F32 => 4,
            KvDtype::F16 => 2,
        }
    }
}

/// Default element type of the decode core's KV cache (half precision, as llama.cpp's
/// default K and V type; `EngineOptions::kv_dtype` chooses per engine).
pub const KV_DTYPE: KvDtype = KvDtype::F16;

/// Geometry and capacity of a [`KvCache`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvConfig {
    /// Transformer blocks (`llama.block_count`).
    pub n_layers: usize,
    /// KV heads per layer (`llama.attention.head_count_kv`).
    pub n_kv_heads: usize,
    /// Coordinates per head (embedding length / head count).
    pub head_dim: usize,
    /// Positions per page.
    pub page_tokens: usize,
    /// Most pages the cache may hold at once.
    pub max_pages: usize,
    /// Storage element type.
    pub dtype: KvDtype,
}

/// Errors of the KV cache, each naming the value at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KvError {
    /// A configuration field is zero.
    #[error("KV cache config field `{field}` must be positive, got 0")]
    ZeroField {
        /// Field name in [`KvConfig`].
        field: &'static str,
    },
    /// The configured geometry overflows `usize` when sizing a page or the whole cache.
    #[error("KV cache config overflows: {what}")]
    Overflow {
        /// Which product overflowed.
        what: &'static str,
    },
    /// Not enough free pages for a growth.
    #[error("KV cache out of pages: need {need} more, {free} free of {max_pages}")]
    OutOfPages {
        /// Pages the growth needs.
        need: usize,
        /// Pages free now.
        free: usize,
        /// Total capacity in pages.
        max_pages: usize,
    },
    /// The sequence id is unknown (never created, or released).
    #[error("unknown KV sequence {0}")]
    UnknownSequence(u64),
    /// A page to share is not held by anything (never created, or back on the free list).
    #[error("KV page {0} is not live: only a page something holds can be shared")]
    PageNotLive(usize),
    /// A layer index is out of range.
    #[error("layer {layer} out of range: the cache has {n_layers} layers")]
    LayerOutOfRange {
        /// The requested layer.
        layer: usize,
        /// Layers in the cache.
        n_layers: usize,
    },
    /// A write targets a position the sequence has not grown to.
    #[error("position {pos} out of range: sequence has {len} positions (grow it first)")]
    PositionOutOfRange {
        /// The requested position.
        pos: usize,
        /// The sequence length.
        len: usize,
    },
    /// A K or V row has the wrong length.
    #[error("{which} row has {got} elements, expected n_kv_heads * head_dim = {expected}")]
    RowLength {
        /// `"k"` or `"v"`.
        which: &'static str,
        /// Length received.
        got: usize,
        /// Length required.
        expected: usize,
    },
}

/// Handle of one sequence in a [`KvCache`]. Ids are never reused within a cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SeqId(u64);

impl SeqId {
    /// The numeric id (for logs and error messages).
    pub fn get(self) -> u64 {
        self.0
    }
}

#[derive(Debug)]
enum Pages {
    F32(Vec<Box<[f32]>>),
    F16(Vec<Box<[f16]>>),
}

#[derive(Debug, Default)]
struct Seq {
    len: usize,
    blocks: Vec<usize>,
}

/// A paged KV cache shared by many sequences.
#[derive(Debug)]
pub struct KvCache {
    cfg: KvConfig,
    row: usize,
    page_elems: usize,
    pages: Pages,
    /// Holders of each created page (sequences whose block table names it, and retains);
    /// a page goes back to the free list when its count reaches 0.
    refs: Vec<u32>,
    free: Vec<usize>,
    seqs: HashMap<u64, Seq>,
    next_seq: u64,
    ops: VecOps,
}

impl KvCache {
    /// An empty cache. No page memory is allocated until a sequence grows (lazy allocation).
    ///
    /// # Errors
    /// [`KvError::ZeroField`] for a zero field; [`KvError::Overflow`] when a page's or the
    /// whole cache's byte size overflows `usize`.
    pub fn new(cfg: KvConfig) -> Result<KvCache, KvError> {
        for (field, v) in [
            ("n_layers", cfg.n_layers),
            ("n_kv_heads", cfg.n_kv_heads),
            ("head_dim", cfg.head_dim),
            ("page_tokens", cfg.page_tokens),
            ("max_pages", cfg.max_pages),
        ] {
            if v == 0 {
                return Err(KvError::ZeroField { field });
            }
        }
        let row = cfg
            .n_kv_heads
            .checked_mul(cfg.head_dim)
            .ok_or(KvError::Overflow {
                what: "n_kv_heads * head_dim",
            })?;
        let page_elems = row
            .checked_mul(cfg.page_tokens)
            .and_then(|x| x.checked_mul(cfg.n_layers))
            .and_then(|x| x.checked_mul(2))
            .ok_or(KvError::Overflow {
                what: "2 * n_layers * page_tokens * n_kv_heads * head_dim",
            })?;
        page_elems
            .checked_mul(cfg.dtype.size())
            .and_then(|x| x.checked_mul(cfg.max_pages))
            .ok_or(KvError::Overflow {
                what: "page bytes * max_pages",
            })?;
        cfg.page_tokens
            .checked_mul(cfg.max_pages)
            .ok_or(KvError::Overflow {
                what: "page_tokens * max_pages",
            })?;
        let pages = match cfg.dtype {
            KvDtype::F32 => Pages::F32(Vec::new()),
            KvDtype::F16 => Pages::F16(Vec::new()),
        };
        Ok(KvCache {
            cfg,
            row,
            page_elems,
            pages,
            refs: Vec::new(),
            free: Vec::new(),
            seqs: HashMap::new(),
            next_seq: 0,
            ops: VecOps::best(),
        })
    }

    /// The configuration the cache was built with.
    pub fn config(&self) -> &KvConfig {
        &self.cfg
    }

    /// Use an explicit SIMD path for the attention reads of [`KvCache::layer`] views
    /// (default [`VecOps::best`]).
    pub fn set_ops(&mut self, ops: VecOps) {
        self.ops = ops;
    }

    /// Bytes one position costs across all layers: `2 × n_layers × n_kv_heads × head_dim ×
    /// element size` (K and V). This is the figure admission budgets count.
    pub fn bytes_per_token(&self) -> usize {
        2 * self.cfg.n_layers * self.row * self.cfg.dtype.size()
    }

    /// Bytes of one page (`bytes_per_token × page_tokens`).
    pub fn page_bytes(&self) -> usize {
        self.page_elems * self.cfg.dtype.size()
    }

    /// Start an empty sequence.
    pub fn create_sequence(&mut self) -> SeqId {
        let id = self.next_seq;
        self.next_seq += 1;
        self.seqs.insert(id, Seq::default());
        SeqId(id)
    }

    /// Ids of the live sequences, in creation order.
    pub fn sequences(&self) -> Vec<SeqId> {
        let mut ids: Vec<SeqId> = self.seqs.keys().map(|&k| SeqId(k)).collect();
        ids.sort();
        ids
    }

    /// Extend the sequence by `n` positions, taking pages from the free list (or creating
    /// them, up to `max_pages`); returns the new positions `old_len..old_len + n`. The new
    /// positions read as zeros until written. All or nothing: on error nothing changes.
    ///
    /// # Errors
    /// [`KvError::UnknownSequence`]; [`KvError::OutOfPages`] naming the pages needed and free.
    pub fn grow(&mut self, seq: SeqId, n: usize) -> Result<Range<usize>, KvError> {
        let free = self.free_pages();
        let max_pages = self.cfg.max_pages;
        let pt = self.cfg.page_tokens;
        let s = self
            .seqs
            .get(&seq.0)
            .ok_or(KvError::UnknownSequence(seq.0))?;
        let old = s.len;
        let new_len = old.checked_add(n).ok_or(KvError::OutOfPages {
            need: usize::MAX,
            free,
            max_pages,
        })?;
        let need = new_len.div_ceil(pt) - s.blocks.len();
        if need > free {
            return Err(KvError::OutOfPages {
                need,
                free,
                max_pages,
            });
        }
        let mut fresh = Vec::with_capacity(need);
        for _ in 0..need {
            fresh.push(self.take_page());
        }
        let s = self.seqs.get_mut(&seq.0).expect("sequence checked above");
        s.blocks.extend(fresh);
        s.len = new_len;
        Ok(old..new_len)
    }

    /// Store one position's K and V rows for one layer.
    ///
    /// `k`, `v`: `[n_kv_heads * head_dim]`. F16 storage rounds to nearest.
    ///
    /// # Errors
    /// [`KvError::UnknownSequence`], [`KvError::LayerOutOfRange`],
    /// [`KvError::PositionOutOfRange`] (`pos` not yet grown), [`KvError::RowLength`].
    pub fn write(
        &mut self,
        seq: SeqId,
        layer: usize,
        pos: usize,
        k: &[f32],
        v: &[f32],
    ) -> Result<(), KvError> {
        let s = self
            .seqs
            .get(&seq.0)
            .ok_or(KvError::UnknownSequence(seq.0))?;
        if layer >= self.cfg.n_layers {
            return Err(KvError::LayerOutOfRange {
                layer,
                n_layers: self.cfg.n_layers,
            });
        }
        if pos >= s.len {
            return Err(KvError::PositionOutOfRange { pos, len: s.len });
        }
        for (which, got) in [("k", k.len()), ("v", v.len())] {
            if got != self.row {
                return Err(KvError::RowLength {
                    which,
                    got,
                    expected: self.row,
                });
            }
        }
        let page = s.blocks[pos / self.cfg.page_tokens];
        let slot = pos % self.cfg.page_tokens;
        let d = self.cfg.head_dim;
        for (kind, x) in [k, v].into_iter().enumerate() {
            for (h, xh) in x.chunks_exact(d).enumerate() {
                let at = offset(&self.cfg, layer, kind, h, slot);
                match &mut self.pages {
                    Pages::F32(p) => p[page][at..at + d].copy_from_slice(xh),
                    Pages::F16(p) => p[page][at..at + d].convert_from_f32_slice(xh),
                }
            }
        }
        Ok(())
    }

    /// Positions the sequence holds.
    ///
    /// # Panics
    /// If `seq` is unknown (released or from another cache).
    pub fn len(&self, seq: SeqId) -> usize {
        self.seq(seq).len
    }

    /// Whether the cache holds no sequence at all.
    pub fn is_empty(&self) -> bool {
        self.seqs.is_empty()
    }

    /// Physical page ids of the sequence, in logical order (its block table).
    ///
    /// # Panics
    /// If `seq` is unknown.
    pub fn block_table(&self, seq: SeqId) -> &[usize] {
        &self.seq(seq).blocks
    }

    /// A read view of one layer of the sequence, implementing [`KvSource`] over positions
    /// `0..len(seq)`.
    ///
    /// # Panics
    /// If `seq` is unknown or `layer >= n_layers`.
    pub fn layer(&self, seq: SeqId, layer: usize) -> PagedKv<'_> {
        assert!(
            layer < self.cfg.n_layers,
            "layer {layer} out of range: the cache has {} layers",
            self.cfg.n_layers
        );
        let s = self.seq(seq);
        PagedKv {
            cfg: &self.cfg,
            pages: &self.pages,
            blocks: &s.blocks,
            len: s.len,
            layer,
            ops: self.ops,
        }
    }

    /// Shorten the sequence to `len` positions, returning the pages wholly past `len` to the
    /// free list and zeroing the cut-off positions of a partly kept page (so they read as zeros
    /// if the sequence grows again). A `len` at or beyond the current length changes nothing.
    ///
    /// # Panics
    /// If `seq` is unknown.
    pub fn truncate(&mut self, seq: SeqId, len: usize) {
        let pt = self.cfg.page_tokens;
        let s = self
            .seqs
            .get_mut(&seq.0)
            .unwrap_or_else(|| panic!("unknown KV sequence {}", seq.0));
        if len >= s.len {
            return;
        }
        s.len = len;
        let keep = len.div_ceil(pt);
        let cut: Vec<usize> = s.blocks.drain(keep..).rev().collect();
        let last = (keep > 0).then(|| s.blocks[keep - 1]);
        for page in cut {
            self.unretain(page);
        }
        // Zero the cut-off slots of a partly kept last page, so a later `grow` reads zeros
        // (a page another holder shares is full and never partly kept).
        let first_slot = len % pt;
        if first_slot != 0
            && let Some(page) = last
            && self.refs[page] == 1
        {
            for layer in 0..self.cfg.n_layers {
                for kind in 0..2 {
                    for h in 0..self.cfg.n_kv_heads {
                        let a = offset(&self.cfg, layer, kind, h, first_slot);
                        let b = offset(&self.cfg, layer, kind, h, 0) + pt * self.cfg.head_dim;
                        match &mut self.pages {
                            Pages::F32(p) => p[page][a..b].fill(0.0),
                            Pages::F16(p) => p[page][a..b].fill(f16::ZERO),
                        }
                    }
                }
            }
        }
    }

    /// End the sequence and return all its pages to the free list. Releasing an unknown or
    /// already released sequence does nothing (so a double release can never free a page twice).
    pub fn release(&mut self, seq: SeqId) {
        if let Some(s) = self.seqs.remove(&seq.0) {
            for page in s.blocks.into_iter().rev() {
                self.unretain(page);
            }
        }
    }

    /// Start a sequence whose first positions are the full pages `pages` another holder
    /// keeps (a shared prefix): its length is `pages.len() × page_tokens`, and each page gains
    /// a holder. The pages are read-only for it: it grows into pages of its own.
    ///
    /// # Errors
    /// [`KvError::PageNotLive`] for a page nothing holds.
    pub fn adopt(&mut self, pages: &[usize]) -> Result<SeqId, KvError> {
        if let Some(&p) = pages
            .iter()
            .find(|&&p| self.refs.get(p).is_none_or(|&r| r == 0))
        {
            return Err(KvError::PageNotLive(p));
        }
        for &p in pages {
            self.refs[p] += 1;
        }
        let id = self.next_seq;
        self.next_seq += 1;
        self.seqs.insert(
            id,
            Seq {
                len: pages.len() * self.cfg.page_tokens,
                blocks: pages.to_vec(),
            },
        );
        Ok(SeqId(id))
    }

    /// Hold `page` once more (a prefix cache keeping it after its sequence ends).
    ///
    /// # Errors
    /// [`KvError::PageNotLive`] for a page nothing holds.
    pub fn retain(&mut self, page: usize) -> Result<(), KvError> {
        match self.refs.get_mut(page) {
            Some(r) if *r > 0 => {
                *r += 1;
                Ok(())
            }
            _ => Err(KvError::PageNotLive(page)),
        }
    }

    /// Drop one hold on `page`; the last one returns it to the free list. A page nothing
    /// holds is left alone (so a double drop can never free a page twice).
    pub fn unretain(&mut self, page: usize) {
        if let Some(r) = self.refs.get_mut(page)
            && *r > 0
        {
            *r -= 1;
            if *r == 0 {
                self.free.push(page);
            }
        }
    }

    /// Holders of `page` (0 for a free or never-created page).
    pub fn holders(&self, page: usize) -> u32 {
        self.refs.get(page).copied().unwrap_or(0)
    }

    /// Pages that can still be handed out: recycled ones plus never-created ones.
    pub fn free_pages(&self) -> usize {
        self.cfg.max_pages - self.used_pages()
    }

    /// Pages held by sequences.
    pub fn used_pages(&self) -> usize {
        self.created_pages() - self.free.len()
    }

    /// Pages whose memory has been created so far (lazy allocation high-water mark).
    pub fn created_pages(&self) -> usize {
        match &self.pages {
            Pages::F32(p) => p.len(),
            Pages::F16(p) => p.len(),
        }
    }

    fn seq(&self, seq: SeqId) -> &Seq {
        self.seqs
            .get(&seq.0)
            .unwrap_or_else(|| panic!("unknown KV sequence {}", seq.0))
    }

    /// A zeroed page: recycled from the free list, else newly created. The caller has checked
    /// that `free_pages() > 0`.
    fn take_page(&mut self) -> usize {
        if let Some(id) = self.free.pop() {
            match &mut self.pages {
                Pages::F32(p) => p[id].fill(0.0),
                Pages::F16(p) => p[id].fill(f16::ZERO),
            }
            self.refs[id] = 1;
            return id;
        }
        let n = self.page_elems;
        self.refs.push(1);
        match &mut self.pages {
            Pages::F32(p) => {
                p.push(vec![0.0; n].into_boxed_slice());
                p.len() - 1
            }
            Pages::F16(p) => {
                p.push(vec![f16::ZERO; n].into_boxed_slice());
                p.len() - 1
            }
        }
    }
}

/// Element offset of `(layer, kind, kv_head, slot)` inside a page; `kind` 0 is K, 1 is V.
/// A head's `page_tokens` rows follow each other (`head_dim` apart).
fn offset(cfg: &KvConfig, layer: usize, kind: usize, kv_head: usize, slot: usize) -> usize {
    (((layer * 2 + kind) * cfg.n_kv_heads + kv_head) * cfg.page_tokens + slot) * cfg.head_dim
}

/// One layer of one sequence, read through its block table. Implements [`KvSource`], using
/// the same [`VecOps`] calls as [`crate::kernels::attention::ContiguousKv`], so with f32
/// storage attention over it is bit-identical to attention over the same rows laid out
/// contiguously. With f16 storage the same primitives' f16 forms ([`VecOps::dot_f16`] and
/// the rest) widen each row as they load it, so attention over f16 pages equals attention
/// over the widened rows bit for bit.
#[derive(Debug, Clone, Copy)]
pub struct PagedKv<'a> {
    cfg: &'a KvConfig,
    pages: &'a Pages,
    blocks: &'a [usize],
    len: usize,
    layer: usize,
    ops: VecOps,
}

impl PagedKv<'_> {
    fn start(&self, pos: usize, kv_head: usize, kind: usize) -> (usize, usize) {
        assert!(
            pos < self.len,
            "PagedKv: position {pos} past length {}",
            self.len
        );
        assert!(
            kv_head < self.cfg.n_kv_heads,
            "PagedKv: kv_head {kv_head} out of range"
        );
        let page = self.blocks[pos / self.cfg.page_tokens];
        let slot = pos % self.cfg.page_tokens;
        let off = offset(self.cfg, self.layer, kind, kv_head, slot);
        (page, off)
    }
}

impl PagedKv<'_> {
    /// Copy `K[pos, kv_head]` (widened to f32) into `out` (`[head_dim]`).
    ///
    /// # Panics
    /// If `pos >= len`, `kv_head >= n_kv_heads` or `out.len() != head_dim`.
    pub fn read_key(&self, pos: usize, kv_head: usize, out: &mut [f32]) {
        self.read(pos, kv_head, 0, out)
    }

    /// Copy `V[pos, kv_head]` (widened to f32) into `out` (`[head_dim]`).
    ///
    /// # Panics
    /// If `pos >= len`, `kv_head >= n_kv_heads` or `out.len() != head_dim`.
    pub fn read_value(&self, pos: usize, kv_head: usize, out: &mut [f32]) {
        self.read(pos, kv_head, 1, out)
    }

    fn read(&self, pos: usize, kv_head: usize, kind: usize, out: &mut [f32]) {
        let (page, off) = self.start(pos, kv_head, kind);
        let d = self.cfg.head_dim;
        assert_eq!(out.len(), d, "read: out must be [head_dim = {d}]");
        match self.pages {
            Pages::F32(p) => out.copy_from_slice(&p[page][off..off + d]),
            Pages::F16(p) => p[page][off..off + d].convert_to_f32_slice(out),
        }
    }
}

impl PagedKv<'_> {
    /// Split positions `lo..lo + n` into runs inside one page: `f(first index, page,
    /// element offset of the run's first row for `kind` and `kv_head`, run length)`.
    fn page_runs(
        &self,
        lo: usize,
        n: usize,
        kv_head: usize,
        kind: usize,
        mut f: impl FnMut(usize, usize, usize, usize),
    ) {
        if n == 0 {
            return;
        }
        assert!(
            lo + n <= self.len,
            "PagedKv: positions {lo}..{} past length {}",
            lo + n,
            self.len
        );
        let pt = self.cfg.page_tokens;
        let mut i = 0;
        while i < n {
            let (page, off) = self.start(lo + i, kv_head, kind);
            let run = (pt - (lo + i) % pt).min(n - i);
            f(i, page, off, run);
            i += run;
        }
    }
}

impl KvSource for PagedKv<'_> {
    fn n_kv_heads(&self) -> usize {
        self.cfg.n_kv_heads
    }
    fn head_dim(&self) -> usize {
        self.cfg.head_dim
    }
    fn len(&self) -> usize {
        self.len
    }
    fn ops(&self) -> VecOps {
        self.ops
    }
    fn read_rows(
        &self,
        lo: usize,
        n: usize,
        kv_head: usize,
        values: bool,
        out: &mut [f32],
        stride: usize,
    ) {
        let d = self.cfg.head_dim;
        assert!(stride >= d, "read_rows: stride {stride} < head_dim {d}");
        let kind = usize::from(values);
        // One page run of one head is contiguous rows: widened in one call when the
        // output rows are packed, row by row otherwise.
        self.page_runs(lo, n, kv_head, kind, |i, page, off, run| {
            let src = off..off + run * d;
            if stride == d {
                let dst = &mut out[i * d..(i + run) * d];
                match self.pages {
                    Pages::F32(p) => dst.copy_from_slice(&p[page][src]),
                    Pages::F16(p) => p[page][src].convert_to_f32_slice(dst),
                }
                return;
            }
            for r in 0..run {
                let dst = &mut out[(i + r) * stride..(i + r) * stride + d];
                let row = off + r * d..off + (r + 1) * d;
                match self.pages {
                    Pages::F32(p) => dst.copy_from_slice(&p[page][row]),
                    Pages::F16(p) => p[page][row].convert_to_f32_slice(dst),
                }
            }
        })
    }
    fn dot_key(&self, pos: usize, kv_head: usize, q: &[f32]) -> f32 {
        let (page, off) = self.start(pos, kv_head, 0);
        let d = self.cfg.head_dim;
        match self.pages {
            Pages::F32(p) => self.ops.dot(q, &p[page][off..off + d]),
            Pages::F16(p) => self.ops.dot_f16(q, &p[page][off..off + d]),
        }
    }
    fn add_value(&self, pos: usize, kv_head: usize, w: f32, out: &mut [f32]) {
        let (page, off) = self.start(pos, kv_head, 1);
        let d = self.cfg.head_dim;
        match self.pages {
            Pages::F32(p) => self.ops.axpy(w, &p[page][off..off + d], out),
            Pages::F16(p) => self.ops.axpy_f16(w, &p[page][off..off + d], out),
        }
    }
    fn prefetch(&self, lo: usize, n: usize, kv_head: usize, values: bool) {
        let d = self.cfg.head_dim;
        let kind = usize::from(values);
        // A page run of one head is contiguous: one span per page.
        self.page_runs(lo, n, kv_head, kind, |_, page, off, run| match self.pages {
            Pages::F32(p) => {
                prefetch_bytes(p[page][off..off + run * d].as_ptr().cast(), 4 * run * d)
            }
            Pages::F16(p) => {
                prefetch_bytes(p[page][off..off + run * d].as_ptr().cast(), 2 * run * d)
            }
        })
    }
    fn dot_keys(&self, lo: usize, kv_head: usize, q: &[f32], out: &mut [f32]) {
        let d = self.cfg.head_dim;
        match self.pages {
            Pages::F32(p) => self.page_runs(lo, out.len(), kv_head, 0, |i, page, off, run| {
                let rows = &p[page][off..off + run * d];
                self.ops.dot_rows(q, rows, d, &mut out[i..i + run]);
            }),
            Pages::F16(p) => self.page_runs(lo, out.len(), kv_head, 0, |i, page, off, run| {
                let rows = &p[page][off..off + run * d];
                self.ops.dot_rows_f16(q, rows, d, &mut out[i..i + run]);
            }),
        }
    }
    fn dot_keys_heads(&self, lo: usize, kv_head: usize, qs: &[&[f32]], outs: &mut [&mut [f32]]) {
        assert_eq!(
            qs.len(),
            outs.len(),
            "dot_keys_heads: one output per query head"
        );
        let d = self.cfg.head_dim;
        let n = outs.first().map_or(0, |o| o.len());
        // Passes of at most GROUP_PASS heads, their scores of one page run on the stack.
        for (c0, c1) in group_passes(qs.len()) {
            let (qs, outs) = (&qs[c0..c1], &mut outs[c0..c1]);
            self.page_runs(lo, n, kv_head, 0, |i, page, off, run| {
                let mut buf: [&mut [f32]; GROUP_PASS] = Default::default();
                for (b, out) in buf.iter_mut().zip(outs.iter_mut()) {
                    *b = &mut out[i..i + run];
                }
                let sub = &mut buf[..qs.len()];
                match self.pages {
                    Pages::F32(p) => {
                        self.ops
                            .dot_rows_heads(qs, &p[page][off..off + run * d], d, sub)
                    }
                    Pages::F16(p) => {
                        self.ops
                            .dot_rows_heads_f16(qs, &p[page][off..off + run * d], d, sub)
                    }
                }
            })
        }
    }
    fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
        let d = self.cfg.head_dim;
        match self.pages {
            Pages::F32(p) => self.page_runs(lo, w.len(), kv_head, 1, |i, page, off, run| {
                let rows = &p[page][off..off + run * d];
                self.ops.axpy_rows(&w[i..i + run], rows, d, out);
            }),
            Pages::F16(p) => self.page_runs(lo, w.len(), kv_head, 1, |i, page, off, run| {
                let rows = &p[page][off..off + run * d];
                self.ops.axpy_rows_f16(&w[i..i + run], rows, d, out);
            }),
        }
    }
    fn add_values_heads(&self, lo: usize, kv_head: usize, ws: &[&[f32]], outs: &mut [&mut [f32]]) {
        assert_eq!(
            ws.len(),
            outs.len(),
            "add_values_heads: one output per head"
        );
        let d = self.cfg.head_dim;
        let n = ws.first().map_or(0, |w| w.len());
        // Passes of at most GROUP_PASS heads, their weights of one page run on the stack.
        for (c0, c1) in group_passes(ws.len()) {
            let (ws, outs) = (&ws[c0..c1], &mut outs[c0..c1]);
            let mut buf: [&[f32]; GROUP_PASS] = [&[]; GROUP_PASS];
            self.page_runs(lo, n, kv_head, 1, |i, page, off, run| {
                for (b, w) in buf.iter_mut().zip(ws) {
                    *b = &w[i..i + run];
                }
                let sub = &buf[..ws.len()];
                let rows = off..off + run * d;
                match self.pages {
                    Pages::F32(p) => self.ops.axpy_rows_heads(sub, &p[page][rows], d, outs),
                    Pages::F16(p) => self.ops.axpy_rows_heads_f16(sub, &p[page][rows], d, outs),
                }
            })
        }
    }
}

/// Ask the CPU to bring the cache lines of `bytes` bytes at `p` into the L1 cache (a
/// prefetch hint: no fault, no effect on any value; nothing on other architectures).
#[inline]
fn prefetch_bytes(p: *const u8, bytes: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        for line in (0..bytes).step_by(64) {
            // SAFETY: a prefetch never faults and reads nothing; the address stays inside
            // the row the caller named.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.wrapping_add(line).cast()) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, bytes);
}
