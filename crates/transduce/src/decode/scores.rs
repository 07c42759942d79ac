//! One decoding step's scores on the host: each row kept as values and a shift, and ranked
//! for the search (§6.1) in one pass over the row where it is still a model's logits.

use crate::host::rows;
use crate::tokenizer::{BOS, PAD};

/// Log-probabilities on the host, each row kept as values and a shift: entry `id` of row
/// `r` is `values[r·vocab + id] − shifts[r]` (a shift of 0 for rows already normalized).
///
/// A single model's rows arrive as its logits and are normalized where they are first
/// read (the shift found, PAD and BOS banned): by [`HostScores::row`], or by
/// [`HostScores::best`], which ranks a row and finds its maximum in one pass and then
/// sums its exponentials, so no row is read three times and none is rewritten.
pub(crate) struct HostScores {
    values: Vec<f32>,
    /// Each row's shift; None while the row is still raw logits (PAD and BOS not banned).
    shifts: Vec<Option<f32>>,
    vocab: usize,
    /// The ranking pass's list, reused across rows.
    top: Vec<(f32, u32)>,
}

impl HostScores {
    /// The values, for the next step to write into.
    pub(crate) fn into_values(self) -> Vec<f32> {
        self.values
    }

    /// Rows in the batch.
    pub(crate) fn rows(&self) -> usize {
        self.shifts.len()
    }

    /// Rows already normalized (shift 0), PAD and BOS banned.
    pub(crate) fn normalized(values: Vec<f32>, vocab: usize) -> Self {
        Self::with_shift(values, vocab, Some(0.0))
    }

    /// A model's logits `[rows, vocab]`, normalized row by row as they are read.
    pub(crate) fn logits(values: Vec<f32>, vocab: usize) -> Self {
        Self::with_shift(values, vocab, None)
    }

    fn with_shift(values: Vec<f32>, vocab: usize, shift: Option<f32>) -> Self {
        let rows = values.len() / vocab.max(1);
        HostScores {
            values,
            shifts: vec![shift; rows],
            vocab,
            top: Vec::new(),
        }
    }

    /// Row `r`'s values and shift (normalized first if it was raw).
    pub(crate) fn row(&mut self, r: usize) -> (&[f32], f32) {
        let shift = match self.shifts[r] {
            Some(shift) => shift,
            None => {
                let shift = rows::log_softmax_shift(self.row_values(r));
                self.finish(r, shift);
                shift
            }
        };
        (self.row_values(r), shift)
    }

    fn row_values(&self, r: usize) -> &[f32] {
        &self.values[r * self.vocab..(r + 1) * self.vocab]
    }

    /// A raw row's shift is known: the softmax counted PAD and BOS, the search must not
    /// choose them (as on the device: banned after normalization).
    fn finish(&mut self, r: usize, shift: f32) {
        self.shifts[r] = Some(shift);
        let row = &mut self.values[r * self.vocab..(r + 1) * self.vocab];
        for id in SPECIALS {
            if let Some(v) = row.get_mut(id as usize) {
                *v = f32::NEG_INFINITY;
            }
        }
    }

    /// Row `r`'s `n` best tokens allowed by `mask`, as (`base` + log-probability, id), best
    /// first, the smaller id first on equal scores; −∞ and NaN never count. Exactly what
    /// [`rank`] finds in [`HostScores::row`].
    ///
    /// A raw row without a mask takes one ranking pass ([`rows::max_and_largest`]: its
    /// maximum and its n + 1 largest logits) and the exponentials' pass from that maximum
    /// ([`HostScores::settle_ranked`]); only a rounding tie at the list's end sends it to
    /// [`rank`].
    pub(crate) fn best(
        &mut self,
        r: usize,
        mask: Option<&[bool]>,
        base: f64,
        n: usize,
        out: &mut Vec<(f64, u32)>,
    ) {
        out.clear();
        if self.shifts[r].is_none() && mask.is_none() && n > 0 {
            let mut top = std::mem::take(&mut self.top);
            let m = rows::max_and_largest(self.row_values(r), n + 1, &SPECIALS, &mut top);
            let settled = self.settle_ranked(r, (m, &top), base, n, out);
            self.top = top;
            if settled {
                return;
            }
        }
        let (row, shift) = self.row(r);
        rank((row, shift), mask, base, n, out);
    }

