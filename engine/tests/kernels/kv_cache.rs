//! The paged KV cache: page accounting under random grow/write/truncate/release sequences,
//! read-back, errors, and attention over paged KV against attention over contiguous KV.

use std::collections::{HashMap, HashSet};

use engine::kernels::VecOps;
use engine::kernels::attention::{ContiguousKv, KvSource, gqa_attention};
use engine::kv::{KvCache, KvConfig, KvDtype, KvError, SeqId};
use proptest::prelude::*;

fn config(
    n_layers: usize,
    n_kv_heads: usize,
    head_dim: usize,
    page_tokens: usize,
    max_pages: usize,
    dtype: KvDtype,
) -> KvConfig {
    KvConfig {
        n_layers,
        n_kv_heads,
        head_dim,
        page_tokens,
        max_pages,
        dtype,
    }
}

#[test]
fn bytes_per_token_for_smollm2_geometry() {
    // SmolLM2-135M: 30 layers, 3 KV heads, head_dim 64. 2 * 30 * 3 * 64 = 11,520 elements.
    let f32c = KvCache::new(config(30, 3, 64, 16, 4, KvDtype::F32)).unwrap();
    assert_eq!(f32c.bytes_per_token(), 46_080);
    assert_eq!(f32c.page_bytes(), 46_080 * 16);
    let f16c = KvCache::new(config(30, 3, 64, 16, 4, KvDtype::F16)).unwrap();
    assert_eq!(f16c.bytes_per_token(), 23_040);
    assert_eq!(f16c.created_pages(), 0, "pages are allocated lazily");
}

#[test]
fn bad_configs_are_typed_errors() {
    let e = KvCache::new(config(2, 1, 4, 0, 4, KvDtype::F32)).unwrap_err();
    assert_eq!(
        e,
        KvError::ZeroField {
            field: "page_tokens"
        }
    );
    let e = KvCache::new(config(2, 1, usize::MAX / 2, 4, 4, KvDtype::F32)).unwrap_err();
    assert!(matches!(e, KvError::Overflow { .. }), "{e:?}");
    let e = KvCache::new(config(2, 1, 4, 4, usize::MAX, KvDtype::F32)).unwrap_err();
    assert!(matches!(e, KvError::Overflow { .. }), "{e:?}");
}

#[test]
fn out_of_pages_names_need_and_free_and_changes_nothing() {
    let mut c = KvCache::new(config(1, 1, 2, 4, 2, KvDtype::F32)).unwrap();
    let s = c.create_sequence();
    assert_eq!(c.grow(s, 3), Ok(0..3));
    let e = c.grow(s, 6).unwrap_err(); // 9 positions need 3 pages, 1 held: need 2, 1 free
    assert_eq!(
        e,
        KvError::OutOfPages {
            need: 2,
            free: 1,
            max_pages: 2
        }
    );
    assert_eq!(
        e.to_string(),
        "KV cache out of pages: need 2 more, 1 free of 2"
    );
    assert_eq!((c.len(s), c.used_pages(), c.free_pages()), (3, 1, 1));
    assert_eq!(c.grow(s, 5), Ok(3..8));
    assert_eq!(c.free_pages(), 0);
}

#[test]
fn writes_are_checked() {
    let mut c = KvCache::new(config(2, 2, 3, 4, 2, KvDtype::F32)).unwrap();
    let s = c.create_sequence();
    c.grow(s, 2).unwrap();
    let row = [0.0f32; 6];
    assert_eq!(
        c.write(s, 2, 0, &row, &row),
        Err(KvError::LayerOutOfRange {
            layer: 2,
            n_layers: 2
        })
    );
    assert_eq!(
        c.write(s, 0, 2, &row, &row),
        Err(KvError::PositionOutOfRange { pos: 2, len: 2 })
    );
    assert_eq!(
        c.write(s, 0, 0, &row[..5], &row),
        Err(KvError::RowLength {
            which: "k",
            got: 5,
            expected: 6
        })
    );
    c.release(s);
    c.release(s); // a second release is a no-op
    assert_eq!(c.free_pages(), 2);
    assert_eq!(
        c.write(s, 0, 0, &row, &row),
        Err(KvError::UnknownSequence(s.get()))
    );
    assert_eq!(c.grow(s, 1), Err(KvError::UnknownSequence(s.get())));
}

