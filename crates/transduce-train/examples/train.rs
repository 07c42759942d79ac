//! Training from code: the `tiny` preset on a file of `source<TAB>target` lines, through
//! the library rather than the command line (`transduce prepare` + `transduce train`).
//!
//! `cargo run --example train -- PAIRS.tsv OUT` writes OUT/data (the BPE vocabulary and the
//! token caches) and OUT/run (checkpoints, `metrics.jsonl`), and prints where it stopped.

use std::path::PathBuf;

use transduce::ModelConfig;
use transduce::burn::prelude::Device;
use transduce_train::error::io;
use transduce_train::prepared::{self, PrepareArgs, Prepared, Vocabulary};
use transduce_train::train::{RunConfig, TrainOptions, Trainer};

fn main() -> transduce_train::Result<()> {
    let mut args = std::env::args().skip(1).map(PathBuf::from);
    let (Some(tsv), Some(out)) = (args.next(), args.next()) else {
        return Err(transduce_train::Error::Usage(
            "usage: train PAIRS.tsv OUT".into(),
        ));
    };
    // The two columns as the parallel files `prepare` reads.
    let text = std::fs::read_to_string(&tsv).map_err(io(&tsv))?;
    let (src, tgt): (Vec<&str>, Vec<&str>) =
        text.lines().filter_map(|l| l.split_once('\t')).unzip();
    std::fs::create_dir_all(&out).map_err(io(&out))?;
    let (src_file, tgt_file, data) = (out.join("src.txt"), out.join("tgt.txt"), out.join("data"));
    std::fs::write(&src_file, src.join("\n")).map_err(io(&src_file))?;
    std::fs::write(&tgt_file, tgt.join("\n")).map_err(io(&tgt_file))?;
    prepared::prepare(PrepareArgs {
        src: &src_file,
        tgt: &tgt_file,
        valid_src: None,
        valid_tgt: None,
        vocabulary: Vocabulary::Learn(300),
        max_len: 64,
        out: &data,
    })?;
    let mut prepared = Prepared::load(&data)?;
    let model = ModelConfig::tiny().with_vocab(prepared.tokenizer.vocab_size());
    prepared.train.close_sources(&model);
    let options = TrainOptions {
        max_tokens: 400,
        warmup: 10,
        max_steps: Some(30),
        ..Default::default()
    };
    let summary = Trainer {
        run_dir: &out.join("run"),
        config: RunConfig {
            model,
            options,
            data,
            init: None,
        },
        train: &prepared.train,
        valid: None,
        focus: None,
        device: Device::flex(),
        resume: false,
        progress: false,
        log_every: 10,
        graph: false,
        fused: true,
        collective: None,
    }
    .run()?;
    println!(
        "trained {} steps; checkpoint {:?}",
        summary.state.step, summary.last_checkpoint
    );
    Ok(())
}