    /// A raw row after its ranking pass (its maximum `m` and its n + 1 largest logits
    /// `top`): finds its shift from `m`, normalizes it, and writes its `n` best to `out`.
    /// Subtracting the shift and adding `base` are monotone, so the n largest logits hold
    /// the n best scores, unless rounding ties the n-th and (n + 1)-th scores: then `out`
    /// is left empty and false returned, for [`rank`], which breaks such ties by id.
    fn settle_ranked(
        &mut self,
        r: usize,
        (m, top): (f32, &[(f32, u32)]),
        base: f64,
        n: usize,
        out: &mut Vec<(f64, u32)>,
    ) -> bool {
        let shift = rows::log_softmax_shift_from_max(self.row_values(r), m);
        self.finish(r, shift);
        out.extend(top.iter().map(|&(v, id)| (base + (v - shift) as f64, id)));
        let clear = shift.is_finite()
            && out.iter().all(|&(s, _)| s > f64::NEG_INFINITY)
            && (out.len() <= n || out[n - 1].0 > out[n].0);
        if clear {
            out.truncate(n);
            out.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        } else {
            out.clear();
        }
        clear
    }

    /// Row `r`'s best token, the one [`HostScores::best`] ranks first (None where nothing
    /// is allowed), for a search that keeps no scores: greedy decoding of outputs alone.
    ///
    /// Where the largest logit beats the runner-up by [`CLEAR_GAP`] or more, subtracting
    /// the shift cannot round the two to one log-probability (both are within 16 of the
    /// shift's magnitude here, so their rounding errors are below 2⁻¹⁹), and the largest
    /// logit is the answer without the exponentials' pass. Otherwise the same ranking pass
    /// goes on as [`HostScores::best`]'s.
    pub(crate) fn best_token(&mut self, r: usize, out: &mut Vec<(f64, u32)>) -> Option<u32> {
        // Logits below 2²⁰ in magnitude keep the shift within 15 of the maximum over a
        // vocabulary of at most 2²⁰ entries (ln 2²⁰ < 14, plus half an ulp of 2²⁰).
        const SMALL: f32 = (1 << 20) as f32;
        out.clear();
        if self.shifts[r].is_none() && self.vocab <= 1 << 20 {
            let mut top = std::mem::take(&mut self.top);
            let m = rows::max_and_largest(self.row_values(r), 2, &SPECIALS, &mut top);
            let clear = match top[..] {
                [(_, id)] if m.abs() < SMALL => Some(id),
                [(v0, id), (v1, _)] if m.abs() < SMALL && v0 - v1 >= CLEAR_GAP => Some(id),
                _ => None,
            };
            let settled = clear.is_some() || self.settle_ranked(r, (m, &top), 0.0, 1, out);
            self.top = top;
            if settled {
                return clear.or_else(|| out.first().map(|&(_, id)| id));
            }
        }
        self.best(r, None, 0.0, 1, out);
        out.first().map(|&(_, id)| id)
    }
}

/// The gap between the two largest logits beyond which no rounding of their
/// log-probabilities can tie them (2⁻¹⁷, four times the largest such rounding).
const CLEAR_GAP: f32 = 1.0 / (1 << 17) as f32;

/// PAD and BOS: never predicted.
const SPECIALS: [u32; 2] = [PAD, BOS];

