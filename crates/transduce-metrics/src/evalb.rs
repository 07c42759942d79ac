//! Constituency bracket scoring identical to EVALB run with `COLLINS.prm`.
//!
//! One file on purpose (about 1,200 lines before its tests): it mirrors one C program,
//! `evalb.c`, rule for rule, and its conventions (reading, deletion, length, label cuts,
//! matching, the summary's cut-off) depend on each other; a reader checking it against the
//! C source reads it top to bottom, as the source is read.
//!
//! This is a re-implementation of `evalb.c` (Satoshi Sekine & Michael Collins, 1997, with the
//! revisions by David Brooks (2005) and David Ellis (2006)), the program that defines the
//! standard PARSEVAL numbers for the Penn Treebank. The reference is the `EVALB/` folder of
//! `nikitakit/self-attentive-parser` at commit `7b1da8fa406e50e3f25bc7dcab0a434965d0b73a`,
//! run as `evalb -p COLLINS.prm GOLD TEST`. Every rule below follows that C source,
//! including its less obvious conventions:
//!
//! * **Reading** ([`parse_line`], EVALB's `read_line`): `(X word)` is a preterminal, every
//!   other `(` opens a constituent whose label is the text after `(` up to whitespace or a
//!   parenthesis. So the outer bracket of `( (S ...) )` or `((S ...))` is a constituent with an
//!   **empty label**, which is counted like any other bracket. Whitespace between brackets does
//!   not matter (`)(` is fine), but a preterminal's `)` must directly follow its word.
//! * Preterminals whose tag is a `DELETE_LABEL` (`-NONE-` and the punctuation tags
//!   `,` `:` ` `` ` `''` `.` under `COLLINS.prm`) are dropped together with their word while
//!   reading: they take no word position, and spans are counted over the remaining words.
//! * **Length** (the `Len.` column, and the `len<=CUTOFF_LEN` selection): the number of gold
//!   preterminals whose tag is not a `DELETE_LABEL_FOR_LENGTH` (`-NONE-`), punctuation
//!   included.
//! * **Labels** of constituents are cut at the first `-` or `=` in gold and test (`NP-SBJ-1`,
//!   `NP=2` → `NP`; as in the C code this also applies at position 0, so a constituent label
//!   starting with `-` becomes the empty label). POS tags are compared as written.
//! * A constituent is **ignored** when it spans no word after deletion, or when its cut label
//!   equals (under `EQ_LABEL`) a `DELETE_LABEL` (here `TOP`). Everything else counts:
//!   unary chains, duplicate brackets, the unlabeled outer bracket.
//! * **Matching**: gold brackets in order, each takes the first still unmatched test bracket
//!   with the same span and an equal label (`ADVP` = `PRT` through `EQ_LABEL`).
//! * **Crossing**: the number of test brackets that cross at least one gold bracket.
//! * **Tags**: word positions where gold and test tags are equal (`EQ_LABEL` applies).
//! * **Errors** (status 1): a length mismatch (`Length unmatch (g|t)`) or a word mismatch
//!   (`Words unmatch (g|t)`), and unbalanced brackets; **skips** (status 2): a test line
//!   without words, e.g. an empty line. Error and skipped sentences are excluded from the
//!   totals but counted as sentences (also in the `len<=40` block, by gold length).
//! * `MAX_ERROR`: EVALB aborts (exit status 1, no summary) when its error counter passes
//!   the limit; [`evaluate`] returns [`EvalbError::TooManyErrors`] at the same point.
//!
//! ```
//! use transduce_metrics::evalb::{EvalbParams, SentenceStatus, evaluate};
//!
//! let gold = ["( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )"];
//! let test = ["((S (NP (DT The) (NN dog)) (VP (VBZ barks) (. .))))"];
//! let report = evaluate(&gold, &test, &EvalbParams::collins()).unwrap();
//! let s = &report.sentences[0];
//! assert_eq!(s.status, SentenceStatus::Ok);
//! // "", S, NP, VP on both sides; the moved "." is not a word for EVALB.
//! assert_eq!((s.matched, s.gold_brackets, s.test_brackets), (4, 4, 4));
//! assert_eq!((s.length, s.words), (4, 3));
//! assert_eq!(format!("{:.2}", report.summary_all.bracketing_fmeasure()), "100.00");
//! print!("{report}"); // EVALB's output layout
//! ```
//!
//! Not reproduced: EVALB's fixed-size buffers (5,000-byte lines, 200 words or brackets per
//! sentence, 30-byte labels, 100-byte words); inputs beyond them are undefined behaviour in
//! the C program and are simply handled here without limits.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Words that make a preterminal a "quote terminal" when its tag is a `QUOTE_LABEL`
/// (EVALB's `is_quote_term`).
const QUOTE_WORDS: [&str; 3] = ["'", "\"", "/"];
/// EVALB's `MAX_QUOTE_TERM`: at most this many quote terminals are remembered per line.
const MAX_QUOTE_TERM: usize = 20;
/// EVALB's `result` value of a deleted bracket.
const DELETED: u8 = 5;
const MATCHED: u8 = 1;
const UNMATCHED: u8 = 0;

// ---------------------------------------------------------------------------------------------
// Parameters
// ---------------------------------------------------------------------------------------------

/// EVALB's parameters (the keys of a `.prm` file).
///
/// [`EvalbParams::collins`] gives `COLLINS.prm`, the standard setting; [`Default`] gives
/// EVALB's built-in defaults (as run without `-p`); [`EvalbParams::from_prm`] reads a
/// parameter file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EvalbParams {
    /// `LABELED`: `true` compares labels when matching brackets, `false` only spans.
    pub labeled: bool,
    /// `CUTOFF_LEN`: the second summary block covers sentences whose gold length
    /// (see [`SentenceResult::length`]) is at most this.
    pub cutoff_len: i64,
    /// `MAX_ERROR`: EVALB exits once its error counter (one per reported error message)
    /// exceeds this, i.e. at the `MAX_ERROR + 2`-th message. `None` never aborts.
    pub max_error: Option<i64>,
    /// `DELETE_LABEL`: preterminals with such a tag are removed with their word; constituents
    /// whose (cut) label equals one are not counted.
    pub delete_labels: Vec<String>,
    /// `DELETE_LABEL_FOR_LENGTH`: preterminals with such a tag do not count for the length.
    pub delete_labels_for_length: Vec<String>,
    /// `QUOTE_LABEL`: tags of quote / possessive terminals (words `'`, `"`, `/`) that EVALB
    /// re-inserts on the side where they were deleted when the lengths differ (`fix_quote`).
    pub quote_labels: Vec<String>,
    /// `EQ_LABEL`: label pairs treated as equal (non-directional).
    pub eq_labels: Vec<(String, String)>,
    /// `EQ_WORD`: word pairs treated as equal (non-directional).
    pub eq_words: Vec<(String, String)>,
}

