//! BLEU exactly as sacreBLEU 2.6.0 computes it.
//!
//! One file on purpose (about 830 lines before its tests): the tokenizers, n-gram
//! statistics and `compute_bleu` are one pipeline whose every step must match sacreBLEU's
//! code, and the numbered steps below are the order the file follows.
//!
//! This module reproduces `sacrebleu.metrics.bleu.BLEU` (and the `sacrebleu.corpus_bleu` /
//! `sacrebleu.sentence_bleu` convenience functions) for the tokenizers `13a` (the default,
//! `Tokenizer13a`), `intl` (`TokenizerV14International`) and `none`, all four smoothing
//! methods (`exp`, `floor`, `add-k`, `none`), lowercasing, effective order and one or
//! several references per hypothesis, with the maximum n-gram order fixed at sacreBLEU's
//! default of 4.
//!
//! Every step follows sacreBLEU's code:
//!
//! 1. each segment is lowercased (optional, Python `str.lower`), right-stripped of
//!    whitespace (Python `str.rstrip`) and tokenized;
//! 2. the tokenized segment is split on whitespace (Python `str.split()`, whose whitespace
//!    set is Rust's `char::is_whitespace` plus U+001C…U+001F) and its 1- to 4-grams counted;
//! 3. per segment: the hypothesis n-gram counts are clipped by the maximum count over the
//!    references, and the reference length is the one closest to the hypothesis length
//!    (ties go to the shorter reference);
//! 4. these sufficient statistics are summed over the corpus and turned into a score by
//!    `BLEU.compute_bleu` (brevity penalty, smoothing, effective order, `my_log`).
//!
//! ```
//! use transduce_metrics::bleu::{corpus_bleu_streams, BleuOptions};
//!
//! let hyps = ["The cat sat on the mat.", "A dog"];
//! let refs = ["The cat is on the mat.", "A dog runs"];
//! let score = corpus_bleu_streams(&hyps, &[refs], &BleuOptions::default()).unwrap();
//! assert_eq!(score.counts, [8, 5, 2, 1]);
//! assert_eq!(
//!     score.signature(),
//!     "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
//! );
//! ```

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::str::FromStr;
use std::sync::LazyLock;

use regex::Regex;
use serde::{Deserialize, Serialize};

/// The sacreBLEU version whose behaviour this module reproduces (and that appears in the
/// signature as `version:2.6.0`).
pub const SACREBLEU_VERSION: &str = "2.6.0";

/// The maximum n-gram order (sacreBLEU's `MAX_NGRAM_ORDER`, the default of
/// `max_ngram_order`); fixed here.
pub const MAX_NGRAM_ORDER: usize = 4;

/// sacreBLEU's `my_log`: `log(0)` is floored to this value.
const LOG_ZERO: f64 = -9_999_999_999.0;

// ---------------------------------------------------------------------------------------
// Tokenizers
// ---------------------------------------------------------------------------------------

/// Whether `c` is whitespace for Python's `str.split()` / `str.strip()` (`str.isspace`):
/// the Unicode `White_Space` characters plus the information separators U+001C…U+001F.
fn is_py_whitespace(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` without arguments: splits on runs of whitespace, drops empties.
fn py_split(s: &str) -> impl Iterator<Item = &str> {
    s.split(is_py_whitespace).filter(|t| !t.is_empty())
}

/// Python's `' '.join(s.split())`.
fn py_normalize_spaces(s: &str) -> String {
    py_split(s).collect::<Vec<_>>().join(" ")
}

/// Python's `str.rstrip()` without arguments.
fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_whitespace)
}

/// `TokenizerRegexp` (the post-tokenizer of `13a`): pattern and replacement pairs, applied
/// in order with Python `re.sub` semantics (leftmost, non-overlapping).
static RE_13A: LazyLock<[(Regex, &'static str); 4]> = LazyLock::new(|| {
    [
        // language-dependent part (assuming Western languages):
        // Python: r'([\{-\~\[-\` -\&\(-\+\:-\@\/])'
        (
            Regex::new(r"([\x7B-\x7E\x5B-\x60\x20-\x26\x28-\x2B\x3A-\x40/])").unwrap(),
            " ${1} ",
        ),
        // tokenize period and comma unless preceded by a digit
        (Regex::new(r"([^0-9])([.,])").unwrap(), "${1} ${2} "),
        // tokenize period and comma unless followed by a digit
        (Regex::new(r"([.,])([^0-9])").unwrap(), " ${1} ${2}"),
        // tokenize dash when preceded by a digit
        (Regex::new(r"([0-9])(-)").unwrap(), "${1} ${2} "),
    ]
});

/// `TokenizerV14International`: pattern and replacement pairs, applied in order.
static RE_INTL: LazyLock<[(Regex, &'static str); 3]> = LazyLock::new(|| {
    [
        // separate out punctuation preceded by a non-digit
        (Regex::new(r"(\P{N})(\p{P})").unwrap(), "${1} ${2} "),
        // separate out punctuation followed by a non-digit
        (Regex::new(r"(\p{P})(\P{N})").unwrap(), " ${1} ${2}"),
        // separate out symbols
        (Regex::new(r"(\p{S})").unwrap(), " ${1} "),
    ]
});

fn apply_rules(rules: &[(Regex, &'static str)], line: String) -> String {
    rules.iter().fold(line, |acc, (re, rep)| {
        re.replace_all(&acc, *rep).into_owned()
    })
}

/// sacreBLEU's `13a` tokenizer (`Tokenizer13a`, equivalent to mteval-v13a.pl, the default).
///
/// Exactly as sacreBLEU 2.6.0: removes `<skipped>`, joins `-\n` line breaks, turns other
/// `\n` into spaces, unescapes `&quot;` `&amp;` `&lt;` `&gt;` (in this order, once each),
/// pads the line with a space on both sides, then applies the `TokenizerRegexp` rules:
/// split off the ASCII punctuation/symbols ``{|}~[\]^_` !"#$%&()*+:;<=>?@/``, split off
/// `.` and `,` unless preceded by a digit, and unless followed by a digit, split off `-`
/// after a digit; finally collapses whitespace (Python `' '.join(line.split())`).
///
/// ```
/// use transduce_metrics::bleu::tokenize_13a;
/// assert_eq!(tokenize_13a("Der Preis: 1,000.50 $ (ca.)"), "Der Preis : 1,000.50 $ ( ca . )");
/// assert_eq!(tokenize_13a("a-b U.S.A."), "a-b U . S . A .");
/// ```
pub fn tokenize_13a(line: &str) -> String {
    let line = line
        .replace("<skipped>", "")
        .replace("-\n", "")
        .replace('\n', " ")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">");
    let padded = format!(" {line} ");
    py_normalize_spaces(&apply_rules(&*RE_13A, padded))
}

