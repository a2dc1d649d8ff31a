//! `token_logprobs`: log-softmax of a logit row, the chosen token's and the top-n tokens' log probabilities.

use engine::kernels::logprob::token_logprobs;
use proptest::prelude::*;

proptest! {
    /// The probabilities of the whole row sum to 1, the top list is the `n` largest logits in
    /// order (ties by lower id), and every difference of log probabilities is the difference
    /// of the logits.
    #[test]
    fn logprobs_are_a_log_softmax_and_top_is_the_n_largest(
        logits in prop::collection::vec(-30.0f32..30.0, 1..300),
        pick in any::<prop::sample::Index>(),
        n in 0usize..25,
    ) {
        let id = pick.index(logits.len()) as u32;
        let lp = token_logprobs(&logits, id, n);
        prop_assert_eq!(lp.id, id);
        prop_assert!(lp.logprob <= 0.0);
        let all: Vec<f32> = (0..logits.len() as u32)
            .map(|i| token_logprobs(&logits, i, 0).logprob)
            .collect();
        let total: f64 = all.iter().map(|&l| f64::from(l).exp()).sum();
        prop_assert!((total - 1.0).abs() < 1e-4, "probabilities sum to {}", total);
        prop_assert!(
            ((lp.logprob - all[0]) - (logits[id as usize] - logits[0])).abs() < 1e-3
        );
        let mut order: Vec<u32> = (0..logits.len() as u32).collect();
        order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]).then(a.cmp(&b)));
        order.truncate(n);
        let top_ids: Vec<u32> = lp.top.iter().map(|&(i, _)| i).collect();
        prop_assert_eq!(top_ids, order);
        for &(i, l) in &lp.top {
            prop_assert!((l - all[i as usize]).abs() < 1e-6);
        }
    }
}

#[test]
fn infinite_nan_and_out_of_range_logits_are_handled() {
    // An infinite logit takes all the mass; NaN counts as -inf.
    let lp = token_logprobs(&[0.0, f32::INFINITY, f32::NAN], 1, 3);
    assert_eq!(lp.logprob, 0.0);
    assert_eq!(lp.top[0], (1, 0.0));
    assert_eq!(lp.top[1].1, f32::NEG_INFINITY);
    let lp = token_logprobs(&[1.0, f32::NAN], 1, 1);
    assert_eq!(lp.logprob, f32::NEG_INFINITY);
    assert_eq!(lp.top, vec![(0, 0.0)]);
    // Nothing finite: -inf everywhere, never NaN.
    let lp = token_logprobs(&[f32::NEG_INFINITY; 3], 0, 2);
    assert_eq!(lp.logprob, f32::NEG_INFINITY);
    assert!(lp.top.iter().all(|&(_, l)| l == f32::NEG_INFINITY));
    // An id outside the row.
    assert_eq!(token_logprobs(&[0.0, 0.0], 7, 0).logprob, f32::NEG_INFINITY);
    // Two equal logits: ln(1/2) each, top in id order.
    let lp = token_logprobs(&[3.0, 3.0], 1, 5);
    assert!((lp.logprob - (0.5f32).ln()).abs() < 1e-6);
    assert_eq!(lp.top.len(), 2);
    assert_eq!(lp.top[0].0, 0);
}