/// Appends to `out` the `n` best allowed entries of a normalized row, (`base` +
/// `row[id]` − `shift`, id), best first, the smaller id first on equal scores; `mask` holds
/// the allowed ids. One pass over the vocabulary with a short sorted list: a token enters
/// only if it beats the list's worst. Once the list is full, a chunk of tokens whose
/// largest value cannot beat it is skipped whole (subtracting the shift is monotone, so
/// the chunk's best log-probability is its largest value minus the shift).
pub(crate) fn rank(
    (row, shift): (&[f32], f32),
    mask: Option<&[bool]>,
    base: f64,
    n: usize,
    out: &mut Vec<(f64, u32)>,
) {
    // Long enough that the test per chunk costs little, short enough to skip most tokens.
    const CHUNK: usize = 32;
    if n == 0 {
        return;
    }
    let start = out.len();
    let by_score = |a: &(f64, u32), b: &(f64, u32)| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1));
    for (c, chunk) in row.chunks(CHUNK).enumerate() {
        if out.len() - start == n {
            let best = rows::max(chunk) - shift;
            if best == f32::NEG_INFINITY || base + best as f64 <= out[out.len() - 1].0 {
                continue;
            }
        }
        for (i, &v) in chunk.iter().enumerate() {
            let id = c * CHUNK + i;
            let lp = v - shift;
            if lp == f32::NEG_INFINITY || lp.is_nan() || mask.is_some_and(|m| !m[id]) {
                continue;
            }
            let score = base + lp as f64;
            let kept = out.len() - start;
            // Tokens come in increasing id order: on equal scores the earlier one wins.
            if kept == n && score <= out[out.len() - 1].0 {
                continue;
            }
            let candidate = (score, id as u32);
            let at = start + out[start..].partition_point(|c| by_score(c, &candidate).is_lt());
            if kept == n {
                out.pop();
            }
            out.insert(at, candidate);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    /// The one-pass ranking of a raw row ([`HostScores::best`]) against normalizing the row
    /// first and ranking it by [`rank`] (the search as it was): the same ids and the same
    /// score bits, on rows with repeated values, ties that only rounding makes (values
    /// that differ by less than the shift's last place), PAD and BOS as the row's best,
    /// −∞, and lists as long as the row.
    #[test]
    fn one_pass_ranking_is_the_normalized_rows_ranking() {
        let vocab = 300;
        let mut rng = Rng::new(0x2545_f491_4f6c_dd1d);
        let mut next = || rng.next_u64();
        let (mut got, mut want) = (Vec::new(), Vec::new());
        for case in 0..400 {
            let values: Vec<f32> = (0..3 * vocab)
                .map(|i| match (next() % 97, case % 4) {
                    (0, _) => f32::NEG_INFINITY,
                    // Logits a few ulps apart near 0.01 round to one log-probability
                    // near −5.7: ties only the shift makes.
                    (r, 0) => f32::from_bits(0.01f32.to_bits() + (r % 7) as u32),
                    (r, 1) => (r % 5) as f32,
                    (_, 2) if i % vocab < 2 => 50.0,
                    (r, _) => (r as f32 - 48.0) * 0.37 + (next() % 1000) as f32 * 1.0e-6,
                })
                .collect();
            let n = [1, 2, 8, 40, vocab][case % 5];
            let base = [0.0, -3.25, -1.0e3][case % 3];
            let mut raw = HostScores::logits(values.clone(), vocab);
            let mut normalized = HostScores::logits(values, vocab);
            for r in 0..3 {
                raw.best(r, None, base, n, &mut got);
                want.clear();
                rank(normalized.row(r), None, base, n, &mut want);
                let bits = |v: &[(f64, u32)]| -> Vec<(u64, u32)> {
                    v.iter().map(|&(s, id)| (s.to_bits(), id)).collect()
                };
                assert_eq!(bits(&got), bits(&want), "case {case}, row {r}");
                assert_eq!(raw.row(r).1.to_bits(), normalized.row(r).1.to_bits());
                assert!(got.iter().all(|&(_, id)| id != PAD && id != BOS));
            }
        }
    }

    /// best_token against best's first token: rows whose two largest logits are far apart,
    /// 1 ulp apart, equal, or round to one log-probability only through the shift.
    #[test]
    fn best_token_is_bests_first() {
        let vocab = 200;
        let mut rng = Rng::new(0x9e37_79b9_7f4a_7c15);
        let mut next = || rng.next_u64();
        let mut out = Vec::new();
        for case in 0..600 {
            let mut values: Vec<f32> = (0..vocab)
                .map(|_| (next() % 1000) as f32 * 0.01 - 5.0)
                .collect();
            let (a, b) = (
                2 + next() as usize % (vocab - 2),
                2 + next() as usize % (vocab - 2),
            );
            let top = [6.0f32, 0.01, 1.0e3][case % 3];
            values[a] = top;
            if a != b {
                values[b] = match case % 4 {
                    0 => top,
                    1 => f32::from_bits(top.to_bits() - 1),
                    2 => top - CLEAR_GAP,
                    _ => top - CLEAR_GAP / 2.0,
                };
            }
            let mut fast = HostScores::logits(values.clone(), vocab);
            let mut full = HostScores::logits(values, vocab);
            full.best(0, None, 0.0, 1, &mut out);
            let want = out.first().map(|&(_, id)| id);
            assert_eq!(fast.best_token(0, &mut out), want, "case {case}");
        }
        let mut empty = HostScores::logits(vec![f32::NEG_INFINITY; 8], 8);
        assert_eq!(empty.best_token(0, &mut out), None);
    }

    /// The shift a raw row gets is the shift of the softmax over every entry, PAD and BOS
    /// included: [`rows::log_softmax_shift`] of the logits as the model wrote them.
    #[test]
    fn raw_rows_count_pad_and_bos_in_the_softmax() {
        let values: Vec<f32> = (0..64).map(|i| (i % 9) as f32 * 0.5).collect();
        let want = rows::log_softmax_shift(&values);
        let mut scores = HostScores::logits(values, 64);
        let mut out = Vec::new();
        scores.best(0, None, 0.0, 3, &mut out);
        let (row, shift) = scores.row(0);
        assert_eq!(shift.to_bits(), want.to_bits());
        assert_eq!(row[PAD as usize], f32::NEG_INFINITY);
        assert_eq!(row[BOS as usize], f32::NEG_INFINITY);
    }
}
