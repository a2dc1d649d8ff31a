//! The roofline line of `genai bench`: its arithmetic (GB/s, FLOP counts, weight bytes)
//! against hand counts on the tiny test model, and its formatting as a snapshot.

use std::sync::Arc;

use engine::gguf::{GgmlType, GgufFile};
use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::model::Model;
use engine::roofline::{
    MemoryRead, Peak, Roofline, decode_weight_bytes, gbps, measure_memory_read, measure_peak,
    parse_cache_size, prefill_flops, read_buffer_bytes,
};
use engine::tiny::{TinyLlamaSpec, tiny_llama};

fn tiny(spec: &TinyLlamaSpec) -> Model {
    let bytes = tiny_llama(spec).expect("tiny model builds").to_bytes();
    let file = GgufFile::from_bytes(bytes).expect("tiny model parses");
    Model::from_file(Arc::new(file), Cpu::new(1, Isa::Portable)).expect("tiny model binds")
}

#[test]
fn gigabytes_per_second_from_bytes_and_seconds() {
    assert_eq!(gbps(3_000_000_000, 1.5), 2.0);
    assert_eq!(gbps(98_000_000, 0.01), 9.8);
}

#[test]
fn prefill_flops_of_the_tiny_model_match_a_hand_count() {
    // The tiny model: 2 layers, hidden 64, ffn 128, 4 query heads over 2 KV heads of 16,
    // vocabulary 259. Every product counted on its own, 2 operations per multiply-add.
    let m = tiny(&TinyLlamaSpec::default());
    let c = m.config();
    assert_eq!(
        (
            c.n_layers,
            c.hidden,
            c.ffn,
            c.n_heads,
            c.n_kv_heads,
            c.head_dim,
            c.vocab
        ),
        (2, 64, 128, 4, 2, 16, 259)
    );
    let n = 10;
    // [outputs, inputs] of Q, K, V, O, gate, up, down.
    let mats = [
        (64, 64),
        (32, 64),
        (32, 64),
        (64, 64),
        (128, 64),
        (128, 64),
        (64, 128),
    ];
    let mut want = 0u64;
    for _layer in 0..2 {
        for pos in 0..n {
            for (rows, cols) in mats {
                want += 2 * rows * cols;
            }
            for _head in 0..4 {
                // pos + 1 keys: one 16-long dot each, then one 16-long axpy each.
                want += (pos + 1) * 2 * 16 + (pos + 1) * 2 * 16;
            }
        }
    }
    want += 2 * 259 * 64; // the last row's logits
    assert_eq!(want, 1_535_872);
    assert_eq!(prefill_flops(c, n as usize), want);
    assert_eq!(
        prefill_flops(c, 1),
        2 * (73_728 + 4 * 2 * 16 * 2) + 2 * 259 * 64
    );
}

#[test]
fn decode_weight_bytes_of_the_tiny_model_match_a_hand_count() {
    let spec = TinyLlamaSpec {
        weight_type: GgmlType::Q8_0,
        embedding_type: GgmlType::F32,
        ..TinyLlamaSpec::default()
    };
    let m = tiny(&spec);
    assert!(m.weights().tied_embeddings);
    // Per layer: 36864 weights in Q8_0 (34 bytes per 32) and two f32 norms of 64.
    let layer = 36_864 / 32 * 34 + 2 * 64 * 4;
    // Tied LM head: the whole f32 embedding [259, 64]; the final norm; one embedding row.
    let want = 2 * layer + 259 * 64 * 4 + 64 * 4 + 64 * 4;
    assert_eq!(want, 146_176);
    assert_eq!(decode_weight_bytes(m.weights()), want as u64);
}

#[test]
fn cache_sizes_and_the_read_buffer() {
    assert_eq!(parse_cache_size("307200K"), Some(300 << 20));
    assert_eq!(parse_cache_size("4M"), Some(4 << 20));
    assert_eq!(parse_cache_size("512"), Some(512));
    assert_eq!(parse_cache_size("lots"), None);
    assert_eq!(read_buffer_bytes(Some(300 << 20)), 1200 << 20);
    assert_eq!(
        read_buffer_bytes(Some(8 << 20)),
        256 << 20,
        "at least 256 MiB"
    );
    assert_eq!(
        read_buffer_bytes(Some(4 << 30)),
        2048 << 20,
        "at most 2 GiB"
    );
    assert_eq!(read_buffer_bytes(None), 256 << 20);
    // Where the kernel reports caches, the last level is found (and is at least the L2).
    if std::path::Path::new("/sys/devices/system/cpu/cpu0/cache/index0/size").exists() {
        let llc = engine::roofline::last_level_cache_bytes().expect("the LLC is found");
        assert!(llc >= 256 << 10, "LLC {llc} bytes");
    }
}

#[test]
fn the_measurements_give_finite_positive_rates() {
    let cpu = Cpu::new(1, Isa::best());
    let mem = measure_memory_read(&cpu, 8 << 20, 3);
    assert!(
        mem.bytes_per_sec.is_finite() && mem.bytes_per_sec > 1e8,
        "{mem:?}"
    );
    assert_eq!((mem.buffer_bytes, mem.threads, mem.reps), (8 << 20, 1, 3));
    let peak = measure_peak(&cpu, 1);
    assert_eq!(peak.isa, cpu.isa());
    assert!(
        peak.ops_per_sec.is_finite() && peak.ops_per_sec > 1e8,
        "{peak:?}"
    );
}

#[test]
fn roofline_lines_snapshot() {
    let r = Roofline {
        weight_bytes: 97_600_000,
        decode_tokens_per_sec: 200.0,
        memory: MemoryRead {
            bytes_per_sec: 31.0e9,
            buffer_bytes: 1200 << 20,
            threads: 2,
            reps: 5,
        },
        prompt_tokens: 512,
        prefill_flops: 512 * 270_000_000,
        prefill_tokens_per_sec: 1000.0,
        peak: Peak {
            isa: Isa::Avx512Vnni,
            instruction: "int8 vpdpbusd zmm",
            ops_per_sec: 540.0e9,
            threads: 2,
        },
    };
    // 97.6 MB × 200 tok/s = 19.52 GB/s = 63.0% of 31; 270 MFLOP × 1000 tok/s = 270 GFLOP/s = 50%.
    assert!((r.decode_bytes_per_sec() - 19.52e9).abs() < 1.0);
    assert!((r.prefill_ops_per_sec() - 270.0e9).abs() < 1.0);
    insta::assert_snapshot!(r.lines());
    insta::assert_json_snapshot!(r.json());
}
