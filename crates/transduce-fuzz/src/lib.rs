//! A small seeded mutation fuzzer for property tests of the readers (bundle files,
//! treebanks, corpora, BLEU tokenizers, sentence splitting, tree linearization).
//!
//! It runs on stable Rust inside `cargo test`: each target takes a handful of seed inputs
//! (real files and hand-written edge cases), mutates them — byte flips, insertions,
//! deletions, duplicated and spliced ranges, tokens from the target's dictionary, invalid
//! UTF-8, huge numbers — and calls the target's check on every result inside
//! `catch_unwind`. A panic fails the test with the case number, the seed that reproduces it
//! and the input (also written to a file), so a failure is never lost.
//!
//! How many inputs: `TRANSDUCE_FUZZ_CASES` (default: each target's short CI count);
//! which run: `TRANSDUCE_FUZZ_SEED` (default 1). The long runs and their results are in
//! docs/FUZZING.md.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::Instant;

/// Bytes that readers treat specially in one format or another: brackets, quotes,
/// separators, line ends (CR, NEL U+0085, LS U+2028), invalid UTF-8, numbers at the edges.
const COMMON: &[&[u8]] = &[
    b"(",
    b")",
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b" ",
    b"\t",
    b"\n",
    b"\r\n",
    b"\r",
    b"\0",
    b"\\",
    b"\xc2\x85",
    b"\xe2\x80\xa8",
    b"\xef\xbb\xbf",
    b"\xff",
    b"\xc3",
    b"\xed\xa0\x80",
    b"0",
    b"-1",
    b"1e308",
    b"-0.0",
    b"NaN",
    b"18446744073709551615",
    b"4294967296",
    b"9007199254740993",
    b"null",
    b"true",
    b"\xf0\x9f\x98\x80",
    b"\xe3\x80\x82",
];

/// xorshift64*: the fuzzer's only source of randomness, so a seed replays a run.
#[derive(Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }
    pub fn chance(&mut self, one_in: usize) -> bool {
        self.below(one_in) == 0
    }
}

/// What a check says about one input, for the run's summary: a reader that rejects every
/// mutated input is not being exercised past its first test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Rejected,
}

impl From<bool> for Outcome {
    fn from(accepted: bool) -> Self {
        if accepted {
            Outcome::Accepted
        } else {
            Outcome::Rejected
        }
    }
}

impl<T, E> From<&Result<T, E>> for Outcome {
    fn from(r: &Result<T, E>) -> Self {
        r.is_ok().into()
    }
}

/// One fuzz target: its name, seed inputs, extra dictionary tokens and the default count.
pub struct Target<'a> {
    pub name: &'a str,
    pub seeds: Vec<Vec<u8>>,
    pub dictionary: Vec<Vec<u8>>,
    /// Inputs run when `TRANSDUCE_FUZZ_CASES` is unset (the CI run).
    pub default_cases: u64,
    /// Longest input generated, in bytes.
    pub max_len: usize,
}

/// What a run did: inputs tried, how many the reader accepted, seconds.
#[derive(Clone, Copy, Debug)]
pub struct Summary {
    pub cases: u64,
    pub accepted: u64,
    pub seconds: f64,
}

impl<'a> Target<'a> {
    pub fn new(name: &'a str, seeds: impl IntoIterator<Item = impl Into<Vec<u8>>>) -> Self {
        Target {
            name,
            seeds: seeds.into_iter().map(Into::into).collect(),
            dictionary: Vec::new(),
            default_cases: 5_000,
            max_len: 1 << 16,
        }
    }

    pub fn dictionary(mut self, words: impl IntoIterator<Item = impl Into<Vec<u8>>>) -> Self {
        self.dictionary.extend(words.into_iter().map(Into::into));
        self
    }

    pub fn cases(mut self, n: u64) -> Self {
        self.default_cases = n;
        self
    }

    pub fn max_len(mut self, n: usize) -> Self {
        self.max_len = n;
        self
    }

    /// Runs `check` on every generated input; panics (failing the test) on the first input
    /// whose check panics, naming the case, the seed and where the input was saved.
    pub fn run<O: Into<Outcome>>(self, check: impl Fn(&[u8]) -> O) -> Summary {
        let cases = env_u64("TRANSDUCE_FUZZ_CASES").unwrap_or(self.default_cases);
        let seed = env_u64("TRANSDUCE_FUZZ_SEED").unwrap_or(1);
        let start = Instant::now();
        let mut accepted = 0;
        let mut input = Vec::new();
        for case in 0..cases {
            let mut rng = Rng::new(seed ^ case.wrapping_mul(0xD134_2543_DE82_EF95));
            self.generate(&mut rng, &mut input);
            match catch_unwind(AssertUnwindSafe(|| check(&input).into())) {
                Ok(Outcome::Accepted) => accepted += 1,
                Ok(Outcome::Rejected) => {}
                Err(_) => self.fail(case, seed, &input),
            }
        }
        let summary = Summary {
            cases,
            accepted,
            seconds: start.elapsed().as_secs_f64(),
        };
        eprintln!(
            "fuzz {}: {} inputs (seed {seed}), {} accepted, {} rejected, no panic; {:.1} s",
            self.name,
            summary.cases,
            summary.accepted,
            summary.cases - summary.accepted,
            summary.seconds
        );
        summary
    }

