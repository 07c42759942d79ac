//! `transduce import`: Marian (OPUS-MT) folders from tests/fixtures/marian become bundles
//! that translate as transformers' `generate` does; what cannot be represented is refused by
//! file and field, with nothing written.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::*;

/// A copy of a fixture folder, to alter.
fn copy_of(model: &str, into: &Path) -> PathBuf {
    let to = into.join(model);
    std::fs::create_dir_all(&to).unwrap();
    for entry in std::fs::read_dir(marian_fixture(model)).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

pub(crate) fn reference(model: &str) -> Value {
    serde_json::from_slice(&std::fs::read(marian_fixture(model).join("reference.json")).unwrap())
        .unwrap()
}

/// Imports `dir` into `out` with `flags`; the bundle folder.
fn import(dir: &Path, out: &Path, flags: &[&str]) -> String {
    let mut args = vec!["import", s(dir), "--out", s(out)];
    args.extend_from_slice(flags);
    run(&args)
}

/// Translates every reference sentence with the bundle's own defaults (beam 4, |Y|^α, as
/// generate) and with beam 1; both must be transformers' texts.
pub(crate) fn assert_translates_as_transformers(bundle: &Path, model: &str, tmp: &Path) {
    let reference = reference(model);
    let cases = reference["generate"].as_array().unwrap();
    let input = tmp.join(format!("{model}.txt"));
    let texts: Vec<&str> = cases.iter().map(|c| c["text"].as_str().unwrap()).collect();
    std::fs::write(&input, texts.join("\n") + "\n").unwrap();
    for (key, flags) in [("beam4", &[][..]), ("greedy", &["--beam", "1"][..])] {
        let out = translate_file(bundle, &input, &tmp.join(format!("{model}.{key}")), flags);
        let got: Vec<&str> = out.lines().collect();
        for (i, case) in cases.iter().enumerate() {
            assert_eq!(
                got[i],
                case[key]["text"].as_str().unwrap(),
                "{model} {key}, sentence {i}: {}",
                texts[i]
            );
        }
    }
}

#[test]
fn a_marian_folder_translates_as_transformers_after_import() {
    let tmp = tempfile::tempdir().unwrap();
    // tc: byte fallback and a joint sorted vocabulary, `<s>` among its rows; student: 6
    // encoder and 2 decoder layers.
    for model in ["swish", "relu", "student", "tc"] {
        let out = tmp.path().join(format!("{model}-bundle"));
        let said = import(
            &marian_fixture(model),
            &out,
            &["--source", "en", "--target", "de"],
        );
        assert!(said.contains("imported"), "{said}");
        for file in [
            "config.json",
            "tokenizer.json",
            "model.safetensors",
            "README.md",
        ] {
            assert!(out.join(file).exists(), "{model}: {file}");
        }
        let card = std::fs::read_to_string(out.join("README.md")).unwrap();
        assert!(
            card.contains("cc-by-4.0") && card.contains("CC-BY 4.0"),
            "{card}"
        );
        let config: Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert_eq!(config["provenance"]["licence"], "cc-by-4.0");
        assert_eq!(config["decoding"]["lengthNorm"], "power");
        assert_translates_as_transformers(&out, model, tmp.path());
    }
}

#[test]
fn a_pytorch_checkpoint_imports_as_its_safetensors_twin() {
    // relu.pytorch_model.bin: the relu model's state dict as `torch.save` writes it (older
    // hub checkpoints), with the tied copies and the position tables.
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_of("relu", tmp.path());
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    std::fs::copy(
        marian_fixture("relu.pytorch_model.bin"),
        dir.join("pytorch_model.bin"),
    )
    .unwrap();
    let out = tmp.path().join("bundle");
    import(&dir, &out, &["--source", "en", "--target", "de"]);
    assert_translates_as_transformers(&out, "relu", tmp.path());
}

#[test]
fn int8_bundles_import_and_need_a_licence_when_the_card_has_none() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = copy_of("swish", tmp.path());
    std::fs::write(dir.join("README.md"), "# a model without a header\n").unwrap();
    let out = tmp.path().join("bundle");
    let err = fail(&[
        "import",
        s(&dir),
        "--out",
        s(&out),
        "--source",
        "en",
        "--target",
        "de",
    ]);
    assert!(
        err.contains("--licence") && err.contains("README.md"),
        "{err}"
    );
    assert!(!out.exists(), "nothing is written on a refusal");
    import(
        &dir,
        &out,
        &[
            "--licence",
            "cc-by-4.0",
            "--weights",
            "int8",
            "--source",
            "en",
            "--target",
            "de",
        ],
    );
    let config: Value =
        serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
    assert_eq!(config["weights"], "int8");
}

