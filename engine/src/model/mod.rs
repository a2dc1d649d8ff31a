//! The decode core: prefill (matrix-matrix) and one-token decode (matrix-vector) over the paged KV cache.
//!
//! One pass serves every supported architecture ([`Arch`]): the Llama block, with the
//! pieces each family adds switched on by its configuration and weights (Q/K/V biases,
//! Q/K RMSNorm, fused QKV and gate-up projections, post-attention and post-FFN norms,
//! GeGLU, embedding scaling, sliding-window layers with their own RoPE base, score and
//! logit soft-capping, Llama 3 RoPE frequency factors).
//!
//! The forward pass is split into the three components a declared workflow can name —
//! [`Model::embed`] (`token_embedding`), [`Model::decoder`] (`llama_decoder`, all blocks,
//! per-layer KV as state) and [`Model::lm_head`] (final RMSNorm + output projection) —
//! and [`Model::forward`] fuses them.

mod config;
mod weights;

use std::path::Path;
use std::sync::Arc;

pub use config::{Activation, Arch, LlamaConfig, SUPPORTED_ARCHITECTURES};
pub use weights::{GateUpWeights, LayerWeights, MatrixRef, QkvWeights, Weights};

use crate::gguf::{GgmlType, GgufError, GgufFile};
use crate::kernels::activation::{geglu, softcap_in_place, swiglu};
use crate::kernels::attention::KvSource;
use crate::kernels::attention::{
    causal_attention, gqa_attention, gqa_attention_part, merge_parts, part_len, split_segments,
};
use crate::kernels::matmul::{Cpu, WeightMatrix, matmul, matmul_many, matvec};
use crate::kernels::norm::rms_norm;
use crate::kernels::rope::Rope;
use crate::kv::{KvCache, KvConfig, KvDtype, KvError, SeqId};

/// Errors of loading or running the decode core. Each names the tensor, key or number at fault.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// The GGUF file could not be read, or a metadata key is missing or mistyped.
    #[error(transparent)]
    Metadata(#[from] GgufError),
    /// `general.architecture` names an architecture this core does not run.
    #[error(
        "unsupported architecture '{architecture}' (GGUF key `general.architecture`; this \
         decode core runs: {supported})"
    )]
    UnsupportedArchitecture {
        /// The architecture the file declares.
        architecture: String,
        /// Comma-separated list of supported architectures.
        supported: String,
    },
    /// Inconsistent hyper-parameters.
    #[error("bad model configuration: {0}")]
    BadConfig(String),
    /// A tensor the Llama layout needs is absent.
    #[error("missing tensor '{name}'")]
    MissingTensor {
        /// Tensor name, e.g. `blk.3.ffn_up.weight`.
        name: String,
    },
    /// A tensor has the wrong shape.
    #[error("tensor '{name}' has GGUF dims {found}, expected {expected}")]
    TensorShape {
        /// Tensor name.
        name: String,
        /// Expected dims, GGUF order (innermost first).
        expected: String,
        /// Found dims.
        found: String,
    },
    /// The file holds a tensor whose meaning this core does not implement.
    #[error("tensor '{name}' is not supported: {reason}")]
    UnsupportedTensor {
        /// Tensor name, e.g. `rope_factors_long.weight`.
        name: String,
        /// What it would need.
        reason: String,
    },
    /// A tensor's storage type has no kernel.
    #[error("tensor '{name}' has unsupported type {ty}")]
    UnsupportedTensorType {
        /// Tensor name.
        name: String,
        /// Its GGML type.
        ty: GgmlType,
    },
    /// A tensor's bytes do not form a valid matrix of its type.
    #[error("tensor '{name}': {message}")]
    Tensor {
        /// Tensor name.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A token id outside the vocabulary.
    #[error("token id {id} is outside the vocabulary (size {vocab})")]
    TokenOutOfRange {
        /// The id.
        id: u32,
        /// Vocabulary size.
        vocab: usize,
    },
    /// The sequence would exceed the model's context length.
    #[error(
        "{positions} positions exceed the model's context length of {context} \
         (prompt and new tokens must fit)"
    )]
    ContextOverflow {
        /// Positions the sequence would hold.
        positions: usize,
        /// `<arch>.context_length`.
        context: usize,
    },
    /// The KV cache refused the positions.
    #[error(transparent)]
    Kv(#[from] KvError),
    /// A pass of a continuous batch failed; every sequence of the pass gets its message.
    #[error("batched pass failed: {message}")]
    Step {
        /// The failure, as the model reported it.
        message: String,
    },
    /// An empty token list was given to a pass that needs at least one.
    #[error("no tokens to run")]
    Empty,
}

/// Which logits [`Model::forward`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Logits {
    /// Only the last position's: `[vocab]`.
    Last,
    /// Every position's: `[n, vocab]` row-major.
    All,
}

