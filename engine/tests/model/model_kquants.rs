//! The decode core on SmolLM2-135M-Instruct requantized by llama.cpp (Q4_K_M, Q5_K_M, Q6_K, Q4_0) against llama.cpp's logits on the same files.

use std::path::PathBuf;
use std::sync::Arc;

use engine::gguf::{GgmlType, GgufFile};
use engine::kernels::Isa;
use engine::kernels::matmul::Cpu;
use engine::kv::{KvCache, KvDtype};
use engine::model::{Logits, Model};
use engine::runtime::{Engine, EngineOptions, GenerateRequest, Prompt};
use engine::tokenizer::{GgufVocab, Tokenizer};
use serde::Deserialize;

#[derive(Deserialize, Clone)]
struct Reference {
    model_sha256: String,
    generate: Vec<GenerateCase>,
}

#[derive(Deserialize, Clone)]
struct GenerateCase {
    prompt: String,
    prompt_ids: Vec<u32>,
    greedy_ids: Vec<u32>,
    greedy_text: String,
    steps: Vec<Step>,
}

#[derive(Deserialize, Clone)]
struct Step {
    pos: usize,
    top: Vec<(u32, f32)>,
}

/// The requantized files of scripts/make-kquant-models checked here.
const KINDS: [&str; 4] = ["Q4_K_M", "Q5_K_M", "Q6_K", "Q4_0"];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Whether the K-quant files are there. They are made by scripts/make-kquant-models, which
/// builds llama-cpp-python (several minutes on 2 cores), so `scripts/test` does not make
/// them: without them each test here says it was skipped and passes, unless
/// `GENAI_REQUIRE_KQUANT_FILES` is set (`scripts/test-kquants` sets it), when it fails.
fn files_present(test: &str) -> bool {
    let missing: Vec<String> = KINDS
        .iter()
        .map(|k| root().join(format!("fixtures/models/SmolLM2-135M-Instruct.{k}.gguf")))
        .filter(|p| !p.exists())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return true;
    }
    let why = format!(
        "{test}: {} missing: run scripts/make-kquant-models (or scripts/test-kquants)",
        missing.join(", ")
    );
    assert!(
        std::env::var_os("GENAI_REQUIRE_KQUANT_FILES").is_none(),
        "{why}"
    );
    eprintln!("skipped: {why}");
    false
}

fn model_path(kind: &str) -> PathBuf {
    let p = root().join(format!("fixtures/models/SmolLM2-135M-Instruct.{kind}.gguf"));
    assert!(
        p.exists(),
        "{} is missing: run scripts/make-kquant-models first",
        p.display()
    );
    p
}

fn reference(kind: &str) -> Reference {
    let path = root().join(format!(
        "fixtures/reference/smollm2-{}-llamacpp.json",
        kind.to_lowercase()
    ));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("reference JSON parses")
}

fn load(kind: &str, threads: usize, isa: Isa) -> (Model, Tokenizer) {
    let file = Arc::new(GgufFile::open(model_path(kind)).expect("GGUF opens"));
    let tok = Tokenizer::from_vocab(&GgufVocab::from_metadata(file.metadata()).unwrap()).unwrap();
    let model = Model::from_file(file, Cpu::new(threads, isa)).expect("model binds");
    (model, tok)
}

/// Argmax with the lowest id on ties, written here independently of the engine.
fn argmax(row: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best as u32
}

/// The agreement rule of docs/design.md §2.0.3, unchanged: our argmax must be a token
/// whose reference logit is within 0.3 of the reference winner's (among its top 8).
fn check_step(case: &str, step: &Step, row: &[f32]) -> Result<(), String> {
    let ours = argmax(row);
    let (top1, l1) = step.top[0];
    let (top2, l2) = step.top[1];
    let ok = ours == top1
        || step
            .top
            .iter()
            .any(|&(id, l)| id == ours && l1 - l >= 0.0 && l1 - l < 0.3);
    if ok {
        Ok(())
    } else {
        let theirs = step
            .top
            .iter()
            .find(|&&(id, _)| id == ours)
            .map_or("below its top 8".to_string(), |&(_, l)| format!("{l:.3}"));
        Err(format!(
            "{case:?} pos {}: our argmax {ours} (logit {:.3}, reference logit {theirs}); reference top-2 {top1} ({l1:.3}, ours {:.3}), {top2} ({l2:.3})",
            step.pos, row[ours as usize], row[top1 as usize]
        ))
    }
}

