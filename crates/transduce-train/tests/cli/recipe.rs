//! `transduce recipe run`: a recipe end to end on the toy corpus, stopped mid-training and
//! run again (the run resumes and equals a plain `transduce train`, done stages are
//! skipped), its bundle's structured provenance; refusals at file:line and field; every
//! shipped recipe at `--scale smoke` on the shared data.

use crate::harness::*;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The toy recipe: prepare, train (tiny), average, select, export, test.
fn toy_recipe(dir: &Path, steps: u64) -> PathBuf {
    let (src, tgt) = corpus(dir);
    let (src, tgt) = (s(&src), s(&tgt));
    let text = format!(
        r#"[recipe]
description = "digits to words"

[[stage]]
name = "data"
kind = "prepare"
src = "{src}"
tgt = "{tgt}"
valid_src = "{src}"
valid_tgt = "{tgt}"
vocab_size = 60

[[stage]]
name = "run"
kind = "train"
data = "@data"
preset = "tiny"
max_tokens = 400
warmup = 20
max_steps = {steps}
checkpoint_steps = 2
keep = 4
seed = 5

[[stage]]
name = "average"
kind = "average"
run = "@run"
last = 2

[[stage]]
name = "select"
kind = "select"
model = "@average"
val = [{{ name = "toy_val", src = "{src}", ref = "{tgt}" }}]
beams = [1, 2]
alphas = [0.6]

[[stage]]
name = "bundle"
kind = "export"
model = "@average"
select = "@select"
source = "xx"
target = "yy"

[[stage]]
name = "test"
kind = "test"
model = "@bundle"
sets = [{{ name = "toy_test", src = "{src}", ref = "{tgt}" }}]
"#
    );
    let path = dir.join("toy.toml");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn recipe_stopped_mid_training_resumes_and_skips_what_is_done() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let recipe = toy_recipe(dir, 120);
    let work = dir.join("work");
    let args = [
        "recipe",
        "run",
        s(&recipe),
        "--work",
        s(&work),
        "--data",
        s(dir),
    ];

    let plan = run(&[&args[..], &["--dry-run"]].concat());
    for line in ["data", "run", "average", "select", "bundle", "test"] {
        assert!(
            plan.lines()
                .any(|l| l.contains(&format!(" {line} ")) && l.contains("to do")),
            "{plan}"
        );
    }
    assert!(plan.contains("estimated: ≈"), "{plan}");

    // Stopped (killed) once the run has written a checkpoint.
    let run_dir = work.join("toy/run");
    let mut child = bin().args(args).spawn().unwrap();
    let start = Instant::now();
    while !run_dir.join("checkpoints/step-00000004").exists() {
        assert!(start.elapsed() < Duration::from_secs(120), "no checkpoint");
        assert!(
            child.try_wait().unwrap().is_none(),
            "the recipe ended before its kill"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(!work.join("toy/bundle").exists());

    let plan = run(&[&args[..], &["--dry-run"]].concat());
    assert!(
        plan.lines()
            .any(|l| l.contains(" data ") && l.contains("done")),
        "{plan}"
    );
    assert!(plan.contains("resumes at step"), "{plan}");

    let out = run(&args);
    assert!(out.contains("==> [1/6] data (prepare): done"), "{out}");
    assert!(
        out.contains("==> [2/6] run (train): resumes at step"),
        "{out}"
    );
    assert!(out.contains("resuming from"), "{out}");
    assert!(out.contains("==> [6/6] test (test): done in"), "{out}");

    // The resumed run equals an uninterrupted `transduce train` with the same options.
    let plain = dir.join("plain");
    run(&[
        "train",
        "--data",
        s(&work.join("toy/data")),
        "--out",
        s(&plain),
        "--preset",
        "tiny",
        "--max-tokens",
        "400",
        "--warmup",
        "20",
        "--max-steps",
        "120",
        "--checkpoint-steps",
        "2",
        "--keep",
        "4",
        "--seed",
        "5",
        "--quiet",
    ]);
    let last = "checkpoints/step-00000120/model.safetensors";
    assert!(
        std::fs::read(run_dir.join(last)).unwrap() == std::fs::read(plain.join(last)).unwrap(),
        "the recipe's resumed run differs from a plain one"
    );

    // The bundle: beam from select, scores in its card, the recipe as its provenance.
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("toy/bundle/bundle/config.json")).unwrap(),
    )
    .unwrap();
    let select: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("toy/select/select.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(config["decoding"]["beam"], select["beam"]);
    assert!(config["metrics"]["bleu_toy_test"].is_number(), "{config}");
    assert!(config["metrics"]["bleu_toy_val"].is_number(), "{config}");
    let origin = &config["provenance"]["recipe"];
    assert_eq!(origin["stage"], "bundle");
    assert_eq!(origin["scale"], "full");
    let lineage: Vec<(&str, &str)> = origin["lineage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["stage"].as_str().unwrap(), s["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        lineage,
        [
            ("data", "prepare"),
            ("run", "train"),
            ("average", "average"),
            ("select", "select"),
            ("bundle", "export")
        ]
    );
    assert_eq!(origin["lineage"][1]["settings"]["max_steps"], 120);
    // The bundle loads and translates.
    let out = translate_file(
        &work.join("toy/bundle/bundle"),
        &dir.join("train.src"),
        &dir.join("hyp"),
        &[],
    );
    assert_eq!(out.lines().count(), 300);

    // Run again: every stage done, nothing made anew.
    let before = std::fs::read(work.join("toy/bundle/bundle/config.json")).unwrap();
    let out = run(&args);
    assert_eq!(out.matches(": done, ").count(), 6, "{out}");
    assert_eq!(
        std::fs::read(work.join("toy/bundle/bundle/config.json")).unwrap(),
        before
    );
    // One stage alone.
    let out = run(&[&args[..], &["--stage", "select"]].concat());
    assert!(out.contains("[1/1] select (select): done"), "{out}");
    // A changed training setting is refused, not trained over.
    let text = std::fs::read_to_string(&recipe)
        .unwrap()
        .replace("seed = 5", "seed = 6");
    std::fs::write(&recipe, text).unwrap();
    let err = fail(&args);
    assert!(
        err.contains("stage run: refused: its settings changed"),
        "{err}"
    );
}

#[test]
fn bad_recipes_get_one_error_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let check = |text: &str, expected: &str| {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let err = fail(&["recipe", "run", s(&path), "--dry-run"]);
        assert!(!err.contains("panicked"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        let want = format!("error: {}:{expected}", path.display());
        assert!(err.starts_with(&want), "expected {want}\ngot {err}");
    };
    let prepare = "[[stage]]\nname = \"data\"\nkind = \"prepare\"\nsrc = \"a\"\ntgt = \"b\"\n";
    check(
        &format!("{prepare}[[stage]]\nname = \"x\"\nkind = \"distil\"\n"),
        "8: stage `x`, field `kind`: unknown stage kind \"distil\"",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@dta\"\nmax_steps = 5\n"
        ),
        "9: stage `run`, field `data`: no stage `dta`",
    );
    check(
        "[[stage]]\nname = \"a\"\nkind = \"train\"\ndata = \"d\"\ninit = \"@b\"\nmax_steps = 1\n\
         [[stage]]\nname = \"b\"\nkind = \"average\"\nrun = \"@a\"\n",
        "10: stage `b`, field `run`: a cycle: a → b → a",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\nmax_steps = 5\nwarmupp = 3\n"
        ),
        "11: stage `run`, field `warmupp`: the trainer says: unexpected argument '--warmupp'",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\nmax_steps = 5\ndropout = 1.5\n"
        ),
        "11: stage `run`, field `dropout`: the trainer says: invalid value '1.5'",
    );
    check(
        &format!("{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\n"),
        "7: stage `run`: a train stage needs the field `max_steps`",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"t\"\nkind = \"test\"\nmodel = \"@data\"\nsets = []\n"
        ),
        "9: stage `t`, field `model`: expected an export stage",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"r\"\nkind = \"train\"\ndata = \"@other:data\"\nmax_steps = 1\n"
        ),
        "9: stage `r`, field `data`: `@other:data` names a recipe that does not exist",
    );
    check(
        "[[stage]]\nname = \"a\"\nkind = \"train\"\nmax_steps = [\n",
        "4: ",
    );
}

