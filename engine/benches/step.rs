//! Batched decode step benchmark: the real model's step over 1, 2, 4 and 8 rows, with greedy selection.
//!
//! Run with `cargo bench -p engine --bench step [-- --threads N --context P --samples S
//! --rows R]` after
//! `scripts/fetch-model` (it reads `fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf`).
//!
//! Each row is its own sequence, prefilled to `P` positions (default 64). A sample is a
//! block of [`STEPS`] decode steps ([`Model::decode_batch_into`] and an
//! [`argmax`] per row, what the continuous batch does per step before detokenizing),
//! after which every sequence is truncated back to `P`, so all samples see the same
//! windows. Row counts take turns sample by sample, so that a slow spell of the machine
//! falls on all of them alike. It prints the median milliseconds per step, rows (tokens)
//! per second, and the ratio of that rate to one row's, measured in the same run.

use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::kernels::sample::argmax;
use engine::kv::{KvCache, KvDtype, SeqId};
use engine::model::{Logits, Model};
use std::time::Instant;

/// Decode steps per timed sample.
const STEPS: usize = 32;
/// Row counts measured by default.
const ROWS: [usize; 4] = [1, 2, 4, 8];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str, default: usize| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().expect("a whole number"))
    };
    let (threads, context, samples) = (
        arg("--threads", 2),
        arg("--context", 64),
        arg("--samples", 15),
    );
    // `--rows R` measures one row count alone (beside one row, for the ratio), e.g. to
    // profile it.
    let rows_counts: Vec<usize> = match arg("--rows", 0) {
        0 => ROWS.to_vec(),
        1 => vec![1],
        r => vec![1, r],
    };
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/models/SmolLM2-135M-Instruct.Q4_1.gguf"
    );
    if !std::path::Path::new(path).exists() {
        println!("step: no model at {path}; run scripts/fetch-model first");
        return;
    }
    let model = Model::load(path, Cpu::new(threads, Isa::best())).expect("the model loads");
    let max_rows = *rows_counts.iter().max().expect("row counts");
    let mut kv = KvCache::new(model.kv_config(max_rows * (context + STEPS), KvDtype::F16))
        .expect("the KV cache fits");
    let prompt: Vec<u32> = (0..context as u32).map(|i| 1 + (i * 7919) % 4000).collect();
    let seqs: Vec<SeqId> = (0..max_rows)
        .map(|_| {
            let s = kv.create_sequence();
            model
                .forward(&mut kv, s, &prompt, Logits::Last)
                .expect("prefill");
            s
        })
        .collect();
    let vocab = model.config().vocab;
    let mut logits = Vec::new();
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); rows_counts.len()];
    for sample in 0..=samples {
        for (k, &n) in rows_counts.iter().enumerate() {
            let mut next: Vec<u32> = (0..n as u32).map(|i| 100 + i).collect();
            let t = Instant::now();
            for _ in 0..STEPS {
                let rows: Vec<(SeqId, u32)> = seqs[..n]
                    .iter()
                    .copied()
                    .zip(next.iter().copied())
                    .collect();
                model
                    .decode_batch_into(&mut kv, &rows, &mut logits)
                    .expect("decode step");
                for (j, t) in next.iter_mut().enumerate() {
                    *t =
                        argmax(&logits[j * vocab..(j + 1) * vocab]).expect("a finite logit") as u32;
                }
            }
            // The first round warms every row count up and is not kept.
            if sample > 0 {
                times[k].push(t.elapsed().as_secs_f64() / STEPS as f64);
            }
            for &s in &seqs[..n] {
                kv.truncate(s, context);
            }
        }
    }
    println!(
        "== batched decode step: {threads} threads, {}, f16 KV cache, {context} positions, median of {samples} samples of {STEPS} steps",
        model.cpu().isa().name()
    );
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let one = median(&mut times[0]);
    for (k, &n) in rows_counts.iter().enumerate() {
        let m = median(&mut times[k]);
        println!(
            "rows={n}  {:>6.3} ms/step  {:>7.1} tok/s  ({:.2}x one row)",
            m * 1e3,
            n as f64 / m,
            (n as f64 / m) / (1.0 / one)
        );
    }
}
