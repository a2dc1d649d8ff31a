//! The decode core on tiny random Llama models: against a naive reference forward pass
//! written here, prefill against step-by-step decode, and load-time errors.

use std::sync::Arc;

use engine::gguf::{GgmlType, GgufFile};
use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::kv::{KvCache, KvDtype};
use engine::model::{Logits, Model, ModelError};
use engine::tiny::{TinyLlamaSpec, tiny_llama};

fn model(spec: &TinyLlamaSpec, isa: Isa) -> Result<Model, ModelError> {
    let bytes = tiny_llama(spec).expect("tiny model builds").to_bytes();
    let file = GgufFile::from_bytes(bytes).expect("tiny model parses");
    Model::from_file(Arc::new(file), Cpu::new(2, isa))
}

/// Read an F32 tensor as `[rows, cols]` (GGUF dims `[cols, rows]`) without engine kernels.
fn f32_tensor(file: &GgufFile, name: &str) -> (Vec<f32>, usize, usize) {
    let t = file.tensor(name).unwrap_or_else(|| panic!("{name}"));
    assert_eq!(t.info.ty, GgmlType::F32);
    let cols = t.info.dims[0] as usize;
    let rows = t.info.dims.get(1).copied().unwrap_or(1) as usize;
    let v = t
        .data
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect::<Vec<_>>();
    (v, rows, cols)
}

/// A naive Llama forward pass over `tokens` from position 0, every position's logits,
/// written from the architecture's definition (RMSNorm, adjacent-pair RoPE, causal GQA
/// softmax attention, SwiGLU FFN, tied LM head), in f64.
fn reference_logits(file: &GgufFile, spec: &TinyLlamaSpec, tokens: &[u32]) -> Vec<Vec<f64>> {
    let h = spec.hidden;
    let hd = h / spec.n_heads;
    let group = spec.n_heads / spec.n_kv_heads;
    let mat = |name: &str| f32_tensor(file, name);
    let mv = |w: &(Vec<f32>, usize, usize), x: &[f64]| -> Vec<f64> {
        (0..w.1)
            .map(|r| (0..w.2).map(|c| w.0[r * w.2 + c] as f64 * x[c]).sum())
            .collect()
    };
    let norm = |x: &[f64], w: &[f32]| -> Vec<f64> {
        let ms = x.iter().map(|v| v * v).sum::<f64>() / x.len() as f64;
        let inv = 1.0 / (ms + 1e-5).sqrt();
        x.iter().zip(w).map(|(v, g)| v * inv * *g as f64).collect()
    };
    let rope = |x: &mut [f64], pos: usize| {
        for head in x.chunks_exact_mut(hd) {
            for i in 0..hd / 2 {
                let theta = pos as f64 * (spec.rope_base as f64).powf(-2.0 * i as f64 / hd as f64);
                let (s, c) = theta.sin_cos();
                let (a, b) = (head[2 * i], head[2 * i + 1]);
                head[2 * i] = a * c - b * s;
                head[2 * i + 1] = a * s + b * c;
            }
        }
    };
    let emb = mat("token_embd.weight");
    let mut xs: Vec<Vec<f64>> = tokens
        .iter()
        .map(|&t| {
            emb.0[t as usize * h..(t as usize + 1) * h]
                .iter()
                .map(|&v| v as f64)
                .collect()
        })
        .collect();
    for l in 0..spec.n_layers {
        let n = |s: &str| format!("blk.{l}.{s}.weight");
        let (wq, wk, wv, wo) = (
            mat(&n("attn_q")),
            mat(&n("attn_k")),
            mat(&n("attn_v")),
            mat(&n("attn_output")),
        );
        let (wg, wu, wd) = (mat(&n("ffn_gate")), mat(&n("ffn_up")), mat(&n("ffn_down")));
        let an = mat(&n("attn_norm")).0;
        let fnorm = mat(&n("ffn_norm")).0;
        let mut ks = Vec::new();
        let mut vs = Vec::new();
        let mut qs = Vec::new();
        for (pos, x) in xs.iter().enumerate() {
            let xn = norm(x, &an);
            let mut q = mv(&wq, &xn);
            let mut k = mv(&wk, &xn);
            rope(&mut q, pos);
            rope(&mut k, pos);
            qs.push(q);
            ks.push(k);
            vs.push(mv(&wv, &xn));
        }
        for (pos, x) in xs.iter_mut().enumerate() {
            let mut att = vec![0.0; spec.n_heads * hd];
            for head in 0..spec.n_heads {
                let kvh = head / group;
                let q = &qs[pos][head * hd..(head + 1) * hd];
                let scores: Vec<f64> = (0..=pos)
                    .map(|t| {
                        let k = &ks[t][kvh * hd..(kvh + 1) * hd];
                        q.iter().zip(k).map(|(a, b)| a * b).sum::<f64>() / (hd as f64).sqrt()
                    })
                    .collect();
                let m = scores.iter().cloned().fold(f64::MIN, f64::max);
                let e: Vec<f64> = scores.iter().map(|s| (s - m).exp()).collect();
                let z: f64 = e.iter().sum();
                for (t, w) in e.iter().enumerate() {
                    for d in 0..hd {
                        att[head * hd + d] += w / z * vs[t][kvh * hd + d];
                    }
                }
            }
            let o = mv(&wo, &att);
            for (a, b) in x.iter_mut().zip(&o) {
                *a += b;
            }
            let xn = norm(x, &fnorm);
            let g = mv(&wg, &xn);
            let u = mv(&wu, &xn);
            let act: Vec<f64> = g
                .iter()
                .zip(&u)
                .map(|(g, u)| g / (1.0 + (-g).exp()) * u)
                .collect();
            let d = mv(&wd, &act);
            for (a, b) in x.iter_mut().zip(&d) {
                *a += b;
            }
        }
    }
    let on = mat("output_norm.weight").0;
    xs.iter().map(|x| mv(&emb, &norm(x, &on))).collect()
}