/// sacreBLEU's `intl` tokenizer (`TokenizerV14International`, after mteval-v14.pl's
/// international tokenization).
///
/// Exactly as sacreBLEU 2.6.0: splits off Unicode punctuation (`\p{P}`) unless it is both
/// preceded and followed by a digit (`\p{N}`), splits off every Unicode symbol (`\p{S}`),
/// then collapses whitespace. No unescaping and no padding, so a final punctuation mark
/// directly after a digit stays attached (`"1990."` stays one token), as in mteval-v14.
///
/// ```
/// use transduce_metrics::bleu::tokenize_intl;
/// assert_eq!(tokenize_intl("a-b 1,000.50 $"), "a - b 1,000.50 $");
/// ```
pub fn tokenize_intl(line: &str) -> String {
    py_normalize_spaces(&apply_rules(&*RE_INTL, line.to_owned()))
}

/// A BLEU tokenizer (sacreBLEU's `tokenize` option).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum Tokenizer {
    /// `13a`: mteval-v13a.pl tokenization, sacreBLEU's default; see [`tokenize_13a`].
    #[default]
    #[serde(rename = "13a")]
    Tok13a,
    /// `intl`: mteval-v14 international tokenization; see [`tokenize_intl`].
    #[serde(rename = "intl")]
    Intl,
    /// `none`: no tokenization (the segment is only split on whitespace).
    #[serde(rename = "none")]
    None,
}

impl Tokenizer {
    /// The name sacreBLEU uses for this tokenizer (and in the signature's `tok:` field).
    pub fn name(self) -> &'static str {
        match self {
            Tokenizer::Tok13a => "13a",
            Tokenizer::Intl => "intl",
            Tokenizer::None => "none",
        }
    }

    /// Tokenizes one line (without lowercasing or right-stripping, which BLEU does first).
    pub fn tokenize(self, line: &str) -> String {
        match self {
            Tokenizer::Tok13a => tokenize_13a(line),
            Tokenizer::Intl => tokenize_intl(line),
            Tokenizer::None => line.to_owned(),
        }
    }
}

impl fmt::Display for Tokenizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Tokenizer {
    type Err = BleuError;

    /// Parses sacreBLEU's tokenizer names `13a`, `intl` and `none`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "13a" => Ok(Tokenizer::Tok13a),
            "intl" => Ok(Tokenizer::Intl),
            "none" => Ok(Tokenizer::None),
            _ => Err(BleuError::UnknownTokenizer(s.to_owned())),
        }
    }
}

// ---------------------------------------------------------------------------------------
// Options
// ---------------------------------------------------------------------------------------

/// A smoothing method (sacreBLEU's `smooth_method`; Chen & Cherry 2014).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub enum SmoothMethod {
    /// `exp` (the default): NIST geometric smoothing as in mteval-v13a; the k-th order with
    /// no match gets precision `100 / (2^k · total)`.
    #[default]
    #[serde(rename = "exp")]
    Exp,
    /// `floor`: an order with no match gets precision `100 · value / total`
    /// (default value 0.1).
    #[serde(rename = "floor")]
    Floor,
    /// `add-k`: `value` is added to the matched and total counts of orders 2…4
    /// (default value 1).
    #[serde(rename = "add-k")]
    AddK,
    /// `none`: no smoothing; an order with no match makes the score 0.
    #[serde(rename = "none")]
    None,
}

impl SmoothMethod {
    /// The name sacreBLEU uses for this method.
    pub fn name(self) -> &'static str {
        match self {
            SmoothMethod::Exp => "exp",
            SmoothMethod::Floor => "floor",
            SmoothMethod::AddK => "add-k",
            SmoothMethod::None => "none",
        }
    }

    /// sacreBLEU's `BLEU.SMOOTH_DEFAULTS`: the default smoothing value, if the method takes
    /// one (`floor`: 0.1, `add-k`: 1).
    pub fn default_value(self) -> Option<f64> {
        match self {
            SmoothMethod::Floor => Some(0.1),
            SmoothMethod::AddK => Some(1.0),
            SmoothMethod::Exp | SmoothMethod::None => None,
        }
    }
}

