//! Spearman's rank correlation: how well our rows' order agrees with the paper's, the
//! measure the project holds Table 3 to (ρ of dev perplexity across rows), since a reduced
//! scale shifts every perplexity but should keep their order.

/// Ranks from 1, ties sharing the mean of the ranks they span (so that 4.92 and 4.92 in
/// the paper's column count as one place, not two).
pub fn ranks(values: &[f64]) -> Vec<f64> {
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_by(|&a, &b| values[a].total_cmp(&values[b]));
    let mut out = vec![0.0; values.len()];
    let mut i = 0;
    while i < order.len() {
        let mut j = i;
        while j + 1 < order.len() && values[order[j + 1]] == values[order[i]] {
            j += 1;
        }
        // Positions i..=j (0-based) are ranks i+1..=j+1: their mean.
        let rank = (i + j) as f64 / 2.0 + 1.0;
        for &k in &order[i..=j] {
            out[k] = rank;
        }
        i = j + 1;
    }
    out
}

/// ρ, the Pearson correlation of the ranks; `None` with fewer than two pairs, different
/// lengths, or a column whose values are all equal (no order to compare).
pub fn spearman(a: &[f64], b: &[f64]) -> Option<f64> {
    if a.len() != b.len() || a.len() < 2 {
        return None;
    }
    let (ra, rb) = (ranks(a), ranks(b));
    let n = ra.len() as f64;
    let (ma, mb) = (ra.iter().sum::<f64>() / n, rb.iter().sum::<f64>() / n);
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in ra.iter().zip(&rb) {
        cov += (x - ma) * (y - mb);
        va += (x - ma) * (x - ma);
        vb += (y - mb) * (y - mb);
    }
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_share_ties() {
        assert_eq!(ranks(&[10.0, 30.0, 20.0]), [1.0, 3.0, 2.0]);
        assert_eq!(ranks(&[5.0, 1.0, 5.0, 2.0]), [3.5, 1.0, 3.5, 2.0]);
    }

    #[test]
    fn spearman_by_hand() {
        // Without ties ρ = 1 − 6Σd²/(n(n²−1)): ranks (1,2,3,4,5) against (2,1,4,3,5),
        // Σd² = 4, so 1 − 24/120 = 0.8.
        let r = spearman(&[1.0, 2.0, 3.0, 4.0, 5.0], &[20.0, 10.0, 40.0, 30.0, 50.0]).unwrap();
        assert!((r - 0.8).abs() < 1e-12, "{r}");
        // Order reversed: −1; the same order whatever the scale: 1.
        let r = spearman(&[1.0, 2.0, 3.0], &[9.0, 5.0, 1.0]).unwrap();
        assert!((r + 1.0).abs() < 1e-12, "{r}");
        let r = spearman(&[4.92, 5.29, 6.11], &[11.0, 12.5, 30.0]).unwrap();
        assert!((r - 1.0).abs() < 1e-12, "{r}");
        // With a tie: ranks (1, 2.5, 2.5, 4) against (1, 2, 3, 4): mean 2.5 each,
        // cov = 2.25 + 0 + 0 + 2.25 = 4.5, var 4.5 and 5, ρ = 4.5 / √22.5 = 0.948683.
        let r = spearman(&[1.0, 2.0, 2.0, 3.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert!((r - 4.5 / 22.5f64.sqrt()).abs() < 1e-12, "{r}");
        assert!((r - 0.948683).abs() < 1e-6, "{r}");
        assert_eq!(spearman(&[1.0], &[1.0]), None);
        assert_eq!(spearman(&[1.0, 1.0], &[1.0, 2.0]), None);
        assert_eq!(spearman(&[1.0, 2.0], &[1.0]), None);
    }
}