#[test]
fn recycled_pages_read_as_zeros() {
    let mut c = KvCache::new(config(1, 1, 4, 2, 1, KvDtype::F32)).unwrap();
    let a = c.create_sequence();
    c.grow(a, 2).unwrap();
    c.write(a, 0, 1, &[1.0; 4], &[2.0; 4]).unwrap();
    c.release(a);
    let b = c.create_sequence();
    c.grow(b, 2).unwrap();
    assert_eq!(c.created_pages(), 1, "the released page is reused");
    let mut out = [f32::NAN; 4];
    c.layer(b, 0).read_key(1, 0, &mut out);
    assert_eq!(out, [0.0; 4]);
    c.layer(b, 0).read_value(1, 0, &mut out);
    assert_eq!(out, [0.0; 4]);
}

#[derive(Debug, Clone)]
enum Op {
    Create,
    Grow(prop::sample::Index, usize),
    Write(
        prop::sample::Index,
        prop::sample::Index,
        prop::sample::Index,
    ),
    Truncate(prop::sample::Index, prop::sample::Index),
    Release(prop::sample::Index),
}

fn op() -> impl Strategy<Value = Op> {
    use prop::sample::Index;
    prop_oneof![
        1 => Just(Op::Create),
        3 => (any::<Index>(), 0usize..8).prop_map(|(s, n)| Op::Grow(s, n)),
        4 => (any::<Index>(), any::<Index>(), any::<Index>()).prop_map(|(s, l, p)| Op::Write(s, l, p)),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(s, l)| Op::Truncate(s, l)),
        1 => any::<Index>().prop_map(Op::Release),
    ]
}

/// Test-side model of one sequence: its length and the rows written, keyed by (layer, pos).
struct Model {
    id: SeqId,
    len: usize,
    rows: HashMap<(usize, usize), (Vec<f32>, Vec<f32>)>,
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Random operation sequences against a model: page accounting is exact, block tables
    /// never share a page (no double allocation), free + used = capacity (no leak), and every
    /// row reads back what was last written (zeros where nothing was). Values are multiples of
    /// 0.25 below 256 in magnitude, exact in f16, so both dtypes must read back exactly.
    #[test]
    fn random_operations_keep_pages_and_contents_consistent(
        n_layers in 1usize..=3, n_kv in 1usize..=2, d in 1usize..=5, pt in 1usize..=4,
        max_pages in 1usize..=12, f16 in any::<bool>(), ops in prop::collection::vec(op(), 1..60)
    ) {
        let dtype = if f16 { KvDtype::F16 } else { KvDtype::F32 };
        let mut c = KvCache::new(config(n_layers, n_kv, d, pt, max_pages, dtype)).unwrap();
        let row = n_kv * d;
        let mut seqs: Vec<Model> = Vec::new();
        let mut counter = 0u32;
        let mut next_row = || {
            (0..row)
                .map(|_| {
                    counter += 1;
                    (counter % 2000) as f32 * 0.25 - 250.0
                })
                .collect::<Vec<f32>>()
        };
        for op in ops {
            match op {
                Op::Create => seqs.push(Model { id: c.create_sequence(), len: 0, rows: HashMap::new() }),
                Op::Grow(s, n) if !seqs.is_empty() => {
                    let i = s.index(seqs.len());
                    let m = &mut seqs[i];
                    let used: usize = c.used_pages();
                    let need = (m.len + n).div_ceil(pt) - m.len.div_ceil(pt);
                    let free = max_pages - used;
                    let got = c.grow(m.id, n);
                    if need > free {
                        prop_assert_eq!(got, Err(KvError::OutOfPages { need, free, max_pages }));
                    } else {
                        prop_assert_eq!(got, Ok(m.len..m.len + n));
                        m.len += n;
                    }
                }
                Op::Write(s, l, p) if !seqs.is_empty() => {
                    let i = s.index(seqs.len());
                    let (layer, pos) = (l.index(n_layers), p.index(seqs[i].len + 2));
                    let (k, v) = (next_row(), next_row());
                    let m = &mut seqs[i];
                    let got = c.write(m.id, layer, pos, &k, &v);
                    if pos < m.len {
                        prop_assert_eq!(got, Ok(()));
                        m.rows.insert((layer, pos), (k, v));
                    } else {
                        prop_assert_eq!(got, Err(KvError::PositionOutOfRange { pos, len: m.len }));
                    }
                }
                Op::Truncate(s, l) if !seqs.is_empty() => {
                    let i = s.index(seqs.len());
                    let m = &mut seqs[i];
                    let len = l.index(m.len + 3);
                    c.truncate(m.id, len);
                    if len < m.len {
                        m.len = len;
                        m.rows.retain(|(_, p), _| *p < len);
                    }
                }
                Op::Release(s) if !seqs.is_empty() => {
                    let m = seqs.remove(s.index(seqs.len()));
                    c.release(m.id);
                }
                _ => {}
            }

            // Accounting and block tables.
            let want_used: usize = seqs.iter().map(|m| m.len.div_ceil(pt)).sum();
            prop_assert_eq!(c.used_pages(), want_used);
            prop_assert_eq!(c.free_pages(), max_pages - want_used);
            prop_assert!(c.created_pages() <= max_pages);
            let mut seen = HashSet::new();
            for m in &seqs {
                prop_assert_eq!(c.len(m.id), m.len);
                let table = c.block_table(m.id);
                prop_assert_eq!(table.len(), m.len.div_ceil(pt));
                for &page in table {
                    prop_assert!(page < max_pages, "page id {} out of range", page);
                    prop_assert!(seen.insert(page), "page {} held twice", page);
                }
            }
            // Contents.
            let zeros = vec![0.0f32; row];
            let mut buf = vec![0.0f32; d];
            for m in &seqs {
                for layer in 0..n_layers {
                    let view = c.layer(m.id, layer);
                    prop_assert_eq!(view.len(), m.len);
                    for pos in 0..m.len {
                        let (k, v) = m.rows.get(&(layer, pos)).map(|(k, v)| (k, v)).unwrap_or((&zeros, &zeros));
                        for h in 0..n_kv {
                            view.read_key(pos, h, &mut buf);
                            prop_assert_eq!(&buf[..], &k[h * d..(h + 1) * d], "K layer {} pos {} head {}", layer, pos, h);
                            view.read_value(pos, h, &mut buf);
                            prop_assert_eq!(&buf[..], &v[h * d..(h + 1) * d], "V layer {} pos {} head {}", layer, pos, h);
                        }
                    }
                }
            }
        }
        for m in seqs.drain(..) {
            c.release(m.id);
        }
        prop_assert_eq!(c.free_pages(), max_pages);
        prop_assert_eq!(c.used_pages(), 0);
    }
}