impl fmt::Display for SmoothMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for SmoothMethod {
    type Err = BleuError;

    /// Parses sacreBLEU's method names `exp`, `floor`, `add-k` and `none`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "exp" => Ok(SmoothMethod::Exp),
            "floor" => Ok(SmoothMethod::Floor),
            "add-k" => Ok(SmoothMethod::AddK),
            "none" => Ok(SmoothMethod::None),
            _ => Err(BleuError::UnknownSmoothMethod(s.to_owned())),
        }
    }
}

/// BLEU options, mirroring the arguments of sacreBLEU's `BLEU(...)`.
///
/// `Default` gives sacreBLEU's defaults: mixed case, `13a`, `exp` smoothing, and
/// `effective_order` resolved per function like sacreBLEU's convenience API
/// (`corpus_bleu`: off, `sentence_bleu`: on).
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BleuOptions {
    /// Lowercase hypotheses and references before tokenizing (`lowercase=True`,
    /// signature `case:lc`).
    pub lowercase: bool,
    /// The tokenizer (`tokenize`, default `13a`).
    pub tokenize: Tokenizer,
    /// The smoothing method (`smooth_method`, default `exp`).
    pub smooth_method: SmoothMethod,
    /// The smoothing value for `floor` and `add-k` (`smooth_value`); `None` takes the
    /// method's default ([`SmoothMethod::default_value`]). Ignored by `exp` and `none`.
    pub smooth_value: Option<f64>,
    /// `effective_order`: stop including n-gram orders from the first order with no
    /// hypothesis n-grams (for short sentences). `None` means sacreBLEU's convenience-API
    /// default: off in [`corpus_bleu`] / [`corpus_bleu_streams`], on in [`sentence_bleu`].
    pub effective_order: Option<bool>,
}

impl BleuOptions {
    /// The smoothing value actually used: `smooth_value` or the method's default
    /// (0 if the method takes none).
    fn resolved_smooth_value(&self) -> f64 {
        self.smooth_value
            .or(self.smooth_method.default_value())
            .unwrap_or(0.0)
    }

    fn validate(&self) -> Result<(), BleuError> {
        if self.smooth_method.default_value().is_some() {
            let v = self.resolved_smooth_value();
            if !v.is_finite() || v < 0.0 {
                return Err(BleuError::InvalidSmoothValue(v));
            }
        }
        Ok(())
    }

    /// sacreBLEU's `BLEU._preprocess_segment`: optional lowercasing, `rstrip`, tokenizing.
    fn preprocess(&self, sent: &str) -> String {
        if self.lowercase {
            self.tokenize.tokenize(py_rstrip(&sent.to_lowercase()))
        } else {
            self.tokenize.tokenize(py_rstrip(sent))
        }
    }
}

// ---------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------

/// Why BLEU could not be computed. Where sacreBLEU raises an exception (or, for
/// mismatched stream lengths, silently truncates), these functions return an error.
#[derive(Debug, Clone, PartialEq)]
pub enum BleuError {
    /// The number of hypotheses differs from the number of reference sets (or from the
    /// length of a reference stream).
    LengthMismatch {
        /// Number of hypotheses.
        hyps: usize,
        /// Number of reference sets / segments in the offending reference stream.
        refs: usize,
    },
    /// No hypotheses were given (sacreBLEU fails on an empty corpus).
    EmptyCorpus,
    /// Hypothesis `index` has no non-empty reference (sacreBLEU: "Empty or `None`
    /// reference sentence found."; empty strings are dropped from a reference set).
    NoReference {
        /// Index of the hypothesis.
        index: usize,
    },
    /// The smoothing value of `floor` / `add-k` is negative or not finite.
    InvalidSmoothValue(f64),
    /// A tokenizer name other than `13a`, `intl`, `none`.
    UnknownTokenizer(String),
    /// A smoothing method name other than `exp`, `floor`, `add-k`, `none`.
    UnknownSmoothMethod(String),
}

impl fmt::Display for BleuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BleuError::LengthMismatch { hyps, refs } => write!(
                f,
                "BLEU: {hyps} hypotheses but {refs} references (the numbers must match)"
            ),
            BleuError::EmptyCorpus => f.write_str("BLEU: no hypotheses given"),
            BleuError::NoReference { index } => {
                write!(f, "BLEU: hypothesis {index} has no non-empty reference")
            }
            BleuError::InvalidSmoothValue(v) => {
                write!(
                    f,
                    "BLEU: invalid smoothing value {v} (must be finite and >= 0)"
                )
            }
            BleuError::UnknownTokenizer(s) => {
                write!(
                    f,
                    "BLEU: unknown tokenizer {s:?} (expected 13a, intl or none)"
                )
            }
            BleuError::UnknownSmoothMethod(s) => write!(
                f,
                "BLEU: unknown smoothing method {s:?} (expected exp, floor, add-k or none)"
            ),
        }
    }
}

impl std::error::Error for BleuError {}

