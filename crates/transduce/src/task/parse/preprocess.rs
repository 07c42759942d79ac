//! The usual clean-up of treebank trees for parsing: no `-NONE-` elements, no function
//! tags or co-indices, no outer unlabelled bracket.

use super::{NONE_TAG, TOP, Tree};

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