#[test]
fn what_cannot_be_represented_is_refused_by_file_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, Value)] = &[
        (
            "config.json",
            "share_encoder_decoder_embeddings",
            Value::Bool(false),
        ),
        ("config.json", "decoder_layers", Value::from(0)),
        ("config.json", "decoder_attention_heads", Value::from(2)),
        ("config.json", "normalize_before", Value::Bool(true)),
        ("config.json", "layernorm_embedding", Value::Bool(true)),
        ("config.json", "activation_function", Value::from("gelu")),
        ("config.json", "scale_embedding", Value::Bool(false)),
        ("config.json", "decoder_start_token_id", Value::from(0)),
        ("config.json", "model_type", Value::from("t5")),
        (
            "generation_config.json",
            "bad_words_ids",
            serde_json::json!([[5], [552]]),
        ),
    ];
    for (i, (file, field, value)) in cases.iter().enumerate() {
        let dir = copy_of("swish", &tmp.path().join(i.to_string()));
        let path = dir.join(file);
        let mut json: serde_json::Map<String, Value> =
            serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        json.insert(field.to_string(), value.clone());
        std::fs::write(&path, serde_json::to_vec_pretty(&json).unwrap()).unwrap();
        let out = tmp.path().join(format!("out{i}"));
        let err = fail(&["import", s(&dir), "--out", s(&out)]);
        assert!(
            err.contains(file) && err.contains(&format!("`{field}`")),
            "{field}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
        assert!(!out.exists(), "{field}: nothing is written on a refusal");
    }
    // A missing file, a broken one, and a vocabulary that disagrees with the config.
    let dir = copy_of("swish", &tmp.path().join("missing"));
    std::fs::remove_file(dir.join("vocab.json")).unwrap();
    let err = fail(&[
        "import",
        s(&dir),
        "--out",
        s(&tmp.path().join("o1")),
        "--source",
        "en",
        "--target",
        "de",
    ]);
    assert!(err.contains("vocab.json"), "{err}");
    let dir = copy_of("swish", &tmp.path().join("broken"));
    std::fs::write(
        dir.join("config.json"),
        "{\"model_type\": \"marian\",\n  oops}",
    )
    .unwrap();
    let err = fail(&[
        "import",
        s(&dir),
        "--out",
        s(&tmp.path().join("o2")),
        "--source",
        "en",
        "--target",
        "de",
    ]);
    assert!(
        err.contains("config.json") && err.contains("line 2"),
        "{err}"
    );
    let dir = copy_of("swish", &tmp.path().join("short"));
    std::fs::write(
        dir.join("vocab.json"),
        r#"{"</s>": 0, "<unk>": 1, "<pad>": 2}"#,
    )
    .unwrap();
    let err = fail(&[
        "import",
        s(&dir),
        "--out",
        s(&tmp.path().join("o3")),
        "--source",
        "en",
        "--target",
        "de",
    ]);
    assert!(
        err.contains("vocab.json") && err.contains("3 entries"),
        "{err}"
    );
    let dir = copy_of("swish", &tmp.path().join("noweights"));
    std::fs::remove_file(dir.join("model.safetensors")).unwrap();
    let err = fail(&[
        "import",
        s(&dir),
        "--out",
        s(&tmp.path().join("o4")),
        "--source",
        "en",
        "--target",
        "de",
    ]);
    assert!(err.contains("pytorch_model.bin"), "{err}");
}

/// The perplexity `transduce eval ppl` or a training run prints ("perplexity X").
fn perplexity(said: &str) -> f64 {
    let at = said.rfind("perplexity ").expect("a perplexity") + "perplexity ".len();
    said[at..]
        .split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

#[test]
fn an_imported_model_fine_tunes_and_resumes() {
    // The swish model copies its source: on English→English pairs its perplexity is near 1,
    // and a training run from it must see the same sources it does (closed by EOS).
    let tmp = tempfile::tempdir().unwrap();
    let p = |name: &str| tmp.path().join(name);
    import(
        &marian_fixture("swish"),
        &p("bundle"),
        &["--source", "en", "--target", "de"],
    );
    let reference = reference("swish");
    let lines: Vec<&str> = reference["generate"]
        .as_array()
        .unwrap()
        .iter()
        .skip(3) // Tatoeba sentences only
        .map(|c| c["text"].as_str().unwrap())
        .collect();
    let text = lines.join("\n") + "\n";
    for side in ["train.en", "train.de", "val.en", "val.de"] {
        std::fs::write(p(side), &text).unwrap();
    }
    run(&[
        "prepare",
        "--src",
        s(&p("train.en")),
        "--tgt",
        s(&p("train.de")),
        "--valid-src",
        s(&p("val.en")),
        "--valid-tgt",
        s(&p("val.de")),
        "--tokenizer",
        s(&p("bundle")),
        "--out",
        s(&p("data")),
    ]);
    let before = perplexity(&run(&[
        "eval",
        "ppl",
        "--model",
        s(&p("bundle")),
        "--src",
        s(&p("val.en")),
        "--tgt",
        s(&p("val.de")),
    ]));
    assert!(
        before < 1.2,
        "the imported model copies: perplexity {before}"
    );
    let first = run(&[
        "train",
        "--data",
        s(&p("data")),
        "--init",
        s(&p("bundle")),
        "--out",
        s(&p("run")),
        "--backend",
        "cpu",
        "--max-steps",
        "4",
        "--checkpoint-steps",
        "2",
        "--quiet",
    ]);
    // A few small steps barely move it: the run's validation sees what eval ppl saw.
    let trained = perplexity(&first);
    assert!(
        (trained - before).abs() < 0.1,
        "{before} → {trained}: {first}"
    );
    let resumed = run(&[
        "train",
        "--data",
        s(&p("data")),
        "--out",
        s(&p("run")),
        "--resume",
        "--max-steps",
        "6",
        "--backend",
        "cpu",
        "--quiet",
    ]);
    assert!(resumed.contains("stopped at step 6"), "{resumed}");
}
