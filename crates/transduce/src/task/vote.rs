//! Parser combination by constituent voting (beyond the paper).
//!
//! Several parsers' trees for one sentence become one tree: every labelled constituent
//! proposed by at least half of them is a candidate (Henderson & Brill 1999, "Exploiting
//! Diversity in Natural Language Processing: Combining Parsers"), and CKY picks the
//! non-crossing set of candidates with the most votes (Sagae & Lavie 2006, "Parser
//! Combination by Reparsing"). With an odd number of trees, constituents with a strict
//! majority never cross (any two of them share a voter, and one tree has no crossing
//! brackets), so every one of them is kept.
//!
//! Unlike decoding with an ensemble (one beam scored by the mean of the members'
//! log-probabilities), every member parses alone, so the members need not share a
//! vocabulary; the cost is the same, one decoder pass per member.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::fmt;

use super::parse::{TOP, Tree};

/// Why trees cannot be combined.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum VoteError {
    /// No tree to combine.
    NoTrees,
    /// Tree `tree` (0-based) is over other words than the first tree.
    WordsDiffer { tree: usize },
}

impl fmt::Display for VoteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            VoteError::NoTrees => f.write_str("no trees to combine"),
            VoteError::WordsDiffer { tree } => write!(
                f,
                "tree {} is over other words than tree 1; voting needs parses of one sentence",
                tree + 1
            ),
        }
    }
}

impl std::error::Error for VoteError {}

/// Word span `[start, end)`.
type Span = (usize, usize);

/// One labelled constituent's tally: how many trees have it, and the sum of its places
/// (0 = outermost) in their unary chains over the same span, to order a chain in the
/// combined tree as the voters do.
#[derive(Default)]
struct Tally {
    votes: usize,
    places: usize,
}

/// Combines parses of one sentence (all over the same words) into one tree: the
/// constituents at least half of the trees have, as the non-crossing set with the most
/// votes above that bar. Preterminals (words with their tags) come from the first tree.
pub fn vote(trees: &[Tree]) -> Result<Tree, VoteError> {
    let first = trees.first().ok_or(VoteError::NoTrees)?;
    let words = first.words();
    if let Some(k) = trees.iter().position(|t| t.words() != words) {
        return Err(VoteError::WordsDiffer { tree: k });
    }
    let leaves: Vec<Tree> = first
        .tags()
        .into_iter()
        .zip(&words)
        .map(|(tag, word)| Tree::word(tag, *word))
        .collect();
    let n = leaves.len();
    if n == 0 {
        return Ok(first.clone());
    }

    let mut tallies: HashMap<(Span, &str), Tally> = HashMap::new();
    for tree in trees {
        let mut phrases = Vec::new();
        constituents(tree, 0, 0, &mut phrases);
        phrases.sort_by_key(|&(span, depth, _)| (span, depth));
        let mut seen = HashSet::new();
        let mut place = 0;
        for (k, &(span, _, label)) in phrases.iter().enumerate() {
            place = if k > 0 && phrases[k - 1].0 == span {
                place + 1
            } else {
                0
            };
            // A label repeated in one chain (NP over NP over the same words) votes once.
            if seen.insert((span, label)) {
                let tally = tallies.entry((span, label)).or_default();
                tally.votes += 1;
                tally.places += place;
            }
        }
    }

    // Candidates: at least half of the trees. The bar sits half a vote below that, so
    // every candidate weighs more than nothing and a tie (m/2 of m) weighs least.
    let m = trees.len();
    let bar = (m as f64 - 1.0) / 2.0;
    let mut labels: HashMap<Span, Vec<(f64, &str)>> = HashMap::new();
    for (&(span, label), tally) in &tallies {
        if 2 * tally.votes >= m {
            let place = tally.places as f64 / tally.votes as f64;
            labels.entry(span).or_default().push((place, label));
        }
    }
    for chain in labels.values_mut() {
        chain.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(b.1)));
    }
    let weight = |span: Span| {
        labels.get(&span).map_or(0.0, |chain| {
            chain
                .iter()
                .map(|&(_, label)| tallies[&(span, label)].votes as f64 - bar)
                .sum()
        })
    };

    let mut chosen = best_spans(n, weight);
    if let Entry::Vacant(root) = labels.entry((0, n)) {
        // No root label reached the bar: the most-voted one over the whole sentence (the
        // first in label order on a tie), else an unscored `TOP`.
        let label = tallies
            .iter()
            .filter(|((span, _), _)| *span == (0, n))
            .max_by(|a, b| a.1.votes.cmp(&b.1.votes).then(b.0.1.cmp(a.0.1)))
            .map_or(TOP, |((_, label), _)| label);
        root.insert(vec![(0.0, label)]);
        chosen.insert((0, n));
    }
    Ok(build((0, n), &chosen, &labels, &leaves))
}