// ---------------------------------------------------------------------------------------
// Score
// ---------------------------------------------------------------------------------------

/// A BLEU score with its sufficient statistics, like sacreBLEU's `BLEUScore`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BleuScore {
    /// The BLEU score, 0…100.
    pub score: f64,
    /// Matched (clipped) n-grams for n = 1…4. As in sacreBLEU, with `add-k` smoothing the
    /// value k is included for n ≥ 2 (when there was at least one match); this is exact
    /// for whole-number k, for a fractional k (where sacreBLEU reports floats) the
    /// unsmoothed counts are reported here.
    pub counts: [usize; MAX_NGRAM_ORDER],
    /// Hypothesis n-grams for n = 1…4 (same `add-k` remark as `counts`).
    pub totals: [usize; MAX_NGRAM_ORDER],
    /// The (smoothed) n-gram precisions in percent; orders after the first one with no
    /// hypothesis n-grams, or all of them when nothing matched, are 0.
    pub precisions: [f64; MAX_NGRAM_ORDER],
    /// The brevity penalty: `exp(1 - ref_len / sys_len)` if `sys_len < ref_len`
    /// (0 if `sys_len` is 0), else 1.
    pub bp: f64,
    /// Total hypothesis length in tokens.
    pub sys_len: usize,
    /// Total (closest) reference length in tokens.
    pub ref_len: usize,
    /// Number of references per hypothesis (`nrefs`): `Some(n)`, or `None` if it varies
    /// between hypotheses (sacreBLEU's `nrefs:var`).
    pub nrefs: Option<usize>,
    /// The options used, with `effective_order` resolved to `Some(..)`.
    pub options: BleuOptions,
}

impl BleuScore {
    /// `sys_len / ref_len`, or 0 if `ref_len` is 0 (sacreBLEU's `ratio`).
    pub fn ratio(&self) -> f64 {
        if self.ref_len == 0 {
            0.0
        } else {
            self.sys_len as f64 / self.ref_len as f64
        }
    }

    /// sacreBLEU's (long) signature string, e.g.
    /// `nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0`; `floor` and `add-k`
    /// carry their value with two decimals (`smooth:floor[0.10]`, `smooth:add-k[1.00]`),
    /// a varying number of references gives `nrefs:var`.
    pub fn signature(&self) -> String {
        let nrefs = match self.nrefs {
            Some(n) => n.to_string(),
            None => "var".to_owned(),
        };
        let o = &self.options;
        let mut smooth = o.smooth_method.name().to_owned();
        if o.smooth_method.default_value().is_some() {
            smooth.push_str(&format!("[{:.2}]", o.resolved_smooth_value()));
        }
        format!(
            "nrefs:{nrefs}|case:{}|eff:{}|tok:{}|smooth:{smooth}|version:{SACREBLEU_VERSION}",
            if o.lowercase { "lc" } else { "mixed" },
            if o.effective_order == Some(true) {
                "yes"
            } else {
                "no"
            },
            o.tokenize.name(),
        )
    }

    /// The score line with the signature, as sacreBLEU's `Score.format(signature=...)`:
    /// `BLEU|nrefs:1|...|version:2.6.0 = 35.12 67.1/41.2/28.0/19.3 (BP = ...)`.
    pub fn format_with_signature(&self) -> String {
        format!("BLEU|{} = {}", self.signature(), self.verbose())
    }

    /// Everything after `BLEU = ` in sacreBLEU's score line.
    fn verbose(&self) -> String {
        let p = &self.precisions;
        format!(
            "{:.2} {:.1}/{:.1}/{:.1}/{:.1} (BP = {:.3} ratio = {:.3} hyp_len = {} ref_len = {})",
            self.score,
            p[0],
            p[1],
            p[2],
            p[3],
            self.bp,
            self.ratio(),
            self.sys_len,
            self.ref_len
        )
    }
}

impl fmt::Display for BleuScore {
    /// sacreBLEU's score line (`str(score)`), e.g.
    /// `BLEU = 35.12 67.1/41.2/28.0/19.3 (BP = 1.000 ratio = 1.012 hyp_len = 12345 ref_len = 12200)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "BLEU = {}", self.verbose())
    }
}

// ---------------------------------------------------------------------------------------
// Statistics
// ---------------------------------------------------------------------------------------

/// Per-segment (or summed) sufficient statistics: `[hyp_len, ref_len] + correct + total`.
#[derive(Debug, Clone, Copy, Default)]
struct Stats {
    sys_len: usize,
    ref_len: usize,
    correct: [usize; MAX_NGRAM_ORDER],
    total: [usize; MAX_NGRAM_ORDER],
}

impl Stats {
    fn add(&mut self, other: &Stats) {
        self.sys_len += other.sys_len;
        self.ref_len += other.ref_len;
        for n in 0..MAX_NGRAM_ORDER {
            self.correct[n] += other.correct[n];
            self.total[n] += other.total[n];
        }
    }
}

