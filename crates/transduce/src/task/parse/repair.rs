//! Target tokens + words → tree, totally: the bracket balancing that turns any decoder
//! output into a tree over exactly the words.

use super::{MAX_NESTING, PLACEHOLDER, TOP, TargetToken, Tree};

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