#[test]
fn prefill_logits_match_a_naive_reference_forward_pass() {
    let spec = TinyLlamaSpec::default();
    let bytes = tiny_llama(&spec).unwrap().to_bytes();
    let file = GgufFile::from_bytes(bytes.clone()).unwrap();
    let tokens = [1u32, 72, 101, 108, 108, 111, 2, 40, 41];
    let want = reference_logits(&file, &spec, &tokens);
    for isa in Isa::available() {
        let m = Model::from_file(
            Arc::new(GgufFile::from_bytes(bytes.clone()).unwrap()),
            Cpu::new(2, isa),
        )
        .unwrap();
        let mut kv = KvCache::new(m.kv_config(32, KvDtype::F32)).unwrap();
        let seq = kv.create_sequence();
        let got = m.forward(&mut kv, seq, &tokens, Logits::All).unwrap();
        let vocab = m.config().vocab;
        for (p, row) in want.iter().enumerate() {
            for (i, w) in row.iter().enumerate() {
                let g = got[p * vocab + i] as f64;
                assert!(
                    (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
                    "[{isa}] pos {p} token {i}: got {g}, reference {w}"
                );
            }
        }
    }
}

/// A prefill row's logits depend only on its sequence and position: the same prompt
/// prefilled whole on two threads, and in chunks of 2, 7, 16 and 33 tokens on one or two
/// threads, gives every row's logits bit for bit on every SIMD path (the attention tiles
/// and the matrix products' rows do not depend on the rows they are computed with).
#[test]
fn prefill_rows_do_not_depend_on_the_chunk_or_the_threads() {
    let spec = TinyLlamaSpec {
        hidden: 96,
        n_heads: 6,
        n_kv_heads: 2,
        // f32 weights: a quantized activation would round an ulp of attention away.
        ..TinyLlamaSpec::default()
    };
    let bytes = tiny_llama(&spec).expect("tiny model builds").to_bytes();
    let file = Arc::new(GgufFile::from_bytes(bytes).expect("tiny model parses"));
    // 74 tokens: no chunk below is left with one token (which would be a decode step).
    let tokens: Vec<u32> = (0..74).map(|i| 3 + (i * 53 % 250) as u32).collect();
    let run = |isa: Isa, threads: usize, chunk: usize| -> Vec<f32> {
        let m = Model::from_file(file.clone(), Cpu::new(threads, isa)).unwrap();
        let mut kv = KvCache::new(m.kv_config(80, KvDtype::F16)).unwrap();
        let s = kv.create_sequence();
        let mut logits = Vec::new();
        for c in tokens.chunks(chunk) {
            logits.extend(m.forward(&mut kv, s, c, Logits::All).unwrap());
        }
        logits
    };
    for isa in Isa::available() {
        let whole = run(isa, 2, tokens.len());
        for (threads, chunk) in [(1, 2), (2, 7), (2, 16), (1, 33), (1, 74)] {
            let got = run(isa, threads, chunk);
            assert_eq!(got.len(), whole.len());
            let vocab = whole.len() / tokens.len();
            for (i, (g, w)) in got.iter().zip(&whole).enumerate() {
                assert_eq!(
                    g.to_bits(),
                    w.to_bits(),
                    "[{isa}] {threads} threads, chunks of {chunk}: token {} logit {}: {g} vs {w}",
                    i / vocab,
                    i % vocab
                );
            }
        }
    }
}

#[test]
fn prefill_equals_step_by_step_decode() {
    // Quantized weights: prefill runs matrix-matrix products, decode matrix-vector ones;
    // both read the same paged KV cache, so the last logits agree closely. Past one
    // attention tile (32 positions) prefill's online softmax and decode's two-pass one
    // may round differently by an ulp; a quantized output head can turn that into one
    // step of its 8-bit activation, so the all-f32 model (f32 head) has the tight bound.
    for (wt, tol) in [
        (GgmlType::F32, 1e-4),
        (GgmlType::Q8_0, 2e-2),
        (GgmlType::Q4_1, 5e-2),
        (GgmlType::Q4_0, 5e-2),
    ] {
        let spec = TinyLlamaSpec {
            weight_type: wt,
            embedding_type: if wt == GgmlType::F32 {
                GgmlType::F32
            } else {
                GgmlType::Q8_0
            },
            ..TinyLlamaSpec::default()
        };
        let m = model(&spec, Isa::best()).unwrap();
        let tokens: Vec<u32> = (0..40).map(|i| 3 + (i * 37 % 250) as u32).collect();
        // Room for both sequences: 2 × 40 positions, in whole pages of 16.
        let mut kv = KvCache::new(m.kv_config(96, KvDtype::F32)).unwrap();
        let a = kv.create_sequence();
        let b = kv.create_sequence();
        let all = m.forward(&mut kv, a, &tokens, Logits::All).unwrap();
        let vocab = m.config().vocab;
        for (i, t) in tokens.iter().enumerate() {
            let step = m.forward(&mut kv, b, &[*t], Logits::Last).unwrap();
            let row = &all[i * vocab..(i + 1) * vocab];
            let max = row
                .iter()
                .zip(&step)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0f32, f32::max);
            assert!(
                max <= tol,
                "[{wt}] pos {i}: prefill and decode differ by {max} > {tol}"
            );
        }
        assert_eq!(kv.len(a), tokens.len());
        assert_eq!(kv.len(b), tokens.len());
    }
}