/// A loaded Llama model: configuration, memory-mapped weights and the CPU context.
#[derive(Debug)]
pub struct Model {
    cfg: LlamaConfig,
    weights: Weights,
    cpu: Cpu,
    /// RoPE of the global layers.
    rope: Rope,
    /// RoPE of the sliding-window layers when it differs (Gemma 3's local base).
    rope_swa: Option<Rope>,
}

impl Model {
    /// Open a GGUF file (memory-mapped) and bind its Llama weights.
    pub fn load(path: impl AsRef<Path>, cpu: Cpu) -> Result<Model, ModelError> {
        let file = GgufFile::open(path)?;
        Model::from_file(Arc::new(file), cpu)
    }

    /// Bind the Llama weights of an already opened GGUF file.
    ///
    /// RoPE uses adjacent pairs for `llama` (llama.cpp's converter permutes the Q and K
    /// weights of LLaMA checkpoints so that GGUF `llama` models rotate pairs `(2i, 2i+1)`)
    /// and rotate-half for the other families ([`Arch::rope_style`]). Gemma 3's local
    /// layers get their own table (`rope.freq_base_swa`, no scaling), as in llama.cpp.
    pub fn from_file(file: Arc<GgufFile>, cpu: Cpu) -> Result<Model, ModelError> {
        let mut cfg = LlamaConfig::from_metadata(file.metadata())?;
        let mut weights = Weights::bind(file, &mut cfg)?;
        weights.pack(cpu.isa());
        let style = cfg.arch.rope_style();
        let factors = weights.rope_freqs.as_deref();
        let rope = Rope::scaled(
            cfg.head_dim,
            cfg.rope_base,
            style,
            cfg.rope_freq_scale,
            factors,
        );
        let swa_differs =
            cfg.rope_base_swa != cfg.rope_base || cfg.rope_freq_scale != 1.0 || factors.is_some();
        let rope_swa = (cfg.swa_layers.iter().any(|&s| s) && swa_differs)
            .then(|| Rope::new(cfg.head_dim, cfg.rope_base_swa, style));
        Ok(Model {
            cfg,
            weights,
            cpu,
            rope,
            rope_swa,
        })
    }

    /// The model's hyper-parameters.
    pub fn config(&self) -> &LlamaConfig {
        &self.cfg
    }

    /// The bound weights.
    pub fn weights(&self) -> &Weights {
        &self.weights
    }

    /// The CPU context (thread pool and SIMD path) the kernels run on.
    pub fn cpu(&self) -> &Cpu {
        &self.cpu
    }

    /// A KV cache configuration for this model able to hold `max_tokens` positions in
    /// total (across sequences), in pages of 16 positions.
    pub fn kv_config(&self, max_tokens: usize, dtype: KvDtype) -> KvConfig {
        const PAGE: usize = 16;
        KvConfig {
            n_layers: self.cfg.n_layers,
            n_kv_heads: self.cfg.n_kv_heads,
            head_dim: self.cfg.head_dim,
            page_tokens: PAGE,
            max_pages: max_tokens.div_ceil(PAGE).max(1),
            dtype,
        }
    }

    /// `token_embedding`: look up rows of the token embedding (multiplied by √hidden for
    /// Gemma, [`LlamaConfig::embed_scale`]).
    ///
    /// `tokens`: `[n]` ids; returns `[n, hidden]` row-major. Errors on an id outside the
    /// vocabulary.
    pub fn embed(&self, tokens: &[u32]) -> Result<Vec<f32>, ModelError> {
        let h = self.cfg.hidden;
        let emb = self.weights.matrix(&self.weights.token_embd);
        let mut out = vec![0.0f32; tokens.len() * h];
        for (row, &id) in out.chunks_exact_mut(h).zip(tokens) {
            if id as usize >= self.cfg.vocab {
                return Err(ModelError::TokenOutOfRange {
                    id,
                    vocab: self.cfg.vocab,
                });
            }
            emb.dequantize_row(id as usize, row);
            if self.cfg.embed_scale != 1.0 {
                row.iter_mut().for_each(|v| *v *= self.cfg.embed_scale);
            }
        }
        Ok(out)
    }

    /// `llama_decoder`: run every block over `n` new positions of `seq`, in place.
    ///
    /// `x`: `[n, hidden]` row-major hidden states of the positions
    /// `kv.len(seq) .. kv.len(seq) + n`; their K and V rows are appended to the cache.
    /// One position runs matrix-vector products (decode); several run matrix-matrix
    /// products (prefill). Errors: [`ModelError::ContextOverflow`] past the context length,
    /// [`ModelError::Kv`] when the cache has no room.
    pub fn decoder(&self, x: &mut [f32], kv: &mut KvCache, seq: SeqId) -> Result<(), ModelError> {
        // The pass runs on the calling thread, which dispatches every parallel loop to the
        // spinning kernel pool and takes tasks itself: no hand-off to another thread and
        // back per pass.
        self.decoder_blocks(x, kv, seq)
    }

