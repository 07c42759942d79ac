//! English constituency parsing as sequence transduction (§6.3 of "Attention Is All You
//! Need"): words in, a linearized tree out.
//!
//! §6.3 casts parsing as translation in the manner of Vinyals et al. (2015), "Grammar as a
//! Foreign Language": the tree is written depth-first as a token sequence in which every
//! constituent opens with `(X`, closes with `)X` and every word is a placeholder `XX`:
//!
//! ```text
//! (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
//! source: The dog barks .
//! target: (S (NP XX XX )NP (VP XX )VP XX )S
//! ```
//!
//! This module holds everything of the task that is not the model:
//!
//! 1. [`parse_trees`] / [`parse_trees_lenient`]: Penn Treebank bracket reading (one tree
//!    per line, or multi-line `.mrg` files), with errors that name the line.
//! 2. [`preprocess`]: the usual clean-up for parsing (no `-NONE-` elements, no function
//!    tags or co-indices, no outer unlabelled bracket).
//! 3. [`linearize`]: tree → (source words, target tokens).
//! 4. [`delinearize`] (strict) and [`repair`] (total): target tokens + words → tree.
//! 5. [`print_tree`]: tree → the bracket string EVALB reads.
//! 6. [`ParseConstraint`]: a prefix automaton for constrained decoding that only lets the
//!    decoder write well-formed trees over exactly the source words.
//!
//! Only `std` is used, so the module builds for every target of the crate.

use std::collections::{BTreeSet, HashMap};
use std::fmt;

/// The one POS tag of the target side: Vinyals et al. (2015) normalise all POS tags to `XX`
/// (the model is not asked to tag), so `XX` is both the word slot of a target sequence and
/// the tag of every preterminal [`delinearize`] builds.
pub const PLACEHOLDER: &str = "XX";

/// Label given to a root that has to be made up: an outer unlabelled bracket holding
/// several constituents or a lone preterminal ([`preprocess`]), or several top-level pieces
/// ([`repair`]). EVALB's `COLLINS.prm` lists `TOP` as a `DELETE_LABEL`, so this bracket is
/// never scored.
pub const TOP: &str = "TOP";

/// POS tag of the Penn Treebank's empty elements (traces, null complementizers, …).
pub const NONE_TAG: &str = "-NONE-";

/// Deepest bracket nesting accepted by the reader and by [`delinearize`] (and built by
/// [`repair`]). Treebank trees are far shallower (a few dozen levels at most); the cap only
/// keeps the recursive tree functions (and the compiler-generated `Drop`) away from stack
/// overflow on hostile input.
pub const MAX_NESTING: usize = 1000;

// ---------------------------------------------------------------------------------------------
// Trees
// ---------------------------------------------------------------------------------------------

/// A constituency tree. Words always sit under their POS tag (the preterminal), as in the
/// Penn Treebank: `(NN dog)` is [`Tree::Word`], every other bracket is [`Tree::Phrase`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Tree {
    /// A constituent. `label` is empty only for the outermost bracket of a treebank tree
    /// as read (`( (S ...) )`); [`preprocess`] removes that bracket.
    Phrase {
        /// Constituent label, e.g. `NP` or, before [`preprocess`], `NP-SBJ-1`.
        label: String,
        /// Sub-trees in sentence order; never empty in trees built by this module.
        children: Vec<Tree>,
    },
    /// A preterminal: a word with its POS tag.
    Word {
        /// POS tag, e.g. `NN`, `-LRB-` or `-NONE-`.
        tag: String,
        /// The word itself.
        word: String,
    },
}

impl Tree {
    /// A constituent.
    pub fn phrase(label: impl Into<String>, children: Vec<Tree>) -> Tree {
        Tree::Phrase {
            label: label.into(),
            children,
        }
    }

    /// A preterminal.
    pub fn word(tag: impl Into<String>, word: impl Into<String>) -> Tree {
        Tree::Word {
            tag: tag.into(),
            word: word.into(),
        }
    }

    /// The constituent label or, for a preterminal, the POS tag.
    pub fn label(&self) -> &str {
        match self {
            Tree::Phrase { label, .. } => label,
            Tree::Word { tag, .. } => tag,
        }
    }

    /// The words in sentence order (the yield), `-NONE-` elements included if present.
    pub fn words(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |_, w| out.push(w));
        out
    }

    /// The POS tags in sentence order.
    pub fn tags(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.for_each_leaf(&mut |t, _| out.push(t));
        out
    }

    /// The same tree with the POS tags replaced, in order, by `tags`; `None` if the number
    /// of tags differs from the number of words.
    ///
    /// Needed before scoring a predicted tree: its tags are all [`PLACEHOLDER`], but EVALB
    /// (`COLLINS.prm`) drops punctuation by *tag* (`,` `:` ` `` ` `''` `.`) in gold and test
    /// alike, so the predicted tree must carry the gold (or a tagger's) tags, or the
    /// sentence lengths differ and EVALB reports `Length unmatch`.
    pub fn with_tags<S: AsRef<str>>(&self, tags: &[S]) -> Option<Tree> {
        let mut next = 0;
        let tree = self.map_tags(&mut |_| {
            let tag = tags.get(next).map(|t| t.as_ref().to_string());
            next += 1;
            tag.unwrap_or_default()
        });
        (next == tags.len()).then_some(tree)
    }

    /// The same tree with every POS tag replaced by [`PLACEHOLDER`]: what
    /// [`delinearize`] gives back for it.
    pub fn with_placeholder_tags(&self) -> Tree {
        self.map_tags(&mut |_| PLACEHOLDER.to_string())
    }

    /// Bracket nesting depth: a preterminal is 0 (it is the `XX` slot of the target), a
    /// constituent is one more than its deepest child. This is the depth
    /// [`ParseConstraint`]'s cap counts.
    pub fn depth(&self) -> usize {
        match self {
            Tree::Word { .. } => 0,
            Tree::Phrase { children, .. } => {
                1 + children.iter().map(Tree::depth).max().unwrap_or(0)
            }
        }
    }

    fn for_each_leaf<'a>(&'a self, f: &mut impl FnMut(&'a str, &'a str)) {
        match self {
            Tree::Phrase { children, .. } => children.iter().for_each(|c| c.for_each_leaf(f)),
            Tree::Word { tag, word } => f(tag, word),
        }
    }

    fn map_tags(&self, f: &mut impl FnMut(&str) -> String) -> Tree {
        match self {
            Tree::Phrase { label, children } => Tree::Phrase {
                label: label.clone(),
                children: children.iter().map(|c| c.map_tags(f)).collect(),
            },
            Tree::Word { tag, word } => Tree::Word {
                tag: f(tag),
                word: word.clone(),
            },
        }
    }
}

impl fmt::Display for Tree {
    /// The bracket string of [`print_tree`] without an added outer bracket.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_tree(self, false))
    }
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// A problem in bracketed tree text, at a 1-based line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeError {
    /// 1-based line of the offending token (for [`TreeErrorKind::Unclosed`], of the
    /// tree's first `(`).
    pub line: usize,
    /// What is wrong.
    pub kind: TreeErrorKind,
}

/// What is wrong with a tree; see [`TreeError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TreeErrorKind {
    /// Unbalanced brackets: the tree starting at the error's line is still open when the
    /// input ends, or when a `(` at the very start of a later line (the next tree, in both
    /// one-per-line and `.mrg` layout) shows it was never closed.
    Unclosed {
        /// Line of that next tree, if one was found.
        next_tree_line: Option<usize>,
    },
    /// Unbalanced brackets: a `)` with no open bracket.
    StrayClose,
    /// A bracket without a label inside a tree, as in `(S ( (NN dog)))`. Only the outermost
    /// bracket may be unlabelled (`( (S ...) )`); a label must follow `(` directly, as EVALB
    /// reads it.
    EmptyLabel,
    /// A word in an unlabelled bracket, as in `( dog)`: a word needs a POS tag.
    MissingTag {
        /// The word.
        word: String,
    },
    /// A word outside any bracket (reported once for a run of such words).
    WordOutsideBracket {
        /// The first word of the run.
        word: String,
    },
    /// The empty tree `()`.
    EmptyTree,
    /// A labelled bracket with nothing in it, as in `(NP )`.
    EmptyConstituent {
        /// Its label.
        label: String,
    },
    /// A preterminal with several words, as in `(NN big dog)`.
    SeveralWords {
        /// Its tag.
        tag: String,
        /// How many words it holds.
        count: usize,
    },
    /// A word next to bracketed constituents, as in `(NP (DT the) dog)`.
    WordBesideBrackets {
        /// Label of the bracket holding both.
        label: String,
        /// The word.
        word: String,
    },
    /// Brackets nested deeper than [`MAX_NESTING`].
    TooDeep {
        /// The limit.
        limit: usize,
    },
}

impl fmt::Display for TreeErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeErrorKind::Unclosed {
                next_tree_line: Some(next),
            } => write!(
                f,
                "unbalanced brackets: the tree starting here is not closed before the next \
                 tree (line {next})"
            ),
            TreeErrorKind::Unclosed {
                next_tree_line: None,
            } => write!(
                f,
                "unbalanced brackets: the tree starting here is not closed at the end of the input"
            ),
            TreeErrorKind::StrayClose => write!(f, "unbalanced brackets: `)` closes nothing"),
            TreeErrorKind::EmptyLabel => write!(
                f,
                "bracket without a label inside a tree (only the outermost bracket may be \
                 unlabelled)"
            ),
            TreeErrorKind::MissingTag { word } => write!(f, "word `{word}` has no POS tag"),
            TreeErrorKind::WordOutsideBracket { word } => {
                write!(f, "word `{word}` outside any bracket")
            }
            TreeErrorKind::EmptyTree => write!(f, "empty tree `()`"),
            TreeErrorKind::EmptyConstituent { label } => {
                write!(f, "empty constituent `({label} )`")
            }
            TreeErrorKind::SeveralWords { tag, count } => write!(
                f,
                "preterminal `({tag}` holds {count} words (a POS tag takes exactly one word)"
            ),
            TreeErrorKind::WordBesideBrackets { label, word } => write!(
                f,
                "word `{word}` next to bracketed constituents inside `({label}`"
            ),
            TreeErrorKind::TooDeep { limit } => {
                write!(f, "brackets nested deeper than {limit}")
            }
        }
    }
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.kind)
    }
}

impl std::error::Error for TreeError {}

/// Trees read by [`parse_trees_lenient`], and what was skipped.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReadReport {
    /// The well-formed trees, in input order.
    pub trees: Vec<Tree>,
    /// One entry per skipped malformed tree (or stray `)`, or run of stray words), in input
    /// order.
    pub skipped: Vec<TreeError>,
}

/// Reads every tree of a Penn Treebank text, failing on the first malformed one.
///
/// A tree is a top-level balanced-parenthesis span, so one tree per line and the
/// multi-line indented `.mrg` layout read alike; any whitespace separates tokens, and
/// `((S`, `( (S`, `))` and `)(` are all fine. A label is the text right after `(` (as in
/// EVALB); only a tree's outermost bracket may be unlabelled, and it is kept as a
/// [`Tree::Phrase`] with an empty label (see [`preprocess`]). Words and labels cannot
/// contain `(`, `)` or whitespace (the treebank writes brackets as `-LRB-`, `-RRB-`).
///
/// Never panics; the error names the line and the problem ([`TreeErrorKind`]).
pub fn parse_trees(text: &str) -> Result<Vec<Tree>, TreeError> {
    let report = read(text, true);
    match report.skipped.into_iter().next() {
        Some(error) => Err(error),
        None => Ok(report.trees),
    }
}

