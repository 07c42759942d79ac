//! Fuzzed readers: every input the model crate reads from outside — a bundle's three files,
//! treebank text, linearized trees, text to split into sentences and words — given
//! arbitrary and mutated bytes must give a value or an `Err`, never a panic (in the
//! browser a panic kills the module). Where a reader accepts, properties of its output are
//! checked too. Counts: `TRANSDUCE_FUZZ_CASES`; the long runs are in docs/FUZZING.md.

use crate::common::*;
use transduce::bundle::{BundleFiles, WeightDtype, load_weights};
use transduce::decode::{DecodeOptions, best_outputs};
use transduce::task::parse::{
    ParseConstraint, Tree, delinearize, linearize, parse_trees, parse_trees_lenient, preprocess,
    print_tree, repair, target_vocabulary,
};
use transduce::task::translate::split_sentences;
use transduce::task::words::ptb_words;
use transduce::{Bundle, BundleConfig, ModelConfig, Tokenizer, Transformer};
use transduce_fuzz::{Outcome, Target};

const SHIPPED: [&str; 3] = ["en-de", "de-en", "ptb-parser"];

fn shipped(model: &str, file: &str) -> Vec<u8> {
    let path = transduce_testing::repo_root().join(format!("web/models/{model}/{file}"));
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn tokenizer() -> Tokenizer {
    let text = [
        "a small dog runs.",
        "ein kleiner Hund rennt.",
        "two men play (football)",
        "zwei Männer spielen „Fußball“",
    ];
    Tokenizer::train(text.iter(), 60).unwrap()
}

/// A tiny bundle's files, without checksums (so mutated weights reach the weight reader).
fn tiny_files(config: ModelConfig, dtype: WeightDtype) -> BundleFiles {
    let device = device();
    device.seed(3);
    let model = Transformer::new(&config.with_vocab(60), &device).unwrap();
    unchecked(
        translation_bundle(tokenizer(), model)
            .to_bytes(dtype)
            .unwrap(),
    )
}

/// Size and schema words of config.json, so mutations change fields, not only syntax.
const CONFIG_WORDS: &[&str] = &[
    "\"d_model\": ",
    "\"n_layers\": ",
    "\"vocab_size\": ",
    "\"max_len\": ",
    "\"d_ff\": ",
    "\"n_heads\": ",
    "\"d_k\": ",
    "\"beam\": ",
    "\"maxExtra\": ",
    "\"alpha\": ",
    "\"format\": ",
    "\"positional\": \"learned\"",
    "\"share_embeddings\": false",
    "\"word_focus\": true",
    "\"parse\"",
    "65536",
    "1000000000",
    "2",
    "3",
    "7",
    "4096",
    "1e-9",
];

#[test]
fn fuzz_bundle_config() {
    let mut seeds: Vec<Vec<u8>> = SHIPPED.iter().map(|m| shipped(m, "config.json")).collect();
    seeds.push(tiny_files(ModelConfig::tiny(), WeightDtype::F32).config);
    Target::new("bundle-config", seeds)
        .dictionary(CONFIG_WORDS.iter().map(|w| w.as_bytes()))
        .cases(20_000)
        .run(|input| Outcome::from(&BundleConfig::from_json(input)));
}

#[test]
fn fuzz_tokenizer() {
    let seed = tokenizer().to_json().unwrap().into_bytes();
    Target::new("tokenizer", [seed])
        .dictionary(
            [
                "\"<unk>\"",
                "\"<s>\"",
                "\"</s>\"",
                "\"<pad>\"",
                "\"merges\"",
                "\"vocab\"",
                "\"added_tokens\"",
                "\"id\": ",
                "\"Ġ\"",
                "\"type\": \"BPE\"",
                "null",
            ]
            .iter()
            .map(|w| w.as_bytes()),
        )
        .cases(3_000)
        .run(|input| {
            let tokenizer = Tokenizer::from_bytes(input);
            if let Ok(t) = &tokenizer {
                // A tokenizer that loads must encode and decode whatever a user types.
                for text in ["A small dog runs.", "„Fußball“ 🐕\u{85}\r\n", ""] {
                    if let Ok(ids) = t.encode(text) {
                        let _ = t.decode(&ids);
                    }
                }
                let _ = t.decode(&[0, 1, 2, 3, 59, 60, 1000, u32::MAX]);
            }
            Outcome::from(&tokenizer)
        });
}

#[test]
fn fuzz_weights() {
    let config = ModelConfig::tiny().with_vocab(60);
    let seeds = [WeightDtype::F32, WeightDtype::F16, WeightDtype::Int8]
        .map(|dtype| tiny_files(ModelConfig::tiny(), dtype).weights);
    let device = device();
    Target::new("weights", seeds)
        .dictionary(
            [
                "\"dtype\":\"F16\"",
                "\"dtype\":\"I64\"",
                "\"dtype\":\"I8\"",
                "_scale",
                "\"shape\":[",
                "\"data_offsets\":[",
                "\"__metadata__\"",
                "\u{0}\u{0}\u{c0}\u{7f}",
                "\u{ff}\u{ff}\u{ff}\u{7f}",
            ]
            .iter()
            .map(|w| w.as_bytes()),
        )
        .cases(3_000)
        .max_len(1 << 20)
        .run(|input| {
            let loaded = load_weights(&config, input, &device);
            if let Ok(model) = &loaded {
                // Loaded weights go to the host decoder (what the CPU path decodes with),
                // in f32 and in int8.
                if let Ok(mut host) = transduce::HostModel::new(model) {
                    host.quantize();
                }
            }
            Outcome::from(&loaded)
        });
}

/// The bundle a page loads, with a config that may lie: sizes that do not match the
/// weights, a tokenizer larger than the vocabulary, decoding defaults out of range. What
/// loads must then translate (or refuse with an error).
#[test]
fn fuzz_bundle_with_lying_config() {
    let files = tiny_files(ModelConfig::tiny(), WeightDtype::F16);
    let device = device();
    Target::new("bundle", [files.config.clone()])
        .dictionary(CONFIG_WORDS.iter().map(|w| w.as_bytes()))
        .cases(2_000)
        .run(|config| {
            let files = BundleFiles {
                config: config.to_vec(),
                ..files.clone()
            };
            let bundle = Bundle::from_bytes(&files, &device);
            if let Ok(b) = &bundle {
                let source = b.tokenizer.encode("a small dog runs.").unwrap();
                let options = DecodeOptions {
                    max_extra: b.config.decoding.max_extra.min(8),
                    ..b.config.decoding.clone()
                };
                let _ = best_outputs(b.scorer(), &[source], &options, None);
            }
            Outcome::from(&bundle)
        });
}

fn tree_seeds() -> Vec<Vec<u8>> {
    let mut seeds: Vec<Vec<u8>> = [
        "(S (NP (DT The) (NN dog)) (VP (VBZ barks)) (. .))",
        "( (S (NP-SBJ-1 (PRP It)) (VP (VBD was) (VP (VBN said) (NP (-NONE- *-1)))) (. .)) )",
        "((S (NP (NNP Mr.) (NNP Smith)) (VP (VBD left))))\n((FRAG (NN Yes) (. !)))",
        "( (S \n    (NP-SBJ (DT The) (NN cat) )\n    (VP (VBD sat) \n      (PP-LOC (IN on) (NP (DT the) (NN mat) )))\n    (. .) ))\n",
        "(TOP (S (NP (-LRB- -LRB-) (CD 1\\/2) (-RRB- -RRB-)) (VP (VBZ is) (ADJP|PRT (JJ odd)))))",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    let sample = transduce_testing::shared_data().join("ptb-sample/dev.trees.gz");
    match std::process::Command::new("gzip")
        .arg("-dc")
        .arg(&sample)
        .output()
    {
        Ok(out) if out.status.success() => {
            let text = String::from_utf8_lossy(&out.stdout);
            seeds.extend(text.lines().take(40).map(|l| l.as_bytes().to_vec()));
        }
        _ => eprintln!(
            "fuzz treebank: no PTB sample at {}; hand-written seeds only",
            sample.display()
        ),
    }
    seeds
}

const TREE_WORDS: &[&str] = &[
    "(",
    ")",
    "((",
    "))",
    "(S ",
    "(NP ",
    "(-NONE- *T*-1)",
    "(NN dog)",
    ")S",
    "(S",
    "XX",
    "-LRB-",
    "=2",
    "-SBJ",
    "\n(",
    "\n  ",
];

#[test]
fn fuzz_treebank() {
    Target::new("treebank", tree_seeds())
        .dictionary(TREE_WORDS.iter().map(|w| w.as_bytes()))
        .cases(20_000)
        .run(|input| {
            let text = String::from_utf8_lossy(input);
            let strict = parse_trees(&text);
            let lenient = parse_trees_lenient(&text);
            if let Ok(trees) = &strict {
                // What the strict reader accepts, the lenient one reads the same.
                assert_eq!(&lenient.trees, trees);
                for tree in trees {
                    // Printing is the reader's inverse.
                    let printed = print_tree(tree, false);
                    assert_eq!(
                        parse_trees(&printed).as_deref(),
                        Ok(std::slice::from_ref(tree))
                    );
                }
            }
            Outcome::from(&strict)
        });
}

/// Linearization round trips on every tree the reader yields, and the inverse readers
/// (strict delinearization, total repair, the decoding constraint) take any token
/// sequence without panicking.
#[test]
fn fuzz_linearization() {
    let mut seeds = tree_seeds();
    // Target sequences as the decoder writes them, one per line, with their word count.
    for seed in tree_seeds() {
        if let Ok(trees) = parse_trees(&String::from_utf8_lossy(&seed)) {
            for tree in trees.iter().filter_map(preprocess) {
                let (words, tokens) = linearize(&tree);
                seeds.push(format!("{}\t{}", words.join(" "), tokens.join(" ")).into_bytes());
            }
        }
    }
    let vocab_trees: Vec<Tree> = tree_seeds()
        .iter()
        .flat_map(|s| parse_trees_lenient(&String::from_utf8_lossy(s)).trees)
        .filter_map(|t| preprocess(&t))
        .collect();
    let mut vocab: Vec<String> = ["<pad>", "<s>", "</s>", "<unk>"].map(String::from).to_vec();
    vocab.extend(target_vocabulary(&vocab_trees));
    let constraint = ParseConstraint::new(&vocab, 2);
    Target::new("linearization", seeds)
        .dictionary(TREE_WORDS.iter().map(|w| w.as_bytes()))
        .dictionary(vocab.iter().map(|w| format!(" {w}").into_bytes()))
        .cases(20_000)
        .run(|input| {
            let text = String::from_utf8_lossy(input);
            let mut accepted = false;
            // As a treebank: every preprocessed tree linearizes and reads back.
            for tree in parse_trees_lenient(&text)
                .trees
                .iter()
                .filter_map(preprocess)
            {
                let (words, tokens) = linearize(&tree);
                assert_eq!(
                    delinearize(&tokens, &words),
                    Ok(tree.with_placeholder_tags()),
                    "{tree}"
                );
                accepted = true;
            }
            // As `words \t target tokens`: any sequence gives a tree or an error, and
            // repair always gives a tree over exactly the words.
            let (words, tokens) = text.split_once('\t').unwrap_or(("a b c", &text));
            let words: Vec<&str> = words.split_whitespace().collect();
            let tokens: Vec<&str> = tokens.split_whitespace().collect();
            if delinearize(&tokens, &words).is_ok() {
                accepted = true;
            }
            let repaired = repair(&tokens, &words);
            if !words.is_empty() {
                assert_eq!(repaired.words(), words, "{text:?}");
            }
            // The constraint replays any id prefix.
            let ids: Vec<u32> = tokens
                .iter()
                .map(|t| vocab.iter().position(|v| v == t).unwrap_or(3) as u32)
                .collect();
            let mut allowed = vec![true; vocab.len() + 2];
            constraint.restrict(words.len(), &ids, &mut allowed);
            assert!(allowed.iter().any(|&a| a), "the constraint left no choice");
            let mut allowed = vec![true; vocab.len()];
            constraint.restrict_within(words.len(), ids.len() + 1, &ids, &mut allowed);
            accepted
        });
}

/// Sentence splitting and the parser's word splitting: ranges in order, on character
/// boundaries, covering every non-space character; words never empty or spaced.
#[test]
fn fuzz_sentences_and_words() {
    let seeds = [
        "Hello world. How are you? I'm fine!",
        "He said \"Stop.\" Then he left…  Mr. Smith (aged 3) didn't.\r\nNew line\u{85}NEL\u{2028}LS",
        "Ein Hund läuft. „Wirklich?“ Ja! 犬が走る。 Dog — runs.",
        "don't, can't; it's $5 #1 ``quoted'' [brackets] {braces}",
    ];
    Target::new("sentences", seeds.map(|s| s.as_bytes()))
        .dictionary(
            [
                ".", "!", "?", "…", "\"", "'", "”", "»", " ", "\u{a0}", "\u{3000}", "n't", "``",
            ]
            .map(str::as_bytes),
        )
        .cases(20_000)
        .run(|input| {
            let text = String::from_utf8_lossy(input);
            let ranges = split_sentences(&text);
            let mut covered = 0;
            let mut last_end = 0;
            for r in &ranges {
                assert!(r.start >= last_end && r.start < r.end && r.end <= text.len());
                assert!(text.is_char_boundary(r.start) && text.is_char_boundary(r.end));
                let piece = &text[r.clone()];
                assert_eq!(piece, piece.trim(), "{piece:?}");
                covered += piece.chars().filter(|c| !c.is_whitespace()).count();
                last_end = r.end;
            }
            assert_eq!(covered, text.chars().filter(|c| !c.is_whitespace()).count());
            let words = ptb_words(&text);
            for w in &words {
                assert!(!w.is_empty() && !w.contains(char::is_whitespace), "{w:?}");
            }
            !ranges.is_empty()
        });
}
