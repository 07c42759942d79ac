//! Penn Treebank bracket reading: one tree per line or multi-line `.mrg` files, with
//! errors that name the line.

use std::fmt;

use super::{MAX_NESTING, Tree};

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

pub(super) fn is_delimiter(c: char) -> bool {
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