/// The shipped recipes (recipes/*.toml), every stage at `--scale smoke` on the shared data.
#[test]
fn every_shipped_recipe_runs_at_smoke_scale() {
    let root = manifest_dir().join("../..");
    let data = root.join("../shared/data");
    if !data.join("ptb-sample").exists() {
        println!(
            "SKIP: every_shipped_recipe_runs_at_smoke_scale: {} not found",
            data.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut recipes: Vec<PathBuf> = std::fs::read_dir(root.join("recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    recipes.sort();
    assert!(!recipes.is_empty());
    for recipe in &recipes {
        let out = run(&[
            "recipe",
            "run",
            s(recipe),
            "--scale",
            "smoke",
            "--data",
            s(&data),
            "--work",
            s(tmp.path()),
        ]);
        assert!(
            out.contains("every stage done"),
            "{}: {out}",
            recipe.display()
        );
        assert!(
            !out.contains(": done, "),
            "{}: a stage was skipped: {out}",
            recipe.display()
        );
    }
}

/// The distillation recipe at smoke scale: its teacher is a shipped bundle, so the student's
/// training data must be exactly what `transduce translate` makes of the same sources with
/// the recipe's beam and α (checked apart from the runner), and the exported card carries
/// the recipe's note on running it for real.
#[test]
fn distilled_student_learns_the_teachers_translations() {
    use std::io::BufRead;
    let root = manifest_dir().join("../..");
    let data = root.join("../shared/data");
    let train_en = data.join("tatoeba-en-de/train.en.gz");
    if !train_en.exists() || !data.join("multi30k").exists() {
        println!(
            "SKIP: distilled_student_learns_the_teachers_translations: {} not found",
            data.display()
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let recipe = root.join("recipes/distill-student.toml");
    let out = run(&[
        "recipe",
        "run",
        s(&recipe),
        "--scale",
        "smoke",
        "--data",
        s(&data),
        "--work",
        s(&work),
    ]);
    assert!(out.contains("every stage done"), "{out}");

    // The smoke scale's teacher corpus: the first 8 sources, read here from the gzip.
    let gz = flate2::read::MultiGzDecoder::new(std::fs::File::open(&train_en).unwrap());
    let sources: Vec<String> = std::io::BufReader::new(gz)
        .lines()
        .take(8)
        .map(|l| l.unwrap())
        .collect();
    let src_file = tmp.path().join("sources.en");
    std::fs::write(&src_file, sources.join("\n") + "\n").unwrap();
    let expected = translate_file(
        &root.join("web/models/en-de"),
        &src_file,
        &tmp.path().join("expected.de"),
        &["--beam", "4", "--alpha", "1.0"],
    );
    let expected: Vec<&str> = expected.lines().collect();
    assert_eq!(expected.len(), 8);
    assert!(
        expected.iter().all(|l| !l.trim().is_empty()),
        "{expected:?}"
    );

    // What the student's prepare stage read: every source with the teacher's German.
    let dir = work.join("distill-student/data/inputs");
    let student_src = std::fs::read_to_string(dir.join("train.src")).unwrap();
    let student_tgt = std::fs::read_to_string(dir.join("train.tgt")).unwrap();
    assert_eq!(student_src.lines().collect::<Vec<_>>(), sources);
    assert_eq!(student_tgt.lines().collect::<Vec<_>>(), expected);

    let card: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("distill-student/bundle/bundle/config.json")).unwrap(),
    )
    .unwrap();
    let notes = card["provenance"]["notes"].as_str().unwrap();
    assert!(notes.contains("transduce import"), "{notes}");
    assert!(notes.contains("--backend cuda"), "{notes}");
    assert_eq!(card["weights"], "int8");
    assert!(card["metrics"]["bleu_tatoeba_test"].is_number(), "{card}");
    let lineage: Vec<&str> = card["provenance"]["recipe"]["lineage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["stage"].as_str().unwrap())
        .collect();
    assert_eq!(
        lineage,
        ["teacher", "data", "student", "average", "select", "bundle"]
    );
}