/// Steps where the engine's argmax is outside the §2.0.3 band of llama.cpp's winner on
/// these files, kept here one by one (file, path, prefill or decode, prompt, position)
/// with the numbers they were found with: the rule is not widened, and the tests fail on
/// any disagreement not listed here and on any listed one that no longer happens (on the
/// paths this machine runs). In each, the two tokens are within 0.14 (Q4_0: 0.19) in the
/// engine's logits and 0.30–0.80 apart in llama.cpp's; the engine's kernels give ggml's products on
/// real rows of every new type to ~1e-6 (`quant_kblocks::kquant_real_rows_match_ggml_reference`).
/// See docs/design.md §2.0.3.
const KNOWN_DISAGREEMENTS: [(&str, &str, &str, &str, usize); 30] = [
    // ours 430 18.250, 453 18.118; llama.cpp 453 18.374, 430 18.067 (gap 0.307).
    ("Q5_K_M", "portable", "prefill", "good morning", 35),
    // ours 430 18.334, 453 18.246; llama.cpp as above.
    ("Q5_K_M", "avx512vnni", "prefill", "good morning", 35),
    // Found on the AVX2 path (`GENAI_ISA=avx2`, the best path of an AVX2-only CPU).
    // ours 283 18.306, 453 18.277; llama.cpp 453 18.374, 283 18.057.
    // ("hash map" 55 of Q4_K_M and "prime numbers" 38 of Q5_K_M disagreed here too until
    // the packed Q5_0 and Q8_0 kernels took those files' matrices on AVX2.)
    ("Q5_K_M", "avx2", "prefill", "good morning", 35),
    // The AVX-512 path without VNNI (`GENAI_ISA=avx512`): the same step as the AVX2 path
    // (it takes the same packed Q5_0 and Q8_0 kernels).
    ("Q5_K_M", "avx512", "prefill", "good morning", 35),
    // Q4_0: the packed Q4_0 kernels give the portable path's bits, so each step disagrees
    // on every path with the same numbers (the one Q8_0 matrix, the embedding and LM head,
    // differs only in summation order between them; AVX2 seen with `GENAI_ISA=avx2`,
    // AVX-512 without VNNI with `GENAI_ISA=avx512`).
    // ours 1109 20.707, 2232 20.523; llama.cpp 2232 20.709, 1109 20.355 (gap 0.354).
    ("Q4_0", "portable", "prefill", "haiku about the sea", 25),
    ("Q4_0", "avx512vnni", "prefill", "haiku about the sea", 25),
    ("Q4_0", "avx2", "prefill", "haiku about the sea", 25),
    ("Q4_0", "avx512", "prefill", "haiku about the sea", 25),
    ("Q4_0", "portable", "decode", "haiku about the sea", 25),
    ("Q4_0", "avx512vnni", "decode", "haiku about the sea", 25),
    ("Q4_0", "avx2", "decode", "haiku about the sea", 25),
    ("Q4_0", "avx512", "decode", "haiku about the sea", 25),
    // ours 8045 21.679, 4326 21.589; llama.cpp 4326 22.054, 8045 21.698 (gap 0.356).
    ("Q4_0", "portable", "prefill", "good morning", 21),
    ("Q4_0", "avx512vnni", "prefill", "good morning", 21),
    ("Q4_0", "avx2", "prefill", "good morning", 21),
    ("Q4_0", "avx512", "prefill", "good morning", 21),
    // Since the flash prefill attention (§2.0.1: scores as a register-tiled product with
    // fused multiply-adds, another rounding of the prompt's keys and values) these steps
    // moved out of the band and four listed ones (Q4_K_M portable decode "haiku about
    // the sea" 54 and prefill "hash map" 55, Q6_K portable prefill "hash map" 60, Q4_0
    // prefill "hash map" 25 on every path) moved into it.
    // ours 81 24.905, 1232 24.724; llama.cpp 1232 25.495, 81 24.868 (gap 0.627).
    ("Q4_0", "portable", "prefill", "prime numbers", 58),
    ("Q4_0", "avx512vnni", "prefill", "prime numbers", 58),
    ("Q4_0", "avx2", "prefill", "prime numbers", 58),
    ("Q4_0", "avx512", "prefill", "prime numbers", 58),
    // Decode after the prompt's prefill: ours 81 25.521, 1232 25.449; llama.cpp as above.
    ("Q4_0", "portable", "decode", "prime numbers", 58),
    ("Q4_0", "avx512vnni", "decode", "prime numbers", 58),
    ("Q4_0", "avx2", "decode", "prime numbers", 58),
    ("Q4_0", "avx512", "decode", "prime numbers", 58),
    // ours 9615 19.575, 253 19.571; llama.cpp 253 20.027, 9615 19.228 (gap 0.799).
    ("Q4_K_M", "avx512vnni", "prefill", "haiku about the sea", 39),
    ("Q4_K_M", "avx2", "prefill", "haiku about the sea", 39),
    ("Q4_K_M", "avx512", "prefill", "haiku about the sea", 39),
    // ours 282 27.676, 30 27.659; llama.cpp 30 27.836, 282 27.484 (gap 0.352).
    ("Q6_K", "avx512vnni", "prefill", "hash map", 44),
    ("Q6_K", "avx2", "prefill", "hash map", 44),
    ("Q6_K", "avx512", "prefill", "hash map", 44),
];