    fn decoder_blocks(
        &self,
        x: &mut [f32],
        kv: &mut KvCache,
        seq: SeqId,
    ) -> Result<(), ModelError> {
        let h = self.cfg.hidden;
        assert_eq!(x.len() % h, 0, "x must be [n, hidden]");
        let n = x.len() / h;
        if n == 0 {
            return Err(ModelError::Empty);
        }
        let p0 = kv.len(seq);
        self.check_context(p0 + n)?;
        let positions = kv.grow(seq, n)?;
        debug_assert_eq!(positions.start, p0);
        let rows: Vec<(SeqId, usize)> = positions.map(|p| (seq, p)).collect();
        self.blocks(x, kv, &rows)
    }

    /// [`ModelError::ContextOverflow`] when a sequence would hold more than the context.
    fn check_context(&self, positions: usize) -> Result<(), ModelError> {
        if positions > self.cfg.context_len {
            return Err(ModelError::ContextOverflow {
                positions,
                context: self.cfg.context_len,
            });
        }
        Ok(())
    }

    /// Every block over activation rows whose KV positions are already grown: row `i` of
    /// `x` (`[rows.len(), hidden]`) is position `rows[i].1` of sequence `rows[i].0`. The
    /// rows of one prefill chunk share a sequence (consecutive positions); the rows of a
    /// batched decode step each extend their own. Projections are one product over all
    /// rows (matrix-vector for one row); RoPE, the KV write and attention run per row on
    /// its own sequence, one task per (row, query head).
    fn blocks(
        &self,
        x: &mut [f32],
        kv: &mut KvCache,
        rows: &[(SeqId, usize)],
    ) -> Result<(), ModelError> {
        let cfg = &self.cfg;
        let h = cfg.hidden;
        let n = rows.len();
        assert_eq!(x.len(), n * h, "x must be [rows, hidden]");
        let (qw, kvw, f, d) = (cfg.q_width(), cfg.kv_width(), cfg.ffn, cfg.head_dim);
        let mut xn = vec![0.0f32; n * h];
        let mut q = vec![0.0f32; n * qw];
        let mut k = vec![0.0f32; n * kvw];
        let mut v = vec![0.0f32; n * kvw];
        let mut att = vec![0.0f32; n * qw];
        let mut o = vec![0.0f32; n * h];
        let mut gate = vec![0.0f32; n * f];
        let mut up = vec![0.0f32; n * f];
        let mut act = vec![0.0f32; n * f];
        // Fused projections' outputs, split into the buffers above.
        let mut fused = Vec::new();
        let mut normed = vec![0.0f32; d];
        // Each row's rotation angles, the same in every layer (of a kind).
        let angles: Vec<Vec<(f32, f32)>> = rows.iter().map(|&(_, p)| self.rope.angles(p)).collect();
        let angles_swa: Option<Vec<Vec<(f32, f32)>>> = self
            .rope_swa
            .as_ref()
            .map(|r| rows.iter().map(|&(_, p)| r.angles(p)).collect());

        for (l, lw) in self.weights.layers.iter().enumerate() {
            for (xr, xnr) in x.chunks_exact(h).zip(xn.chunks_exact_mut(h)) {
                rms_norm(xr, &lw.attn_norm, cfg.rms_eps, xnr);
            }
            match &lw.qkv {
                QkvWeights::Split {
                    q: wq,
                    k: wk,
                    v: wv,
                } => self.project_many(&[wq, wk, wv], &xn, n, &mut [&mut q, &mut k, &mut v]),
                QkvWeights::Fused(m) => {
                    fused.resize(n * (qw + 2 * kvw), 0.0);
                    self.project(m, &xn, n, &mut fused);
                    for (i, r) in fused.chunks_exact(qw + 2 * kvw).enumerate() {
                        q[i * qw..(i + 1) * qw].copy_from_slice(&r[..qw]);
                        k[i * kvw..(i + 1) * kvw].copy_from_slice(&r[qw..qw + kvw]);
                        v[i * kvw..(i + 1) * kvw].copy_from_slice(&r[qw + kvw..]);
                    }
                }
            }
            if let Some([bq, bk, bv]) = &lw.qkv_bias {
                for (buf, b) in [(&mut q, bq), (&mut k, bk), (&mut v, bv)] {
                    for r in buf.chunks_exact_mut(b.len()) {
                        add_in_place(r, b);
                    }
                }
            }
            if let Some([nq, nk]) = &lw.qk_norm {
                for (buf, w) in [(&mut q, nq), (&mut k, nk)] {
                    for head in buf.chunks_exact_mut(d) {
                        rms_norm(head, w, cfg.rms_eps, &mut normed);
                        head.copy_from_slice(&normed);
                    }
                }
            }
            let (rope, angles) = match (&self.rope_swa, &angles_swa) {
                (Some(r), Some(a)) if cfg.is_swa(l) => (r, a),
                _ => (&self.rope, &angles),
            };
            for (i, &(seq, pos)) in rows.iter().enumerate() {
                rope.apply_angles(&mut q[i * qw..(i + 1) * qw], cfg.n_heads, &angles[i]);
                rope.apply_angles(&mut k[i * kvw..(i + 1) * kvw], cfg.n_kv_heads, &angles[i]);
                kv.write(
                    seq,
                    l,
                    pos,
                    &k[i * kvw..(i + 1) * kvw],
                    &v[i * kvw..(i + 1) * kvw],
                )?;
            }
            // A prefill chunk whose rows all see from position 0 takes the tiled causal
            // path; rows of a sliding-window layer past the window take the per-row path,
            // which bounds each row's window.
            match prefill_chunk(rows) {
                Some((seq, first)) if cfg.window_start(l, first + n - 1) == 0 => {
                    self.prefill_attention(&q, kv, seq, first, l, &mut att)
                }
                _ => self.attention(&q, kv, rows, l, &mut att),
            }
            self.project(&lw.wo, &att, n, &mut o);
            if let Some(w) = &lw.attn_post_norm {
                norm_rows(&mut o, w, cfg.rms_eps, h);
            }
            add_in_place(x, &o);

            for (xr, xnr) in x.chunks_exact(h).zip(xn.chunks_exact_mut(h)) {
                rms_norm(xr, &lw.ffn_norm, cfg.rms_eps, xnr);
            }
            match &lw.gate_up {
                GateUpWeights::Split { gate: wg, up: wu } => {
                    self.project_many(&[wg, wu], &xn, n, &mut [&mut gate, &mut up])
                }
                GateUpWeights::Fused(m) => {
                    fused.resize(n * 2 * f, 0.0);
                    self.project(m, &xn, n, &mut fused);
                    for (i, r) in fused.chunks_exact(2 * f).enumerate() {
                        gate[i * f..(i + 1) * f].copy_from_slice(&r[..f]);
                        up[i * f..(i + 1) * f].copy_from_slice(&r[f..]);
                    }
                }
            }
            match cfg.activation {
                Activation::Silu => self.swiglu_rows(&gate, &up, &mut act),
                Activation::GeluTanh => geglu(&gate, &up, &mut act),
            }
            self.project(&lw.w_down, &act, n, &mut o);
            if let Some(w) = &lw.ffn_post_norm {
                norm_rows(&mut o, w, cfg.rms_eps, h);
            }
            add_in_place(x, &o);
        }
        Ok(())
    }