#[derive(Debug, Clone)]
struct AttnCase {
    n_kv: usize,
    group: usize,
    d: usize,
    pt: usize,
    len: usize,
    lo: usize,
    hi: usize,
    cap: Option<f32>,
    chunks: Vec<usize>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
}

fn attn_case() -> impl Strategy<Value = AttnCase> {
    (1usize..=3, 1usize..=3, 1usize..=72, 1usize..=5, 1usize..=30)
        .prop_flat_map(|(n_kv, group, d, pt, len)| {
            (
                Just((n_kv, group, d, pt, len)),
                (0..len).prop_flat_map(move |lo| (Just(lo), lo + 1..=len)),
                prop::option::of(0.5f32..8.0),
                prop::collection::vec(1usize..=7, 1..=30),
                prop::collection::vec(-1.0f32..1.0, n_kv * group * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
                prop::collection::vec(-1.0f32..1.0, len * n_kv * d),
            )
        })
        .prop_map(
            |((n_kv, group, d, pt, len), (lo, hi), cap, chunks, q, k, v)| AttnCase {
                n_kv,
                group,
                d,
                pt,
                len,
                lo,
                hi,
                cap,
                chunks,
                q,
                k,
                v,
            },
        )
}

/// Fill layer 1 of a sequence with `k`, `v` (`[len, n_kv, d]`), growing it in the given chunk
/// sizes while a second sequence grows in between, so its pages are scattered, not in order.
fn paged(c: &AttnCase, dtype: KvDtype, ops: VecOps) -> (KvCache, SeqId) {
    let row = c.n_kv * c.d;
    // `other` takes one page per growth step of `seq`, at most `len` steps.
    let max_pages = c.len.div_ceil(c.pt) + c.len + 2;
    let mut cache = KvCache::new(config(2, c.n_kv, c.d, c.pt, max_pages, dtype)).unwrap();
    cache.set_ops(ops);
    let other = cache.create_sequence();
    let seq = cache.create_sequence();
    let mut chunks = c.chunks.iter().cycle();
    while cache.len(seq) < c.len {
        let n = (*chunks.next().unwrap()).min(c.len - cache.len(seq));
        cache.grow(other, c.pt).unwrap();
        let range = cache.grow(seq, n).unwrap();
        for p in range {
            let (k, v) = (&c.k[p * row..(p + 1) * row], &c.v[p * row..(p + 1) * row]);
            cache.write(seq, 1, p, k, v).unwrap();
            cache.write(seq, 0, p, v, k).unwrap(); // a different layer holds other data
        }
    }
    (cache, seq)
}

fn run(c: &AttnCase, kv: &impl KvSource) -> Vec<f32> {
    let n_heads = c.n_kv * c.group;
    let mut out = vec![f32::NAN; n_heads * c.d];
    let scale = 1.0 / (c.d as f32).sqrt();
    gqa_attention(
        &c.q,
        kv,
        c.lo,
        c.hi,
        n_heads,
        scale,
        c.cap,
        &mut out,
        &mut Vec::new(),
    );
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    /// f32 storage: attention over the paged cache (page size 1..=5, windows crossing page
    /// boundaries, pages out of order) is bit-identical to attention over the same rows laid
    /// out contiguously, on every SIMD path.
    #[test]
    fn paged_attention_is_bit_identical_to_contiguous(c in attn_case()) {
        for ops in VecOps::available() {
            let (cache, seq) = paged(&c, KvDtype::F32, ops);
            let from_pages = run(&c, &cache.layer(seq, 1));
            let contiguous = run(&c, &ContiguousKv::new(&c.k, &c.v, c.n_kv, c.d).with_ops(ops));
            let a: Vec<u32> = from_pages.iter().map(|x| x.to_bits()).collect();
            let b: Vec<u32> = contiguous.iter().map(|x| x.to_bits()).collect();
            prop_assert_eq!(a, b, "path {}", ops.isa());
        }
    }

    /// f16 storage: within 1e-2 absolute of f32 attention (|q|, |k|, |v| ≤ 1; f16 rounds each
    /// stored value by at most 2^-11 relative, which moves a score by at most
    /// sqrt(head_dim)·2^-11 ≈ 4e-3 at head_dim 72). Against contiguous attention over the
    /// same f16-rounded rows it is bit-identical while head_dim ≤ 64 (one widening chunk), and
    /// within 1e-5 beyond.
    #[test]
    fn f16_paged_attention_is_close_to_f32(c in attn_case()) {
        let ops = VecOps::best();
        let (cache, seq) = paged(&c, KvDtype::F16, ops);
        let got = run(&c, &cache.layer(seq, 1));
        let exact = run(&c, &ContiguousKv::new(&c.k, &c.v, c.n_kv, c.d).with_ops(ops));
        let round = |x: &Vec<f32>| x.iter().map(|v| half::f16::from_f32(*v).to_f32()).collect::<Vec<f32>>();
        let (k16, v16) = (round(&c.k), round(&c.v));
        let rounded = run(&c, &ContiguousKv::new(&k16, &v16, c.n_kv, c.d).with_ops(ops));
        for i in 0..got.len() {
            prop_assert!((got[i] - exact[i]).abs() <= 1e-2, "i={} {} vs {}", i, got[i], exact[i]);
            if c.d <= 64 {
                prop_assert_eq!(got[i].to_bits(), rounded[i].to_bits(), "i={}", i);
            } else {
                prop_assert!((got[i] - rounded[i]).abs() <= 1e-5, "i={}", i);
            }
        }
    }
}

/// A shared page lives while anything holds it: a sequence that adopted it reads the rows
/// its first holder wrote; releasing one holder keeps it; the last release frees it once.
#[test]
fn shared_pages_live_while_held_and_free_once() {
    let mut kv = KvCache::new(config(1, 1, 2, 2, 4, KvDtype::F32)).unwrap();
    let a = kv.create_sequence();
    kv.grow(a, 4).unwrap();
    for pos in 0..4 {
        let x = [pos as f32, 10.0 + pos as f32];
        kv.write(a, 0, pos, &x, &x).unwrap();
    }
    let pages = kv.block_table(a).to_vec();
    for &p in &pages {
        kv.retain(p).unwrap();
    }
    kv.release(a);
    assert_eq!(
        kv.used_pages(),
        2,
        "the retained pages outlive their sequence"
    );
    let b = kv.adopt(&pages).unwrap();
    assert_eq!(kv.len(b), 4);
    kv.grow(b, 1).unwrap();
    assert_eq!(kv.used_pages(), 3, "growth takes a page of its own");
    let mut k = [0.0; 2];
    kv.layer(b, 0).read_key(3, 0, &mut k);
    assert_eq!(
        k,
        [3.0, 13.0],
        "the adopted rows are the ones written before"
    );
    kv.release(b);
    assert_eq!(kv.used_pages(), 2, "the cache's hold keeps them");
    for &p in &pages {
        kv.unretain(p);
        kv.unretain(p);
    }
    assert_eq!(kv.used_pages(), 0);
    assert_eq!(kv.free_pages(), 4, "a page dropped twice is freed once");
    assert!(matches!(kv.adopt(&pages), Err(KvError::PageNotLive(_))));
    assert!(matches!(kv.retain(pages[0]), Err(KvError::PageNotLive(_))));
}
