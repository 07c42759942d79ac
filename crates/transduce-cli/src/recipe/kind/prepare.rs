//! `kind = "prepare"`: a tokenizer and prepared data (`transduce prepare`), from source
//! and target files, `source<TAB>target` files, or treebank trees for parsing.

use std::any::Any;
use std::path::PathBuf;

use transduce_train::error::Result;

use crate::cmd::{self, prepare::PrepareCmd};

use super::super::argv::Argv;
use super::super::format::Input;
use super::super::plan::{Output, Plan};
use super::super::sets::{SMOKE_EVAL_LINES, SMOKE_TRAIN_LINES, corpus, split_tsv};
use super::fields::Fields;
use super::spec::{At, CostAt, Spec};

/// A prepare stage's corpora and vocabulary, resolved.
#[derive(Clone, Debug)]
pub struct Prepare {
    pub parse: bool,
    /// Sources (or trees, for parsing) and targets, each a list of files joined in order.
    pub src: Vec<PathBuf>,
    pub tgt: Vec<PathBuf>,
    pub valid_src: Vec<PathBuf>,
    pub valid_tgt: Vec<PathBuf>,
    /// `source<TAB>target` files, split into the two sides before `transduce prepare`
    /// reads them (joined after `src`/`tgt`, so a recipe may give both).
    pub tsv: Vec<PathBuf>,
    pub valid_tsv: Vec<PathBuf>,
    pub vocab_size: Option<usize>,
    pub tokenizer: Option<PathBuf>,
    pub max_len: Option<usize>,
}

/// A prepared data folder.
pub fn output(plan: &Plan, node: usize) -> Result<Output> {
    Ok(Output::Prepared(plan.nodes[node].dir.clone()))
}

impl Prepare {
    pub fn read(f: &Fields) -> Result<Prepare> {
        let parse = f.task_parse("task")?;
        let (src, tgt, valid_src, valid_tgt) = if parse {
            for name in ["src", "tgt", "valid_src", "valid_tgt", "tsv", "valid_tsv"] {
                if f.has(name) {
                    return Err(f.err(name, "a parsing task reads `trees`".into()));
                }
            }
            (
                f.files("trees")?,
                Vec::new(),
                f.optional_files("valid_trees")?,
                Vec::new(),
            )
        } else {
            for name in ["trees", "valid_trees"] {
                if f.has(name) {
                    return Err(f.err(name, "`trees` are for task = \"parse\"".into()));
                }
            }
            let valid_src = f.optional_files("valid_src")?;
            let valid_tgt = f.optional_files("valid_tgt")?;
            if valid_src.is_empty() != valid_tgt.is_empty() {
                let name = if valid_src.is_empty() {
                    "valid_tgt"
                } else {
                    "valid_src"
                };
                return Err(f.err(name, "give valid_src and valid_tgt together".into()));
            }
            // A TSV stands in for src and tgt: either is then optional.
            let has_tsv = f.has("tsv");
            let side = |name: &str| -> Result<Vec<PathBuf>> {
                if has_tsv {
                    f.optional_files(name)
                } else {
                    f.files(name)
                }
            };
            let (src, tgt) = (side("src")?, side("tgt")?);
            if src.len() != tgt.len() && (src.is_empty() || tgt.is_empty()) {
                let name = if src.is_empty() { "tgt" } else { "src" };
                return Err(f.err(name, "give src and tgt together".into()));
            }
            (src, tgt, valid_src, valid_tgt)
        };
        let tokenizer = match f.get("tokenizer") {
            None => None,
            Some(_) => Some(match f.single("tokenizer")? {
                Input::Path(p) => p,
                Input::Stage(r) if r.sub.is_some() => f.file("tokenizer", &Input::Stage(r))?,
                Input::Stage(r) => match f.reference_output("tokenizer", &r)? {
                    Output::Prepared(d) | Output::Run(d) | Output::Bundle(d) => d,
                    Output::Weights { run, .. } => run,
                    other => {
                        return Err(f.expected(
                            "tokenizer",
                            "a tokenizer (prepare, train or export)",
                            &other,
                        ));
                    }
                },
            }),
        };
        let vocab_size = f.count("vocab_size")?;
        if tokenizer.is_some() && vocab_size.is_some() {
            return Err(f.err(
                "vocab_size",
                "a reused tokenizer has its own vocabulary".into(),
            ));
        }
        Ok(Prepare {
            parse,
            src,
            tgt,
            valid_src,
            valid_tgt,
            tsv: f.optional_files("tsv")?,
            valid_tsv: f.optional_files("valid_tsv")?,
            vocab_size,
            tokenizer,
            max_len: f.count("max_len")?,
        })
    }
}