    /// Attention of every row of `q` (`[rows.len(), n_heads · head_dim]`, RoPE applied)
    /// over its own sequence's layer `l` up to its own position, into `att` (same shape).
    ///
    /// A row's window is cut by [`split_segments`] (whole up to
    /// [`SEGMENT`](crate::kernels::attention::SEGMENT) positions, otherwise in segments
    /// aligned to absolute positions). One task per (row, KV head,
    /// segment) runs the query heads of that GQA group over the segment, so they read each
    /// page of their KV head once: [`gqa_attention`] for a whole window, otherwise
    /// [`gqa_attention_part`], whose parts are then merged in segment order
    /// ([`merge_parts`]). A long window thus spreads over every thread instead of one task
    /// per KV head. Decode rows (and any rows that are not one prefill chunk, see
    /// [`Model::prefill_attention`]) take this path; the cut and the merge depend only on
    /// the row's window, so a decode row's result depends only on its sequence and
    /// position, never on the batch or the thread count (it equals
    /// [`decode_attention`](crate::kernels::attention::decode_attention)).
    fn attention(
        &self,
        q: &[f32],
        kv: &KvCache,
        rows: &[(SeqId, usize)],
        l: usize,
        att: &mut [f32],
    ) {
        let cfg = &self.cfg;
        let (scale, softcap) = (cfg.attn_scale, cfg.attn_softcap);
        let (n_heads, d, n_kv) = (cfg.n_heads, cfg.head_dim, cfg.n_kv_heads);
        let group = n_heads / n_kv;
        let views: Vec<_> = rows.iter().map(|&(s, _)| kv.layer(s, l)).collect();
        let views = &views;
        let segs: Vec<Vec<(usize, usize)>> = rows
            .iter()
            .map(|&(_, p)| split_segments(cfg.window_start(l, p), p + 1))
            .collect();
        if segs.iter().all(|s| s.len() == 1) {
            self.cpu.for_chunks(att, group * d, &|t, out| {
                let (i, kvh) = (t / n_kv, t % n_kv);
                let view = OneKvHead {
                    inner: &views[i],
                    head: kvh,
                };
                let at = (i * n_heads + kvh * group) * d;
                SCRATCH.with_borrow_mut(|scratch| {
                    gqa_attention(
                        &q[at..at + group * d],
                        &view,
                        segs[i][0].0,
                        rows[i].1 + 1,
                        group,
                        scale,
                        softcap,
                        out,
                        scratch,
                    )
                });
            });
            return;
        }
        // (row, KV head, segment, whole window) per task; one part slot per task.
        let mut tasks = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            for kvh in 0..n_kv {
                tasks.extend(s.iter().map(|&(a, b)| (i, kvh, a, b, s.len() == 1)));
            }
        }
        let len = part_len(group, d);
        let mut parts = vec![0.0f32; tasks.len() * len];
        let tasks = &tasks;
        self.cpu.for_chunks(&mut parts, len, &|t, part| {
            let (i, kvh, a, b, whole) = tasks[t];
            let view = OneKvHead {
                inner: &views[i],
                head: kvh,
            };
            let at = (i * n_heads + kvh * group) * d;
            let qg = &q[at..at + group * d];
            SCRATCH.with_borrow_mut(|scratch| {
                if whole {
                    let out = &mut part[..group * d];
                    gqa_attention(qg, &view, a, b, group, scale, softcap, out, scratch)
                } else {
                    gqa_attention_part(qg, &view, a, b, group, scale, softcap, part, scratch)
                }
            });
        });
        let mut t = 0;
        for (i, s) in segs.iter().enumerate() {
            for kvh in 0..n_kv {
                let at = (i * n_heads + kvh * group) * d;
                let out = &mut att[at..at + group * d];
                let mine = &parts[t * len..(t + s.len()) * len];
                if s.len() == 1 {
                    out.copy_from_slice(&mine[..group * d]);
                } else {
                    merge_parts(mine, group, d, out);
                }
                t += s.len();
            }
        }
    }

    /// Causal attention of a prefill chunk: `q` and `att` are `[rows, n_heads · head_dim]`
    /// for the consecutive positions `first ..` of `seq` in layer `l`.
    ///
    /// One task per (KV head, block of [`PREFILL_ROWS`] rows), the blocks with the longest
    /// windows first, runs the flash kernel [`causal_attention`] for the query heads of
    /// that GQA group (16 rows × the group's heads in SIMD lanes): each tile of keys and
    /// values is widened to f32 once for the block's rows and heads and folded in by
    /// register-tiled products, and no score outlives its tile, so the cost per row stays
    /// a pass over the window at any context length. At 512 prompt tokens a layer makes
    /// 32 × n_kv_heads tasks, at 32 tokens 2 × n_kv_heads of one tile each, so two threads
    /// share them evenly. A row's result depends only on its sequence and position (tiles
    /// are aligned to absolute positions), not on the chunk, the block or the thread.
    fn prefill_attention(
        &self,
        q: &[f32],
        kv: &KvCache,
        seq: SeqId,
        first: usize,
        l: usize,
        att: &mut [f32],
    ) {
        let cfg = &self.cfg;
        let (scale, softcap) = (cfg.attn_scale, cfg.attn_softcap);
        let (n_heads, d, n_kv) = (cfg.n_heads, cfg.head_dim, cfg.n_kv_heads);
        let group = n_heads / n_kv;
        let rows = q.len() / (n_heads * d);
        let view = kv.layer(seq, l);
        let blocks = rows.div_ceil(PREFILL_ROWS);
        let results: Vec<std::sync::Mutex<Vec<f32>>> = (0..blocks * n_kv)
            .map(|_| std::sync::Mutex::new(Vec::new()))
            .collect();
        self.cpu.run_tasks(blocks * n_kv, &|t| {
            let (b, kvh) = (blocks - 1 - t / n_kv, t % n_kv);
            let (r0, r1) = (b * PREFILL_ROWS, ((b + 1) * PREFILL_ROWS).min(rows));
            let mut qg = Vec::with_capacity((r1 - r0) * group * d);
            for i in r0..r1 {
                let at = (i * n_heads + kvh * group) * d;
                qg.extend_from_slice(&q[at..at + group * d]);
            }
            let mut og = vec![0.0f32; qg.len()];
            let one = OneKvHead {
                inner: &view,
                head: kvh,
            };
            SCRATCH.with_borrow_mut(|scratch| {
                causal_attention(
                    &qg,
                    &one,
                    first + r0,
                    group,
                    scale,
                    softcap,
                    &mut og,
                    scratch,
                )
            });
            *results[t].lock().unwrap_or_else(|e| e.into_inner()) = og;
        });
        for (t, r) in results.into_iter().enumerate() {
            let (b, kvh) = (blocks - 1 - t / n_kv, t % n_kv);
            let og = r.into_inner().unwrap_or_else(|e| e.into_inner());
            for (k, o) in og.chunks_exact(group * d).enumerate() {
                let at = ((b * PREFILL_ROWS + k) * n_heads + kvh * group) * d;
                att[at..at + group * d].copy_from_slice(o);
            }
        }
    }

    /// `lm_head`: final RMSNorm and output projection (then Gemma's final soft-capping,
    /// [`LlamaConfig::final_softcap`]).
    ///
    /// `x`: `[n, hidden]`; returns `[n, vocab]` logits row-major.
    pub fn lm_head(&self, x: &[f32]) -> Vec<f32> {
        let mut logits = Vec::new();
        self.lm_head_into(x, &mut logits);
        logits
    }

    /// [`Model::lm_head`] into `logits` (resized to `[n, vocab]`, every element
    /// overwritten): a decode loop that passes the same buffer each step reuses its
    /// memory instead of faulting in fresh pages for every step's logits (192 KiB a row
    /// at a 49152-token vocabulary).
    pub fn lm_head_into(&self, x: &[f32], logits: &mut Vec<f32>) {
        let h = self.cfg.hidden;
        assert_eq!(x.len() % h, 0, "x must be [n, hidden]");
        let n = x.len() / h;
        let mut xn = vec![0.0f32; x.len()];
        for (xr, xnr) in x.chunks_exact(h).zip(xn.chunks_exact_mut(h)) {
            rms_norm(xr, &self.weights.output_norm, self.cfg.rms_eps, xnr);
        }
        logits.resize(n * self.cfg.vocab, 0.0);
        logits.truncate(n * self.cfg.vocab);
        self.project(&self.weights.lm_head, &xn, n, logits);
        if let Some(c) = self.cfg.final_softcap {
            softcap_in_place(logits, c);
        }
    }

    /// The fused forward pass: embed `tokens`, run them through every block at the next
    /// positions of `seq` (appending to the KV cache), and return logits.
    ///
    /// Returns `[vocab]` for [`Logits::Last`], `[n, vocab]` for [`Logits::All`].
    pub fn forward(
        &self,
        kv: &mut KvCache,
        seq: SeqId,
        tokens: &[u32],
        mode: Logits,
    ) -> Result<Vec<f32>, ModelError> {
        if tokens.is_empty() {
            return Err(ModelError::Empty);
        }
        let mut x = self.embed(tokens)?;
        self.decoder(&mut x, kv, seq)?;
        let h = self.cfg.hidden;
        Ok(match mode {
            Logits::All => self.lm_head(&x),
            Logits::Last => self.lm_head(&x[x.len() - h..]),
        })
    }

    /// One decode step for a batch of sequences: each `(seq, token)` appends one position
    /// to its own sequence of `kv`; returns `[rows.len(), vocab]` logits row-major.
    ///
    /// The weights are read once for the whole batch: every projection is one matrix
    /// product over the batch's rows ([`matmul`], whose rows equal [`matvec`]'s bit for
    /// bit), while RoPE and attention run per row on that row's own sequence and position.
    /// Row `i`'s logits are therefore exactly what [`Model::forward`] gives for that token
    /// alone. A batch of one is [`Model::forward`] itself.
    ///
    /// Errors: [`ModelError::Empty`] for no rows, [`ModelError::TokenOutOfRange`],
    /// [`ModelError::ContextOverflow`] and [`ModelError::Kv`] for the row at fault
    /// (checked before any row is written).
    pub fn decode_batch(
        &self,
        kv: &mut KvCache,
        rows: &[(SeqId, u32)],
    ) -> Result<Vec<f32>, ModelError> {
        let mut logits = Vec::new();
        self.decode_batch_into(kv, rows, &mut logits)?;
        Ok(logits)
    }

    /// [`Model::decode_batch`] into `logits` (resized to `[rows.len(), vocab]`; see
    /// [`Model::lm_head_into`]). Same results and errors; on an error `logits` is left as
    /// it was.
    pub fn decode_batch_into(
        &self,
        kv: &mut KvCache,
        rows: &[(SeqId, u32)],
        logits: &mut Vec<f32>,
    ) -> Result<(), ModelError> {
        match rows {
            [] => Err(ModelError::Empty),
            [(seq, token)] => {
                let mut x = self.embed(&[*token])?;
                self.decoder(&mut x, kv, *seq)?;
                self.lm_head_into(&x, logits);
                Ok(())
            }
            _ => {
                let tokens: Vec<u32> = rows.iter().map(|r| r.1).collect();
                let mut x = self.embed(&tokens)?;
                let seqs: Vec<SeqId> = rows.iter().map(|r| r.0).collect();
                self.decoder_batch(&mut x, kv, &seqs)?;
                self.lm_head_into(&x, logits);
                Ok(())
            }
        }
    }

    /// The blocks over one new position of each of `seqs` (`x`: `[seqs.len(), hidden]`);
    /// every sequence's context is checked before any grows.
    fn decoder_batch(
        &self,
        x: &mut [f32],
        kv: &mut KvCache,
        seqs: &[SeqId],
    ) -> Result<(), ModelError> {
        let mut rows = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            let p = kv.len(seq);
            self.check_context(p + 1)?;
            rows.push((seq, p));
        }
        for &seq in seqs {
            kv.grow(seq, 1)?;
        }
        self.blocks(x, kv, &rows)
    }

    /// [`swiglu`] over `[rows, ffn]` activations, element-wise: one call below
    /// `2 ·` [`SWIGLU_TASK`] elements (one row of SmolLM2), otherwise cut into two equal
    /// pieces per thread of the kernel pool (the same bits either way). A batched decode
    /// step or a prefill chunk thus spends no serial time here while the pool's other
    /// threads wait.
    fn swiglu_rows(&self, gate: &[f32], up: &[f32], act: &mut [f32]) {
        let threads = self.cpu.threads();
        if act.len() < 2 * SWIGLU_TASK || threads == 1 {
            swiglu(gate, up, act);
            return;
        }
        let chunk = act.len().div_ceil(2 * threads).next_multiple_of(16);
        self.cpu.for_chunks(act, chunk, &|c, part| {
            let at = c * chunk;
            swiglu(&gate[at..at + part.len()], &up[at..at + part.len()], part);
        });
    }

    /// `ys[m] = x · W[m]ᵀ` for `n` rows and matrices sharing the input, in one fused pass
    /// ([`matmul_many`]: the input quantized once, one dispatch of the pool).
    fn project_many(&self, ms: &[&MatrixRef], x: &[f32], n: usize, ys: &mut [&mut [f32]]) {
        let ws: Vec<WeightMatrix<'_>> = ms.iter().map(|m| self.weights.matrix(m)).collect();
        let ws: Vec<&WeightMatrix<'_>> = ws.iter().collect();
        matmul_many(&self.cpu, &ws, x, n, ys);
    }

    /// `y = x · Wᵀ` for `n` rows: matrix-vector for one row, matrix-matrix otherwise.
    fn project(&self, m: &MatrixRef, x: &[f32], n: usize, y: &mut [f32]) {
        let w: WeightMatrix<'_> = self.weights.matrix(m);
        if n == 1 {
            matvec(&self.cpu, &w, x, y);
        } else {
            matmul(&self.cpu, &w, x, n, y);
        }
    }
}