/// `extract_all_word_ngrams(line, 1, 4)`: counts of all 1…4-grams (keyed by token slices).
fn count_ngrams<'a>(tokens: &'a [&'a str]) -> HashMap<&'a [&'a str], usize> {
    let mut counts = HashMap::new();
    for n in 1..=MAX_NGRAM_ORDER {
        for gram in tokens.windows(n) {
            *counts.entry(gram).or_insert(0) += 1;
        }
    }
    counts
}

/// `BLEU._get_closest_ref_len`: the reference length closest to `hyp_len`, ties to the
/// shorter one.
fn closest_ref_len(hyp_len: usize, ref_lens: &[usize]) -> usize {
    let mut best: Option<(usize, usize)> = None; // (diff, len)
    for &len in ref_lens {
        let diff = hyp_len.abs_diff(len);
        best = match best {
            None => Some((diff, len)),
            Some((d, l)) if diff < d || (diff == d && len < l) => Some((diff, len)),
            keep => keep,
        };
    }
    best.map_or(0, |(_, len)| len)
}

/// `_extract_reference_info` + `_compute_segment_statistics` for one segment, on already
/// preprocessed strings.
fn segment_stats(hyp: &str, refs: &[String]) -> Stats {
    let ref_tokens: Vec<Vec<&str>> = refs.iter().map(|r| py_split(r).collect()).collect();
    let mut ref_ngrams: HashMap<&[&str], usize> = HashMap::new();
    for toks in &ref_tokens {
        for (gram, count) in count_ngrams(toks) {
            let e = ref_ngrams.entry(gram).or_insert(0);
            *e = (*e).max(count);
        }
    }
    let ref_lens: Vec<usize> = ref_tokens.iter().map(Vec::len).collect();

    let hyp_tokens: Vec<&str> = py_split(hyp).collect();
    let mut stats = Stats {
        sys_len: hyp_tokens.len(),
        ref_len: closest_ref_len(hyp_tokens.len(), &ref_lens),
        ..Stats::default()
    };
    for (gram, count) in count_ngrams(&hyp_tokens) {
        let n = gram.len() - 1;
        stats.total[n] += count;
        if let Some(&rc) = ref_ngrams.get(gram) {
            stats.correct[n] += count.min(rc);
        }
    }
    stats
}

/// sacreBLEU's `my_log`.
fn my_log(x: f64) -> f64 {
    if x == 0.0 { LOG_ZERO } else { x.ln() }
}

/// `BLEU.compute_bleu`: the score from summed statistics.
fn compute_bleu(stats: &Stats, options: &BleuOptions, nrefs: Option<usize>) -> BleuScore {
    let effective_order = options.effective_order == Some(true);
    let method = options.smooth_method;
    let smooth_value = options.resolved_smooth_value();
    let (sys_len, ref_len) = (stats.sys_len, stats.ref_len);

    let bp = if sys_len < ref_len {
        if sys_len > 0 {
            (1.0 - ref_len as f64 / sys_len as f64).exp()
        } else {
            0.0
        }
    } else {
        1.0
    };

    let mut result = BleuScore {
        score: 0.0,
        counts: stats.correct,
        totals: stats.total,
        precisions: [0.0; MAX_NGRAM_ORDER],
        bp,
        sys_len,
        ref_len,
        nrefs,
        options: BleuOptions {
            effective_order: Some(effective_order),
            ..*options
        },
    };

    // Early stop if there are no matches (sacreBLEU #141).
    if stats.correct.iter().all(|&c| c == 0) {
        return result;
    }

    let mut correct = stats.correct.map(|c| c as f64);
    let mut total = stats.total.map(|t| t as f64);
    let mut precisions = [0.0f64; MAX_NGRAM_ORDER];
    let mut smooth_mteval = 1.0f64;
    let mut eff_order = MAX_NGRAM_ORDER;
    for n in 1..=MAX_NGRAM_ORDER {
        let i = n - 1;
        if method == SmoothMethod::AddK && n > 1 {
            correct[i] += smooth_value;
            total[i] += smooth_value;
        }
        if total[i] == 0.0 {
            break;
        }
        if effective_order {
            eff_order = n;
        }
        if correct[i] == 0.0 {
            match method {
                SmoothMethod::Exp => {
                    smooth_mteval *= 2.0;
                    precisions[i] = 100.0 / (smooth_mteval * total[i]);
                }
                SmoothMethod::Floor => precisions[i] = 100.0 * smooth_value / total[i],
                SmoothMethod::AddK | SmoothMethod::None => {}
            }
        } else {
            precisions[i] = 100.0 * correct[i] / total[i];
        }
    }

    let log_sum = precisions[..eff_order]
        .iter()
        .fold(0.0f64, |acc, &p| acc + my_log(p));
    result.score = bp * (log_sum / eff_order as f64).exp();
    result.precisions = precisions;
    if smooth_value.fract() == 0.0 {
        // add-k changed counts/totals in place in sacreBLEU, and they are reported so.
        result.counts = correct.map(|c| c as usize);
        result.totals = total.map(|t| t as usize);
    }
    result
}

/// Scores `hyps[i]` against the raw reference set `refs(i)` (both preprocessed here), summing
/// the statistics over all segments like sacreBLEU's `corpus_score`.
fn score_segments<'a, H: AsRef<str>>(
    hyps: &[H],
    refs: impl Fn(usize) -> Vec<&'a str>,
    options: &BleuOptions,
) -> Result<BleuScore, BleuError> {
    options.validate()?;
    if hyps.is_empty() {
        return Err(BleuError::EmptyCorpus);
    }
    let mut total = Stats::default();
    let mut nrefs_seen = HashSet::new();
    for (index, hyp) in hyps.iter().enumerate() {
        // `_cache_references`: drop empty references, fail if none is left.
        let lines: Vec<String> = refs(index)
            .into_iter()
            .filter(|r| !r.is_empty())
            .map(|r| options.preprocess(r))
            .collect();
        if lines.is_empty() {
            return Err(BleuError::NoReference { index });
        }
        nrefs_seen.insert(lines.len());
        let hyp = options.preprocess(hyp.as_ref());
        total.add(&segment_stats(&hyp, &lines));
    }
    let nrefs = if nrefs_seen.len() == 1 {
        nrefs_seen.into_iter().next()
    } else {
        None
    };
    Ok(compute_bleu(&total, options, nrefs))
}

