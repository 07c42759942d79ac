//! Trees as plain objects for JavaScript (the page draws them as SVG).

use serde::Serialize;
use transduce::task::parse::Tree;

/// A constituent (`label`, `children`) or a word under its tag (`label` = tag, `word`).
#[derive(Serialize)]
pub struct Node {
    pub label: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub word: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<Node>,
}

impl From<&Tree> for Node {
    fn from(tree: &Tree) -> Node {
        match tree {
            Tree::Phrase { label, children } => Node {
                label: label.clone(),
                word: None,
                children: children.iter().map(Node::from).collect(),
            },
            Tree::Word { tag, word } => Node {
                label: tag.clone(),
                word: Some(word.clone()),
                children: Vec::new(),
            },
        }
    }
}