/// [`Model::swiglu_rows`] goes to the pool from twice this many elements (more than one
/// row of SmolLM2's 1536): below that the work is under a microsecond or two and the
/// pool's hand-off would be a large part of it.
const SWIGLU_TASK: usize = 1024;

/// Query rows per task of [`Model::prefill_attention`].
const PREFILL_ROWS: usize = 16;

/// The sequence and first position when `rows` are a prefill chunk (two or more
/// consecutive positions of one sequence); `None` for a decode step's rows.
fn prefill_chunk(rows: &[(SeqId, usize)]) -> Option<(SeqId, usize)> {
    let &[(seq, first), ..] = rows else {
        return None;
    };
    let consecutive = rows
        .iter()
        .enumerate()
        .all(|(i, &(s, p))| s == seq && p == first + i);
    (rows.len() > 1 && consecutive).then_some((seq, first))
}

thread_local! {
    /// Each kernel thread's attention scores, kept across calls so that decode allocates
    /// only when the context grows.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// RMSNorm of every `width`-element row of `x` in place (Gemma's post norms).
fn norm_rows(x: &mut [f32], w: &[f32], eps: f32, width: usize) {
    let mut row = vec![0.0f32; width];
    for r in x.chunks_exact_mut(width) {
        rms_norm(r, w, eps, &mut row);
        r.copy_from_slice(&row);
    }
}

fn add_in_place(x: &mut [f32], y: &[f32]) {
    for (a, b) in x.iter_mut().zip(y) {
        *a += b;
    }
}

/// One KV head of a layer's cache seen as a single-head [`KvSource`], so the query heads
/// of one GQA group can be attended to in their own task. Reads go to the same rows with
/// the same primitives, so results equal attention over the whole layer bit for bit.
struct OneKvHead<'a, K: KvSource> {
    inner: &'a K,
    head: usize,
}