impl Default for EvalbParams {
    /// EVALB's compiled-in defaults: labeled, cut-off 40, `MAX_ERROR` 10, nothing deleted.
    fn default() -> Self {
        EvalbParams {
            labeled: true,
            cutoff_len: 40,
            max_error: Some(10),
            delete_labels: Vec::new(),
            delete_labels_for_length: Vec::new(),
            quote_labels: Vec::new(),
            eq_labels: Vec::new(),
            eq_words: Vec::new(),
        }
    }
}

impl EvalbParams {
    /// The parameters of EVALB's `COLLINS.prm`: `MAX_ERROR 10`, `CUTOFF_LEN 40`, `LABELED 1`,
    /// `DELETE_LABEL` `TOP` `-NONE-` `,` `:` ` `` ` `''` `.`, `DELETE_LABEL_FOR_LENGTH -NONE-`,
    /// `EQ_LABEL ADVP PRT`.
    pub fn collins() -> Self {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        EvalbParams {
            labeled: true,
            cutoff_len: 40,
            max_error: Some(10),
            delete_labels: s(&["TOP", "-NONE-", ",", ":", "``", "''", "."]),
            delete_labels_for_length: s(&["-NONE-"]),
            quote_labels: Vec::new(),
            eq_labels: vec![("ADVP".to_string(), "PRT".to_string())],
            eq_words: Vec::new(),
        }
    }

    /// Reads an EVALB parameter file, starting from [`Default`], as `read_parameter_file`
    /// does: trailing whitespace is trimmed, lines starting with `#` or shorter than 3
    /// characters are ignored, the first token is the key and the rest of the line the value;
    /// numbers are read like C's `atoi`. `DEBUG` is accepted and ignored.
    ///
    /// Where EVALB only warns and goes on (an unknown key, an `EQ_LABEL` / `EQ_WORD` without
    /// exactly two values), this returns [`EvalbError::Param`].
    pub fn from_prm(text: &str) -> Result<Self, EvalbError> {
        let mut p = EvalbParams::default();
        for (n, raw) in text.split('\n').enumerate() {
            let line = raw.trim_end_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
            if line.starts_with('#') || line.len() < 3 {
                continue;
            }
            let key_end = line.bytes().position(is_c_space).unwrap_or(line.len());
            let key = &line[..key_end];
            let value =
                line[key_end..].trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
            let err = |message: String| EvalbError::Param {
                line: n + 1,
                message,
            };
            let pair = |value: &str| -> Result<(String, String), EvalbError> {
                let v: Vec<&str> = value
                    .split(|c: char| c.is_ascii() && is_c_space(c as u8))
                    .filter(|s| !s.is_empty())
                    .collect();
                if v.len() != 2 {
                    return Err(err(format!("{key} requires two values")));
                }
                Ok((v[0].to_string(), v[1].to_string()))
            };
            match key {
                "DEBUG" => {}
                "MAX_ERROR" => p.max_error = Some(atoi(value)),
                "CUTOFF_LEN" => p.cutoff_len = atoi(value),
                "LABELED" => p.labeled = atoi(value) != 0,
                "DELETE_LABEL" => p.delete_labels.push(value.to_string()),
                "DELETE_LABEL_FOR_LENGTH" => p.delete_labels_for_length.push(value.to_string()),
                "QUOTE_LABEL" => p.quote_labels.push(value.to_string()),
                "EQ_LABEL" => p.eq_labels.push(pair(value)?),
                "EQ_WORD" => p.eq_words.push(pair(value)?),
                _ => return Err(err(format!("Unknown keyword ({key}) in parameter file"))),
            }
        }
        Ok(p)
    }

    /// EVALB's `label_comp`: equal strings or an `EQ_LABEL` pair.
    fn label_eq(&self, a: &str, b: &str) -> bool {
        a == b
            || self
                .eq_labels
                .iter()
                .any(|(x, y)| (a == x && b == y) || (a == y && b == x))
    }

    /// EVALB's `word_comp`: equal strings or an `EQ_WORD` pair.
    fn word_eq(&self, a: &str, b: &str) -> bool {
        a == b
            || self
                .eq_words
                .iter()
                .any(|(x, y)| (a == x && b == y) || (a == y && b == x))
    }

    /// EVALB's `is_deletelabel` (exact comparison; used for preterminal tags).
    fn is_delete_label(&self, s: &str) -> bool {
        self.delete_labels.iter().any(|d| d == s)
    }

    /// EVALB's `is_deletelabel_for_length` (exact comparison).
    fn is_delete_label_for_length(&self, s: &str) -> bool {
        self.delete_labels_for_length.iter().any(|d| d == s)
    }

    /// EVALB's `is_quote_term`.
    fn is_quote_term(&self, label: &str, word: &str) -> bool {
        self.quote_labels.iter().any(|q| q == label) && QUOTE_WORDS.contains(&word)
    }

    /// The bracket deletion test of EVALB's `massage_data` (`label_comp` with each
    /// `DELETE_LABEL`, so `EQ_LABEL` applies).
    fn is_deleted_bracket_label(&self, label: &str) -> bool {
        self.delete_labels.iter().any(|d| self.label_eq(label, d))
    }
}

/// C's `isspace` in the "C" locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// EVALB's `is_terminator`: whitespace or a parenthesis.
fn is_terminator(b: u8) -> bool {
    is_c_space(b) || b == b'(' || b == b')'
}

/// C's `atoi` (leading whitespace, optional sign, digits; 0 if none; saturating).
fn atoi(s: &str) -> i64 {
    let s = s.trim_start_matches(|c: char| c.is_ascii() && is_c_space(c as u8));
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        v = v.saturating_mul(10).saturating_add(i64::from(b - b'0'));
    }
    if neg { -v } else { v }
}

/// EVALB's `modify_label`: cut the label at the first `-` or `=` (also at position 0).
fn modify_label(label: &str) -> &str {
    match label.find(['-', '=']) {
        Some(i) => &label[..i],
        None => label,
    }
}

// ---------------------------------------------------------------------------------------------
// Reading trees
// ---------------------------------------------------------------------------------------------

/// A word kept after reading, with its POS tag (EVALB's `terminal[]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Terminal {
    pub word: String,
    pub tag: String,
}

/// A constituent as read (EVALB's `bracket[]`): the raw label (not yet cut at `-`/`=`) and
/// the span `start..end` in word positions after `DELETE_LABEL` preterminals were dropped.
/// `end` is `-1` for a bracket that was never closed (EVALB's initial value); spans are
/// signed because EVALB's quote re-insertion shifts them as plain integers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bracket {
    pub start: i64,
    pub end: i64,
    pub label: String,
}

/// A `QUOTE_LABEL` terminal remembered while reading (EVALB's `s_term_ind`): its word and
/// tag, its word position, the number of brackets opened before it and the brackets still
/// open around it. Only used when [`EvalbParams::quote_labels`] is not empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuoteTerm {
    pub word: String,
    pub tag: String,
    pub index: i64,
    pub bracket: usize,
    pub ends: Vec<usize>,
}