impl Spec for Prepare {
    fn run(&self, at: &At, _resume: bool) -> Result<()> {
        let (dir, smoke) = (&at.dir, at.smoke());
        let inputs = dir.join("inputs");
        let train_limit = smoke.then_some(SMOKE_TRAIN_LINES);
        let valid_limit = smoke.then_some(SMOKE_EVAL_LINES * 4);
        // TSV files are split into two sides first, and joined after src / tgt.
        let (mut src, mut tgt) = (self.src.clone(), self.tgt.clone());
        let (mut valid_src, mut valid_tgt) = (self.valid_src.clone(), self.valid_tgt.clone());
        for (files, name, limit, s, t) in [
            (&self.tsv, "train", train_limit, &mut src, &mut tgt),
            (
                &self.valid_tsv,
                "valid",
                valid_limit,
                &mut valid_src,
                &mut valid_tgt,
            ),
        ] {
            if !files.is_empty() {
                let (a, b) = split_tsv(files, limit, &inputs.join(format!("{name}-tsv")))?;
                s.push(a);
                t.push(b);
            }
        }
        let mut args: Vec<String> = vec!["--out".into(), dir.display().to_string()];
        let mut add = |flag: &str, files: &[PathBuf], name: &str, limit| -> Result<()> {
            if !files.is_empty() {
                let file = corpus(files, limit, &inputs.join(name))?;
                args.extend([flag.to_string(), file.display().to_string()]);
            }
            Ok(())
        };
        if self.parse {
            add("--trees", &src, "train.trees", train_limit)?;
            add("--valid-trees", &valid_src, "valid.trees", valid_limit)?;
        } else {
            add("--src", &src, "train.src", train_limit)?;
            add("--tgt", &tgt, "train.tgt", train_limit)?;
            add("--valid-src", &valid_src, "valid.src", valid_limit)?;
            add("--valid-tgt", &valid_tgt, "valid.tgt", valid_limit)?;
        }
        args.extend([
            "--task".into(),
            if self.parse { "parse" } else { "translate" }.into(),
        ]);
        if let Some(t) = &self.tokenizer {
            args.extend(["--tokenizer".into(), t.display().to_string()]);
        } else {
            let v = self.vocab_size.unwrap_or(37_000);
            let v = if smoke { v.min(400) } else { v };
            args.extend(["--vocab-size".into(), v.to_string()]);
        }
        if let Some(m) = self.max_len {
            args.extend(["--max-len".into(), m.to_string()]);
        }
        cmd::prepare::run(Argv::<PrepareCmd>::read(&args)?)
    }

    fn cost(&self, at: &CostAt) -> Option<(f64, &'static str)> {
        // BPE learning and encoding, about 2 MB of text a second.
        let bytes: u64 = if at.smoke() {
            100_000
        } else {
            self.src
                .iter()
                .chain(&self.tsv)
                .filter_map(|p| std::fs::metadata(p).ok())
                .map(|m| m.len() * 2)
                .sum()
        };
        Some((bytes as f64 / 2e6 + 1.0, "from the data's size"))
    }

    fn data_files(&self) -> Vec<PathBuf> {
        [
            &self.src,
            &self.tgt,
            &self.valid_src,
            &self.valid_tgt,
            &self.tsv,
            &self.valid_tsv,
        ]
        .into_iter()
        .flatten()
        .cloned()
        .collect()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
