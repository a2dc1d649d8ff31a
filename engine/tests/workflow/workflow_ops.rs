//! The graph op set against plain reference implementations written here (proptest over shapes and values).

use engine::workflow::DType;
use engine::workflow::Tensor;
use engine::workflow::ops::Op;
use proptest::prelude::*;

fn s(x: &str) -> String {
    x.to_string()
}

fn f32_data(t: &Tensor) -> (Vec<usize>, Vec<f32>) {
    match t {
        Tensor::F32(a) => (a.shape().to_vec(), a.iter().copied().collect()),
        other => panic!("expected f32, got {:?}", other.dtype()),
    }
}

fn i64_data(t: &Tensor) -> (Vec<usize>, Vec<i64>) {
    match t {
        Tensor::I64(a) => (a.shape().to_vec(), a.iter().copied().collect()),
        other => panic!("expected i64, got {:?}", other.dtype()),
    }
}

fn bool_data(t: &Tensor) -> (Vec<usize>, Vec<bool>) {
    match t {
        Tensor::Bool(a) => (a.shape().to_vec(), a.iter().copied().collect()),
        other => panic!("expected bool, got {:?}", other.dtype()),
    }
}

fn matrix(max: usize) -> impl Strategy<Value = (usize, usize, Vec<f32>)> {
    (1..max, 1..max)
        .prop_flat_map(|(r, c)| (Just(r), Just(c), prop::collection::vec(-4.0f32..4.0, r * c)))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn matmul_matches_triple_loop(
        (m, k, a) in matrix(7),
        n in 1usize..7,
        seed in prop::collection::vec(-4.0f32..4.0, 49),
    ) {
        let b: Vec<f32> = (0..k * n).map(|i| seed[i % seed.len()] + i as f32 * 0.01).collect();
        let out = Op::MatMul { a: s("a"), b: s("b") }
            .eval(&[&Tensor::f32(&[m, k], a.clone()).unwrap(), &Tensor::f32(&[k, n], b.clone()).unwrap()])
            .unwrap();
        let (shape, got) = f32_data(&out);
        prop_assert_eq!(shape, vec![m, n]);
        for i in 0..m {
            for j in 0..n {
                let mut want = 0.0f32;
                for t in 0..k {
                    want += a[i * k + t] * b[t * n + j];
                }
                prop_assert!((got[i * n + j] - want).abs() <= 1e-4 * (1.0 + want.abs()));
            }
        }
    }

    #[test]
    fn softmax_rows_match_reference((r, c, x) in matrix(9)) {
        let out = Op::Softmax { input: s("x"), axis: -1 }
            .eval(&[&Tensor::f32(&[r, c], x.clone()).unwrap()])
            .unwrap();
        let (_, got) = f32_data(&out);
        for i in 0..r {
            let row = &x[i * c..(i + 1) * c];
            let m = row.iter().cloned().fold(f32::MIN, f32::max);
            let z: f64 = row.iter().map(|&v| ((v - m) as f64).exp()).sum();
            for j in 0..c {
                let want = ((row[j] - m) as f64).exp() / z;
                prop_assert!((got[i * c + j] as f64 - want).abs() < 1e-5);
            }
        }
    }

    #[test]
    fn argmax_lowest_index_on_ties_and_nan_never_wins(
        vals in prop::collection::vec(prop_oneof![Just(f32::NAN), Just(1.0f32), -3.0f32..3.0], 1..20),
    ) {
        let out = Op::ArgMax { input: s("x"), axis: 0, keepdims: false }
            .eval(&[&Tensor::f32(&[vals.len()], vals.clone()).unwrap()])
            .unwrap();
        let (shape, got) = i64_data(&out);
        prop_assert!(shape.is_empty());
        let mut want = None::<usize>;
        for (i, &v) in vals.iter().enumerate() {
            if v.is_nan() { continue; }
            match want {
                Some(w) if vals[w] >= v => {}
                _ => want = Some(i),
            }
        }
        prop_assert_eq!(got[0], want.unwrap_or(0) as i64);
    }

    #[test]
    fn gather_rows_matches_indexing(
        (r, c, x) in matrix(8),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..6),
    ) {
        let idx: Vec<i64> = picks.iter().map(|p| p.index(r) as i64).collect();
        let out = Op::Gather { data: s("d"), indices: s("i"), axis: 0 }
            .eval(&[&Tensor::f32(&[r, c], x.clone()).unwrap(), &Tensor::i64(&[idx.len()], idx.clone()).unwrap()])
            .unwrap();
        let (shape, got) = f32_data(&out);
        prop_assert_eq!(shape, vec![idx.len(), c]);
        for (o, &i) in idx.iter().enumerate() {
            prop_assert_eq!(&got[o * c..(o + 1) * c], &x[i as usize * c..(i as usize + 1) * c]);
        }
    }

    #[test]
    fn transpose_and_reshape_move_elements((r, c, x) in matrix(8)) {
        let t = Tensor::f32(&[r, c], x.clone()).unwrap();
        let out = Op::Transpose { input: s("x"), perm: vec![1, 0] }.eval(&[&t]).unwrap();
        let (shape, got) = f32_data(&out);
        prop_assert_eq!(shape, vec![c, r]);
        for i in 0..r {
            for j in 0..c {
                prop_assert_eq!(got[j * r + i], x[i * c + j]);
            }
        }
        let flat = Op::Reshape { input: s("x"), shape: vec![-1] }.eval(&[&t]).unwrap();
        prop_assert_eq!(f32_data(&flat), (vec![r * c], x.clone()));
        let bad = Op::Reshape { input: s("x"), shape: vec![r as i64 * c as i64 + 1] }.eval(&[&t]);
        prop_assert!(bad.is_err());
    }

    #[test]
    fn slice_and_concat_follow_python_semantics(
        v in prop::collection::vec(-100i64..100, 0..12),
        w in prop::collection::vec(-100i64..100, 0..12),
        start in -15i64..15,
        end in prop::option::of(-15i64..15),
    ) {
        let tv = Tensor::i64(&[v.len()], v.clone()).unwrap();
        let out = Op::Slice { input: s("x"), axis: 0, start, end }.eval(&[&tv]).unwrap();
        let n = v.len() as i64;
        let clamp = |i: i64| if i < 0 { (n + i).max(0) } else { i.min(n) };
        let (a, b) = (clamp(start), clamp(end.unwrap_or(n)));
        let want: Vec<i64> = if a < b { v[a as usize..b as usize].to_vec() } else { vec![] };
        prop_assert_eq!(i64_data(&out).1, want);

        let tw = Tensor::i64(&[w.len()], w.clone()).unwrap();
        let cat = Op::Concat { inputs: vec![s("a"), s("b")], axis: 0 }.eval(&[&tv, &tw]).unwrap();
        let mut both = v.clone();
        both.extend(&w);
        prop_assert_eq!(i64_data(&cat).1, both);
    }

    #[test]
    fn broadcast_add_mul_match_reference((r, c, x) in matrix(6), row in prop::collection::vec(-2.0f32..2.0, 6)) {
        let row = &row[..c];
        let tx = Tensor::f32(&[r, c], x.clone()).unwrap();
        let tr = Tensor::f32(&[c], row.to_vec()).unwrap();
        let add = f32_data(&Op::Add { a: s("a"), b: s("b") }.eval(&[&tx, &tr]).unwrap()).1;
        let mul = f32_data(&Op::Mul { a: s("a"), b: s("b") }.eval(&[&tr, &tx]).unwrap()).1;
        for i in 0..r {
            for j in 0..c {
                prop_assert_eq!(add[i * c + j], x[i * c + j] + row[j]);
                prop_assert_eq!(mul[i * c + j], row[j] * x[i * c + j]);
            }
        }
    }

    #[test]
    fn reductions_and_cumsum_match_reference((r, c, x) in matrix(7)) {
        let t = Tensor::f32(&[r, c], x.clone()).unwrap();
        let mx = f32_data(&Op::ReduceMax { input: s("x"), axis: 1, keepdims: true }.eval(&[&t]).unwrap());
        let cs = f32_data(&Op::CumSum { input: s("x"), axis: 1 }.eval(&[&t]).unwrap()).1;
        let sm = f32_data(&Op::ReduceSum { input: s("x"), axis: 0, keepdims: false }.eval(&[&t]).unwrap());
        prop_assert_eq!(mx.0, vec![r, 1]);
        prop_assert_eq!(sm.0, vec![c]);
        for i in 0..r {
            let row = &x[i * c..(i + 1) * c];
            prop_assert_eq!(mx.1[i], row.iter().cloned().fold(f32::MIN, f32::max));
            let mut acc = 0.0f32;
            for j in 0..c {
                acc += row[j];
                prop_assert!((cs[i * c + j] - acc).abs() < 1e-4);
            }
        }
        for j in 0..c {
            let col: f32 = (0..r).map(|i| x[i * c + j]).sum();
            prop_assert!((sm.1[j] - col).abs() < 1e-4);
        }
    }

    #[test]
    fn comparisons_logic_and_where_match_reference(
        a in prop::collection::vec(-3i64..3, 1..10),
        seed in prop::collection::vec(-3i64..3, 10),
    ) {
        let n = a.len();
        let b = &seed[..n];
        let ta = Tensor::i64(&[n], a.clone()).unwrap();
        let tb = Tensor::i64(&[n], b.to_vec()).unwrap();
        let eq = Op::Equal { a: s("a"), b: s("b") }.eval(&[&ta, &tb]).unwrap();
        let gt = Op::Greater { a: s("a"), b: s("b") }.eval(&[&ta, &tb]).unwrap();
        let ng = Op::Not { input: s("g") }.eval(&[&gt]).unwrap();
        let and = Op::And { a: s("a"), b: s("b") }.eval(&[&eq, &ng]).unwrap();
        let wh = Op::Where { cond: s("c"), a: s("a"), b: s("b") }.eval(&[&gt, &ta, &tb]).unwrap();
        for i in 0..n {
            prop_assert_eq!(bool_data(&eq).1[i], a[i] == b[i]);
            prop_assert_eq!(bool_data(&gt).1[i], a[i] > b[i]);
            prop_assert_eq!(bool_data(&and).1[i], a[i] == b[i] && a[i] <= b[i]);
            prop_assert_eq!(i64_data(&wh).1[i], a[i].max(b[i]));
        }
        let cast = Op::Cast { input: s("g"), to: DType::F32 }.eval(&[&gt]).unwrap();
        for i in 0..n {
            prop_assert_eq!(f32_data(&cast).1[i], if a[i] > b[i] { 1.0 } else { 0.0 });
        }
    }

    #[test]
    fn random_uniform_is_in_unit_interval_and_reproducible(seed in any::<i64>(), counter in any::<i64>()) {
        let op = Op::RandomUniform { seed: s("s"), counter: s("c") };
        let args = [Tensor::scalar_i64(seed), Tensor::scalar_i64(counter)];
        let u = f32_data(&op.eval(&[&args[0], &args[1]]).unwrap()).1[0];
        let v = f32_data(&op.eval(&[&args[0], &args[1]]).unwrap()).1[0];
        prop_assert!((0.0..1.0).contains(&u));
        prop_assert_eq!(u.to_bits(), v.to_bits());
    }
}