impl<K: KvSource> KvSource for OneKvHead<'_, K> {
    fn n_kv_heads(&self) -> usize {
        1
    }
    fn head_dim(&self) -> usize {
        self.inner.head_dim()
    }
    fn len(&self) -> usize {
        self.inner.len()
    }
    fn ops(&self) -> crate::kernels::VecOps {
        self.inner.ops()
    }
    fn read_rows(
        &self,
        lo: usize,
        n: usize,
        _kv_head: usize,
        values: bool,
        out: &mut [f32],
        stride: usize,
    ) {
        self.inner.read_rows(lo, n, self.head, values, out, stride)
    }
    fn dot_key(&self, pos: usize, _kv_head: usize, q: &[f32]) -> f32 {
        self.inner.dot_key(pos, self.head, q)
    }
    fn add_value(&self, pos: usize, _kv_head: usize, w: f32, out: &mut [f32]) {
        self.inner.add_value(pos, self.head, w, out)
    }
    fn dot_keys(&self, lo: usize, _kv_head: usize, q: &[f32], out: &mut [f32]) {
        self.inner.dot_keys(lo, self.head, q, out)
    }
    fn add_values(&self, lo: usize, _kv_head: usize, w: &[f32], out: &mut [f32]) {
        self.inner.add_values(lo, self.head, w, out)
    }
    fn dot_keys_heads(&self, lo: usize, _kv_head: usize, qs: &[&[f32]], outs: &mut [&mut [f32]]) {
        self.inner.dot_keys_heads(lo, self.head, qs, outs)
    }
    fn add_values_heads(&self, lo: usize, _kv_head: usize, ws: &[&[f32]], outs: &mut [&mut [f32]]) {
        self.inner.add_values_heads(lo, self.head, ws, outs)
    }
    fn prefetch(&self, lo: usize, n: usize, _kv_head: usize, values: bool) {
        self.inner.prefetch(lo, n, self.head, values)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::attention::ContiguousKv;
    use std::cell::RefCell;

    /// A KV source that records each call's method and KV head, then serves it from a
    /// contiguous cache.
    struct Recording<'a> {
        inner: ContiguousKv<'a>,
        calls: RefCell<Vec<(&'static str, usize)>>,
    }

    impl Recording<'_> {
        fn note(&self, method: &'static str, kv_head: usize) {
            self.calls.borrow_mut().push((method, kv_head));
        }
    }

    impl KvSource for Recording<'_> {
        fn n_kv_heads(&self) -> usize {
            self.inner.n_kv_heads()
        }
        fn head_dim(&self) -> usize {
            self.inner.head_dim()
        }
        fn len(&self) -> usize {
            self.inner.len()
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
            self.note("read_rows", kv_head);
            self.inner.read_rows(lo, n, kv_head, values, out, stride)
        }
        fn dot_key(&self, pos: usize, kv_head: usize, q: &[f32]) -> f32 {
            self.note("dot_key", kv_head);
            self.inner.dot_key(pos, kv_head, q)
        }
        fn add_value(&self, pos: usize, kv_head: usize, w: f32, out: &mut [f32]) {
            self.note("add_value", kv_head);
            self.inner.add_value(pos, kv_head, w, out)
        }
        fn dot_keys(&self, lo: usize, kv_head: usize, q: &[f32], out: &mut [f32]) {
            self.note("dot_keys", kv_head);
            self.inner.dot_keys(lo, kv_head, q, out)
        }
        fn add_values(&self, lo: usize, kv_head: usize, w: &[f32], out: &mut [f32]) {
            self.note("add_values", kv_head);
            self.inner.add_values(lo, kv_head, w, out)
        }
        fn dot_keys_heads(
            &self,
            lo: usize,
            kv_head: usize,
            qs: &[&[f32]],
            outs: &mut [&mut [f32]],
        ) {
            self.note("dot_keys_heads", kv_head);
            self.inner.dot_keys_heads(lo, kv_head, qs, outs)
        }
        fn add_values_heads(
            &self,
            lo: usize,
            kv_head: usize,
            ws: &[&[f32]],
            outs: &mut [&mut [f32]],
        ) {
            self.note("add_values_heads", kv_head);
            self.inner.add_values_heads(lo, kv_head, ws, outs)
        }
        fn prefetch(&self, lo: usize, n: usize, kv_head: usize, values: bool) {
            self.note("prefetch", kv_head);
            self.inner.prefetch(lo, n, kv_head, values)
        }
    }

    /// Decode attention through the one-head view reaches the cache by the group forms
    /// (each key and value row read once for the group's query heads), on the view's KV
    /// head, never row by row or head by head.
    #[test]
    fn one_kv_head_view_forwards_the_group_forms() {
        let (n_kv, d, len, group) = (3, 64, 40, 3);
        let k: Vec<f32> = (0..len * n_kv * d)
            .map(|i| (i as f32 * 0.37).sin())
            .collect();
        let v: Vec<f32> = (0..len * n_kv * d)
            .map(|i| (i as f32 * 0.11).cos())
            .collect();
        let rec = Recording {
            inner: ContiguousKv::new(&k, &v, n_kv, d),
            calls: RefCell::new(Vec::new()),
        };
        let view = OneKvHead {
            inner: &rec,
            head: 1,
        };
        let q: Vec<f32> = (0..group * d).map(|i| (i as f32 * 0.05).sin()).collect();
        let mut out = vec![0.0f32; group * d];
        let mut scratch = Vec::new();
        gqa_attention(
            &q,
            &view,
            0,
            len,
            group,
            0.125,
            None,
            &mut out,
            &mut scratch,
        );
        let calls = rec.calls.into_inner();
        for method in ["dot_keys_heads", "add_values_heads"] {
            assert!(
                calls.iter().any(|&(m, _)| m == method),
                "{method} never reached the cache: {calls:?}"
            );
        }
        for &(method, head) in &calls {
            assert!(
                matches!(method, "dot_keys_heads" | "add_values_heads" | "prefetch"),
                "the view fell back to {method}: {calls:?}"
            );
            assert_eq!(head, 1, "{method} read KV head {head}, not the view's");
        }
    }
}