// ---------------------------------------------------------------------------------------
// Public scoring functions
// ---------------------------------------------------------------------------------------

/// Corpus BLEU with the references given per hypothesis: `refs[i]` is the set of
/// references (one or more) of `hyps[i]`.
///
/// Reproduces `sacrebleu.corpus_bleu(hyps, ref_streams, ...)` /
/// `BLEU(...).corpus_score(...)`: statistics are summed over all segments before the
/// score is computed. Empty reference strings are ignored (sacreBLEU's way of giving
/// hypotheses different numbers of references); `effective_order: None` means off.
///
/// Errors: `refs.len() != hyps.len()` ([`BleuError::LengthMismatch`]), no hypotheses,
/// a hypothesis with no non-empty reference, an invalid smoothing value.
///
/// ```
/// use transduce_metrics::bleu::{corpus_bleu, BleuOptions};
/// let s = corpus_bleu(&["a b c d"], &[vec!["a b c d", "x"]], &BleuOptions::default()).unwrap();
/// assert_eq!(s.signature(), "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0");
/// assert!((s.score - 100.0).abs() < 1e-9);
/// ```
pub fn corpus_bleu<H, R, S>(
    hyps: &[H],
    refs: &[R],
    options: &BleuOptions,
) -> Result<BleuScore, BleuError>
where
    H: AsRef<str>,
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    if refs.len() != hyps.len() {
        return Err(BleuError::LengthMismatch {
            hyps: hyps.len(),
            refs: refs.len(),
        });
    }
    let options = BleuOptions {
        effective_order: Some(options.effective_order.unwrap_or(false)),
        ..*options
    };
    score_segments(
        hyps,
        |i| refs[i].as_ref().iter().map(AsRef::as_ref).collect(),
        &options,
    )
}

/// Corpus BLEU with the references given as sacreBLEU does: a list of reference
/// *streams*, each parallel to `hyps` (`ref_streams[k][i]` is the k-th reference of
/// `hyps[i]`). For a single reference per hypothesis pass `&[refs]`.
///
/// Same computation as [`corpus_bleu`] (= `sacrebleu.corpus_bleu(hyps, ref_streams)`),
/// but every stream must have exactly `hyps.len()` entries (sacreBLEU would silently
/// truncate to the shortest): otherwise [`BleuError::LengthMismatch`]. No streams at
/// all is [`BleuError::NoReference`].
pub fn corpus_bleu_streams<H, R, S>(
    hyps: &[H],
    ref_streams: &[R],
    options: &BleuOptions,
) -> Result<BleuScore, BleuError>
where
    H: AsRef<str>,
    R: AsRef<[S]>,
    S: AsRef<str>,
{
    for stream in ref_streams {
        let len = stream.as_ref().len();
        if len != hyps.len() {
            return Err(BleuError::LengthMismatch {
                hyps: hyps.len(),
                refs: len,
            });
        }
    }
    if ref_streams.is_empty() {
        return Err(if hyps.is_empty() {
            BleuError::EmptyCorpus
        } else {
            BleuError::NoReference { index: 0 }
        });
    }
    let options = BleuOptions {
        effective_order: Some(options.effective_order.unwrap_or(false)),
        ..*options
    };
    score_segments(
        hyps,
        |i| ref_streams.iter().map(|s| s.as_ref()[i].as_ref()).collect(),
        &options,
    )
}

/// Sentence BLEU of one hypothesis against one or more references.
///
/// Reproduces `sacrebleu.sentence_bleu(hyp, refs, ...)` (= `BLEU(...).sentence_score`):
/// the sentence is scored as a one-segment corpus. `effective_order: None` means on, as in
/// `sacrebleu.sentence_bleu` (`use_effective_order=True`), giving `eff:yes`.
///
/// Errors: no non-empty reference, an invalid smoothing value.
///
/// ```
/// use transduce_metrics::bleu::{sentence_bleu, BleuOptions};
/// let s = sentence_bleu("Ein Mann.", &["Ein Mann."], &BleuOptions::default()).unwrap();
/// assert_eq!(s.counts, [3, 2, 1, 0]);
/// assert!((s.score - 100.0).abs() < 1e-9);
/// ```
pub fn sentence_bleu<S: AsRef<str>>(
    hyp: &str,
    refs: &[S],
    options: &BleuOptions,
) -> Result<BleuScore, BleuError> {
    let options = BleuOptions {
        effective_order: Some(options.effective_order.unwrap_or(true)),
        ..*options
    };
    score_segments(
        &[hyp],
        |_| refs.iter().map(AsRef::as_ref).collect(),
        &options,
    )
}