/// A step where the engine's argmax is outside the band: file, path, position, message
/// (which quotes the prompt).
type Found = (&'static str, String, usize, String);

/// Compare the disagreements `found` in `mode` (prefill or decode) with the listed ones
/// for the paths `isas` run: `Err` names every unlisted disagreement and every listed one
/// that did not happen.
fn check_known(mode: &str, isas: &[Isa], found: &[Found]) -> Result<(), String> {
    let listed = |(k, i, pos, msg): &Found| {
        KNOWN_DISAGREEMENTS.iter().any(|&(lk, li, lm, lp, lpos)| {
            lk == *k && li == i && lm == mode && msg.contains(lp) && lpos == *pos
        })
    };
    let mut problems: Vec<String> = found
        .iter()
        .filter(|f| !listed(f))
        .map(|(k, i, _, msg)| format!("not listed: [{k} {i} {mode}] {msg}"))
        .collect();
    for &(lk, li, lm, lp, lpos) in &KNOWN_DISAGREEMENTS {
        let ran = isas.iter().any(|isa| isa.to_string() == li);
        let seen = found
            .iter()
            .any(|(k, i, pos, msg)| *k == lk && i == li && *pos == lpos && msg.contains(lp));
        if lm == mode && ran && !seen {
            problems.push(format!(
                "listed but agrees now: [{lk} {li} {lm}] {lp:?} pos {lpos}"
            ));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("\n"))
    }
}

/// The files hold what the reference was captured on (the sha256 the capture recorded)
/// and mix the types llama.cpp chose: K-quants where rows are whole super-blocks, the
/// 32-element fallbacks elsewhere.
#[test]
fn kquant_files_are_the_captured_ones_and_mix_types() {
    if !files_present("kquant_files_are_the_captured_ones_and_mix_types") {
        return;
    }
    use sha2::Digest;
    for (kind, want) in [
        (
            "Q4_K_M",
            &[GgmlType::Q4K, GgmlType::Q6K, GgmlType::Q5_0, GgmlType::Q8_0][..],
        ),
        (
            "Q5_K_M",
            &[GgmlType::Q5K, GgmlType::Q6K, GgmlType::Q5_1, GgmlType::Q8_0][..],
        ),
        ("Q6_K", &[GgmlType::Q6K, GgmlType::Q8_0][..]),
        ("Q4_0", &[GgmlType::Q4_0][..]),
    ] {
        let bytes = std::fs::read(model_path(kind)).unwrap();
        let sha = format!("{:x}", sha2::Sha256::digest(&bytes));
        assert_eq!(
            sha,
            reference(kind).model_sha256,
            "{kind}: not the file the reference was captured on"
        );
        let file = GgufFile::open(model_path(kind)).unwrap();
        let types: std::collections::BTreeSet<GgmlType> =
            file.tensors().iter().map(|t| t.ty).collect();
        for t in want {
            assert!(types.contains(t), "{kind}: no {t} tensor ({types:?})");
        }
    }
}

/// Teacher-forced prefill (every position's logits from one pass over prompt and
/// reference continuation) agrees with llama.cpp at every step, on each file, on the
/// portable path and the best path this machine has, but for the listed
/// [`KNOWN_DISAGREEMENTS`] (exactly those).
#[test]
fn kquant_teacher_forced_prefill_agrees_with_llamacpp() {
    if !files_present("kquant_teacher_forced_prefill_agrees_with_llamacpp") {
        return;
    }
    let mut failures: Vec<Found> = Vec::new();
    let mut checked = 0;
    let isas = [Isa::Portable, Isa::best()];
    for kind in KINDS {
        for isa in isas {
            let (model, _) = load(kind, 2, isa);
            for case in reference(kind).generate {
                let mut seq_ids = case.prompt_ids.clone();
                seq_ids.extend_from_slice(&case.greedy_ids[..case.greedy_ids.len() - 1]);
                let mut kv = KvCache::new(model.kv_config(seq_ids.len(), KvDtype::F16)).unwrap();
                let seq = kv.create_sequence();
                let logits = model.forward(&mut kv, seq, &seq_ids, Logits::All).unwrap();
                let vocab = model.config().vocab;
                for step in &case.steps {
                    let row = &logits[step.pos * vocab..(step.pos + 1) * vocab];
                    checked += 1;
                    if let Err(e) = check_step(&case.prompt, step, row) {
                        failures.push((kind, isa.to_string(), step.pos, e));
                    }
                }
            }
        }
    }
    assert!(checked > 600, "only {checked} steps checked");
    println!("{} listed disagreements of {checked} steps", failures.len());
    if let Err(e) = check_known("prefill", &isas, &failures) {
        panic!("{e}");
    }
}

/// Decode steps (the matrix-vector path, one token at a time) agree with llama.cpp on
/// each file, on the portable path and the best path, but for the listed
/// [`KNOWN_DISAGREEMENTS`] (exactly those).
#[test]
fn kquant_teacher_forced_decode_steps_agree_with_llamacpp() {
    if !files_present("kquant_teacher_forced_decode_steps_agree_with_llamacpp") {
        return;
    }
    let mut failures: Vec<Found> = Vec::new();
    let isas = [Isa::Portable, Isa::best()];
    for kind in KINDS {
        for isa in isas {
            let (model, tok) = load(kind, 2, isa);
            for case in reference(kind).generate.iter().take(3) {
                assert_eq!(tok.encode(&case.prompt).unwrap(), case.prompt_ids, "{kind}");
                let total = case.prompt_ids.len() + case.greedy_ids.len();
                let mut kv = KvCache::new(model.kv_config(total, KvDtype::F16)).unwrap();
                let seq = kv.create_sequence();
                let mut row = model
                    .forward(&mut kv, seq, &case.prompt_ids, Logits::Last)
                    .unwrap();
                for (i, step) in case.steps.iter().enumerate() {
                    if let Err(e) = check_step(&case.prompt, step, &row) {
                        failures.push((kind, isa.to_string(), step.pos, e));
                    }
                    if i + 1 < case.steps.len() {
                        row = model
                            .forward(&mut kv, seq, &[case.greedy_ids[i]], Logits::Last)
                            .unwrap();
                    }
                }
            }
        }
    }
    if let Err(e) = check_known("decode", &isas, &failures) {
        panic!("{e}");
    }
}

/// A user's Q4_K_M file loads through the engine's funnel and answers as llama.cpp does.
#[test]
fn q4_k_m_file_generates_the_reference_answer() {
    if !files_present("q4_k_m_file_generates_the_reference_answer") {
        return;
    }
    let engine = Engine::load_gguf(
        model_path("Q4_K_M"),
        EngineOptions {
            threads: 2,
            ..EngineOptions::default()
        },
    )
    .expect("the Q4_K_M file loads");
    let r = reference("Q4_K_M");
    let case = r
        .generate
        .iter()
        .find(|c| c.prompt.contains("capital of France"))
        .unwrap();
    let g = engine
        .generate_stream(
            &GenerateRequest::new(Prompt::Text(case.prompt.clone()), 32),
            &mut |_| {},
            &mut |_, _| engine::runtime::Flow::Continue,
        )
        .unwrap();
    let row = &g.rows[0];
    assert_eq!(row.text.as_deref(), Some(case.greedy_text.as_str()));
    assert_eq!(row.tokens, case.greedy_ids);
}