/// One line read the way EVALB's `read_line` reads it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedLine {
    /// Words left after preterminals tagged with a `DELETE_LABEL` were removed.
    pub terminals: Vec<Terminal>,
    /// Every constituent bracket in order of its `(`, including ones that will be ignored.
    pub brackets: Vec<Bracket>,
    /// Number of preterminals whose tag is not a `DELETE_LABEL_FOR_LENGTH` (EVALB uses the
    /// gold line's value as the sentence length).
    pub length: usize,
    /// Quote terminals (see [`QuoteTerm`]).
    pub quote_terms: Vec<QuoteTerm>,
    /// Non-fatal reading errors EVALB reports for this line (they make the sentence an error
    /// sentence): `Bracketing is unbalanced (too many open bracket)`,
    /// `Bracketing unbalance (too many close bracket)`, `More than two elements in a bracket`.
    pub errors: Vec<String>,
}

/// A line EVALB cannot read at all. EVALB itself reports `Reading sentence` in an endless
/// loop until `MAX_ERROR` aborts the run; here it is an error value.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadError {
    /// EVALB's message(s) for the position.
    pub message: String,
    /// Byte offset in the line where reading stopped.
    pub offset: usize,
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at byte {})", self.message, self.offset)
    }
}

impl std::error::Error for ReadError {}

/// Reads one bracketed tree line exactly as EVALB's `read_line` does.
///
/// Accepts the usual forms (`( (S ...) )`, `((S ...))`, `(S ...)`, with or without spaces
/// around `)(`); an empty line gives no words and no brackets. A stray word, or a
/// preterminal whose `)` does not directly follow its word (`(NN dog )`), is a [`ReadError`]
/// (EVALB loops on it until it aborts). Unbalanced brackets are not fatal: they are listed
/// in [`ParsedLine::errors`], as EVALB reports them and marks the sentence as an error.
///
/// The text is treated as a C string (it ends at a NUL byte) followed by EVALB's line feed.
pub fn parse_line(line: &str, params: &EvalbParams) -> Result<ParsedLine, ReadError> {
    let text = line.split('\0').next().unwrap_or("");
    let mut b: Vec<u8> = Vec::with_capacity(text.len() + 1);
    b.extend_from_slice(text.as_bytes());
    b.push(b'\n');
    let n = b.len();
    let s = |from: usize, to: usize| String::from_utf8_lossy(&b[from..to]).into_owned();

    let mut out = ParsedLine {
        terminals: Vec::new(),
        brackets: Vec::new(),
        length: 0,
        quote_terms: Vec::new(),
        errors: Vec::new(),
    };
    // EVALB's stack: `stack_top` may go negative after a surplus `)`; `stack` holds the
    // entries at non-negative levels (its length is max(stack_top, 0)).
    let mut stack: Vec<usize> = Vec::new();
    let mut stack_top: i64 = 0;
    let mut wid: i64 = 0;
    let mut p = 0;

    while p < n {
        let c = b[p];
        if is_c_space(c) {
            p += 1;
        } else if c == b'(' {
            p += 1;
            let label_start = p;
            while p < n && !is_terminator(b[p]) {
                p += 1;
            }
            let label = s(label_start, p);

            if p < n && is_c_space(b[p]) {
                let mut q = p + 1;
                while q < n && is_c_space(b[q]) {
                    q += 1;
                }
                let word_start = q;
                while q < n && !is_terminator(b[q]) {
                    q += 1;
                }
                let word = s(word_start, q);
                let next = b.get(q).copied();

                if next == Some(b')') {
                    if !params.is_delete_label_for_length(&label) {
                        out.length += 1;
                    }
                    if params.is_quote_term(&label, &word) && out.quote_terms.len() < MAX_QUOTE_TERM
                    {
                        out.quote_terms.push(QuoteTerm {
                            word: word.clone(),
                            tag: label.clone(),
                            index: wid,
                            bracket: out.brackets.len(),
                            ends: stack.clone(),
                        });
                    }
                    if !params.is_delete_label(&label) {
                        out.terminals.push(Terminal { word, tag: label });
                        wid += 1;
                    }
                    p = q + 1;
                    continue;
                } else if next != Some(b'(') {
                    if !word.is_empty() {
                        // EVALB: "More than two elements in a bracket", then it treats the
                        // bracket as a constituent and loops on the word ("Reading sentence").
                        return Err(ReadError {
                            message: "More than two elements in a bracket; Reading sentence"
                                .to_string(),
                            offset: word_start,
                        });
                    }
                    // `(X` followed only by whitespace up to the end of the line.
                    out.errors
                        .push("More than two elements in a bracket".to_string());
                }
            }

            // A constituent.
            let bid = out.brackets.len();
            out.brackets.push(Bracket {
                start: wid,
                end: -1,
                label,
            });
            if stack_top >= 0 {
                stack.push(bid);
            }
            stack_top += 1;
        } else if c == b')' {
            // EVALB's popb: reports only when the stack was already below zero.
            if stack_top > 0 {
                if let Some(top) = stack.pop() {
                    out.brackets[top].end = wid;
                }
            } else if stack_top < 0 {
                out.errors
                    .push("Bracketing unbalance (too many close bracket)".to_string());
            }
            stack_top -= 1;
            p += 1;
        } else {
            return Err(ReadError {
                message: "Reading sentence".to_string(),
                offset: p,
            });
        }
    }
    if stack_top != 0 {
        out.errors
            .push("Bracketing is unbalanced (too many open bracket)".to_string());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------
// Results
// ---------------------------------------------------------------------------------------------

/// EVALB's per-sentence status (the `Stat.` column).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SentenceStatus {
    /// 0: evaluated and counted in the totals.
    Ok,
    /// 1: error (length or word mismatch, unbalanced brackets); excluded from the totals.
    Error,
    /// 2: skipped (the test line has no words, e.g. an empty line); excluded from the totals.
    Skip,
}

impl SentenceStatus {
    /// The number EVALB prints: 0, 1 or 2.
    pub fn code(self) -> u8 {
        match self {
            SentenceStatus::Ok => 0,
            SentenceStatus::Error => 1,
            SentenceStatus::Skip => 2,
        }
    }
}

/// One line of EVALB's per-sentence table, with the counts as EVALB prints them.
///
/// For a length / word mismatch or a skip every count is 0 (only `length` is set), as in
/// EVALB. A sentence with unbalanced brackets is scored and printed normally but has status
/// [`SentenceStatus::Error`] and is left out of the totals, again as in EVALB.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SentenceResult {
    /// 1-based line number (EVALB's sentence ID).
    pub id: usize,
    /// `Len.`: gold preterminals not tagged `DELETE_LABEL_FOR_LENGTH` (punctuation included);
    /// decides the `len<=CUTOFF_LEN` group.
    pub length: usize,
    /// `Stat.`
    pub status: SentenceStatus,
    /// Matched brackets.
    pub matched: usize,
    /// Counted gold brackets.
    pub gold_brackets: usize,
    /// Counted test brackets.
    pub test_brackets: usize,
    /// Test brackets crossing at least one gold bracket.
    pub cross_brackets: usize,
    /// Words scored (after `DELETE_LABEL` preterminals were removed).
    pub words: usize,
    /// Words whose gold and test tags are equal.
    pub correct_tags: usize,
    /// The messages EVALB prints on stderr for this sentence (without the `ID : ` prefix),
    /// e.g. `Length unmatch (18|19)`.
    pub errors: Vec<String>,
}