/// Reads every well-formed tree of a Penn Treebank text and reports each malformed one
/// (with its line and reason) instead of failing: what a `prepare` step wants, to say how
/// many trees it skipped and why.
///
/// Recovery: an error inside a balanced span skips that span; a stray `)` or a run of
/// words outside brackets is skipped on its own (trees before and after are kept); a tree
/// whose brackets never close — or that only balances by borrowing a `)` from a later tree
/// and is malformed as a result — is skipped up to the next `(` in the first column of a
/// line: in both one-tree-per-line files and `.mrg` files (whose continuation lines are
/// indented) that is where the next tree begins. Well-formed input is read as balanced
/// spans whatever its layout.
pub fn parse_trees_lenient(text: &str) -> ReadReport {
    read(text, false)
}

/// A token of bracketed text.
#[derive(Clone, Copy, Debug)]
enum Tok<'a> {
    /// `(` with the label that directly follows it (possibly empty); `at_line_start`: the
    /// `(` is the first character of its line.
    Open {
        label: &'a str,
        at_line_start: bool,
    },
    Close,
    Atom(&'a str),
}

#[derive(Clone, Copy, Debug)]
struct Token<'a> {
    tok: Tok<'a>,
    line: usize,
}

fn is_delimiter(c: char) -> bool {
    c == '(' || c == ')' || c.is_whitespace()
}

/// The tokens of a text, produced lazily so that reading a large treebank file holds one
/// tree's tokens at a time.
struct Tokens<'a> {
    text: &'a str,
    chars: std::iter::Peekable<std::str::CharIndices<'a>>,
    line: usize,
    line_start: bool,
}

impl<'a> Tokens<'a> {
    fn new(text: &'a str) -> Self {
        Tokens {
            text,
            chars: text.char_indices().peekable(),
            line: 1,
            line_start: true,
        }
    }

    /// End (byte offset) of the run of non-delimiters starting at `start`.
    fn run_end(&mut self, start: usize) -> usize {
        let mut end = start;
        while let Some(&(j, d)) = self.chars.peek() {
            if is_delimiter(d) {
                break;
            }
            end = j + d.len_utf8();
            self.chars.next();
        }
        end
    }
}

impl<'a> Iterator for Tokens<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        while let Some((i, c)) = self.chars.next() {
            let at_line_start = self.line_start;
            self.line_start = c == '\n';
            if c == '\n' {
                self.line += 1;
                continue;
            }
            if c.is_whitespace() {
                continue;
            }
            let tok = match c {
                '(' => {
                    let end = self.run_end(i + 1);
                    Tok::Open {
                        label: &self.text[i + 1..end],
                        at_line_start,
                    }
                }
                ')' => Tok::Close,
                _ => {
                    let end = self.run_end(i + c.len_utf8());
                    Tok::Atom(&self.text[i..end])
                }
            };
            return Some(Token {
                tok,
                line: self.line,
            });
        }
        None
    }
}

fn read(text: &str, stop_at_first_error: bool) -> ReadReport {
    let mut report = ReadReport::default();
    read_tokens(Tokens::new(text), None, stop_at_first_error, &mut report);
    report
}

/// The reading loop over a token stream: trees, stray `)`, stray words. `end_line` is the
/// line of the token after the stream (`None`: the end of the input), for the message of a
/// tree left open at the end.
fn read_tokens<'a>(
    tokens: impl Iterator<Item = Token<'a>>,
    end_line: Option<usize>,
    stop_at_first_error: bool,
    report: &mut ReadReport,
) {
    let mut tokens = tokens.peekable();
    let mut span = Vec::new();
    while let Some(token) = tokens.next() {
        if stop_at_first_error && !report.skipped.is_empty() {
            return;
        }
        match token.tok {
            Tok::Close => {
                report
                    .skipped
                    .push(TreeError::new(token.line, TreeErrorKind::StrayClose));
            }
            Tok::Atom(word) => {
                let word = word.to_string();
                report.skipped.push(TreeError::new(
                    token.line,
                    TreeErrorKind::WordOutsideBracket { word },
                ));
                while tokens.next_if(|t| matches!(t.tok, Tok::Atom(_))).is_some() {}
            }
            Tok::Open { .. } => {
                // The balanced span, or everything up to the end of the stream.
                span.clear();
                span.push(token);
                let mut depth = 1usize;
                while depth > 0 {
                    let Some(next) = tokens.next() else { break };
                    match next.tok {
                        Tok::Open { .. } => depth += 1,
                        Tok::Close => depth -= 1,
                        Tok::Atom(_) => {}
                    }
                    span.push(next);
                }
                read_span(&span, depth == 0, end_line, stop_at_first_error, report);
            }
        }
    }
}

fn is_first_column_open(token: &Token<'_>) -> bool {
    matches!(
        token.tok,
        Tok::Open {
            at_line_start: true,
            ..
        }
    )
}