/// Every constituent of `tree` (preterminals aside) as (span, depth, label); returns the
/// end of `tree`'s span.
fn constituents<'a>(
    tree: &'a Tree,
    start: usize,
    depth: usize,
    out: &mut Vec<(Span, usize, &'a str)>,
) -> usize {
    match tree {
        Tree::Word { .. } => start + 1,
        Tree::Phrase { label, children } => {
            let end = children
                .iter()
                .fold(start, |at, c| constituents(c, at, depth + 1, out));
            out.push(((start, end), depth, label));
            end
        }
    }
}

/// CKY over `n` words: the set of non-crossing spans of positive weight with the largest
/// total weight.
fn best_spans(n: usize, weight: impl Fn(Span) -> f64) -> HashSet<Span> {
    let at = |i: usize, j: usize| i * (n + 1) + j;
    let mut best = vec![0.0f64; (n + 1) * (n + 1)];
    let mut split = vec![0usize; (n + 1) * (n + 1)];
    for len in 1..=n {
        for i in 0..=n - len {
            let j = i + len;
            let mut inside = 0.0;
            for k in i + 1..j {
                let s = best[at(i, k)] + best[at(k, j)];
                if s > inside {
                    inside = s;
                    split[at(i, j)] = k;
                }
            }
            best[at(i, j)] = inside + weight((i, j));
        }
    }
    let mut chosen = HashSet::new();
    let mut todo = vec![(0, n)];
    while let Some((i, j)) = todo.pop() {
        if weight((i, j)) > 0.0 {
            chosen.insert((i, j));
        }
        let k = split[at(i, j)];
        if k > i {
            todo.push((i, k));
            todo.push((k, j));
        }
    }
    chosen
}

