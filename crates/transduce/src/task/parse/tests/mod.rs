//! Tests of the parsing task: helpers, the Penn Treebank sample, then one module per
//! concept.

use super::*;
use std::collections::{BTreeSet, HashMap, HashSet};
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
        None => transduce_testing::shared_data().join("ptb-sample"),
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
            transduce_testing::skip(format_args!("{why}"));
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

mod constraint;
mod linearize;
mod preprocess;
mod print;
mod read;