#[test]
fn bad_operands_are_errors_not_panics() {
    let x = Tensor::f32(&[2, 3], vec![0.0; 6]).unwrap();
    let i = Tensor::i64(&[1], vec![5]).unwrap();
    let e = Op::Gather {
        data: s("d"),
        indices: s("i"),
        axis: 0,
    }
    .eval(&[&x, &i])
    .unwrap_err();
    assert!(
        e.contains("index 5 is out of range for axis 0 of size 2"),
        "{e}"
    );
    let e = Op::MatMul {
        a: s("a"),
        b: s("b"),
    }
    .eval(&[&x, &x])
    .unwrap_err();
    assert!(e.contains("inner dimensions differ"), "{e}");
    let e = Op::Add {
        a: s("a"),
        b: s("b"),
    }
    .eval(&[&x, &Tensor::f32(&[2], vec![0.0; 2]).unwrap()])
    .unwrap_err();
    assert!(e.contains("do not broadcast"), "{e}");
    let e = Op::Div {
        a: s("a"),
        b: s("b"),
    }
    .eval(&[&Tensor::scalar_i64(1), &Tensor::scalar_i64(0)])
    .unwrap_err();
    assert!(e.contains("i64 division 1 / 0"), "{e}");
    let e = Op::ArgMax {
        input: s("x"),
        axis: 0,
        keepdims: false,
    }
    .eval(&[&Tensor::f32(&[0], vec![]).unwrap()])
    .unwrap_err();
    assert!(e.contains("empty axis"), "{e}");
    let e = Op::Softmax {
        input: s("x"),
        axis: 2,
    }
    .eval(&[&x])
    .unwrap_err();
    assert!(e.contains("axis 2 is out of range for rank 2"), "{e}");
}