    fn fail(&self, case: u64, seed: u64, input: &[u8]) -> ! {
        let path = std::env::temp_dir().join(format!("transduce-fuzz-{}-{case}.bin", self.name));
        let saved = match std::fs::write(&path, input) {
            Ok(()) => format!("saved to {}", path.display()),
            Err(e) => format!("not saved: {e}"),
        };
        let shown = String::from_utf8_lossy(&input[..input.len().min(600)]).into_owned();
        panic!(
            "fuzz {}: case {case} panicked (replay: TRANSDUCE_FUZZ_SEED={seed}, \
             TRANSDUCE_FUZZ_CASES={}); {} bytes, {saved}; starts {shown:?}",
            self.name,
            case + 1,
            input.len()
        );
    }

    /// One input: usually a seed under 1–8 mutations, sometimes random bytes or a splice.
    fn generate(&self, rng: &mut Rng, out: &mut Vec<u8>) {
        out.clear();
        if self.seeds.is_empty() || rng.chance(32) {
            let n = rng.below(64);
            out.extend((0..n).map(|_| rng.next_u64() as u8));
            return;
        }
        out.extend_from_slice(&self.seeds[rng.below(self.seeds.len())]);
        let mutations = 1 + rng.below(8);
        for _ in 0..mutations {
            self.mutate(rng, out);
        }
        out.truncate(self.max_len);
    }

    fn token<'s>(&'s self, rng: &mut Rng) -> &'s [u8] {
        let n = COMMON.len() + self.dictionary.len();
        let i = rng.below(n);
        if i < COMMON.len() {
            COMMON[i]
        } else {
            &self.dictionary[i - COMMON.len()]
        }
    }

    fn mutate(&self, rng: &mut Rng, data: &mut Vec<u8>) {
        let len = data.len();
        let at = |rng: &mut Rng| rng.below(len + 1);
        match rng.below(10) {
            // Flip bits of one byte.
            0 if len > 0 => {
                let i = rng.below(len);
                data[i] ^= 1 << rng.below(8);
            }
            // Set one byte to anything.
            1 if len > 0 => {
                let i = rng.below(len);
                data[i] = rng.next_u64() as u8;
            }
            // Insert a token (format syntax, line ends, invalid UTF-8, edge numbers).
            2 | 3 => {
                let i = at(rng);
                let token = self.token(rng).to_vec();
                data.splice(i..i, token);
            }
            // Overwrite a range with a token: changes values without growing.
            4 if len > 0 => {
                let i = rng.below(len);
                let token = self.token(rng).to_vec();
                let end = (i + token.len()).min(len);
                data.splice(i..end, token);
            }
            // Delete a range.
            5 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(64));
                data.drain(i..i + n);
            }
            // Duplicate a range somewhere else (repeated fields, deeper nesting).
            6 if len > 0 => {
                let i = rng.below(len);
                let n = 1 + rng.below((len - i).min(256));
                let piece = data[i..i + n].to_vec();
                let j = at(rng);
                data.splice(j..j, piece);
            }
            // Truncate.
            7 if len > 0 => data.truncate(rng.below(len)),
            // Splice in a range of another seed.
            8 if !self.seeds.is_empty() => {
                let other = &self.seeds[rng.below(self.seeds.len())];
                if !other.is_empty() {
                    let i = rng.below(other.len());
                    let n = 1 + rng.below((other.len() - i).min(256));
                    let j = at(rng);
                    data.splice(j..j, other[i..i + n].iter().copied());
                }
            }
            // Repeat one token many times (deep nesting, long runs).
            _ => {
                let token = self.token(rng).to_vec();
                let times = 1 + rng.below(2048);
                let i = at(rng);
                let run: Vec<u8> = token
                    .iter()
                    .copied()
                    .cycle()
                    .take(token.len() * times)
                    .collect();
                data.splice(i..i, run);
            }
        }
    }
}

fn env_u64(name: &str) -> Option<u64> {
    let value = std::env::var(name).ok()?;
    match value.replace('_', "").parse() {
        Ok(n) => Some(n),
        Err(_) => panic!("{name}={value:?} is not a whole number"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_check_is_reported() {
        let result = std::panic::catch_unwind(|| {
            Target::new("self-test", [b"abc".to_vec()])
                .cases(1000)
                .run(|input| {
                    assert!(!input.contains(&b'('), "found a bracket");
                    true
                })
        });
        assert!(
            result.is_err(),
            "a check that panics on '(' must fail the run"
        );
    }

    #[test]
    fn runs_are_reproducible_and_varied() {
        let t = Target::new("self-test", [b"hello world".to_vec()]);
        let (mut a, mut b) = (Vec::new(), Vec::new());
        let mut distinct = std::collections::HashSet::new();
        for case in 0..200 {
            t.generate(&mut Rng::new(case), &mut a);
            t.generate(&mut Rng::new(case), &mut b);
            assert_eq!(a, b);
            distinct.insert(a.clone());
        }
        assert!(
            distinct.len() > 150,
            "{} distinct inputs of 200",
            distinct.len()
        );
    }
}