// ---------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    // Hand-computed corpus (13a leaves these unchanged: no punctuation).
    //
    // Segment 1: hyp "the cat sat on the mat" (6 tokens)
    //            ref "the cat is on the mat"  (6 tokens)
    //   1-grams: hyp the×2 cat sat on mat; matched the×2 cat on mat      → 5 / 6
    //   2-grams: the-cat cat-sat sat-on on-the the-mat;
    //            matched the-cat on-the the-mat                            → 3 / 5
    //   3-grams: the-cat-sat cat-sat-on sat-on-the on-the-mat;
    //            matched on-the-mat                                        → 1 / 4
    //   4-grams: the-cat-sat-on cat-sat-on-the sat-on-the-mat; none       → 0 / 3
    // Segment 2: hyp "a dog" (2 tokens), ref "a dog runs" (3 tokens)
    //   1-grams 2 / 2, 2-grams 1 / 1, 3- and 4-grams 0 / 0
    // Corpus: counts [7, 4, 1, 0], totals [8, 6, 4, 3], sys_len 8, ref_len 9,
    //   BP = exp(1 - 9/8) = exp(-0.125).
    //   exp smoothing: p = 87.5, 66.67, 25, and 100 / (2·3) for the unmatched 4-grams;
    //   BLEU = BP · (87.5 · 200/3 · 25 · 50/3)^(1/4) ≈ 34.8449.
    const HYPS: [&str; 2] = ["the cat sat on the mat", "a dog"];
    const REFS: [&str; 2] = ["the cat is on the mat", "a dog runs"];

    fn geo(ps: [f64; 4]) -> f64 {
        (-0.125f64).exp() * ps.iter().product::<f64>().powf(0.25)
    }

    #[test]
    fn hand_computed_corpus_exp() {
        let s = corpus_bleu_streams(&HYPS, &[REFS], &BleuOptions::default()).unwrap();
        assert_eq!(s.counts, [7, 4, 1, 0]);
        assert_eq!(s.totals, [8, 6, 4, 3]);
        assert_eq!((s.sys_len, s.ref_len), (8, 9));
        assert!(close(s.bp, (-0.125f64).exp()));
        let expected_p = [87.5, 200.0 / 3.0, 25.0, 50.0 / 3.0];
        for (p, e) in s.precisions.iter().zip(expected_p) {
            assert!(close(*p, e), "{p} vs {e}");
        }
        assert!(close(s.score, geo(expected_p)));
        assert!(close(s.score, 34.844928509543394));
        assert_eq!(
            s.to_string(),
            "BLEU = 34.84 87.5/66.7/25.0/16.7 (BP = 0.882 ratio = 0.889 hyp_len = 8 ref_len = 9)"
        );
        assert_eq!(
            s.signature(),
            "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
        );
        // Per-hypothesis reference sets give the same result.
        let per_hyp = [vec![REFS[0]], vec![REFS[1]]];
        assert_eq!(
            corpus_bleu(&HYPS, &per_hyp, &BleuOptions::default()).unwrap(),
            s
        );
    }

    #[test]
    fn hand_computed_corpus_other_smoothing() {
        let floor = BleuOptions {
            smooth_method: SmoothMethod::Floor,
            ..Default::default()
        };
        let s = corpus_bleu_streams(&HYPS, &[REFS], &floor).unwrap();
        // floor: unmatched 4-grams get 100 · 0.1 / 3.
        assert!(close(s.score, geo([87.5, 200.0 / 3.0, 25.0, 10.0 / 3.0])));
        assert_eq!(
            s.signature(),
            "nrefs:1|case:mixed|eff:no|tok:13a|smooth:floor[0.10]|version:2.6.0"
        );

        let addk = BleuOptions {
            smooth_method: SmoothMethod::AddK,
            ..Default::default()
        };
        let s = corpus_bleu_streams(&HYPS, &[REFS], &addk).unwrap();
        // add-k (k = 1) on the corpus sums for n >= 2: 7/8, 5/7, 2/5, 1/4.
        assert_eq!(s.counts, [7, 5, 2, 1]);
        assert_eq!(s.totals, [8, 7, 5, 4]);
        assert!(close(s.score, geo([87.5, 500.0 / 7.0, 40.0, 25.0])));
        assert!(s.signature().contains("|smooth:add-k[1.00]|"));

        let none = BleuOptions {
            smooth_method: SmoothMethod::None,
            ..Default::default()
        };
        let s = corpus_bleu_streams(&HYPS, &[REFS], &none).unwrap();
        // no smoothing: log(0) is floored to -9999999999, so the score is 0.
        assert_eq!(s.score, 0.0);
        assert_eq!(s.precisions[3], 0.0);
    }

    #[test]
    fn sentence_effective_order() {
        // "a dog" vs "a dog runs": 2/2, 1/1, no 3- or 4-grams; BP = exp(1 - 3/2).
        let s = sentence_bleu("a dog", &["a dog runs"], &BleuOptions::default()).unwrap();
        assert_eq!(s.counts, [2, 1, 0, 0]);
        assert_eq!(s.totals, [2, 1, 0, 0]);
        assert!(close(s.score, 100.0 * (-0.5f64).exp()));
        assert!(s.signature().contains("|eff:yes|"));
        // Without effective order the missing orders count as log(0): score 0.
        let no_eff = BleuOptions {
            effective_order: Some(false),
            ..Default::default()
        };
        let s = sentence_bleu("a dog", &["a dog runs"], &no_eff).unwrap();
        assert_eq!(s.score, 0.0);
        assert!(s.signature().contains("|eff:no|"));
    }

    #[test]
    fn multiple_references() {
        // Closest reference length: 3 tokens vs lengths 2 and 4 is a tie → shorter (2).
        let s = sentence_bleu("a b c", &["a b", "a b c d"], &BleuOptions::default()).unwrap();
        assert_eq!(s.ref_len, 2);
        assert_eq!(s.counts, [3, 2, 1, 0]);
        assert!(s.signature().starts_with("nrefs:2|"));
        // Clipping uses the maximum count over references.
        let s = sentence_bleu("x x x", &["x y", "x x z"], &BleuOptions::default()).unwrap();
        assert_eq!(s.counts[0], 2);
        assert_eq!(s.ref_len, 3);
        // Varying numbers of (non-empty) references: nrefs:var.
        let refs = [vec!["a b", "a c"], vec!["d e", ""]];
        let s = corpus_bleu(&["a b", "d e"], &refs, &BleuOptions::default()).unwrap();
        assert_eq!(s.nrefs, None);
        assert!(s.signature().starts_with("nrefs:var|"));
    }

    #[test]
    fn errors_not_panics() {
        let o = BleuOptions::default();
        assert_eq!(
            corpus_bleu_streams(&["a", "b"], &[["a"]], &o),
            Err(BleuError::LengthMismatch { hyps: 2, refs: 1 })
        );
        assert_eq!(
            corpus_bleu(&["a"], &[vec!["a"], vec!["b"]], &o),
            Err(BleuError::LengthMismatch { hyps: 1, refs: 2 })
        );
        let empty: [&str; 0] = [];
        assert_eq!(
            corpus_bleu_streams(&empty, &[empty], &o),
            Err(BleuError::EmptyCorpus)
        );
        assert_eq!(
            sentence_bleu("a", &empty, &o),
            Err(BleuError::NoReference { index: 0 })
        );
        assert_eq!(
            sentence_bleu("a", &[""], &o),
            Err(BleuError::NoReference { index: 0 })
        );
        let bad = BleuOptions {
            smooth_method: SmoothMethod::Floor,
            smooth_value: Some(-1.0),
            ..o
        };
        assert!(matches!(
            sentence_bleu("a", &["a"], &bad),
            Err(BleuError::InvalidSmoothValue(_))
        ));
    }

    #[test]
    fn empty_hypothesis() {
        let s = sentence_bleu("", &["Ein Mann steht."], &BleuOptions::default()).unwrap();
        assert_eq!(s.score, 0.0);
        assert_eq!(s.bp, 0.0);
        assert_eq!((s.sys_len, s.ref_len), (0, 4));
        assert_eq!(
            s.to_string(),
            "BLEU = 0.00 0.0/0.0/0.0/0.0 (BP = 0.000 ratio = 0.000 hyp_len = 0 ref_len = 4)"
        );
    }

    #[test]
    fn lowercase_and_names() {
        let o = BleuOptions {
            lowercase: true,
            ..Default::default()
        };
        let s = sentence_bleu("EIN Mann", &["ein mann"], &o).unwrap();
        assert_eq!(s.counts, [2, 1, 0, 0]);
        assert!(s.signature().contains("|case:lc|"));
        assert_eq!("intl".parse::<Tokenizer>(), Ok(Tokenizer::Intl));
        assert_eq!("add-k".parse::<SmoothMethod>(), Ok(SmoothMethod::AddK));
        assert!("zh".parse::<Tokenizer>().is_err());
        assert_eq!(
            s.format_with_signature(),
            format!(
                "BLEU|{} = {}",
                s.signature(),
                &s.to_string()["BLEU = ".len()..]
            )
        );
    }

    #[test]
    fn tokenizer_13a_details() {
        assert_eq!(tokenize_13a(""), "");
        assert_eq!(tokenize_13a("a<skipped>b"), "ab");
        assert_eq!(tokenize_13a("Zeilen-\numbruch\nneu"), "Zeilenumbruch neu");
        assert_eq!(tokenize_13a("&lt;b&gt; &amp;quot;"), "< b > & quot ;");
        // A final period after a digit is split thanks to the padding.
        assert_eq!(tokenize_13a("im Jahr 1990."), "im Jahr 1990 .");
        assert_eq!(tokenize_13a("3-4 Tage, 2.5"), "3 - 4 Tage , 2.5");
        // Python whitespace includes U+001C..U+001F and U+00A0.
        assert_eq!(tokenize_13a("a\u{1f}b\u{a0}c"), "a b c");
    }

    #[test]
    fn tokenizer_intl_details() {
        // No padding: a final period after a digit stays attached (as in mteval-v14).
        assert_eq!(tokenize_intl("im Jahr 1990."), "im Jahr 1990.");
        assert_eq!(tokenize_intl("«Hallo» – sagte €5"), "« Hallo » – sagte € 5");
        assert_eq!(tokenize_intl("E-Mail 1,5"), "E - Mail 1,5");
        assert_eq!(tokenize_intl("&amp;"), "& amp ;");
    }
}