fn pct(num: usize, den: usize) -> f64 {
    if den == 0 {
        0.0
    } else {
        100.0 * num as f64 / den as f64
    }
}

impl SentenceResult {
    /// `Recal`: 100·matched/gold_brackets (0 when there is no gold bracket).
    pub fn recall(&self) -> f64 {
        pct(self.matched, self.gold_brackets)
    }

    /// `Prec.`: 100·matched/test_brackets (0 when there is no test bracket).
    pub fn precision(&self) -> f64 {
        pct(self.matched, self.test_brackets)
    }

    /// `Tag Accracy`: 100·correct_tags/words (0 when there are no words).
    pub fn tag_accuracy(&self) -> f64 {
        pct(self.correct_tags, self.words)
    }

    /// The line EVALB prints for this sentence (without the newline).
    pub fn to_evalb_line(&self) -> String {
        format!(
            "{:4}  {:3}    {}  {:6.2} {:6.2}   {:3}    {:3}  {:3}    {:3}   {:4}  {:4}   {:6.2}",
            self.id,
            self.length,
            self.status.code(),
            self.recall(),
            self.precision(),
            self.matched,
            self.gold_brackets,
            self.test_brackets,
            self.cross_brackets,
            self.words,
            self.correct_tags,
            self.tag_accuracy()
        )
    }
}

/// The counts behind one of EVALB's summary blocks (`-- All --` or `-- len<=40 --`).
/// The bracket, word and crossing counts are summed over valid (status 0) sentences only.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// `Number of sentence`
    pub sentences: usize,
    /// `Number of Error sentence`
    pub error_sentences: usize,
    /// `Number of Skip  sentence`
    pub skip_sentences: usize,
    /// `Number of Valid sentence` = sentences − errors − skips.
    pub valid_sentences: usize,
    pub matched: usize,
    pub gold_brackets: usize,
    pub test_brackets: usize,
    pub cross_brackets: usize,
    pub words: usize,
    pub correct_tags: usize,
    /// Valid sentences with matched = gold brackets = test brackets.
    pub complete_match_sentences: usize,
    /// Valid sentences without crossing brackets.
    pub no_crossing_sentences: usize,
    /// Valid sentences with at most 2 crossing brackets.
    pub two_or_less_crossing_sentences: usize,
}

impl Summary {
    /// Adds one sentence, as EVALB's `individual_result` adds to its totals.
    pub fn add(&mut self, r: &SentenceResult) {
        self.sentences += 1;
        match r.status {
            SentenceStatus::Error => self.error_sentences += 1,
            SentenceStatus::Skip => self.skip_sentences += 1,
            SentenceStatus::Ok => {
                self.valid_sentences += 1;
                self.matched += r.matched;
                self.gold_brackets += r.gold_brackets;
                self.test_brackets += r.test_brackets;
                if r.gold_brackets == r.test_brackets && r.test_brackets == r.matched {
                    self.complete_match_sentences += 1;
                }
                self.words += r.words;
                self.cross_brackets += r.cross_brackets;
                if r.cross_brackets == 0 {
                    self.no_crossing_sentences += 1;
                }
                if r.cross_brackets <= 2 {
                    self.two_or_less_crossing_sentences += 1;
                }
                self.correct_tags += r.correct_tags;
            }
        }
    }

    /// `Bracketing Recall` (percent; 0 without gold brackets).
    pub fn bracketing_recall(&self) -> f64 {
        pct(self.matched, self.gold_brackets)
    }

    /// `Bracketing Precision` (percent; 0 without test brackets).
    pub fn bracketing_precision(&self) -> f64 {
        pct(self.matched, self.test_brackets)
    }

    /// `Bracketing FMeasure` = 2PR/(P+R) from the unrounded percentages. Like EVALB it is
    /// NaN when P + R = 0 (EVALB prints `-nan` there on x86-64).
    pub fn bracketing_fmeasure(&self) -> f64 {
        let r = self.bracketing_recall();
        let p = self.bracketing_precision();
        if p + r == 0.0 {
            f64::NAN
        } else {
            2.0 * p * r / (p + r)
        }
    }

    /// `Complete match`: percent of valid sentences matched completely.
    pub fn complete_match(&self) -> f64 {
        pct(self.complete_match_sentences, self.valid_sentences)
    }

    /// `Average crossing`: crossing brackets per valid sentence.
    pub fn average_crossing(&self) -> f64 {
        if self.valid_sentences == 0 {
            0.0
        } else {
            self.cross_brackets as f64 / self.valid_sentences as f64
        }
    }

    /// `No crossing`: percent of valid sentences without crossing brackets.
    pub fn no_crossing(&self) -> f64 {
        pct(self.no_crossing_sentences, self.valid_sentences)
    }

    /// `2 or less crossing`: percent of valid sentences with at most 2 crossing brackets.
    pub fn two_or_less_crossing(&self) -> f64 {
        pct(self.two_or_less_crossing_sentences, self.valid_sentences)
    }

    /// `Tagging accuracy`: 100·correct_tags/words (0 without words).
    pub fn tagging_accuracy(&self) -> f64 {
        pct(self.correct_tags, self.words)
    }

    /// The totals line EVALB prints below the per-sentence table (without the newline); the
    /// bracket part is only printed when there are gold and test brackets.
    pub fn to_evalb_totals_line(&self) -> String {
        let mut s = String::new();
        if self.gold_brackets > 0 && self.test_brackets > 0 {
            s.push_str(&format!(
                "                {:6.2} {:6.2} {:6} {:5} {:5}  {:5}",
                self.bracketing_recall(),
                self.bracketing_precision(),
                self.matched,
                self.gold_brackets,
                self.test_brackets,
                self.cross_brackets
            ));
        }
        s.push_str(&format!(
            "  {:5} {:5}   {:6.2}",
            self.words,
            self.correct_tags,
            self.tagging_accuracy()
        ));
        s
    }

    /// The lines of one summary block as EVALB prints them (after its `-- ... --` title),
    /// each ending with a newline.
    pub fn to_evalb_block(&self) -> String {
        let f = self.bracketing_fmeasure();
        let f = if f.is_nan() {
            "  -nan".to_string()
        } else {
            format!("{f:6.2}")
        };
        format!(
            "Number of sentence        = {:6}\n\
             Number of Error sentence  = {:6}\n\
             Number of Skip  sentence  = {:6}\n\
             Number of Valid sentence  = {:6}\n\
             Bracketing Recall         = {:6.2}\n\
             Bracketing Precision      = {:6.2}\n\
             Bracketing FMeasure       = {}\n\
             Complete match            = {:6.2}\n\
             Average crossing          = {:6.2}\n\
             No crossing               = {:6.2}\n\
             2 or less crossing        = {:6.2}\n\
             Tagging accuracy          = {:6.2}\n",
            self.sentences,
            self.error_sentences,
            self.skip_sentences,
            self.valid_sentences,
            self.bracketing_recall(),
            self.bracketing_precision(),
            f,
            self.complete_match(),
            self.average_crossing(),
            self.no_crossing(),
            self.two_or_less_crossing(),
            self.tagging_accuracy()
        )
    }
}

