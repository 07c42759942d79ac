//! The bundle files the import writes, against the model crate's own writer: the weights
//! file of every dtype is byte for byte what `Bundle::to_bytes` writes for the same model
//! (the import computes it tensor by tensor without building the model), and the
//! checkpoint's form (safetensors, PyTorch zip, PyTorch legacy) does not change a byte.

mod common;

use common::{files, fixture, folder_files, imported_files, options};
use transduce::burn::prelude::Device;
use transduce::{Bundle, WeightDtype};
use transduce_import::{ErrorCode, PYTORCH, import};

#[test]
fn weights_are_what_the_model_crate_writes_for_the_same_model() {
    for model in ["swish", "relu"] {
        let f32_files = imported_files(model, WeightDtype::F32).files;
        let bundle = Bundle::from_bytes(&f32_files, &Device::flex()).unwrap();
        for dtype in [WeightDtype::F32, WeightDtype::F16, WeightDtype::Int8] {
            let ours = imported_files(model, dtype).files;
            let theirs = bundle.to_bytes(dtype).unwrap();
            assert!(
                ours.weights == theirs.weights,
                "{model} {dtype:?}: weights differ"
            );
            assert!(
                ours.tokenizer == theirs.tokenizer,
                "{model}: tokenizer.json differs"
            );
            // config.json differs only in `weights` and the sums (the bundle above was read
            // from the f32 import, whose provenance it keeps).
            let (a, b): (serde_json::Value, serde_json::Value) = (
                serde_json::from_slice(&ours.config).unwrap(),
                serde_json::from_slice(&theirs.config).unwrap(),
            );
            assert_eq!(a, b, "{model} {dtype:?}: config.json");
        }
    }
}

#[test]
fn pytorch_checkpoints_give_the_same_bundle_as_safetensors() {
    let want = imported_files("relu", WeightDtype::Int8).files;
    let dir = fixture("relu");
    let mut forms = vec![("zip", fixture("relu.pytorch_model.bin"))];
    let legacy = fixture("relu.legacy.pytorch_model.bin");
    if legacy.exists() {
        forms.push(("legacy", legacy));
    }
    assert_eq!(forms.len(), 2, "the legacy fixture is committed");
    for (form, path) in forms {
        let got = import(
            folder_files(&dir, &path, PYTORCH),
            &options(WeightDtype::Int8),
        )
        .unwrap()
        .files;
        assert!(got.weights == want.weights, "{form}: weights differ");
        assert_eq!(got.config, want.config, "{form}: config.json");
    }
}

/// A Marian model published under its author's own name: the languages come from its card
/// (two languages, source first), and without them it is one error that says what to pass.
#[test]
fn a_model_under_any_name_takes_its_languages_from_the_card() {
    let named = |name: &str| transduce_import::Options {
        name: Some(name.into()),
        source: None,
        target: None,
        ..options(WeightDtype::Int8)
    };
    // The fixture's card lists `language: - en - de`.
    let imported = import(files("swish"), &named("someone/my-legal-finetune")).unwrap();
    let config: serde_json::Value = serde_json::from_slice(&imported.files.config).unwrap();
    assert!(
        config["task"]["source"] == "en" && config["task"]["target"] == "de",
        "{config}"
    );
    let mut one_language = files("swish");
    one_language.insert(
        "README.md",
        b"---\nlanguage: en\nlicense: cc-by-4.0\n---\n".to_vec(),
    );
    let e = import(one_language, &named("someone/my-legal-finetune")).unwrap_err();
    assert_eq!(e.code, ErrorCode::NoLanguages);
    assert!(e.message.contains("language:"), "{e}");
}

#[test]
fn each_bad_file_is_one_error_naming_it() {
    let mut no_vocab = files("swish");
    let e = {
        let mut f = transduce_import::ModelFiles::new();
        for name in [
            "config.json",
            "source.spm",
            "README.md",
            "model.safetensors",
        ] {
            f.insert(name, no_vocab.get(name).unwrap().to_vec());
        }
        no_vocab = f;
        import(no_vocab, &options(WeightDtype::Int8)).unwrap_err()
    };
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::MissingFile, Some("vocab.json"))
    );

    let mut html = files("swish");
    html.insert("config.json", b"<!doctype html><h1>Not found</h1>".to_vec());
    let e = import(html, &options(WeightDtype::Int8)).unwrap_err();
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::Corrupt, Some("config.json"))
    );
    assert!(
        e.to_string().starts_with("config.json: line 1 column 1"),
        "{e}"
    );

    let mut cut = files("swish");
    let weights = cut.get("model.safetensors").unwrap().to_vec();
    cut.insert("model.safetensors", weights[..weights.len() / 2].to_vec());
    let e = import(cut, &options(WeightDtype::Int8)).unwrap_err();
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::Corrupt, Some("model.safetensors"))
    );

    let mut learned = files("swish");
    let config = String::from_utf8(learned.get("config.json").unwrap().to_vec()).unwrap();
    let config = config.replacen('{', "{\"normalize_before\": true,", 1);
    learned.insert("config.json", config.into_bytes());
    let e = import(learned, &options(WeightDtype::Int8)).unwrap_err();
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::Unsupported, Some("config.json"))
    );
    assert!(e.message.contains("normalize_before"), "{e}");

    let mut no_card = files("swish");
    no_card.insert("README.md", b"# no header\n".to_vec());
    let e = import(no_card, &options(WeightDtype::Int8)).unwrap_err();
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::NoLicence, Some("README.md"))
    );

    let mut cut_bin = files("relu");
    let bin = std::fs::read(fixture("relu.pytorch_model.bin")).unwrap();
    cut_bin.insert(PYTORCH, bin[..bin.len() - 100].to_vec());
    let mut only_bin = transduce_import::ModelFiles::new();
    for name in [
        "config.json",
        "vocab.json",
        "source.spm",
        "README.md",
        PYTORCH,
    ] {
        only_bin.insert(name, cut_bin.get(name).unwrap().to_vec());
    }
    let e = import(only_bin, &options(WeightDtype::Int8)).unwrap_err();
    assert_eq!(
        (e.code, e.file.as_deref()),
        (ErrorCode::Corrupt, Some(PYTORCH))
    );
}
