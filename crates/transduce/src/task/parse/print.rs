//! Tree → the one-line bracket string EVALB reads (and the tree's `Display`).

use std::fmt;

use super::Tree;

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

impl fmt::Display for Tree {
    /// The bracket string of [`print_tree`] without an added outer bracket.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_tree(self, false))
    }
}