#[test]
fn f16_kv_cache_stays_close_to_f32() {
    let m = model(&TinyLlamaSpec::default(), Isa::best()).unwrap();
    let tokens: Vec<u32> = (3..35).collect();
    let run = |dtype| {
        let mut kv = KvCache::new(m.kv_config(64, dtype)).unwrap();
        let s = kv.create_sequence();
        m.forward(&mut kv, s, &tokens, Logits::Last).unwrap()
    };
    let (a, b) = (run(KvDtype::F32), run(KvDtype::F16));
    let max = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(max < 1e-2, "f16 KV differs by {max}");
}

#[test]
fn unsupported_architecture_is_named() {
    let spec = TinyLlamaSpec {
        architecture: "gpt2".into(),
        ..TinyLlamaSpec::default()
    };
    let err = model(&spec, Isa::Portable).unwrap_err();
    assert!(
        matches!(err, ModelError::UnsupportedArchitecture { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(msg.contains("'gpt2'") && msg.contains("llama"), "{msg}");
}

#[test]
fn missing_tensor_is_named() {
    let spec = TinyLlamaSpec {
        omit_tensors: vec!["blk.1.ffn_up.weight".into()],
        ..TinyLlamaSpec::default()
    };
    let err = model(&spec, Isa::Portable).unwrap_err();
    assert!(err.to_string().contains("'blk.1.ffn_up.weight'"), "{err}");
}

#[test]
fn unsupported_tensor_type_is_named() {
    // IQ4_NL has a GGML layout the reader knows but no kernel in this engine.
    let spec = TinyLlamaSpec {
        weight_type: GgmlType::IQ4NL,
        ..TinyLlamaSpec::default()
    };
    let err = model(&spec, Isa::Portable).unwrap_err();
    assert!(
        matches!(err, ModelError::UnsupportedTensorType { .. }),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("'blk.0.attn_q.weight'") && msg.contains("IQ4_NL"),
        "{msg}"
    );
}

#[test]
fn token_outside_vocabulary_is_refused() {
    let m = model(&TinyLlamaSpec::default(), Isa::Portable).unwrap();
    let mut kv = KvCache::new(m.kv_config(8, KvDtype::F32)).unwrap();
    let s = kv.create_sequence();
    let err = m
        .forward(&mut kv, s, &[5, 100_000], Logits::Last)
        .unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("100000") && msg.contains("259"), "{msg}");
}

/// Decode rows whose windows are longer than one attention segment (`SEGMENT`, run as
/// split-K tasks and merged) give the same logits bit for bit alone, in a batch with other
/// rows (longer, shorter, unsplit), and on 1 or 2 threads; and they agree with the naive
/// reference forward pass.
#[test]
fn split_decode_is_the_same_alone_in_a_batch_and_on_any_thread_count() {
    use engine::kernels::attention::SEGMENT;
    let spec = TinyLlamaSpec {
        context_len: 4 * SEGMENT,
        ..TinyLlamaSpec::default()
    };
    let bytes = tiny_llama(&spec).unwrap().to_bytes();
    let steps = 3;
    // Prompts ending just past one and two segments, and a short one; each row then
    // decodes `steps` tokens of its own (fixed, so every run feeds the same ones).
    let tokens = |n: usize, salt: usize| -> Vec<u32> {
        (0..n + steps)
            .map(|i| 3 + ((i * 37 + salt * 11) % 250) as u32)
            .collect()
    };
    let seqs = [
        tokens(SEGMENT + 1, 1),
        tokens(2 * SEGMENT + 7, 2),
        tokens(20, 3),
    ];
    let prompt = |t: &[u32]| t.len() - steps;
    let mut runs = Vec::new();
    for threads in [1, 2] {
        let file = Arc::new(GgufFile::from_bytes(bytes.clone()).unwrap());
        let m = Model::from_file(file, Cpu::new(threads, Isa::best())).unwrap();
        let vocab = m.config().vocab;
        let mut alone = Vec::new();
        for t in &seqs {
            let mut kv = KvCache::new(m.kv_config(t.len(), KvDtype::F32)).unwrap();
            let s = kv.create_sequence();
            m.forward(&mut kv, s, &t[..prompt(t)], Logits::Last)
                .unwrap();
            let rows: Vec<Vec<f32>> = (prompt(t)..t.len())
                .map(|p| m.forward(&mut kv, s, &[t[p]], Logits::Last).unwrap())
                .collect();
            alone.push(rows);
        }
        let total: usize = seqs.iter().map(|t| t.len() + 16).sum();
        let mut kv = KvCache::new(m.kv_config(total, KvDtype::F32)).unwrap();
        let ids: Vec<_> = seqs.iter().map(|_| kv.create_sequence()).collect();
        for (t, &s) in seqs.iter().zip(&ids) {
            m.forward(&mut kv, s, &t[..prompt(t)], Logits::Last)
                .unwrap();
        }
        for step in 0..steps {
            let rows: Vec<_> = seqs
                .iter()
                .zip(&ids)
                .map(|(t, &s)| (s, t[prompt(t) + step]))
                .collect();
            let logits = m.decode_batch(&mut kv, &rows).unwrap();
            for (i, a) in alone.iter().enumerate() {
                assert!(
                    logits[i * vocab..(i + 1) * vocab] == a[step][..],
                    "{threads} threads, row {i} step {step}: batched logits differ from alone"
                );
            }
        }
        runs.push(alone);
    }
    assert!(
        runs[0] == runs[1],
        "decode logits differ between 1 and 2 threads"
    );
    // The longest row's last decode step against the reference over its whole sequence.
    let file = GgufFile::from_bytes(bytes).unwrap();
    let want = reference_logits(&file, &spec, &seqs[1]);
    let got = runs[1][1].last().unwrap();
    for (i, w) in want.last().unwrap().iter().enumerate() {
        let g = got[i] as f64;
        assert!(
            (g - w).abs() <= 1e-4 + 1e-4 * w.abs(),
            "token {i}: got {g}, reference {w}"
        );
    }
}
