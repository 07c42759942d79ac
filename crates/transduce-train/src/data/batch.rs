//! Token-bucketed batches (§5.1): pairs of similar length together, each batch holding
//! about `max_tokens` source and `max_tokens` target tokens, padding included.

use crate::rng::Rng;

/// One batch: indices into the pair list.
pub type Batch = Vec<usize>;

/// Groups pairs into batches of similar length whose padded size stays within the budget
/// on both sides: `rows × longest source ≤ max_tokens` and `rows × longest target ≤
/// max_tokens`. Lengths include the BOS/EOS a side gets (source +1, target +1). A pair
/// longer than the budget alone gets a batch of its own.
///
/// Deterministic: the same pairs always give the same batches; the order they are visited
/// in is shuffled per epoch by [`epoch_order`].
pub fn make_batches(src_lens: &[usize], tgt_lens: &[usize], max_tokens: usize) -> Vec<Batch> {
    let mut order: Vec<usize> = (0..src_lens.len()).collect();
    // By target length, then source length: both sides of a batch are then similar.
    order.sort_by_key(|&i| (tgt_lens[i], src_lens[i], i));
    let mut batches = Vec::new();
    let mut current: Batch = Vec::new();
    let (mut max_s, mut max_t) = (0usize, 0usize);
    for i in order {
        let (s, t) = (src_lens[i] + 1, tgt_lens[i] + 1);
        let (ns, nt) = (max_s.max(s), max_t.max(t));
        let rows = current.len() + 1;
        if !current.is_empty() && (rows * ns > max_tokens || rows * nt > max_tokens) {
            batches.push(std::mem::take(&mut current));
            max_s = s;
            max_t = t;
        } else {
            max_s = ns;
            max_t = nt;
        }
        current.push(i);
    }
    if !current.is_empty() {
        batches.push(current);
    }
    batches
}

/// The order batches are visited in during `epoch`: a permutation that depends only on
/// the seed and the epoch, so a resumed run sees exactly the same order.
pub fn epoch_order(n_batches: usize, seed: u64, epoch: u64) -> Vec<usize> {
    let mut order: Vec<usize> = (0..n_batches).collect();
    let mut rng = Rng::new(seed ^ epoch.wrapping_mul(0xA076_1D64_78BD_642F));
    rng.shuffle(&mut order);
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lens(seed: u64, n: usize) -> Vec<usize> {
        let mut rng = Rng::new(seed);
        (0..n).map(|_| 1 + rng.below(60) as usize).collect()
    }

    #[test]
    fn batches_respect_the_budget_and_cover_every_pair_once() {
        let (src, tgt) = (lens(1, 5000), lens(2, 5000));
        for budget in [64, 500, 2000, 25_000] {
            let batches = make_batches(&src, &tgt, budget);
            let mut seen = vec![0u32; src.len()];
            for b in &batches {
                let ms = b.iter().map(|&i| src[i] + 1).max().unwrap();
                let mt = b.iter().map(|&i| tgt[i] + 1).max().unwrap();
                assert!(
                    b.len() == 1 || (b.len() * ms <= budget && b.len() * mt <= budget),
                    "budget {budget}: {} rows × ({ms}, {mt})",
                    b.len()
                );
                for &i in b {
                    seen[i] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "budget {budget}");
            let order = epoch_order(batches.len(), 7, 3);
            let mut sorted = order.clone();
            sorted.sort();
            assert_eq!(sorted, (0..batches.len()).collect::<Vec<_>>());
            assert_eq!(order, epoch_order(batches.len(), 7, 3));
            assert_ne!(order, epoch_order(batches.len(), 7, 4));
        }
    }

    #[test]
    fn batches_are_well_filled() {
        let (src, tgt) = (lens(3, 5000), lens(4, 5000));
        let batches = make_batches(&src, &tgt, 2000);
        let padded: usize = batches
            .iter()
            .map(|b| b.len() * b.iter().map(|&i| tgt[i] + 1).max().unwrap())
            .sum();
        let real: usize = tgt.iter().map(|t| t + 1).sum();
        // Sorting by length keeps target padding small.
        assert!(real as f64 / padded as f64 > 0.9, "{real} / {padded}");
    }
}