/// The tree over `span`: its unary chain of labels, outermost first, over the chosen
/// spans inside it (largest first) and the preterminals between them.
fn build(
    span: Span,
    chosen: &HashSet<Span>,
    labels: &HashMap<Span, Vec<(f64, &str)>>,
    leaves: &[Tree],
) -> Tree {
    let (start, end) = span;
    let mut children = Vec::new();
    let mut at = start;
    while at < end {
        let inner = (at + 1..=end)
            .rev()
            .find(|&e| (at, e) != span && chosen.contains(&(at, e)));
        match inner {
            Some(e) => {
                children.push(build((at, e), chosen, labels, leaves));
                at = e;
            }
            None => {
                children.push(leaves[at].clone());
                at += 1;
            }
        }
    }
    let chain = &labels[&span];
    let mut chain = chain.iter().rev();
    let innermost = chain.next().map_or(TOP, |&(_, l)| l);
    chain.fold(Tree::phrase(innermost, children), |tree, &(_, label)| {
        Tree::phrase(label, vec![tree])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;
    use crate::task::parse::parse_trees;

    fn tree(s: &str) -> Tree {
        parse_trees(s).unwrap().remove(0)
    }

    fn spans_of(t: &Tree) -> Vec<(Span, String)> {
        let mut out = Vec::new();
        constituents(t, 0, 0, &mut out);
        let mut v: Vec<_> = out
            .into_iter()
            .map(|(s, _, l)| (s, l.to_string()))
            .collect();
        v.sort();
        v
    }

    #[test]
    fn identical_trees_give_the_tree_back() {
        let t = tree("(S (NP (DT The) (NN dog)) (VP (VBZ barks) (ADVP (RB loudly))) (. .))");
        assert_eq!(vote(&[t.clone(), t.clone(), t.clone()]).unwrap(), t);
        assert_eq!(vote(std::slice::from_ref(&t)).unwrap(), t);
    }

    #[test]
    fn majority_constituents_win() {
        // Votes: S 3; NP[0,2) 2; VP[2,4) 2; NP[3,4) 1; VP[1,4) 1. Of 3 trees, 2 is the bar.
        let a = tree("(S (NP (XX a) (XX b)) (VP (XX c) (NP (XX d))))");
        let b = tree("(S (NP (XX a) (XX b)) (VP (XX c) (XX d)))");
        let c = tree("(S (XX a) (VP (XX b) (XX c) (XX d)))");
        assert_eq!(vote(&[a, b.clone(), c]).unwrap(), b);
    }

    #[test]
    fn unary_chains_keep_the_voters_order() {
        // S over VP over the same words in two trees, VP alone in the third: S (2 votes)
        // stays outside VP (3 votes).
        let a = tree("(S (VP (XX a) (XX b)))");
        let c = tree("(VP (XX a) (XX b))");
        let want = tree("(S (VP (XX a) (XX b)))");
        assert_eq!(vote(&[a.clone(), c.clone(), a.clone()]).unwrap(), want);
        assert_eq!(vote(&[c, a.clone(), a]).unwrap(), want);
    }

    #[test]
    fn crossing_ties_give_one_well_formed_tree() {
        let a = tree("(S (NP (XX a) (XX b)) (XX c))");
        let b = tree("(S (XX a) (NP (XX b) (XX c)))");
        let v = vote(&[a.clone(), b.clone()]).unwrap();
        assert!(v == a || v == b, "{v}");
    }

    #[test]
    fn the_root_is_made_up_when_no_root_reaches_the_bar() {
        let a = tree("(S (XX a) (XX b))");
        let b = tree("(NP (XX a) (XX b))");
        let c = tree("(FRAG (XX a) (XX b))");
        let d = tree("(S (XX a) (XX b))");
        // S has 2 of 4 votes: a tie reaches the bar.
        assert_eq!(vote(&[a.clone(), b.clone(), c.clone(), d]).unwrap(), a);
        // 1 of 3 each: the first in label order among the most voted.
        assert_eq!(vote(&[b.clone(), c.clone(), a]).unwrap(), c);
    }

    #[test]
    fn trees_over_other_words_are_an_error() {
        let a = tree("(S (XX a) (XX b))");
        let b = tree("(S (XX a) (XX c))");
        assert_eq!(vote(&[]), Err(VoteError::NoTrees));
        let e = vote(&[a.clone(), a, b]).unwrap_err();
        assert_eq!(e, VoteError::WordsDiffer { tree: 2 });
        assert!(
            e.to_string().starts_with("tree 3 is over other words"),
            "{e}"
        );
    }

    /// A random tree over words `start..end` from three labels, so random trees share brackets.
    fn random_tree(rng: &mut Rng, start: usize, end: usize) -> Tree {
        const LABELS: [&str; 3] = ["NP", "VP", "PP"];
        let mut below = |n: usize| rng.below(n as u64) as usize;
        if end - start == 1 {
            return Tree::word("XX", format!("w{start}"));
        }
        let mut cuts = vec![start, start + 1 + below(end - start - 1)];
        if below(2) == 0 && cuts[1] + 1 < end {
            cuts.push(cuts[1] + 1 + below(end - cuts[1] - 1));
        }
        cuts.push(end);
        let label = LABELS[below(3)];
        let children = cuts
            .windows(2)
            .map(|w| random_tree(rng, w[0], w[1]))
            .collect();
        Tree::phrase(label, children)
    }

    /// Henderson & Brill's property: with an odd number of trees, the combined tree has
    /// exactly the constituents a strict majority of them has (the root aside, which is
    /// made up when no root label has a majority).
    #[test]
    fn odd_votes_keep_exactly_the_majority_constituents() {
        let mut rng = Rng::new(7);
        for round in 0..300 {
            let n = 2 + round % 7;
            let m = [3, 5, 7][round % 3];
            let trees: Vec<Tree> = (0..m).map(|_| random_tree(&mut rng, 0, n)).collect();
            let combined = vote(&trees).unwrap();
            assert_eq!(combined.words(), trees[0].words());
            let mut count: HashMap<(Span, String), usize> = HashMap::new();
            for t in &trees {
                let mut own = spans_of(t);
                own.dedup();
                for s in own {
                    *count.entry(s).or_default() += 1;
                }
            }
            let mut want: Vec<_> = count
                .into_iter()
                .filter(|&(_, c)| 2 * c > m)
                .map(|(s, _)| s)
                .collect();
            let mut got = spans_of(&combined);
            if !want.iter().any(|(s, _)| *s == (0, n)) {
                got.retain(|(s, _)| *s != (0, n));
            }
            want.sort();
            got.dedup();
            assert_eq!(got, want, "round {round}: {trees:?} -> {combined}");
        }
    }
}