/// The result of [`evaluate`]: EVALB's per-sentence table and its two summary blocks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// One entry per input line pair, in order.
    pub sentences: Vec<SentenceResult>,
    /// `-- All --` (also the totals line below the table).
    pub summary_all: Summary,
    /// `-- len<=CUTOFF_LEN --`: sentences whose gold length is at most `cutoff_len`
    /// (error and skipped ones included in the sentence counts).
    pub summary_len40: Summary,
    /// The cut-off used for `summary_len40` (40 with `COLLINS.prm`).
    pub cutoff_len: i64,
}

impl Report {
    /// EVALB's complete standard output for this run.
    pub fn to_evalb_text(&self) -> String {
        self.to_string()
    }

    /// The lines EVALB writes to standard error, e.g. `91 : Length unmatch (18|19)`.
    pub fn stderr_lines(&self) -> Vec<String> {
        self.sentences
            .iter()
            .flat_map(|s| s.errors.iter().map(move |e| format!("{} : {}", s.id, e)))
            .collect()
    }
}

const RULE: &str = "============================================================================";

impl fmt::Display for Report {
    /// Writes EVALB's standard output layout: header, per-sentence lines, totals line,
    /// `=== Summary ===`, the `-- All --` and `-- len<=N --` blocks.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "  Sent.                        Matched  Bracket   Cross        Correct Tag"
        )?;
        writeln!(
            f,
            " ID  Len.  Stat. Recal  Prec.  Bracket gold test Bracket Words  Tags Accracy"
        )?;
        writeln!(f, "{RULE}")?;
        for s in &self.sentences {
            writeln!(f, "{}", s.to_evalb_line())?;
        }
        writeln!(f, "{RULE}")?;
        writeln!(f, "{}", self.summary_all.to_evalb_totals_line())?;
        writeln!(f, "=== Summary ===")?;
        writeln!(f)?;
        writeln!(f, "-- All --")?;
        write!(f, "{}", self.summary_all.to_evalb_block())?;
        writeln!(f)?;
        writeln!(f, "-- len<={} --", self.cutoff_len)?;
        write!(f, "{}", self.summary_len40.to_evalb_block())
    }
}

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Which input a problem was found in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Side {
    Gold,
    Test,
}

/// Problems that stop an evaluation (where EVALB would abort or give a partial result).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EvalbError {
    /// Gold and test have different numbers of lines. (EVALB reports `Number of lines
    /// unmatch` and scores only the pairs it could read.)
    LineCountMismatch {
        gold_lines: usize,
        test_lines: usize,
    },
    /// A line EVALB cannot read (it loops on `Reading sentence` until it aborts).
    Unreadable {
        line: usize,
        side: Side,
        error: ReadError,
    },
    /// EVALB's error counter passed `MAX_ERROR`: EVALB exits with status 1 after printing
    /// `message` and prints no summary.
    TooManyErrors {
        line: usize,
        errors: usize,
        message: String,
    },
    /// A parameter file line [`EvalbParams::from_prm`] does not accept.
    Param { line: usize, message: String },
}

impl fmt::Display for EvalbError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EvalbError::LineCountMismatch {
                gold_lines,
                test_lines,
            } => write!(
                f,
                "Number of lines unmatch: {gold_lines} gold lines, {test_lines} test lines"
            ),
            EvalbError::Unreadable { line, side, error } => {
                write!(f, "{line} : cannot read {side:?} line: {error}")
            }
            EvalbError::TooManyErrors {
                line,
                errors,
                message,
            } => write!(
                f,
                "{line} : {message} (error {errors} exceeds MAX_ERROR; EVALB aborts)"
            ),
            EvalbError::Param { line, message } => {
                write!(f, "parameter file line {line}: {message}")
            }
        }
    }
}

impl std::error::Error for EvalbError {}

// ---------------------------------------------------------------------------------------------
// Scoring
// ---------------------------------------------------------------------------------------------

/// EVALB's global `Error_count` and the `MAX_ERROR` abort of its `Error` function.
struct ErrorCounter {
    count: usize,
    max: Option<i64>,
}

impl ErrorCounter {
    fn raise(&mut self, line: usize, message: &str) -> Result<(), EvalbError> {
        let before = self.count;
        self.count += 1;
        match self.max {
            Some(max) if (before as i64) > max => Err(EvalbError::TooManyErrors {
                line,
                errors: self.count,
                message: message.to_string(),
            }),
            _ => Ok(()),
        }
    }
}

/// A bracket during scoring, with EVALB's `result` (0 unmatched, 1 matched, 5 deleted).
struct WorkBracket {
    start: i64,
    end: i64,
    label: String,
    result: u8,
}

struct WorkSide {
    terminals: Vec<Terminal>,
    brackets: Vec<WorkBracket>,
    quotes: Vec<QuoteTerm>,
}

impl From<ParsedLine> for WorkSide {
    fn from(p: ParsedLine) -> Self {
        WorkSide {
            terminals: p.terminals,
            brackets: p
                .brackets
                .into_iter()
                .map(|b| WorkBracket {
                    start: b.start,
                    end: b.end,
                    label: b.label,
                    result: UNMATCHED,
                })
                .collect(),
            quotes: p.quote_terms,
        }
    }
}

/// EVALB's `reinsert_term`: put a deleted quote terminal back and shift the brackets.
fn reinsert_term(q: &QuoteTerm, side: &mut WorkSide) {
    let at = usize::try_from(q.index)
        .unwrap_or(0)
        .min(side.terminals.len());
    side.terminals.insert(
        at,
        Terminal {
            word: q.word.clone(),
            tag: q.tag.clone(),
        },
    );
    for b in side.brackets.iter_mut().skip(q.bracket) {
        b.start += 1;
        b.end += 1;
    }
    for &e in &q.ends {
        if let Some(b) = side.brackets.get_mut(e) {
            b.end += 1;
        }
    }
}

/// EVALB's `fix_quote`: when the lengths differ, re-insert quote terminals deleted on one
/// side but not on the other (only with `QUOTE_LABEL`s).
fn fix_quote(params: &EvalbParams, g: &mut WorkSide, t: &mut WorkSide) {
    for i in 0..t.quotes.len() {
        let ind = t.quotes[i].index;
        for j in 0..g.quotes.len() {
            if g.quotes[j].index != ind || g.quotes[j].tag == t.quotes[i].tag {
                continue;
            }
            let gdel = params.is_delete_label(&g.quotes[j].tag);
            let tdel = params.is_delete_label(&t.quotes[i].tag);
            if gdel && !tdel {
                let q = g.quotes[j].clone();
                reinsert_term(&q, g);
                for k in &mut g.quotes[j..] {
                    k.index += 1;
                }
            } else if tdel && !gdel {
                let q = t.quotes[i].clone();
                reinsert_term(&q, t);
                for k in &mut t.quotes[i..] {
                    k.index += 1;
                }
            }
        }
    }
}