/// Reads the tree of one span (`closed`: its brackets balance) into `report`.
fn read_span(
    span: &[Token<'_>],
    closed: bool,
    end_line: Option<usize>,
    stop_at_first_error: bool,
    report: &mut ReadReport,
) {
    let result = if closed {
        build_tree(span)
    } else {
        let kind = TreeErrorKind::Unclosed {
            next_tree_line: end_line,
        };
        Err(TreeError::new(span[0].line, kind))
    };
    let error = match result {
        Ok(tree) => return report.trees.push(tree),
        Err(error) => error,
    };
    // A broken span that runs over a `(` in the first column of a line (unclosed, or only
    // balanced by a `)` borrowed from a later tree) has swallowed the trees that start
    // there: both one-tree-per-line files and `.mrg` files (whose continuation lines are
    // indented) put each tree's first `(` in the first column. Report this tree as not
    // closed before the next one, and read each first-column piece on its own (a piece
    // never reaches past the next one, so each token is read at most twice).
    let starts: Vec<usize> = (1..span.len())
        .filter(|&j| is_first_column_open(&span[j]))
        .collect();
    let Some(&first) = starts.first() else {
        return report.skipped.push(error);
    };
    let kind = TreeErrorKind::Unclosed {
        next_tree_line: Some(span[first].line),
    };
    report.skipped.push(TreeError::new(span[0].line, kind));
    for (k, &from) in starts.iter().enumerate() {
        let to = starts.get(k + 1).copied().unwrap_or(span.len());
        // A piece left open ends where the next begins; the last one can only be left open
        // if the whole span was, i.e. at the end of the stream.
        let after = starts.get(k + 1).map(|&j| span[j].line).or(end_line);
        read_tokens(
            span[from..to].iter().copied(),
            after,
            stop_at_first_error,
            report,
        );
    }
}

impl TreeError {
    fn new(line: usize, kind: TreeErrorKind) -> Self {
        TreeError { line, kind }
    }
}

/// Checks the nesting depth of a balanced span, then builds its tree.
fn build_tree(span: &[Token<'_>]) -> Result<Tree, TreeError> {
    let mut depth = 0usize;
    for token in span {
        match token.tok {
            Tok::Open { .. } => {
                depth += 1;
                if depth > MAX_NESTING {
                    let kind = TreeErrorKind::TooDeep { limit: MAX_NESTING };
                    return Err(TreeError::new(token.line, kind));
                }
            }
            Tok::Close => depth = depth.saturating_sub(1),
            Tok::Atom(_) => {}
        }
    }
    build_checked(span)
}

/// An open bracket while building.
struct Frame<'a> {
    label: &'a str,
    line: usize,
    children: Vec<Tree>,
    words: Vec<(&'a str, usize)>,
}

/// Builds the tree of one balanced span (explicit stack: no recursion on input depth).
fn build_checked(span: &[Token<'_>]) -> Result<Tree, TreeError> {
    let mut stack: Vec<Frame<'_>> = Vec::new();
    for token in span {
        match token.tok {
            Tok::Open { label, .. } => {
                if label.is_empty() && !stack.is_empty() {
                    return Err(TreeError::new(token.line, TreeErrorKind::EmptyLabel));
                }
                stack.push(Frame {
                    label,
                    line: token.line,
                    children: Vec::new(),
                    words: Vec::new(),
                });
            }
            Tok::Atom(word) => match stack.last_mut() {
                Some(frame) => frame.words.push((word, token.line)),
                None => {
                    let kind = TreeErrorKind::WordOutsideBracket {
                        word: word.to_string(),
                    };
                    return Err(TreeError::new(token.line, kind));
                }
            },
            Tok::Close => {
                let Some(frame) = stack.pop() else {
                    return Err(TreeError::new(token.line, TreeErrorKind::StrayClose));
                };
                let node = finish_frame(frame)?;
                match stack.last_mut() {
                    Some(parent) => parent.children.push(node),
                    None => return Ok(node),
                }
            }
        }
    }
    // Not reached for a balanced span; kept so that no input can panic.
    let line = span.first().map_or(1, |t| t.line);
    Err(TreeError::new(
        line,
        TreeErrorKind::Unclosed {
            next_tree_line: None,
        },
    ))
}

fn finish_frame(frame: Frame<'_>) -> Result<Tree, TreeError> {
    let Frame {
        label,
        line,
        children,
        mut words,
    } = frame;
    let err = |line, kind| Err(TreeError::new(line, kind));
    match (children.is_empty(), words.len()) {
        // Inner unlabelled brackets were refused when opened: this is the outermost one.
        (true, 0) if label.is_empty() => err(line, TreeErrorKind::EmptyTree),
        (true, 0) => err(
            line,
            TreeErrorKind::EmptyConstituent {
                label: label.to_string(),
            },
        ),
        (true, 1) => {
            let (word, word_line) = words.remove(0);
            if label.is_empty() {
                err(
                    word_line,
                    TreeErrorKind::MissingTag {
                        word: word.to_string(),
                    },
                )
            } else {
                Ok(Tree::word(label, word))
            }
        }
        (true, count) => err(
            line,
            TreeErrorKind::SeveralWords {
                tag: label.to_string(),
                count,
            },
        ),
        (false, 0) => Ok(Tree::phrase(label, children)),
        (false, _) => {
            let (word, word_line) = words[0];
            err(
                word_line,
                TreeErrorKind::WordBesideBrackets {
                    label: label.to_string(),
                    word: word.to_string(),
                },
            )
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Preprocessing
// ---------------------------------------------------------------------------------------------

/// The usual preparation of treebank trees for parsing experiments:
///
/// * preterminals tagged `-NONE-` (traces, empty elements) are removed, then every
///   constituent left without children, repeatedly (`(SBAR (-NONE- 0) (S (-NONE- *T*-1)))`
///   disappears entirely);
/// * phrase labels lose function tags and co-indices ([`strip_function_tags`]:
///   `NP-SBJ-1` → `NP`, `NP=2` → `NP`, `PP-LOC-CLR` → `PP`); POS tags are kept as written
///   (`-LRB-`, `PRP$`, …), as EVALB compares them as written;
/// * the outer unlabelled bracket is dropped: `( (S ...) )` becomes the `S` tree. When that
///   bracket holds several constituents or just a preterminal, and when the tree is a bare
///   preterminal, the root is labelled [`TOP`] instead, so every result is a
///   [`Tree::Phrase`] with one root bracket (which the target linearization needs) and the
///   made-up bracket is not scored by EVALB.
///
/// Unary chains are kept (EVALB scores them). Returns `None` if nothing but `-NONE-`
/// elements was left.
pub fn preprocess(tree: &Tree) -> Option<Tree> {
    match clean(tree)? {
        Tree::Phrase {
            label,
            mut children,
        } if label.is_empty() => {
            if children.len() == 1 && matches!(children[0], Tree::Phrase { .. }) {
                children.pop()
            } else {
                Some(Tree::phrase(TOP, children))
            }
        }
        word @ Tree::Word { .. } => Some(Tree::phrase(TOP, vec![word])),
        phrase => Some(phrase),
    }
}

fn clean(tree: &Tree) -> Option<Tree> {
    match tree {
        Tree::Word { tag, .. } if tag == NONE_TAG => None,
        Tree::Word { .. } => Some(tree.clone()),
        Tree::Phrase { label, children } => {
            let children: Vec<Tree> = children.iter().filter_map(clean).collect();
            (!children.is_empty()).then(|| Tree::phrase(strip_function_tags(label), children))
        }
    }
}

/// A phrase label without its function tags and co-indices: the part before the first `-`
/// or `=` (`NP-SBJ-1` → `NP`, `NP=2` → `NP`, `S-TPC-1` → `S`, `PP-LOC-CLR` → `PP`), the
/// cut EVALB makes. Labels that *start* with `-` or `=` are punctuation-made names like
/// `-NONE-` or `-LRB-` and are returned unchanged (EVALB would cut them to nothing; no
/// Penn Treebank phrase label starts so). Other characters are kept (`ADVP|PRT` stays, as
/// in EVALB).
pub fn strip_function_tags(label: &str) -> &str {
    if label.starts_with(['-', '=']) {
        return label;
    }
    match label.find(['-', '=']) {
        Some(cut) => &label[..cut],
        None => label,
    }
}

// ---------------------------------------------------------------------------------------------
// Linearization
// ---------------------------------------------------------------------------------------------

/// A target token, as [`delinearize`], [`repair`] and [`ParseConstraint`] see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetToken<'a> {
    /// `(X`: opens a constituent labelled `X`.
    Open(&'a str),
    /// `)X`: closes the innermost constituent, which must be labelled `X`.
    Close(&'a str),
    /// [`PLACEHOLDER`]: the next word.
    Slot,
    /// Anything else (special tokens, sub-word pieces, …).
    Other,
}

impl<'a> TargetToken<'a> {
    /// Classifies a token string. A label must be non-empty and free of brackets and
    /// whitespace.
    pub fn classify(token: &'a str) -> Self {
        if token == PLACEHOLDER {
            return TargetToken::Slot;
        }
        let valid = |label: &str| !label.is_empty() && !label.contains(is_delimiter);
        if let Some(label) = token.strip_prefix('(').filter(|l| valid(l)) {
            TargetToken::Open(label)
        } else if let Some(label) = token.strip_prefix(')').filter(|l| valid(l)) {
            TargetToken::Close(label)
        } else {
            TargetToken::Other
        }
    }
}

/// The opening target token of a label: `NP` → `(NP`.
pub fn open_token(label: &str) -> String {
    format!("({label}")
}

/// The closing target token of a label: `NP` → `)NP`.
pub fn close_token(label: &str) -> String {
    format!("){label}")
}

/// Linearizes a tree as Vinyals et al. (2015) do (§6.3): depth-first, `(X` … `)X` around
/// each constituent, [`PLACEHOLDER`] for each preterminal (the POS tag is dropped).
/// Returns `(source words, target tokens)`:
///
/// ```text
/// (S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))
/// → ["The", "dog", "barks", "."],
///   ["(S", "(NP", "XX", "XX", ")NP", "(VP", "XX", ")VP", "XX", ")S"]
/// ```
///
/// Meant for [`preprocess`]ed trees, whose labels are non-empty (an empty label would give
/// the tokens `(` and `)`, which nothing reads back).
pub fn linearize(tree: &Tree) -> (Vec<String>, Vec<String>) {
    fn walk(tree: &Tree, words: &mut Vec<String>, tokens: &mut Vec<String>) {
        match tree {
            Tree::Phrase { label, children } => {
                tokens.push(open_token(label));
                for child in children {
                    walk(child, words, tokens);
                }
                tokens.push(close_token(label));
            }
            Tree::Word { word, .. } => {
                words.push(word.clone());
                tokens.push(PLACEHOLDER.to_string());
            }
        }
    }
    let (mut words, mut tokens) = (Vec::new(), Vec::new());
    walk(tree, &mut words, &mut tokens);
    (words, tokens)
}

/// The target-side tokens of a set of trees: [`PLACEHOLDER`] then `(X`, `)X` for every
/// phrase label, sorted by label. These should be whole tokens of the target vocabulary
/// (e.g. added tokens of the tokenizer), so that [`ParseConstraint`] can steer them.
pub fn target_vocabulary<'a>(trees: impl IntoIterator<Item = &'a Tree>) -> Vec<String> {
    fn labels<'a>(tree: &'a Tree, out: &mut BTreeSet<&'a str>) {
        if let Tree::Phrase { label, children } = tree {
            if !label.is_empty() {
                out.insert(label);
            }
            children.iter().for_each(|c| labels(c, out));
        }
    }
    let mut set = BTreeSet::new();
    trees.into_iter().for_each(|t| labels(t, &mut set));
    let mut out = vec![PLACEHOLDER.to_string()];
    for label in set {
        out.push(open_token(label));
        out.push(close_token(label));
    }
    out
}

/// Why a target sequence is not a tree over the given words ([`delinearize`]). Positions
/// are 0-based token indices.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LinearError {
    /// No tokens at all.
    Empty,
    /// A token that is neither `(X`, `)X` nor [`PLACEHOLDER`].
    UnknownToken {
        /// Where.
        position: usize,
        /// The token.
        token: String,
    },
    /// A word slot before the root bracket opened.
    SlotOutsideBracket {
        /// Where.
        position: usize,
    },
    /// A closing token with no open bracket (at the start of the sequence).
    StrayClose {
        /// Where.
        position: usize,
        /// The token.
        token: String,
    },
    /// `)B` while the innermost open bracket is `(A`.
    Mismatch {
        /// Where.
        position: usize,
        /// Label of the innermost open bracket.
        open: String,
        /// Label of the closing token.
        close: String,
    },
    /// `(X` closed with no child (`(NP )NP`).
    EmptyConstituent {
        /// Position of the closing token.
        position: usize,
        /// The label.
        label: String,
    },
    /// Brackets still open at the end.
    Unclosed {
        /// Label of the innermost open bracket.
        label: String,
        /// How many brackets are open.
        open: usize,
    },
    /// Tokens after the root bracket closed (a second root, or stray tokens).
    AfterRoot {
        /// Position of the first such token.
        position: usize,
        /// The token.
        token: String,
    },
    /// The number of word slots differs from the number of words.
    WordCount {
        /// Slots in the sequence.
        slots: usize,
        /// Words given.
        words: usize,
    },
    /// Brackets nested deeper than [`MAX_NESTING`].
    TooDeep {
        /// Position of the opening token past the limit.
        position: usize,
    },
}

impl fmt::Display for LinearError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinearError::Empty => write!(f, "empty target sequence"),
            LinearError::UnknownToken { position, token } => {
                write!(f, "token {position} `{token}` is not a tree token")
            }
            LinearError::SlotOutsideBracket { position } => {
                write!(f, "token {position}: word slot outside any bracket")
            }
            LinearError::StrayClose { position, token } => {
                write!(f, "token {position} `{token}` closes nothing")
            }
            LinearError::Mismatch {
                position,
                open,
                close,
            } => write!(f, "token {position} `){close}` closes `({open}`"),
            LinearError::EmptyConstituent { position, label } => {
                write!(f, "token {position}: empty constituent `({label} ){label}`")
            }
            LinearError::Unclosed { label, open } => {
                write!(f, "{open} bracket(s) never closed (innermost `({label}`)")
            }
            LinearError::AfterRoot { position, token } => {
                write!(f, "token {position} `{token}` follows the closed root")
            }
            LinearError::WordCount { slots, words } => {
                write!(f, "{slots} word slot(s) for {words} word(s)")
            }
            LinearError::TooDeep { position } => write!(
                f,
                "token {position}: brackets nested deeper than {MAX_NESTING}"
            ),
        }
    }
}

impl std::error::Error for LinearError {}

/// Rebuilds the tree of a target sequence, filling the [`PLACEHOLDER`] slots with `words`
/// in order; every preterminal gets the tag [`PLACEHOLDER`] (the model predicts no tags;
/// see [`Tree::with_tags`]). The inverse of [`linearize`] up to POS tags:
/// `delinearize(&t, &w) == Ok(tree.with_placeholder_tags())` for `(w, t) = linearize(tree)`.
///
/// Strict: anything that is not exactly one well-formed bracketed tree with one slot per
/// word is an error ([`LinearError`]), never a panic. [`repair`] never fails.
pub fn delinearize<T: AsRef<str>, W: AsRef<str>>(
    tokens: &[T],
    words: &[W],
) -> Result<Tree, LinearError> {
    if tokens.is_empty() {
        return Err(LinearError::Empty);
    }
    let mut stack: Vec<(&str, Vec<Tree>)> = Vec::new();
    let mut root = None;
    let mut slots = 0;
    for (position, token) in tokens.iter().enumerate() {
        let token = token.as_ref();
        if root.is_some() {
            return Err(LinearError::AfterRoot {
                position,
                token: token.to_string(),
            });
        }
        match TargetToken::classify(token) {
            TargetToken::Other => {
                return Err(LinearError::UnknownToken {
                    position,
                    token: token.to_string(),
                });
            }
            TargetToken::Open(label) => {
                if stack.len() == MAX_NESTING {
                    return Err(LinearError::TooDeep { position });
                }
                stack.push((label, Vec::new()));
            }
            TargetToken::Slot => {
                let Some((_, children)) = stack.last_mut() else {
                    return Err(LinearError::SlotOutsideBracket { position });
                };
                let word = words.get(slots).map_or("", |w| w.as_ref());
                children.push(Tree::word(PLACEHOLDER, word));
                slots += 1;
            }
            TargetToken::Close(label) => {
                let Some((open, children)) = stack.pop() else {
                    return Err(LinearError::StrayClose {
                        position,
                        token: token.to_string(),
                    });
                };
                if open != label {
                    return Err(LinearError::Mismatch {
                        position,
                        open: open.to_string(),
                        close: label.to_string(),
                    });
                }
                if children.is_empty() {
                    return Err(LinearError::EmptyConstituent {
                        position,
                        label: label.to_string(),
                    });
                }
                let node = Tree::phrase(label, children);
                match stack.last_mut() {
                    Some((_, parent)) => parent.push(node),
                    None => root = Some(node),
                }
            }
        }
    }
    let Some(root) = root else {
        let open = stack.len();
        let label = stack.pop().map_or("", |(l, _)| l).to_string();
        return Err(LinearError::Unclosed { label, open });
    };
    if slots != words.len() {
        return Err(LinearError::WordCount {
            slots,
            words: words.len(),
        });
    }
    Ok(root)
}

/// Turns any token sequence into a tree over exactly `words` (in order), for output decoded
/// without [`ParseConstraint`] (or cut off by a length limit). Vinyals et al. (2015) report
/// that malformed outputs are rare and fix them with simple bracket balancing; this is
/// such a fix, made total:
///
/// * tokens that are not tree tokens are dropped, and so are `(X` past [`MAX_NESTING`];
/// * `)X` closes the innermost open `(X`, closing any brackets opened inside it first
///   (their closers are taken as missing); a `)X` with no open `(X` is dropped;
/// * a slot takes the next word; slots beyond the words are dropped, and words left over
///   at the end join the innermost open bracket (or else the last top-level constituent);
/// * brackets still open at the end are closed; constituents left empty are dropped;
/// * several top-level pieces (or a bare word) are wrapped in a [`TOP`] root.
///
/// A well-formed sequence comes back exactly as [`delinearize`] gives it. With no words
/// the result is an empty `TOP` bracket (no tree has zero words).
pub fn repair<T: AsRef<str>, W: AsRef<str>>(tokens: &[T], words: &[W]) -> Tree {
    struct Builder {
        stack: Vec<(String, Vec<Tree>)>,
        top: Vec<Tree>,
    }
    impl Builder {
        fn attach(&mut self, node: Tree) {
            match self.stack.last_mut() {
                Some((_, children)) => children.push(node),
                None => self.top.push(node),
            }
        }
        fn close(&mut self) {
            if let Some((label, children)) = self.stack.pop()
                && !children.is_empty()
            {
                self.attach(Tree::phrase(label, children));
            }
        }
    }
    let mut b = Builder {
        stack: Vec::new(),
        top: Vec::new(),
    };
    let mut words = words.iter().map(|w| Tree::word(PLACEHOLDER, w.as_ref()));
    for token in tokens {
        match TargetToken::classify(token.as_ref()) {
            TargetToken::Other => {}
            TargetToken::Open(label) => {
                if b.stack.len() < MAX_NESTING {
                    b.stack.push((label.to_string(), Vec::new()));
                }
            }
            TargetToken::Slot => {
                if let Some(leaf) = words.next() {
                    b.attach(leaf);
                }
            }
            TargetToken::Close(label) => {
                if let Some(k) = b.stack.iter().rposition(|(open, _)| open == label) {
                    while b.stack.len() > k {
                        b.close();
                    }
                }
            }
        }
    }
    for leaf in words {
        if let Some((_, children)) = b.stack.last_mut() {
            children.push(leaf);
        } else if let Some(Tree::Phrase { children, .. }) = b.top.last_mut() {
            children.push(leaf);
        } else {
            b.top.push(leaf);
        }
    }
    while !b.stack.is_empty() {
        b.close();
    }
    let mut top = b.top;
    if top.len() == 1
        && matches!(top[0], Tree::Phrase { .. })
        && let Some(root) = top.pop()
    {
        return root;
    }
    Tree::phrase(TOP, top)
}

// ---------------------------------------------------------------------------------------------
// Printing
// ---------------------------------------------------------------------------------------------

/// The bracket string of a tree in the format EVALB (and [`parse_trees`]) reads:
/// `(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))`, one line, one space between
/// siblings, each word's `)` right after the word.
///
/// `outer_bracket` wraps the tree in the treebank's unlabelled bracket,
/// `( (S ...) )` (EVALB counts that bracket on both sides alike). A tree whose root is
/// already unlabelled (as read, before [`preprocess`]) is printed as it is either way.
///
/// Reading the string back with [`parse_trees`] gives the same tree for every tree the
/// reader can produce. Characters the format cannot carry are escaped the treebank's way:
/// `(` → `-LRB-`, `)` → `-RRB-`, whitespace → `_`, and an empty word, tag or (inner) label
/// is written `_`. A constituent without children prints as `(X)`, which is not a tree.
pub fn print_tree(tree: &Tree, outer_bracket: bool) -> String {
    fn atom(out: &mut String, text: &str) {
        if text.is_empty() {
            out.push('_');
        }
        for c in text.chars() {
            match c {
                '(' => out.push_str("-LRB-"),
                ')' => out.push_str("-RRB-"),
                c if c.is_whitespace() => out.push('_'),
                c => out.push(c),
            }
        }
    }
    fn write(tree: &Tree, out: &mut String, root: bool) {
        match tree {
            Tree::Phrase { label, children } => {
                // Only the treebank's outer bracket is unlabeled, written `( (S ...) )`.
                let outer = root && label.is_empty();
                out.push('(');
                if !outer {
                    atom(out, label);
                }
                for child in children {
                    out.push(' ');
                    write(child, out, false);
                }
                out.push_str(if outer { " )" } else { ")" });
            }
            Tree::Word { tag, word } => {
                out.push('(');
                atom(out, tag);
                out.push(' ');
                atom(out, word);
                out.push(')');
            }
        }
    }
    let mut out = String::new();
    let unlabelled = matches!(tree, Tree::Phrase { label, .. } if label.is_empty());
    if outer_bracket && !unlabelled {
        out.push_str("( ");
        write(tree, &mut out, false);
        out.push_str(" )");
    } else {
        write(tree, &mut out, true);
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Constrained decoding
// ---------------------------------------------------------------------------------------------

/// What a vocabulary id is to the tree automaton.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Never,
    Eos,
    Slot,
    Open(u32),
    Close(u32),
}

/// A prefix automaton over target ids that lets a decoder write only well-formed
/// linearized trees over a given number of source words.
///
/// Every sequence it lets through to EOS [`delinearize`]s: one root bracket; each `)X`
/// closes the innermost open `(X`; no constituent is empty (a bracket may close only once
/// it has a child); exactly `n_words` [`PLACEHOLDER`] slots; EOS only after the root has
/// closed. Other tokens (special tokens, sub-words, `(X` without a `)X` in the vocabulary)
/// are never allowed.
///
/// It never dead-ends: from every prefix it allows, a completion exists (place the
/// remaining words, then close the open brackets), because a bracket may open only while
/// a word is left to fill it, and the root may close only once every word is placed.
///
/// Caps (both configurable with [`ParseConstraint::with_caps`]):
///
/// * bracket depth at most [`ParseConstraint::DEFAULT_MAX_DEPTH`] (counting the root as 1,
///   slots as 0; see [`Tree::depth`]);
/// * at most [`ParseConstraint::DEFAULT_MAX_OPEN_RUN`] opening tokens in a row, which
///   bounds unary chains (in `(A (B (C XX …`, a unary chain A→B→C is always a run of
///   consecutive openings).
///
/// The depth cap guarantees termination: every bracket spans at least one word and the
/// brackets spanning a word are all open when its slot is written, so there are at most
/// `n_words · max_depth` brackets and any sequence is at most
/// `2 · n_words · max_depth + n_words` tokens long before EOS. The defaults leave room above
/// the Penn Treebank: after [`preprocess`] the PTB sample (3,914 trees) already peaks at
/// depth 28 and 6 openings in a row, so the depth cap is 64 rather than 40, as the full WSJ
/// is 13 times larger. [`ParseConstraint::restrict_within`] adds a hard length budget.
///
/// Prefixes it would not have produced (an unknown or forbidden token) and `n_words == 0`
/// (no tree exists) allow only EOS, so the hypothesis ends and [`repair`] takes over.
#[derive(Clone, Debug)]
pub struct ParseConstraint {
    kinds: Vec<Kind>,
    eos_id: u32,
    max_depth: usize,
    max_open_run: usize,
}

/// The automaton's state after a prefix.
#[derive(Clone, Debug, Default)]
struct State {
    /// Open brackets, outermost first: (label, has a child yet).
    stack: Vec<(u32, bool)>,
    /// Slots written.
    placed: usize,
    /// The root has closed.
    done: bool,
    /// Opening tokens in a row at the end of the prefix.
    open_run: usize,
    /// Tokens so far.
    len: usize,
}

impl ParseConstraint {
    /// Default bracket-depth cap.
    pub const DEFAULT_MAX_DEPTH: usize = 64;
    /// Default cap on consecutive opening tokens.
    pub const DEFAULT_MAX_OPEN_RUN: usize = 12;

    /// Builds the automaton from the target vocabulary (`vocab[id]` is the token string of
    /// `id`) and the EOS id. `(X`, `)X` and [`PLACEHOLDER`] must be whole tokens; every
    /// other entry is never allowed.
    pub fn new<S: AsRef<str>>(vocab: &[S], eos_id: u32) -> Self {
        Self::build(vocab, eos_id, "")
    }

    /// As [`ParseConstraint::new`] for a vocabulary whose word-initial tokens carry a
    /// marker, e.g. SentencePiece's `▁` (`▁(NP`, `▁XX`): only tokens starting with `marker`
    /// are tree tokens, read without it; tokens without it (word continuations) are never
    /// allowed.
    pub fn with_word_marker<S: AsRef<str>>(vocab: &[S], eos_id: u32, marker: &str) -> Self {
        Self::build(vocab, eos_id, marker)
    }

    fn build<S: AsRef<str>>(vocab: &[S], eos_id: u32, marker: &str) -> Self {
        fn classify<'a>(token: &'a str, marker: &str) -> TargetToken<'a> {
            token
                .strip_prefix(marker)
                .map_or(TargetToken::Other, TargetToken::classify)
        }
        // Labels are numbered from their closing tokens: an `(X` that could never be closed
        // must never be opened.
        let mut labels: HashMap<String, u32> = HashMap::new();
        for token in vocab {
            if let TargetToken::Close(label) = classify(token.as_ref(), marker) {
                let next = labels.len() as u32;
                labels.entry(label.to_string()).or_insert(next);
            }
        }
        let kinds = vocab
            .iter()
            .enumerate()
            .map(|(id, token)| {
                if id as u64 == eos_id as u64 {
                    return Kind::Eos;
                }
                match classify(token.as_ref(), marker) {
                    TargetToken::Slot => Kind::Slot,
                    TargetToken::Open(l) => labels.get(l).map_or(Kind::Never, |&i| Kind::Open(i)),
                    TargetToken::Close(l) => labels.get(l).map_or(Kind::Never, |&i| Kind::Close(i)),
                    TargetToken::Other => Kind::Never,
                }
            })
            .collect();
        ParseConstraint {
            kinds,
            eos_id,
            max_depth: Self::DEFAULT_MAX_DEPTH,
            max_open_run: Self::DEFAULT_MAX_OPEN_RUN,
        }
    }

    /// The same automaton with other caps (each at least 1): bracket depth and consecutive
    /// opening tokens.
    pub fn with_caps(mut self, max_depth: usize, max_open_run: usize) -> Self {
        self.max_depth = max_depth.max(1);
        self.max_open_run = max_open_run.max(1);
        self
    }

    /// The depth cap.
    pub fn max_depth(&self) -> usize {
        self.max_depth
    }

    /// The cap on consecutive opening tokens.
    pub fn max_open_run(&self) -> usize {
        self.max_open_run
    }

    /// Sets `allowed[id] = false` for every id that may not follow `prefix` (output ids so
    /// far, without BOS) in a tree over `n_words` words; never sets anything to `true`.
    /// Ids beyond the vocabulary are forbidden. Cost: O(|prefix| + |allowed|).
    pub fn restrict(&self, n_words: usize, prefix: &[u32], allowed: &mut [bool]) {
        self.restrict_impl(n_words, None, prefix, allowed);
    }

    /// As [`ParseConstraint::restrict`], and the output must also end within `max_len`
    /// tokens, EOS included: a token is allowed only if the shortest completion after it
    /// still fits. Use it when the decoder cuts hypotheses at a maximum length (§6.3: input
    /// length + 300), so a cut never leaves a broken tree. If even the shortest tree
    /// (`n_words + 3` tokens with EOS) does not fit, the budget is ignored.
    pub fn restrict_within(
        &self,
        n_words: usize,
        max_len: usize,
        prefix: &[u32],
        allowed: &mut [bool],
    ) {
        self.restrict_impl(n_words, Some(max_len), prefix, allowed);
    }

    fn restrict_impl(
        &self,
        n_words: usize,
        max_len: Option<usize>,
        prefix: &[u32],
        allowed: &mut [bool],
    ) {
        let state = self.replay(n_words, max_len, prefix);
        let budget = state
            .as_ref()
            .and_then(|state| self.budget(state, n_words, max_len));
        let rule = |id: usize| {
            state
                .as_ref()
                .is_some_and(|state| self.permits(state, self.kind(id), n_words, budget))
        };
        // Never leave the decoder without a choice: if nothing is permitted (a prefix this
        // automaton would not have produced, no words, or no tree tokens in the
        // vocabulary), EOS alone is.
        let any = (0..allowed.len()).any(rule);
        for (id, slot) in allowed.iter_mut().enumerate() {
            let ok = if any {
                rule(id)
            } else {
                id as u64 == self.eos_id as u64
            };
            if !ok {
                *slot = false;
            }
        }
    }

    fn kind(&self, id: usize) -> Kind {
        if id as u64 == self.eos_id as u64 {
            Kind::Eos
        } else {
            self.kinds.get(id).copied().unwrap_or(Kind::Never)
        }
    }

    /// The state after `prefix`, or `None` if some token of it was not allowed.
    fn replay(&self, n_words: usize, max_len: Option<usize>, prefix: &[u32]) -> Option<State> {
        let mut state = State::default();
        for &id in prefix {
            let kind = self.kind(id as usize);
            let budget = self.budget(&state, n_words, max_len);
            if kind == Kind::Eos || !self.permits(&state, kind, n_words, budget) {
                return None;
            }
            Self::apply(&mut state, kind);
        }
        Some(state)
    }

    /// The length budget, if it can still be met from `state`.
    fn budget(&self, state: &State, n_words: usize, max_len: Option<usize>) -> Option<usize> {
        max_len.filter(|&max| state.len + Self::min_completion(state, n_words) <= max)
    }

    /// Fewest tokens (EOS included) that complete a tree from `state`: the remaining slots,
    /// one closer per open bracket, EOS; from the start, root open + slots + root close + EOS.
    fn min_completion(state: &State, n_words: usize) -> usize {
        if state.done {
            1
        } else if state.stack.is_empty() {
            n_words + 3
        } else {
            n_words.saturating_sub(state.placed) + state.stack.len() + 1
        }
    }

    fn permits(&self, state: &State, kind: Kind, n_words: usize, budget: Option<usize>) -> bool {
        let remaining = n_words.saturating_sub(state.placed);
        let depth = state.stack.len();
        let structural = match kind {
            Kind::Never => false,
            Kind::Eos => state.done,
            Kind::Slot => !state.done && depth > 0 && remaining > 0,
            // A new bracket needs a word of its own to be non-empty.
            Kind::Open(_) => {
                !state.done
                    && remaining > 0
                    && depth < self.max_depth
                    && state.open_run < self.max_open_run
            }
            // Close the innermost bracket only once it has a child, and the root only once
            // every word is placed.
            Kind::Close(label) => match state.stack.last() {
                Some(&(open, has_child)) => {
                    open == label && has_child && (depth > 1 || remaining == 0)
                }
                None => false,
            },
        };
        let Some(max_len) = budget.filter(|_| structural) else {
            return structural;
        };
        let after = match kind {
            Kind::Eos => 0,
            Kind::Slot => (remaining - 1) + depth + 1,
            Kind::Open(_) => remaining + (depth + 1) + 1,
            Kind::Close(_) if depth == 1 => 1,
            Kind::Close(_) => remaining + (depth - 1) + 1,
            Kind::Never => return false,
        };
        structural && state.len + 1 + after <= max_len
    }

    fn apply(state: &mut State, kind: Kind) {
        state.len += 1;
        match kind {
            Kind::Open(label) => {
                state.stack.push((label, false));
                state.open_run += 1;
            }
            Kind::Slot => {
                state.placed += 1;
                if let Some(top) = state.stack.last_mut() {
                    top.1 = true;
                }
                state.open_run = 0;
            }
            Kind::Close(_) => {
                state.stack.pop();
                match state.stack.last_mut() {
                    Some(top) => top.1 = true,
                    None => state.done = true,
                }
                state.open_run = 0;
            }
            Kind::Eos | Kind::Never => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::path::{Path, PathBuf};
    use std::sync::OnceLock;

    // ----- helpers -----------------------------------------------------------------------------

    /// xorshift64*: a seeded RNG without crates.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn pick<T: Copy>(&mut self, items: &[T]) -> T {
            items[self.below(items.len())]
        }
    }

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    fn w(tag: &str, word: &str) -> Tree {
        Tree::word(tag, word)
    }

    fn p(label: &str, children: Vec<Tree>) -> Tree {
        Tree::phrase(label, children)
    }

    fn one(text: &str) -> Tree {
        let mut trees = parse_trees(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(trees.len(), 1, "{text}");
        trees.remove(0)
    }

    fn err(text: &str) -> TreeError {
        match parse_trees(text) {
            Ok(trees) => panic!("{text:?} read as {} tree(s)", trees.len()),
            Err(e) => e,
        }
    }

    /// Longest run of consecutive opening tokens.
    fn open_run(tokens: &[String]) -> usize {
        let (mut run, mut best) = (0, 0);
        for t in tokens {
            if matches!(TargetToken::classify(t), TargetToken::Open(_)) {
                run += 1;
                best = best.max(run);
            } else {
                run = 0;
            }
        }
        best
    }

    fn words_n(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("w{i}")).collect()
    }

    // ----- the PTB sample ----------------------------------------------------------------------

    struct Sample {
        train: Vec<Tree>,
        dev: Vec<Tree>,
        test: Vec<Tree>,
        combined: Vec<Tree>,
        mrg_files: usize,
    }

    impl Sample {
        fn all(&self) -> impl Iterator<Item = &Tree> {
            self.train.iter().chain(&self.dev).chain(&self.test)
        }
        fn preprocessed(&self) -> Vec<Tree> {
            self.all()
                .map(|t| preprocess(t).expect("a tree with words"))
                .collect()
        }
    }

    fn sample_dir() -> PathBuf {
        match std::env::var_os("PTB_SAMPLE_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../../../shared/data/ptb-sample"
            )),
        }
    }

    fn gunzip(path: &Path) -> Result<String, String> {
        let out = std::process::Command::new("gzip")
            .arg("-dc")
            .arg(path)
            .output()
            .map_err(|e| format!("cannot run gzip: {e}"))?;
        if !out.status.success() {
            return Err(format!("gzip -dc {} failed", path.display()));
        }
        String::from_utf8(out.stdout).map_err(|e| e.to_string())
    }

    fn load_sample() -> Result<Sample, String> {
        let dir = sample_dir();
        if !dir.is_dir() {
            return Err(format!("no PTB sample at {}", dir.display()));
        }
        let split = |name: &str| -> Result<Vec<Tree>, String> {
            let path = dir.join(format!("{name}.trees.gz"));
            let text = gunzip(&path)?;
            parse_trees(&text).map_err(|e| format!("{}: {e}", path.display()))
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir.join("combined"))
            .map_err(|e| e.to_string())?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "mrg"))
            .collect();
        files.sort();
        let mut combined = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).map_err(|e| e.to_string())?;
            let trees = parse_trees(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            combined.extend(trees);
        }
        Ok(Sample {
            train: split("train")?,
            dev: split("dev")?,
            test: split("test")?,
            combined,
            mrg_files: files.len(),
        })
    }

    /// The sample, read once per test binary; `None` (after printing `SKIP: …`) without it.
    fn sample() -> Option<&'static Sample> {
        static SAMPLE: OnceLock<Result<Sample, String>> = OnceLock::new();
        let sample = SAMPLE.get_or_init(load_sample);
        match sample {
            Ok(sample) => Some(sample),
            Err(why) if why.starts_with("no PTB sample") || why.contains("cannot run gzip") => {
                println!("SKIP: {why}");
                None
            }
            Err(why) => panic!("reading the PTB sample: {why}"),
        }
    }

    /// Specials at 0–3 as in the model crate, some junk, then the sample's tree tokens.
    fn sample_vocab(sample: &Sample) -> Vec<String> {
        let trees = sample.preprocessed();
        let mut vocab = s(&[
            "<pad>", "<s>", "</s>", "<unk>", "the", "(", ")", "XXX", "(NP(",
        ]);
        vocab.extend(target_vocabulary(&trees));
        vocab
    }

    const EOS: u32 = 2;

    #[test]
    fn reads_every_tree_of_the_sample_in_both_layouts() {
        let Some(sample) = sample() else { return };
        assert_eq!(sample.train.len(), 3396);
        assert_eq!(sample.dev.len(), 273);
        assert_eq!(sample.test.len(), 245);
        assert_eq!(sample.mrg_files, 199);
        assert_eq!(sample.combined.len(), 3914);
        // The one-per-line files are the .mrg trees with whitespace normalised.
        let lines: Vec<&Tree> = sample.all().collect();
        assert!(lines.iter().zip(&sample.combined).all(|(a, b)| *a == b));

        // Preterminal counts of the sample's README: (all, -NONE-) per split.
        let count = |trees: &[Tree]| {
            let tags: Vec<&str> = trees.iter().flat_map(Tree::tags).collect();
            (tags.len(), tags.iter().filter(|t| **t == NONE_TAG).count())
        };
        assert_eq!(count(&sample.train), (87_514, 5_721));
        assert_eq!(count(&sample.dev), (6_772, 445));
        assert_eq!(count(&sample.test), (6_390, 426));
        // Every tree is `( (X ...) )`.
        assert!(sample.all().all(|t| t.label().is_empty()));
    }

    #[test]
    fn preprocessing_the_sample() {
        let Some(sample) = sample() else { return };
        let words = |trees: &[Tree]| -> usize {
            trees
                .iter()
                .map(|t| preprocess(t).map_or(0, |t| t.words().len()))
                .sum()
        };
        // Word counts without -NONE- from the sample's README.
        assert_eq!(words(&sample.train), 81_793);
        assert_eq!(words(&sample.dev), 6_327);
        assert_eq!(words(&sample.test), 5_964);
        fn check(tree: &Tree) {
            match tree {
                Tree::Phrase { label, children } => {
                    assert!(!label.is_empty() && !children.is_empty());
                    assert!(!label.contains(['-', '=']), "{label}");
                    children.iter().for_each(check);
                }
                Tree::Word { tag, .. } => assert_ne!(tag, NONE_TAG),
            }
        }
        let trees = sample.preprocessed();
        trees.iter().for_each(check);
        let tops = trees.iter().filter(|t| t.label() == TOP).count();
        let max_depth = trees.iter().map(Tree::depth).max().unwrap_or(0);
        let max_run = trees
            .iter()
            .map(|t| open_run(&linearize(t).1))
            .max()
            .unwrap_or(0);
        let labels = target_vocabulary(&trees).len() / 2;
        println!(
            "sample: {} trees, {labels} phrase labels, {tops} TOP roots, max depth {max_depth}, \
             max opening run {max_run}",
            trees.len()
        );
        assert!(max_depth <= ParseConstraint::DEFAULT_MAX_DEPTH);
        assert!(max_run <= ParseConstraint::DEFAULT_MAX_OPEN_RUN);
    }

    #[test]
    fn linearization_round_trips_on_the_sample() {
        let Some(sample) = sample() else { return };
        for tree in sample.preprocessed() {
            let (words, tokens) = linearize(&tree);
            assert_eq!(words, tree.words());
            assert_eq!(
                tokens.iter().filter(|t| *t == PLACEHOLDER).count(),
                words.len()
            );
            let back = delinearize(&tokens, &words).unwrap_or_else(|e| panic!("{tree}: {e}"));
            assert_eq!(back, tree.with_placeholder_tags());
            assert_eq!(repair(&tokens, &words), back);
            // The gold tags go back in for scoring.
            assert_eq!(back.with_tags(&tree.tags()), Some(tree.clone()));
        }
    }

    #[test]
    fn printing_round_trips_on_the_sample() {
        let Some(sample) = sample() else { return };
        for tree in sample.all() {
            // As read: the unlabelled root prints as `( (S ...) )` with or without the option.
            let text = print_tree(tree, false);
            assert!(text.starts_with("( (") && text.ends_with(") )"), "{text}");
            assert_eq!(print_tree(tree, true), text);
            assert_eq!(
                parse_trees(&text).as_deref(),
                Ok(std::slice::from_ref(tree))
            );
            let clean = preprocess(tree).expect("words");
            let bare = print_tree(&clean, false);
            assert_eq!(parse_trees(&bare), Ok(vec![clean.clone()]));
            assert_eq!(clean.to_string(), bare);
            let wrapped = print_tree(&clean, true);
            assert_eq!(parse_trees(&wrapped), Ok(vec![p("", vec![clean.clone()])]));
            // Reading the wrapped form back and preprocessing it changes nothing.
            assert_eq!(preprocess(&one(&wrapped)), Some(clean));
        }
    }

    #[test]
    fn the_constraint_allows_every_gold_tree_of_the_sample() {
        let Some(sample) = sample() else { return };
        let vocab = sample_vocab(sample);
        let ids: HashMap<&str, u32> = vocab
            .iter()
            .enumerate()
            .map(|(i, t)| (t.as_str(), i as u32))
            .collect();
        let constraint = ParseConstraint::new(&vocab, EOS);
        let mut allowed = vec![true; vocab.len()];
        for tree in sample.preprocessed() {
            let (words, tokens) = linearize(&tree);
            let mut gold: Vec<u32> = tokens.iter().map(|t| ids[t.as_str()]).collect();
            gold.push(EOS);
            let n = words.len();
            // Also under the tightest length budget: exactly the gold length.
            let tight = gold.len();
            for step in 0..gold.len() {
                allowed.fill(true);
                constraint.restrict(n, &gold[..step], &mut allowed);
                assert!(allowed[gold[step] as usize], "{tree}: step {step}");
                allowed.fill(true);
                constraint.restrict_within(n, tight, &gold[..step], &mut allowed);
                assert!(allowed[gold[step] as usize], "{tree}: step {step} (budget)");
            }
        }
    }

    #[test]
    fn random_walks_through_the_constraint_end_in_trees() {
        let Some(sample) = sample() else { return };
        let vocab = sample_vocab(sample);
        let constraint = ParseConstraint::new(&vocab, EOS);
        let mut rng = Rng::new(2017);
        let mut allowed = vec![true; vocab.len()];
        for walk in 0..300 {
            let n = 1 + rng.below(60);
            // Budgeted walks: from the shortest possible tree up to a generous limit.
            let budget = (walk % 3 == 0).then(|| n + 3 + rng.below(3 * n));
            // Uniform over ids favours the ~100 opening tokens; half the walks first pick a
            // kind (open / close / slot / EOS) to get trees of every shape.
            let by_kind = walk % 2 == 0;
            let n = if by_kind || budget.is_some() {
                n
            } else {
                n.min(12)
            };
            let mut prefix: Vec<u32> = Vec::new();
            loop {
                allowed.fill(true);
                match budget {
                    Some(max) => constraint.restrict_within(n, max, &prefix, &mut allowed),
                    None => constraint.restrict(n, &prefix, &mut allowed),
                }
                let choices: Vec<u32> = (0..vocab.len() as u32)
                    .filter(|&i| allowed[i as usize])
                    .collect();
                assert!(!choices.is_empty(), "dead end after {prefix:?}");
                let id = if by_kind {
                    let kind_of = |i: u32| match TargetToken::classify(&vocab[i as usize]) {
                        _ if i == EOS => 0,
                        TargetToken::Open(_) => 1,
                        TargetToken::Close(_) => 2,
                        _ => 3,
                    };
                    let kinds: BTreeSet<u8> = choices.iter().map(|&i| kind_of(i)).collect();
                    let kinds: Vec<u8> = kinds.into_iter().collect();
                    let kind = rng.pick(&kinds);
                    let of_kind: Vec<u32> = choices
                        .into_iter()
                        .filter(|&i| kind_of(i) == kind)
                        .collect();
                    rng.pick(&of_kind)
                } else {
                    rng.pick(&choices)
                };
                if id == EOS {
                    break;
                }
                prefix.push(id);
                assert!(
                    prefix.len() <= 2 * n * constraint.max_depth() + n,
                    "runaway"
                );
            }
            let tokens: Vec<&str> = prefix.iter().map(|&i| vocab[i as usize].as_str()).collect();
            let words = words_n(n);
            let tree = delinearize(&tokens, &words).unwrap_or_else(|e| panic!("{e}: {tokens:?}"));
            assert_eq!(tree.words().len(), n);
            assert!(tree.depth() <= constraint.max_depth());
            assert!(open_run(&s(&tokens)) <= constraint.max_open_run());
            if let Some(max) = budget {
                assert!(prefix.len() < max, "{} tokens + EOS > {max}", prefix.len());
            }
        }
    }

    // ----- constraint: exhaustive small cases ----------------------------------------------------

    fn small_vocab() -> Vec<String> {
        // `(C` has no closer and `)D` no opener: neither may ever appear.
        s(&[
            "<pad>", "<s>", "</s>", "<unk>", "XX", "(A", ")A", "(B", ")B", "(C", ")D", "junk",
        ])
    }

    /// Every sequence the automaton lets through to EOS (depth-first over allowed ids),
    /// asserting on the way that no prefix is a dead end.
    fn accepted(
        c: &ParseConstraint,
        vocab: &[String],
        n: usize,
        max_len: Option<usize>,
    ) -> Vec<Vec<String>> {
        fn go(
            c: &ParseConstraint,
            vocab: &[String],
            n: usize,
            max_len: Option<usize>,
            prefix: &mut Vec<u32>,
            out: &mut Vec<Vec<String>>,
        ) {
            let mut allowed = vec![true; vocab.len()];
            match max_len {
                Some(max) => c.restrict_within(n, max, prefix, &mut allowed),
                None => c.restrict(n, prefix, &mut allowed),
            }
            assert!(allowed.iter().any(|&a| a), "dead end after {prefix:?}");
            for id in 0..vocab.len() as u32 {
                if !allowed[id as usize] {
                    continue;
                }
                if id == EOS {
                    out.push(prefix.iter().map(|&i| vocab[i as usize].clone()).collect());
                } else {
                    prefix.push(id);
                    go(c, vocab, n, max_len, prefix, out);
                    prefix.pop();
                }
            }
        }
        let mut out = Vec::new();
        go(c, vocab, n, max_len, &mut Vec::new(), &mut out);
        out
    }

    /// Every tree with labels A/B over `n` slots and bracket depth ≤ `depth`, linearized.
    fn all_trees(n: usize, depth: usize) -> Vec<Vec<String>> {
        // Child sequences over `n` words whose brackets have depth ≤ `d`.
        fn seqs(n: usize, d: usize) -> Vec<Vec<String>> {
            if n == 0 {
                return vec![Vec::new()];
            }
            let mut out = Vec::new();
            for rest in seqs(n - 1, d) {
                let mut v = vec![PLACEHOLDER.to_string()];
                v.extend(rest);
                out.push(v);
            }
            if d > 0 {
                for k in 1..=n {
                    for first in brackets(k, d) {
                        for rest in seqs(n - k, d) {
                            let mut v = first.clone();
                            v.extend(rest);
                            out.push(v);
                        }
                    }
                }
            }
            out
        }
        fn brackets(n: usize, d: usize) -> Vec<Vec<String>> {
            let mut out = Vec::new();
            for label in ["A", "B"] {
                for inner in seqs(n, d - 1) {
                    let mut v = vec![open_token(label)];
                    v.extend(inner);
                    v.push(close_token(label));
                    out.push(v);
                }
            }
            out
        }
        brackets(n, depth)
    }

    #[test]
    fn the_constraint_accepts_exactly_the_trees_within_its_caps() {
        let vocab = small_vocab();
        for (depth, run) in [(3, 3), (3, 2), (2, 1), (4, 2)] {
            let c = ParseConstraint::new(&vocab, EOS).with_caps(depth, run);
            for n in 1..=3 {
                let got: HashSet<Vec<String>> = accepted(&c, &vocab, n, None).into_iter().collect();
                let want: HashSet<Vec<String>> = all_trees(n, depth)
                    .into_iter()
                    .filter(|t| open_run(t) <= run)
                    .collect();
                assert!(!want.is_empty());
                if (depth, run, n) == (3, 3, 3) {
                    // 2 · S(3, 2) with S(3, 2) = 733 child sequences (counted by hand).
                    assert_eq!(want.len(), 1466);
                }
                assert_eq!(got, want, "depth {depth}, run {run}, n {n}");
                for t in &got {
                    assert!(delinearize(t, &words_n(n)).is_ok());
                }
                // With a length budget: exactly those that fit (EOS counted).
                for max in [n + 2, n + 3, n + 5, n + 8] {
                    let got: HashSet<Vec<String>> =
                        accepted(&c, &vocab, n, Some(max)).into_iter().collect();
                    let fit: HashSet<Vec<String>> =
                        want.iter().filter(|t| t.len() < max).cloned().collect();
                    if fit.is_empty() {
                        // Infeasible budget: ignored.
                        assert_eq!(got, want, "max {max}");
                    } else {
                        assert_eq!(got, fit, "depth {depth}, run {run}, n {n}, max {max}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_constraint_ends_bad_prefixes_and_degenerate_cases() {
        let vocab = small_vocab();
        let c = ParseConstraint::new(&vocab, EOS);
        let only_eos = |n: usize, prefix: &[u32]| {
            let mut allowed = vec![true; vocab.len() + 2];
            c.restrict(n, prefix, &mut allowed);
            let ids: Vec<usize> = (0..allowed.len()).filter(|&i| allowed[i]).collect();
            ids == [EOS as usize]
        };
        let allowed_after = |n: usize, prefix: &[u32]| {
            let mut allowed = vec![true; vocab.len() + 2];
            c.restrict(n, prefix, &mut allowed);
            (0..allowed.len())
                .filter(|&i| allowed[i])
                .map(|i| vocab.get(i).map_or("?", |t| t.as_str()))
                .collect::<Vec<_>>()
        };
        // Start: a root bracket that can close.
        assert_eq!(allowed_after(2, &[]), ["(A", "(B"]);
        // `(A`: a slot or another bracket; not `)A` (empty), not EOS.
        assert_eq!(allowed_after(2, &[5]), ["XX", "(A", "(B"]);
        // `(A XX` with a word left: the root may not close yet.
        assert_eq!(allowed_after(2, &[5, 4]), ["XX", "(A", "(B"]);
        // `(A XX XX`: no word left, so nothing may open.
        assert_eq!(allowed_after(2, &[5, 4, 4]), [")A"]);
        assert_eq!(allowed_after(2, &[5, 4, 4, 6]), ["</s>"]);
        // Inner bracket closes with words left; the root does not.
        assert_eq!(allowed_after(3, &[5, 7, 4]), ["XX", "(A", "(B", ")B"]);
        // Bad prefixes end at once: a mismatched closer, an unknown token, `(C`, EOS.
        for bad in [&[5, 4, 8][..], &[11], &[9], &[5, 4, 6, 5], &[2], &[99]] {
            assert!(only_eos(1, bad), "{bad:?}");
        }
        assert!(only_eos(1, &[5, 4, 4]));
        // No words: no tree exists.
        assert!(only_eos(0, &[]));
        // A vocabulary without tree tokens: nothing but EOS, never an all-false mask.
        let bare = ParseConstraint::new(&s(&["<pad>", "<s>", "</s>"]), EOS);
        let mut allowed = vec![true; 3];
        bare.restrict(4, &[], &mut allowed);
        assert_eq!(allowed, [false, false, true]);
        // An EOS id past the vocabulary still works.
        let far = ParseConstraint::new(&s(&["XX", "(A", ")A"]), 3);
        let mut allowed = vec![true; 4];
        far.restrict(1, &[1, 0, 2], &mut allowed);
        assert_eq!(allowed, [false, false, false, true]);
        // Entries already false stay false.
        let mut allowed = vec![false; vocab.len()];
        c.restrict(1, &[], &mut allowed);
        assert!(allowed.iter().all(|a| !a));
    }

    #[test]
    fn the_constraint_reads_marked_vocabularies() {
        // SentencePiece-style: word-initial tokens carry `▁`; the bare `(A` is a continuation.
        let vocab = s(&[
            "<pad>", "<s>", "</s>", "<unk>", "▁XX", "▁(A", "▁)A", "(A", ")A", "XX",
        ]);
        let c = ParseConstraint::with_word_marker(&vocab, EOS, "▁");
        let mut allowed = vec![true; vocab.len()];
        c.restrict(1, &[], &mut allowed);
        assert_eq!(allowed.iter().filter(|&&a| a).count(), 1);
        assert!(allowed[5]);
        let mut allowed = vec![true; vocab.len()];
        c.restrict(1, &[5], &mut allowed);
        assert_eq!((0..10).filter(|&i| allowed[i]).collect::<Vec<_>>(), [4, 5]);
        let mut allowed = vec![true; vocab.len()];
        c.restrict(1, &[5, 4], &mut allowed);
        assert_eq!((0..10).filter(|&i| allowed[i]).collect::<Vec<_>>(), [6]);
    }

    #[test]
    fn the_constraint_never_dead_ends_on_random_prefixes_of_allowed_moves() {
        // Random walks with a tiny vocabulary and tight caps, checking after every step that
        // each allowed token still leads to a tree: complete greedily (slot, else close).
        let vocab = small_vocab();
        let mut rng = Rng::new(7);
        for (depth, run) in [(1, 1), (2, 1), (5, 2), (40, 12)] {
            let c = ParseConstraint::new(&vocab, EOS).with_caps(depth, run);
            for _ in 0..60 {
                let n = 1 + rng.below(20);
                let mut prefix = Vec::new();
                loop {
                    let mut allowed = vec![true; vocab.len()];
                    c.restrict(n, &prefix, &mut allowed);
                    let choices: Vec<u32> = (0..vocab.len() as u32)
                        .filter(|&i| allowed[i as usize])
                        .collect();
                    for &id in &choices {
                        let mut seq = prefix.clone();
                        seq.push(id);
                        while seq.last() != Some(&EOS) {
                            let mut next = vec![true; vocab.len()];
                            c.restrict(n, &seq, &mut next);
                            let pick = [4u32, 6, 8, EOS]
                                .into_iter()
                                .find(|&i| next[i as usize])
                                .expect("greedy completion");
                            seq.push(pick);
                        }
                        seq.pop();
                        let tokens: Vec<&str> =
                            seq.iter().map(|&i| vocab[i as usize].as_str()).collect();
                        assert!(delinearize(&tokens, &words_n(n)).is_ok(), "{tokens:?}");
                    }
                    let id = rng.pick(&choices);
                    if id == EOS {
                        break;
                    }
                    prefix.push(id);
                }
            }
        }
    }

    // ----- reading -----------------------------------------------------------------------------

    #[test]
    fn reads_both_openings_and_compact_closings() {
        let want = p(
            "",
            vec![p(
                "S",
                vec![
                    p("NP-SBJ", vec![w("DT", "The"), w("NN", "dog")]),
                    p("VP", vec![w("VBZ", "barks")]),
                    w(".", "."),
                ],
            )],
        );
        for text in [
            "( (S (NP-SBJ (DT The) (NN dog)) (VP (VBZ barks)) (. .)) )",
            "((S (NP-SBJ (DT The)(NN dog))(VP (VBZ barks))(. .)))",
            "( (S \n    (NP-SBJ (DT The) (NN dog) )\n\t(VP (VBZ barks) )\r\n    (. .) ))\n",
        ] {
            assert_eq!(one(text), want, "{text:?}");
        }
        // Several trees, any layout; a bare labelled tree; a bare preterminal.
        let trees = parse_trees("(S (NN a))\n\n  (NN b) ((X (NN c)))\n").unwrap();
        assert_eq!(trees.len(), 3);
        assert_eq!(trees[1], w("NN", "b"));
        assert_eq!(parse_trees(""), Ok(vec![]));
        assert_eq!(parse_trees(" \n\t\n"), Ok(vec![]));
        // Labels and words as written: punctuation, `-LRB-`, non-ASCII.
        let t = one("(NP (-LRB- -LRB-) (`` ``) (NN café) (-NONE- *T*-1) ($ $))");
        assert_eq!(t.tags(), ["-LRB-", "``", "NN", "-NONE-", "$"]);
        assert_eq!(t.words(), ["-LRB-", "``", "café", "*T*-1", "$"]);
    }

    #[test]
    fn malformed_trees_give_errors_with_lines() {
        use TreeErrorKind as K;
        let cases: Vec<(&str, usize, K)> = vec![
            (
                "(S (NN a))\n( (S (NP (NN dog))\n",
                2,
                K::Unclosed {
                    next_tree_line: None,
                },
            ),
            (
                "( (S (NN a))\n( (S (NN b)) )\n",
                1,
                K::Unclosed {
                    next_tree_line: Some(2),
                },
            ),
            ("(S (NN a))\n\n(S (NN b)))\n", 3, K::StrayClose),
            (")", 1, K::StrayClose),
            ("(S\n  (  (NN dog)))", 2, K::EmptyLabel),
            ("(S ()\n)", 1, K::EmptyLabel),
            ("( dog)", 1, K::MissingTag { word: "dog".into() }),
            (
                "(S (NN a))\nhello world (S (NN b))",
                2,
                K::WordOutsideBracket {
                    word: "hello".into(),
                },
            ),
            ("\n\n()", 3, K::EmptyTree),
            ("( )", 1, K::EmptyTree),
            ("(S\n (NP ))", 2, K::EmptyConstituent { label: "NP".into() }),
            (
                "(S (NN big dog))",
                1,
                K::SeveralWords {
                    tag: "NN".into(),
                    count: 2,
                },
            ),
            (
                "(NP (DT the)\n dog)",
                2,
                K::WordBesideBrackets {
                    label: "NP".into(),
                    word: "dog".into(),
                },
            ),
        ];
        for (text, line, kind) in cases {
            let e = err(text);
            assert_eq!(e, TreeError { line, kind }, "{text:?}");
            let shown = e.to_string();
            assert!(shown.starts_with(&format!("line {line}: ")), "{shown}");
        }
        assert_eq!(
            err("(S (NP ))").to_string(),
            "line 1: empty constituent `(NP )`"
        );
        assert_eq!(err("x").to_string(), "line 1: word `x` outside any bracket");
        let boxed: Box<dyn std::error::Error> = Box::new(err(")"));
        assert!(boxed.to_string().contains("unbalanced brackets"));
    }

    #[test]
    fn the_lenient_reader_skips_and_reports() {
        let text = "\
( (S (NP (NN a)) (VP (VBZ b))) )
( (S (NP (NN broken)) (VP (VBZ b)) )
( (S (NP (NN c)) (VP (VBZ d))) )
( (S (NP ) (VP (VBZ e))) )
stray words here
( (S (NN f)) ))
(  (NN g))
( (S
    (NP (NN h))
    (VP (VBZ i))) )
( (S (NP (NN j)
";
        let report = parse_trees_lenient(text);
        let firsts: Vec<&str> = report.trees.iter().map(|t| t.words()[0]).collect();
        assert_eq!(firsts, ["a", "c", "f", "g", "h"]);
        let got: Vec<(usize, String)> = report
            .skipped
            .iter()
            .map(|e| (e.line, e.kind.to_string()))
            .collect();
        let want = [
            (
                2,
                "unbalanced brackets: the tree starting here is not closed before the next tree (line 3)",
            ),
            (4, "empty constituent `(NP )`"),
            (5, "word `stray` outside any bracket"),
            (6, "unbalanced brackets: `)` closes nothing"),
            (
                11,
                "unbalanced brackets: the tree starting here is not closed at the end of the input",
            ),
        ];
        let want: Vec<(usize, String)> = want.iter().map(|(l, m)| (*l, m.to_string())).collect();
        assert_eq!(got, want);
        // The strict reader stops at the first of them.
        assert_eq!(parse_trees(text), Err(report.skipped[0].clone()));
    }

    #[test]
    fn layout_is_free_and_broken_files_are_read_in_one_pass() {
        // A well-formed tree may put its brackets anywhere, first columns included.
        let text = "(S\n(NP (DT the)\n(NN dog))\n(VP (VBZ barks)))\n(S (NN x))";
        assert_eq!(parse_trees(text).map(|t| t.len()), Ok(2));
        // Every line missing its last `)`: each is reported, up to the next line; the
        // reader does not rescan the rest of the input for each (20,000 lines here).
        let lines = 20_000;
        let text = "( (S (NP (NN a)) (VP (VBZ b)))\n".repeat(lines);
        let report = parse_trees_lenient(&text);
        assert!(report.trees.is_empty());
        assert_eq!(report.skipped.len(), lines);
        for (i, e) in report.skipped.iter().enumerate() {
            let next_tree_line = (i + 1 < lines).then_some(i + 2);
            assert_eq!(e.line, i + 1);
            assert_eq!(e.kind, TreeErrorKind::Unclosed { next_tree_line });
        }
        // Every other line broken: the good ones are all kept.
        let text = "( (S (NN a))\n( (S (NN b)) )\n".repeat(lines / 2);
        let report = parse_trees_lenient(&text);
        assert_eq!(report.trees.len(), lines / 2);
        assert_eq!(report.skipped.len(), lines / 2);
    }

    #[test]
    fn nesting_is_capped() {
        let deep = |depth: usize| {
            let mut text = String::new();
            for _ in 0..depth - 1 {
                text.push_str("(A ");
            }
            text.push_str("(NN x)");
            text.push_str(&")".repeat(depth - 1));
            text
        };
        // At the cap everything works (recursive helpers included).
        let tree = one(&deep(MAX_NESTING));
        assert_eq!(tree.depth(), MAX_NESTING - 1);
        let (words, tokens) = linearize(&tree);
        assert_eq!(
            parse_trees(&print_tree(&tree, false)),
            Ok(vec![tree.clone()])
        );
        let back = delinearize(&tokens, &words).unwrap();
        assert_eq!(back, tree.with_placeholder_tags());
        assert_eq!(repair(&tokens, &words), back);
        assert!(preprocess(&tree).is_some());
        // Past it: an error, and the reader goes on after the span.
        let text = format!("{}\n(NN y)", deep(MAX_NESTING + 5));
        let report = parse_trees_lenient(&text);
        assert_eq!(report.trees, [w("NN", "y")]);
        assert_eq!(
            report.skipped[0].kind,
            TreeErrorKind::TooDeep { limit: MAX_NESTING }
        );
        let opens = vec!["(A"; MAX_NESTING + 1];
        assert_eq!(
            delinearize(&opens, &["x"]),
            Err(LinearError::TooDeep {
                position: MAX_NESTING
            })
        );
        let mut tokens = opens.clone();
        tokens.push("XX");
        assert_eq!(repair(&tokens, &["x"]).depth(), MAX_NESTING);
    }

    #[test]
    fn random_input_never_panics_and_what_reads_prints_back() {
        let mut rng = Rng::new(42);
        let pieces = [
            "(",
            ")",
            "((",
            "))",
            ")(",
            " ",
            "\n",
            "\t",
            "(S",
            "(NP",
            "(NN",
            "(-NONE-",
            "x",
            "dog",
            "-LRB-",
            "=",
            "-",
            "é",
            "\r\n",
            "(NP-SBJ-1",
            "()",
            "( (",
        ];
        let mut read_ok = 0;
        for round in 0..3000 {
            let text = match round % 3 {
                // Random bytes.
                0 => {
                    let bytes: Vec<u8> = (0..rng.below(60)).map(|_| rng.next() as u8).collect();
                    String::from_utf8_lossy(&bytes).into_owned()
                }
                // Bracket soup.
                1 => (0..rng.below(40)).map(|_| rng.pick(&pieces)).collect(),
                // A few printed trees, one per line, then a few random edits.
                _ => {
                    let mut text = String::new();
                    for _ in 0..1 + rng.below(3) {
                        text.push_str(&print_tree(&random_tree(&mut rng, 4), rng.below(2) == 0));
                        text.push('\n');
                    }
                    let mut chars: Vec<char> = text.chars().collect();
                    for _ in 0..rng.below(3) {
                        let at = rng.below(chars.len());
                        match rng.below(3) {
                            0 => {
                                chars.remove(at);
                            }
                            1 => chars.insert(at, rng.pick(&['(', ')', ' ', '\n', 'x'])),
                            _ => chars.insert(at, '\n'),
                        }
                    }
                    chars.into_iter().collect()
                }
            };
            let report = parse_trees_lenient(&text);
            let lines = text.matches('\n').count() + 1;
            for e in &report.skipped {
                assert!((1..=lines).contains(&e.line), "{text:?}: {e}");
                assert!(e.to_string().starts_with("line "));
            }
            match parse_trees(&text) {
                Ok(trees) => {
                    read_ok += 1;
                    assert!(report.skipped.is_empty());
                    assert_eq!(trees, report.trees);
                    for tree in &trees {
                        assert_eq!(
                            parse_trees(&print_tree(tree, false)),
                            Ok(vec![tree.clone()])
                        );
                        if let Some(clean) = preprocess(tree) {
                            let (words, tokens) = linearize(&clean);
                            assert_eq!(
                                delinearize(&tokens, &words),
                                Ok(clean.with_placeholder_tags())
                            );
                        }
                    }
                }
                Err(e) => assert_eq!(Some(&e), report.skipped.first()),
            }
        }
        println!("fuzz: {read_ok} of 3000 inputs read without error");
        assert!(read_ok > 500, "only {read_ok} readable inputs");
    }

    // ----- preprocessing -----------------------------------------------------------------------

    #[test]
    fn function_tags_and_indices_are_stripped_from_phrase_labels() {
        for (label, want) in [
            ("NP-SBJ-1", "NP"),
            ("NP=2", "NP"),
            ("PP-LOC-CLR", "PP"),
            ("NP-SBJ=1-3", "NP"),
            ("S-TPC-1", "S"),
            ("WHNP-260", "WHNP"),
            ("ADVP|PRT", "ADVP|PRT"),
            ("NP", "NP"),
            ("-NONE-", "-NONE-"),
            ("-LRB-", "-LRB-"),
            ("=", "="),
            ("", ""),
        ] {
            assert_eq!(strip_function_tags(label), want, "{label}");
        }
    }

    #[test]
    fn preprocessing_removes_empty_elements_tags_and_the_outer_bracket() {
        let raw = one("( (S (S-TPC-2 (NP-SBJ (NNS Prices)) (VP (VBD fell))) (, ,)
                  (NP-SBJ=1 (-LRB- -LRB-) (NNS analysts) (-RRB- -RRB-))
                  (VP (VBD said) (SBAR (-NONE- 0) (S (-NONE- *T*-2)))) (. .)) )");
        let want = one("(S (S (NP (NNS Prices)) (VP (VBD fell))) (, ,)
                (NP (-LRB- -LRB-) (NNS analysts) (-RRB- -RRB-)) (VP (VBD said)) (. .))");
        assert_eq!(preprocess(&raw), Some(want.clone()));
        assert_eq!(preprocess(&want), Some(want.clone()));
        let (words, tokens) = linearize(&want);
        assert_eq!(
            words,
            [
                "Prices", "fell", ",", "-LRB-", "analysts", "-RRB-", "said", "."
            ]
        );
        assert_eq!(
            tokens.join(" "),
            "(S (S (NP XX )NP (VP XX )VP )S XX (NP XX XX XX )NP (VP XX )VP XX )S"
        );
        // Several constituents, or a lone preterminal, under the outer bracket: a TOP root.
        assert_eq!(
            preprocess(&one("( (NP (NN a)) (. .) )")),
            Some(p(TOP, vec![p("NP", vec![w("NN", "a")]), w(".", ".")]))
        );
        assert_eq!(
            preprocess(&one("( (UH Yes) )")),
            Some(p(TOP, vec![w("UH", "Yes")]))
        );
        assert_eq!(
            preprocess(&w("UH", "Yes")),
            Some(p(TOP, vec![w("UH", "Yes")]))
        );
        // Outer bracket gone after -NONE- removal leaves one constituent.
        assert_eq!(
            preprocess(&one("( (S (NP (-NONE- *)) (VP (VB go))) (-NONE- *U*) )")),
            Some(one("(S (VP (VB go)))"))
        );
        // Nothing but empty elements.
        assert_eq!(
            preprocess(&one("( (S (NP (-NONE- *)) (-NONE- *T*)) )")),
            None
        );
    }

    // ----- linearization -----------------------------------------------------------------------

    #[test]
    fn linearizes_as_vinyals_et_al() {
        let tree = one("(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))");
        let (words, tokens) = linearize(&tree);
        assert_eq!(words, ["The", "dog", "barks", "."]);
        assert_eq!(
            tokens,
            [
                "(S", "(NP", "XX", "XX", ")NP", "(VP", "XX", ")VP", "XX", ")S"
            ]
        );
        assert_eq!(
            delinearize(&tokens, &words).map(|t| t.to_string()),
            Ok("(S (NP (XX The) (XX dog)) (VP (XX barks)) (XX .))".to_string())
        );
        assert_eq!(
            target_vocabulary([&tree]),
            ["XX", "(NP", ")NP", "(S", ")S", "(VP", ")VP"]
        );
        assert_eq!(TargetToken::classify("(NP"), TargetToken::Open("NP"));
        assert_eq!(TargetToken::classify(")NP"), TargetToken::Close("NP"));
        assert_eq!(TargetToken::classify("XX"), TargetToken::Slot);
        for other in ["(", ")", "", "XXX", "(N P", "((", "</s>", "▁(NP"] {
            assert_eq!(TargetToken::classify(other), TargetToken::Other, "{other}");
        }
    }

    #[test]
    fn delinearize_reports_ill_formed_sequences() {
        let words = ["a", "b"];
        let cases: Vec<(&str, LinearError)> = vec![
            ("", LinearError::Empty),
            (
                "(S XX <unk> XX )S",
                LinearError::UnknownToken {
                    position: 2,
                    token: "<unk>".into(),
                },
            ),
            (
                "XX (S XX )S",
                LinearError::SlotOutsideBracket { position: 0 },
            ),
            (
                ")S (S XX XX )S",
                LinearError::StrayClose {
                    position: 0,
                    token: ")S".into(),
                },
            ),
            (
                "(S (NP XX XX )VP )S",
                LinearError::Mismatch {
                    position: 4,
                    open: "NP".into(),
                    close: "VP".into(),
                },
            ),
            (
                "(S (NP )NP XX XX )S",
                LinearError::EmptyConstituent {
                    position: 2,
                    label: "NP".into(),
                },
            ),
            (
                "(S (NP XX XX )NP",
                LinearError::Unclosed {
                    label: "S".into(),
                    open: 1,
                },
            ),
            (
                "(S (VP (NP XX XX",
                LinearError::Unclosed {
                    label: "NP".into(),
                    open: 3,
                },
            ),
            (
                "(S XX )S (S XX )S",
                LinearError::AfterRoot {
                    position: 3,
                    token: "(S".into(),
                },
            ),
            (
                "(S XX XX )S </s>",
                LinearError::AfterRoot {
                    position: 4,
                    token: "</s>".into(),
                },
            ),
            ("(S XX )S", LinearError::WordCount { slots: 1, words: 2 }),
            (
                "(S XX XX XX )S",
                LinearError::WordCount { slots: 3, words: 2 },
            ),
        ];
        for (text, want) in cases {
            let tokens: Vec<&str> = text.split_whitespace().collect();
            let got = delinearize(&tokens, &words);
            assert_eq!(got, Err(want.clone()), "{text}");
            assert!(!want.to_string().is_empty());
        }
        assert_eq!(
            LinearError::Mismatch {
                position: 4,
                open: "NP".into(),
                close: "VP".into()
            }
            .to_string(),
            "token 4 `)VP` closes `(NP`"
        );
    }

    #[test]
    fn repair_makes_a_tree_of_anything() {
        let words = ["a", "b", "c"];
        let fixed = |text: &str| {
            let tokens: Vec<&str> = text.split_whitespace().collect();
            repair(&tokens, &words).to_string()
        };
        // Unclosed brackets closed; missing words added to the innermost open bracket.
        assert_eq!(fixed("(S (NP XX"), "(S (NP (XX a) (XX b) (XX c)))");
        // A closer of an outer bracket closes the inner ones; unmatched closers dropped.
        assert_eq!(
            fixed("(S (VP XX (NP XX )VP )PP XX )S"),
            "(S (VP (XX a) (NP (XX b))) (XX c))"
        );
        // Extra slots and junk dropped; empty constituents dropped.
        assert_eq!(
            fixed("(S <unk> (NP )NP XX XX XX XX XX )S"),
            "(S (XX a) (XX b) (XX c))"
        );
        // Several roots: wrapped in TOP; leftover words join the last root.
        assert_eq!(
            fixed("(S XX )S (S XX )S"),
            "(TOP (S (XX a)) (S (XX b) (XX c)))"
        );
        assert_eq!(fixed("XX XX XX"), "(TOP (XX a) (XX b) (XX c))");
        assert_eq!(fixed(""), "(TOP (XX a) (XX b) (XX c))");
        assert_eq!(fixed(")S )S"), "(TOP (XX a) (XX b) (XX c))");
        assert_eq!(fixed("(S XX )S XX"), "(TOP (S (XX a)) (XX b) (XX c))");
        let empty: [&str; 0] = [];
        assert_eq!(repair(&["(S", "XX", ")S"], &empty), p(TOP, vec![]));

        // Random token soup: always the words, in order, in a tree EVALB can read.
        let mut rng = Rng::new(99);
        let pool = [
            "(S", ")S", "(NP", ")NP", "(VP", ")VP", "XX", "XX", "XX", "<unk>", "(", ")",
        ];
        for _ in 0..2000 {
            let n = 1 + rng.below(12);
            let tokens: Vec<&str> = (0..rng.below(30)).map(|_| rng.pick(&pool)).collect();
            let ws = words_n(n);
            let tree = repair(&tokens, &ws);
            assert_eq!(tree.words(), ws);
            assert!(matches!(tree, Tree::Phrase { .. }));
            let (lw, lt) = linearize(&tree);
            assert_eq!(delinearize(&lt, &lw), Ok(tree.clone()));
            assert_eq!(
                parse_trees(&print_tree(&tree, true)).map(|t| t.len()),
                Ok(1)
            );
            if let Ok(strict) = delinearize(&tokens, &ws) {
                assert_eq!(strict, tree);
            }
        }
    }

    // ----- printing ----------------------------------------------------------------------------

    fn random_tree(rng: &mut Rng, depth: usize) -> Tree {
        const LABELS: [&str; 6] = ["S", "NP", "VP", "PP-LOC", "-LRB-", "ADVP|PRT"];
        const TAGS: [&str; 6] = ["NN", "-NONE-", ",", "``", "PRP$", "-RRB-"];
        const WORDS: [&str; 6] = ["dog", "*T*-1", ",", "café", "-LRB-", "1\\/2"];
        if depth == 0 || rng.below(3) == 0 {
            return w(rng.pick(&TAGS), rng.pick(&WORDS));
        }
        let children = (0..1 + rng.below(4))
            .map(|_| random_tree(rng, depth - 1))
            .collect();
        p(rng.pick(&LABELS), children)
    }

    #[test]
    fn printing_round_trips_and_escapes() {
        let mut rng = Rng::new(5);
        for _ in 0..2000 {
            let tree = random_tree(&mut rng, 6);
            let text = print_tree(&tree, false);
            assert_eq!(parse_trees(&text), Ok(vec![tree.clone()]), "{text}");
            let outer = print_tree(&tree, true);
            assert_eq!(parse_trees(&outer), Ok(vec![p("", vec![tree.clone()])]));
        }
        let tree = p("S", vec![w("NN", "dog"), p("VP", vec![w("VBZ", "barks")])]);
        assert_eq!(print_tree(&tree, false), "(S (NN dog) (VP (VBZ barks)))");
        assert_eq!(print_tree(&tree, true), "( (S (NN dog) (VP (VBZ barks))) )");
        // What the format cannot carry is escaped the treebank's way.
        let odd = p("S", vec![w("(", "f(x)"), w("NN", "New York"), w("", "")]);
        assert_eq!(
            print_tree(&odd, false),
            "(S (-LRB- f-LRB-x-RRB-) (NN New_York) (_ _))"
        );
        assert!(parse_trees(&print_tree(&odd, false)).is_ok());
        // Gold tags back into a prediction, for EVALB.
        let pred = tree.with_placeholder_tags();
        assert_eq!(pred.tags(), ["XX", "XX"]);
        assert_eq!(pred.with_tags(&["NN", "VBZ"]), Some(tree.clone()));
        assert_eq!(pred.with_tags(&["NN"]), None);
        assert_eq!(pred.with_tags(&["NN", "VBZ", "X"]), None);
    }
}