/// EVALB's `massage_data` for one side: ignore empty brackets, cut labels, ignore
/// `DELETE_LABEL` brackets; returns the number of counted brackets.
fn massage(params: &EvalbParams, brackets: &mut [WorkBracket]) -> usize {
    let mut n = 0;
    for b in brackets.iter_mut() {
        b.result = UNMATCHED;
        if b.start == b.end {
            b.result = DELETED;
            continue;
        }
        let cut = modify_label(&b.label).len();
        b.label.truncate(cut);
        if params.is_deleted_bracket_label(&b.label) {
            b.result = DELETED;
        } else {
            n += 1;
        }
    }
    n
}

/// Scores one line pair as EVALB's `calc_result`.
fn score_sentence(
    id: usize,
    gold: ParsedLine,
    test: ParsedLine,
    params: &EvalbParams,
    counter: &mut ErrorCounter,
) -> Result<SentenceResult, EvalbError> {
    let length = gold.length;
    let mut errors: Vec<String> = gold.errors.clone();
    errors.extend(test.errors.iter().cloned());
    let status = if errors.is_empty() {
        SentenceStatus::Ok
    } else {
        SentenceStatus::Error
    };
    let zero = |status, errors| SentenceResult {
        id,
        length,
        status,
        matched: 0,
        gold_brackets: 0,
        test_brackets: 0,
        cross_brackets: 0,
        words: 0,
        correct_tags: 0,
        errors,
    };

    if test.terminals.is_empty() {
        return Ok(zero(SentenceStatus::Skip, errors));
    }

    let mut g = WorkSide::from(gold);
    let mut t = WorkSide::from(test);

    if g.terminals.len() != t.terminals.len() {
        fix_quote(params, &mut g, &mut t);
        if g.terminals.len() != t.terminals.len() {
            let msg = format!(
                "Length unmatch ({}|{})",
                g.terminals.len(),
                t.terminals.len()
            );
            counter.raise(id, &msg)?;
            errors.push(msg);
            return Ok(zero(SentenceStatus::Error, errors));
        }
    }

    for (a, b) in g.terminals.iter().zip(&t.terminals) {
        if !params.word_eq(&a.word, &b.word) {
            let msg = format!("Words unmatch ({}|{})", a.word, b.word);
            counter.raise(id, &msg)?;
            errors.push(msg);
            return Ok(zero(SentenceStatus::Error, errors));
        }
    }

    let gold_brackets = massage(params, &mut g.brackets);
    let test_brackets = massage(params, &mut t.brackets);

    // Matching: each gold bracket takes the first unmatched test bracket with the same span
    // and an equal label.
    let mut matched = 0;
    for gb in g.brackets.iter_mut().filter(|b| b.result != DELETED) {
        for tb in t.brackets.iter_mut() {
            if tb.result == UNMATCHED
                && gb.start == tb.start
                && gb.end == tb.end
                && (!params.labeled || params.label_eq(&gb.label, &tb.label))
            {
                gb.result = MATCHED;
                tb.result = MATCHED;
                matched += 1;
                break;
            }
        }
    }

    // Crossing, counted over test brackets.
    let cross_brackets = t
        .brackets
        .iter()
        .filter(|tb| tb.result != DELETED)
        .filter(|tb| {
            g.brackets
                .iter()
                .filter(|gb| gb.result != DELETED)
                .any(|gb| {
                    (gb.start < tb.start && gb.end > tb.start && gb.end < tb.end)
                        || (gb.start > tb.start && gb.start < tb.end && gb.end > tb.end)
                })
        })
        .count();

    let correct_tags = g
        .terminals
        .iter()
        .zip(&t.terminals)
        .filter(|(a, b)| params.label_eq(&a.tag, &b.tag))
        .count();

    Ok(SentenceResult {
        id,
        length,
        status,
        matched,
        gold_brackets,
        test_brackets,
        cross_brackets,
        words: g.terminals.len(),
        correct_tags,
        errors,
    })
}

/// Scores test trees against gold trees, line by line, exactly as
/// `evalb -p <prm> GOLD TEST` does, and returns the per-sentence table and both summaries.
///
/// Line `k` (1-based) of each input is sentence `k`. An empty test line is a skipped
/// sentence; a length or word mismatch, or unbalanced brackets, make an error sentence;
/// neither counts in the totals. Errors where EVALB stops or scores only part of the input
/// are returned as [`EvalbError`]: different numbers of lines, an unreadable line, and
/// more errors than [`EvalbParams::max_error`].
pub fn evaluate<G: AsRef<str>, T: AsRef<str>>(
    gold_lines: &[G],
    test_lines: &[T],
    params: &EvalbParams,
) -> Result<Report, EvalbError> {
    if gold_lines.len() != test_lines.len() {
        return Err(EvalbError::LineCountMismatch {
            gold_lines: gold_lines.len(),
            test_lines: test_lines.len(),
        });
    }
    let mut counter = ErrorCounter {
        count: 0,
        max: params.max_error,
    };
    let mut report = Report {
        sentences: Vec::with_capacity(gold_lines.len()),
        summary_all: Summary::default(),
        summary_len40: Summary::default(),
        cutoff_len: params.cutoff_len,
    };
    for (k, (g, t)) in gold_lines.iter().zip(test_lines).enumerate() {
        let id = k + 1;
        let gold = parse_line(g.as_ref(), params).map_err(|error| EvalbError::Unreadable {
            line: id,
            side: Side::Gold,
            error,
        })?;
        for e in &gold.errors {
            counter.raise(id, e)?;
        }
        let test = parse_line(t.as_ref(), params).map_err(|error| EvalbError::Unreadable {
            line: id,
            side: Side::Test,
            error,
        })?;
        for e in &test.errors {
            counter.raise(id, e)?;
        }
        let r = score_sentence(id, gold, test, params, &mut counter)?;
        report.summary_all.add(&r);
        if (r.length as i64) <= params.cutoff_len {
            report.summary_len40.add(&r);
        }
        report.sentences.push(r);
    }
    Ok(report)
}

/// [`evaluate`] on whole file contents: each text is split into lines as EVALB's `fgets`
/// does (a final line without newline counts; no line after a final newline).
pub fn evaluate_text(gold: &str, test: &str, params: &EvalbParams) -> Result<Report, EvalbError> {
    let g: Vec<&str> = gold.lines().collect();
    let t: Vec<&str> = test.lines().collect();
    evaluate(&g, &t, params)
}

/// Scores a single tree pair (as sentence 1 of a one-line run).
pub fn evaluate_sentence(
    gold: &str,
    test: &str,
    params: &EvalbParams,
) -> Result<SentenceResult, EvalbError> {
    let mut report = evaluate(&[gold], &[test], params)?;
    Ok(report.sentences.remove(0))
}

// ---------------------------------------------------------------------------------------------
// Unit tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    fn one(gold: &str, test: &str) -> SentenceResult {
        evaluate_sentence(gold, test, &EvalbParams::collins()).expect("evaluates")
    }

    /// (matched, gold, test, cross, words, tags)
    fn counts(r: &SentenceResult) -> (usize, usize, usize, usize, usize, usize) {
        (
            r.matched,
            r.gold_brackets,
            r.test_brackets,
            r.cross_brackets,
            r.words,
            r.correct_tags,
        )
    }

    #[test]
    fn reads_compact_and_spaced_forms_alike() {
        let p = EvalbParams::collins();
        let a = parse_line("( (S (NP (DT a) (NN b)) (VP (VBZ c))) )", &p).unwrap();
        let b = parse_line("((S(NP (DT a)(NN b))(VP (VBZ c))))", &p).unwrap();
        assert_eq!(a, b);
        assert_eq!(a.terminals.len(), 3);
        let labels: Vec<_> = a.brackets.iter().map(|x| x.label.as_str()).collect();
        assert_eq!(labels, ["", "S", "NP", "VP"]);
        assert_eq!((a.brackets[0].start, a.brackets[0].end), (0, 3));
        assert_eq!((a.brackets[2].start, a.brackets[2].end), (0, 2));
        assert_eq!((a.brackets[3].start, a.brackets[3].end), (2, 3));
        assert!(a.errors.is_empty());
    }

    #[test]
    fn identical_trees_score_100() {
        let t = "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )";
        let r = one(t, t);
        assert_eq!(r.status, SentenceStatus::Ok);
        // brackets: "", S, NP, VP; the '.' word is deleted.
        assert_eq!(counts(&r), (4, 4, 4, 0, 3, 3));
        assert_eq!(r.length, 4);
        assert_eq!(
            r.to_evalb_line(),
            "   1    4    0  100.00 100.00     4      4    4      0      3     3   100.00"
        );
    }

    #[test]
    fn traces_function_tags_and_empty_brackets() {
        // Gold with a trace subject (an NP over -NONE- only is ignored), function tags,
        // co-index and gap index; test stripped as a parser would output it.
        let gold = "( (S (NP-SBJ-1 (NNP John)) (VP (VBD tried) (S (NP-SBJ (-NONE- *-1)) \
                    (VP (TO to) (VP (VB go))))) (NP=2 (NN home)) (. .)) )";
        let test = "( (S (NP (NNP John)) (VP (VBD tried) (S (VP (TO to) (VP (VB go))))) \
                    (NP (NN home)) (. .)) )";
        let r = one(gold, test);
        // Len: 6 preterminals minus the -NONE- one = 6 (John tried to go home .).
        assert_eq!(r.length, 6);
        // Counted gold: "", S, NP, VP, S, VP, VP, NP = 8; test the same 8.
        assert_eq!(counts(&r), (8, 8, 8, 0, 5, 5));
    }

    #[test]
    fn punctuation_moves_do_not_matter() {
        let gold = "( (S (NP (NN a) (, ,)) (VP (VB b))) )";
        let test = "( (S (NP (NN a)) (, ,) (VP (VB b))) )";
        let r = one(gold, test);
        assert_eq!(counts(&r), (4, 4, 4, 0, 2, 2));
        // A bracket over punctuation only becomes empty and is ignored.
        let test2 = "( (S (NP (NN a)) (X (, ,)) (VP (VB b))) )";
        assert_eq!(counts(&one(gold, test2)), (4, 4, 4, 0, 2, 2));
    }

    #[test]
    fn eq_label_and_relabel() {
        let gold = "( (S (VP (VB give) (PRT (RP up)))) )";
        let advp = "( (S (VP (VB give) (ADVP (RP up)))) )";
        assert_eq!(counts(&one(gold, advp)), (4, 4, 4, 0, 2, 2));
        let np = "( (S (VP (VB give) (NP (RP up)))) )";
        let r = one(gold, np);
        assert_eq!(counts(&r), (3, 4, 4, 0, 2, 2));
        assert_eq!(format!("{:.2}", r.recall()), "75.00");
    }

    #[test]
    fn duplicates_and_unaries_are_multisets() {
        let gold = "( (S (NP (NN a)) (VP (VB b))) )";
        // Duplicate NP over the same span: one matches, the second is extra.
        let test = "( (S (NP (NP (NN a))) (VP (VB b))) )";
        assert_eq!(counts(&one(gold, test)), (4, 4, 5, 0, 2, 2));
        // Duplicate in gold as well: both match.
        let gold2 = "( (S (NP (NP (NN a))) (VP (VB b))) )";
        assert_eq!(counts(&one(gold2, test)), (5, 5, 5, 0, 2, 2));
    }

    #[test]
    fn top_and_missing_outer_bracket() {
        let gold = "( (S (NP (NN a)) (VP (VB b))) )";
        let top = "(TOP (S (NP (NN a)) (VP (VB b))))";
        assert_eq!(counts(&one(gold, top)), (3, 4, 3, 0, 2, 2));
        let bare = "(S (NP (NN a)) (VP (VB b)))";
        assert_eq!(counts(&one(gold, bare)), (3, 4, 3, 0, 2, 2));
        let s1 = "(S1 (S (NP (NN a)) (VP (VB b))))";
        assert_eq!(counts(&one(gold, s1)), (3, 4, 4, 0, 2, 2));
    }

    #[test]
    fn crossing_brackets_counted_per_test_bracket() {
        // Gold: (A (B w0 w1) (C w2 w3)); test (X w0 (Y w1 w2) w3): Y crosses B and C → 1.
        let gold = "( (A (B (T w0) (T w1)) (C (T w2) (T w3))) )";
        let test = "( (A (T w0) (Y (T w1) (T w2)) (T w3)) )";
        let r = one(gold, test);
        assert_eq!(counts(&r), (2, 4, 3, 1, 4, 4));
    }

    #[test]
    fn tag_accuracy() {
        let gold = "( (S (NP (DT the) (NN dog)) (VP (VBZ runs)) (. .)) )";
        let test = "( (S (NP (DT the) (VB dog)) (VP (NNS runs)) (. .)) )";
        let r = one(gold, test);
        assert_eq!((r.words, r.correct_tags), (3, 1));
        assert_eq!(format!("{:.2}", r.tag_accuracy()), "33.33");
    }

    #[test]
    fn length_and_word_mismatch_are_errors() {
        let gold = "( (S (NP (NN a)) (VP (VB b)) (. .)) )";
        let test = "( (S (NP (NN a)) (VP (VB b)) (CC .)) )";
        let r = one(gold, test);
        assert_eq!(r.status, SentenceStatus::Error);
        assert_eq!(r.errors, ["Length unmatch (2|3)"]);
        assert_eq!(counts(&r), (0, 0, 0, 0, 0, 0));
        assert_eq!(r.length, 3);
        let r = one(gold, "( (S (NP (NN A)) (VP (VB b)) (. .)) )");
        assert_eq!(r.status, SentenceStatus::Error);
        assert_eq!(r.errors, ["Words unmatch (a|A)"]);
    }

    #[test]
    fn empty_test_line_is_skipped() {
        let gold = "( (S (NP (NN a)) (VP (VB b))) )";
        let r = one(gold, "");
        assert_eq!(r.status, SentenceStatus::Skip);
        assert_eq!(r.length, 2);
        assert!(r.errors.is_empty());
        // Only punctuation is also "no words".
        assert_eq!(one(gold, "( (. .) )").status, SentenceStatus::Skip);
    }

    #[test]
    fn unbalanced_and_unreadable_input() {
        let gold = "( (S (NP (NN a)) (VP (VB b))) )";
        let r = one(gold, "( (S (NP (NN a)) (VP (VB b)) )");
        assert_eq!(r.status, SentenceStatus::Error);
        assert_eq!(
            r.errors,
            ["Bracketing is unbalanced (too many open bracket)"]
        );
        let p = EvalbParams::collins();
        assert!(matches!(
            evaluate(&[gold], &["( (S (NN dog )) )"], &p),
            Err(EvalbError::Unreadable {
                line: 1,
                side: Side::Test,
                ..
            })
        ));
        assert!(matches!(
            evaluate(&[gold], &["hello"], &p),
            Err(EvalbError::Unreadable { .. })
        ));
        assert!(matches!(
            evaluate(&[gold, gold], &[gold], &p),
            Err(EvalbError::LineCountMismatch {
                gold_lines: 2,
                test_lines: 1
            })
        ));
        // Surplus close brackets never panic.
        let r = one(gold, "( (S (NP (NN a)))) (VP (VB b))) )))");
        assert_eq!(r.status, SentenceStatus::Error);
    }

    #[test]
    fn max_error_aborts_at_the_twelfth_error() {
        let p = EvalbParams::collins();
        let gold = vec!["( (S (NN a)) )"; 12];
        let test = vec!["( (S (NN b)) )"; 12];
        assert!(matches!(
            evaluate(&gold, &test, &p),
            Err(EvalbError::TooManyErrors { line: 12, .. })
        ));
        let r = evaluate(&gold[..11], &test[..11], &p).unwrap();
        assert_eq!(r.summary_all.error_sentences, 11);
        let unlimited = EvalbParams {
            max_error: None,
            ..p
        };
        assert!(evaluate(&gold, &test, &unlimited).is_ok());
    }

    #[test]
    fn summary_and_cutoff() {
        let p = EvalbParams {
            cutoff_len: 2,
            ..EvalbParams::collins()
        };
        let gold = [
            "( (S (NP (NN a)) (VP (VB b))) )",
            "( (S (NP (NN a) (NN c)) (VP (VB b))) )",
            "( (S (NN a)) )",
        ];
        let test = [
            "( (S (NP (NN a)) (VP (VB b))) )",
            "( (S (NN a) (NP (NN c) (VP (VB b)))) )",
            "",
        ];
        let r = evaluate(&gold, &test, &p).unwrap();
        let a = &r.summary_all;
        assert_eq!(
            (a.sentences, a.skip_sentences, a.valid_sentences),
            (3, 1, 2)
        );
        // Sentence 2: gold "", S, NP(0,2), VP(2,3); test "", S, NP(1,3), VP(2,3):
        // 3 matched, NP crosses.
        assert_eq!((a.matched, a.gold_brackets, a.test_brackets), (7, 8, 8));
        assert_eq!(a.cross_brackets, 1);
        assert_eq!(a.complete_match_sentences, 1);
        assert_eq!(format!("{:.2}", a.bracketing_fmeasure()), "87.50");
        assert_eq!(format!("{:.2}", a.average_crossing()), "0.50");
        let c = &r.summary_len40;
        assert_eq!(
            (c.sentences, c.skip_sentences, c.valid_sentences),
            (2, 1, 1)
        );
        let text = r.to_evalb_text();
        assert!(text.contains("\n-- len<=2 --\nNumber of sentence        =      2\n"));
        assert!(text.ends_with("Tagging accuracy          = 100.00\n"));
    }

    #[test]
    fn empty_summary_prints_like_evalb() {
        let r = evaluate::<&str, &str>(&[], &[], &EvalbParams::collins()).unwrap();
        assert!(r.summary_all.bracketing_fmeasure().is_nan());
        let text = r.to_evalb_text();
        assert!(text.contains("Bracketing FMeasure       =   -nan\n"));
        // Without brackets the totals line only has the word part.
        assert!(text.contains(&format!("{RULE}\n      0     0     0.00\n")));
    }

    #[test]
    fn label_cutting() {
        assert_eq!(modify_label("NP-SBJ-1"), "NP");
        assert_eq!(modify_label("NP=3"), "NP");
        assert_eq!(modify_label("ADVP-DIR=4"), "ADVP");
        assert_eq!(modify_label("-LRB-"), "");
        assert_eq!(modify_label("S"), "S");
    }

    #[test]
    fn rounding_matches_printf() {
        // glibc rounds the exact binary value, ties to even; so does Rust.
        assert_eq!(format!("{:6.2}", 100.0 / 32.0), "  3.12");
        assert_eq!(format!("{:6.2}", 0.005_f64), "  0.01");
    }

    #[test]
    fn prm_file_is_read_like_evalb() {
        let prm = "##------------------------------------------##\n\
                   ## Debug mode\n\
                   DEBUG 0\n\
                   MAX_ERROR 10\n\
                   CUTOFF_LEN 40\n\
                   LABELED 1\n\
                   DELETE_LABEL TOP\n\
                   DELETE_LABEL -NONE-\n\
                   DELETE_LABEL ,\n\
                   DELETE_LABEL :\n\
                   DELETE_LABEL ``\n\
                   DELETE_LABEL ''\n\
                   DELETE_LABEL .\n\
                   \n\
                   DELETE_LABEL_FOR_LENGTH -NONE-\n\
                   EQ_LABEL ADVP PRT\n";
        assert_eq!(EvalbParams::from_prm(prm).unwrap(), EvalbParams::collins());
        assert!(EvalbParams::from_prm("FOO 1\n").is_err());
        assert!(EvalbParams::from_prm("EQ_LABEL A\n").is_err());
    }

    #[test]
    fn quote_terms_are_reinserted() {
        // QUOTE_LABEL POS and '': the gold "'" is a kept POS word, the test tags it '' (a
        // DELETE_LABEL), so the test is one word short; EVALB re-inserts it and shifts spans.
        let p = EvalbParams {
            quote_labels: vec!["POS".to_string(), "''".to_string()],
            delete_labels: vec!["''".to_string()],
            ..EvalbParams::default()
        };
        let gold = "( (S (NP (NNS dogs) (POS ')) (VP (VB b))) )";
        let test = "( (S (NP (NNS dogs) ('' ')) (VP (VB b))) )";
        let r = evaluate_sentence(gold, test, &p).unwrap();
        assert_eq!(r.status, SentenceStatus::Ok);
        // 3 words, 2 tags equal; all 4 brackets line up again.
        assert_eq!(counts(&r), (4, 4, 4, 0, 3, 2));
        // Without QUOTE_LABEL it is a length mismatch.
        let plain = EvalbParams {
            quote_labels: Vec::new(),
            ..p
        };
        let r = evaluate_sentence(gold, test, &plain).unwrap();
        assert_eq!(r.errors, ["Length unmatch (3|2)"]);
    }
}
