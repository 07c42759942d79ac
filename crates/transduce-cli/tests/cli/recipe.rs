//! `transduce recipe run`: a recipe end to end on the toy corpus, stopped mid-training and
//! run again (the run resumes and equals a plain `transduce train`, done stages are
//! skipped), its bundle's structured provenance; refusals at file:line and field; every
//! shipped recipe at `--scale smoke` on the shared data.

use crate::harness::*;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use transduce_testing::repo_root;

/// `../shared/data` beside the checkout when it holds every one of `needs`, else `None`
/// after a SKIP line naming the test.
fn shared_data(test: &str, needs: &[&str]) -> Option<PathBuf> {
    let data = transduce_testing::shared_data();
    match needs.iter().find(|n| !data.join(n).exists()) {
        None => Some(data),
        Some(missing) => {
            transduce_testing::skip(format_args!(
                "{test}: {} not found",
                data.join(missing).display()
            ));
            None
        }
    }
}

/// `transduce recipe run RECIPE --scale smoke --data DATA --work WORK EXTRA…`, its stderr.
fn smoke(recipe: &Path, data: &Path, work: &Path, extra: &[&str]) -> String {
    let args = [
        "recipe",
        "run",
        s(recipe),
        "--scale",
        "smoke",
        "--data",
        s(data),
        "--work",
        s(work),
    ];
    run(&[&args[..], extra].concat())
}

/// Writes `text` as `DIR/bad.toml`, runs `recipe run` on it with `extra` and checks that
/// it fails with one error line starting `error: FILE:EXPECTED`.
fn one_error(dir: &Path, text: &str, extra: &[&str], expected: &str) {
    let path = dir.join("bad.toml");
    std::fs::write(&path, text).unwrap();
    let mut args = vec!["recipe", "run", s(&path), "--dry-run", "--work", s(dir)];
    args.extend(extra);
    let err = fail(&args);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let want = format!("error: {}:{expected}", path.display());
    assert!(err.starts_with(&want), "expected {want}\ngot {err}");
}

/// A stage prepare of two files, the start of the recipes the refusal tests write.
const PREPARE: &str = "[[stage]]\nname = \"data\"\nkind = \"prepare\"\nsrc = \"a\"\ntgt = \"b\"\n";

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

/// A train stage that `continues` another: the run's folder copied and resumed, so it ends
/// where an uninterrupted run of that many steps ends (bit for bit), the run it continues
/// is left as it was, and its plan and smoke steps count from that run.
#[test]
fn a_continued_run_equals_one_run_of_all_its_steps() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let recipe = toy_recipe(dir, 6);
    let mut text = std::fs::read_to_string(&recipe).unwrap();
    text.push_str(
        "\n[[stage]]\nname = \"more\"\nkind = \"train\"\ncontinues = \"@run\"\nmax_steps = 10\n",
    );
    std::fs::write(&recipe, &text).unwrap();
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
    assert!(
        plan.lines()
            .any(|l| l.contains(" more ") && l.contains("to do") && l.contains('≈')),
        "{plan}"
    );
    let out = run(&args);
    assert!(out.contains("continuing the run in"), "{out}");
    assert!(out.contains("resuming from"), "{out}");
    let source = work.join("toy/run");
    let more = work.join("toy/more");
    let steps = |run: &Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(run.join("checkpoints"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    // keep = 4: the continued run's newest four, the run it continues untouched.
    assert_eq!(
        steps(&more),
        [
            "step-00000004",
            "step-00000006",
            "step-00000008",
            "step-00000010"
        ]
    );
    assert_eq!(
        steps(&source),
        ["step-00000002", "step-00000004", "step-00000006"]
    );
    let last_logged = |run: &Path| {
        std::fs::read_to_string(run.join("metrics.jsonl"))
            .unwrap()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok()?["step"].as_u64())
            .max()
    };
    assert_eq!(
        (last_logged(&source), last_logged(&more)),
        (Some(6), Some(10))
    );

    let plain = plain_toy_run(&work.join("toy/data"), &dir.join("plain"), 10);
    let last = "checkpoints/step-00000010/model.safetensors";
    assert!(
        std::fs::read(more.join(last)).unwrap() == std::fs::read(plain.join(last)).unwrap(),
        "the continued run differs from one run of 10 steps"
    );
    let again = run(&args);
    assert!(again.contains("] more (train): done"), "{again}");

    // At smoke scale the continued run trains 2 steps past the 2 of the one it continues.
    let smoke_work = dir.join("smoke");
    let out = smoke(&recipe, dir, &smoke_work, &[]);
    assert!(out.contains("every stage done"), "{out}");
    assert_eq!(
        steps(&smoke_work.join("toy/more")).last().unwrap(),
        "step-00000004"
    );
}

/// The Python with CTranslate2 that an export stage's `ct2 = true` runs (the one
/// `scripts/test.sh` installs, or `TRANSDUCE_CT2_PYTHON`), or `None` after a SKIP line.
fn ct2_python(test: &str) -> Option<PathBuf> {
    let python = std::env::var_os("TRANSDUCE_CT2_PYTHON")
        .map(PathBuf::from)
        .or_else(|| {
            let home = std::env::var_os("HOME")?;
            Some(PathBuf::from(home).join(".cache/transduce-tools/ct2-venv/bin/python"))
        })?;
    let found = std::process::Command::new(&python)
        .args(["-c", "import ctranslate2"])
        .output()
        .is_ok_and(|o| o.status.success());
    if !found {
        transduce_testing::skip(format_args!(
            "{test}: no CTranslate2 at {} (`source scripts/common.sh && ensure_ct2`)",
            python.display()
        ));
    }
    found.then_some(python)
}

/// An export stage with `ct2 = true` writes a CTranslate2 model beside the bundle that
/// CTranslate2 itself loads, and the stage counts as done only with it.
#[test]
fn export_stage_writes_a_ctranslate2_model() {
    let test = "export_stage_writes_a_ctranslate2_model";
    let Some(python) = ct2_python(test) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let recipe = toy_recipe(dir, 6);
    let text = std::fs::read_to_string(&recipe).unwrap();
    let text = text.replace("target = \"yy\"\n", "target = \"yy\"\nct2 = true\n");
    assert!(text.contains("ct2 = true"));
    std::fs::write(&recipe, text).unwrap();
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
    let python_env = ("TRANSDUCE_CT2_PYTHON", python.as_os_str());
    let out = bin()
        .args(args)
        .env(python_env.0, python_env.1)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(err.contains("CTranslate2 export"), "{err}");
    let ct2 = work.join("toy/bundle/ct2");
    assert!(ct2.join("model.bin").is_file(), "{err}");
    let load = std::process::Command::new(&python)
        .args([
            "-c",
            "import sys, ctranslate2; t = ctranslate2.Translator(sys.argv[1]); \
             print(t.translate_batch([['▁1']], beam_size=1)[0].hypotheses[0])",
        ])
        .arg(&ct2)
        .output()
        .unwrap();
    assert!(
        load.status.success(),
        "{}",
        String::from_utf8_lossy(&load.stderr)
    );
    // Without its CTranslate2 model the stage is to redo.
    std::fs::remove_file(ct2.join("model.bin")).unwrap();
    let plan = run(&[&args[..], &["--dry-run"]].concat());
    assert!(
        plan.lines().any(|l| l.contains(" bundle ")
            && l.contains("to redo")
            && l.contains("ct2/model.bin is missing")),
        "{plan}"
    );
}

/// A plain `transduce train` of `steps` on the toy recipe's data with its `run` stage's
/// options (toy_recipe), into `out`: what a run the recipe stopped or continued must equal.
fn plain_toy_run(data: &Path, out: &Path, steps: u64) -> PathBuf {
    let steps = steps.to_string();
    run(&[
        "train",
        "--data",
        s(data),
        "--out",
        s(out),
        "--preset",
        "tiny",
        "--max-tokens",
        "400",
        "--warmup",
        "20",
        "--max-steps",
        &steps,
        "--checkpoint-steps",
        "2",
        "--keep",
        "4",
        "--seed",
        "5",
        "--quiet",
    ]);
    out.to_path_buf()
}

/// `--dry-run` estimates a run that starts from a model no stage has built yet: its
/// architecture is the one of the run it continues (through the average), so its cost is
/// that run's for as many steps.
#[test]
fn dry_run_estimates_a_run_started_from_a_model_not_yet_built() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let recipe = toy_recipe(dir, 120);
    let mut text = std::fs::read_to_string(&recipe).unwrap();
    text.push_str(
        "\n[[stage]]\nname = \"more\"\nkind = \"train\"\ndata = \"@data\"\ninit = \"@average\"\nmax_tokens = 400\nmax_steps = 120\n",
    );
    std::fs::write(&recipe, text).unwrap();
    let work = dir.join("work");
    let plan = run(&[
        "recipe",
        "run",
        s(&recipe),
        "--work",
        s(&work),
        "--data",
        s(dir),
        "--dry-run",
    ]);
    let cost = |stage: &str| -> String {
        let line = plan
            .lines()
            .find(|l| l.contains(&format!(" {stage} ")) && l.contains("to do"))
            .unwrap_or_else(|| panic!("no stage {stage}: {plan}"));
        line.rsplit("  ").next().unwrap().trim().to_string()
    };
    assert!(cost("more").starts_with('≈'), "{plan}");
    assert_eq!(cost("more"), cost("run"), "{plan}");
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
    let plain = plain_toy_run(&work.join("toy/data"), &dir.join("plain"), 120);
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
    // A run stopped before its first checkpoint has nothing to resume: it is made anew.
    let run_json = std::fs::read(run_dir.join("run.json")).unwrap();
    std::fs::rename(run_dir.join("checkpoints"), dir.join("checkpoints-away")).unwrap();
    let plan = run(&[&args[..], &["--dry-run"]].concat());
    assert!(
        plan.contains("to redo (it stopped before its first checkpoint)"),
        "{plan}"
    );
    std::fs::rename(dir.join("checkpoints-away"), run_dir.join("checkpoints")).unwrap();
    assert_eq!(std::fs::read(run_dir.join("run.json")).unwrap(), run_json);
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
    let check = |text: &str, expected: &str| one_error(dir, text, &[], expected);
    let prepare = PREPARE;
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
    // The teacher's rescoring and back-translation, the trainer's GPU precision.
    let teacher = format!("{prepare}[[stage]]\nname = \"t\"\nkind = \"teacher\"\n");
    check(
        &format!("{teacher}models = [\"a\", \"b\"]\nrescore = \"c\"\nsrc = \"s\"\n"),
        "10: stage `t`, field `rescore`: a rescoring model checks one model",
    );
    check(
        &format!("{teacher}models = \"a\"\nrescore_weight = 0.5\nsrc = \"s\"\n"),
        "10: stage `t`, field `rescore_weight`: there is no `rescore`",
    );
    check(
        &format!("{teacher}models = \"a\"\nrescore = \"c\"\nrescore_weight = 1.5\nsrc = \"s\"\n"),
        "11: stage `t`, field `rescore_weight`: 1.5 is the teacher's share: at most 1",
    );
    check(
        &format!("{teacher}models = \"a\"\nback = true\nsrc = \"s\"\ntgt = \"r\"\n"),
        "12: stage `t`, field `tgt`: a back-translation's targets are its `src`",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\nmax_steps = 5\ngpu_precision = \"f8\"\n"
        ),
        "11: stage `run`, field `gpu_precision`: `f8` is not a precision",
    );
}

/// Every stage of a recipe's plan as `recipe:stage`, from `--dry-run` (its own stages are
/// unprefixed there).
fn planned_stages(recipe: &Path, data: &Path, work: &Path) -> BTreeSet<String> {
    let name = recipe.file_stem().unwrap().to_str().unwrap();
    let out = smoke(recipe, data, work, &["--dry-run"]);
    out.lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            words.next()?.strip_suffix('.')?.parse::<usize>().ok()?;
            Some(qualified(name, words.next()?))
        })
        .collect()
}

fn qualified(recipe: &str, label: &str) -> String {
    if label.contains(':') {
        label.to_string()
    } else {
        format!("{recipe}:{label}")
    }
}

/// The stages a run ran (not found done), as `recipe:stage`, from its `==> [i/n] LABEL
/// (kind): STATE` lines.
fn ran_stages(recipe: &Path, out: &str) -> BTreeSet<String> {
    let name = recipe.file_stem().unwrap().to_str().unwrap();
    out.lines()
        .filter_map(|l| l.strip_prefix("==> ["))
        .filter(|l| !l.contains(": done, ") && !l.contains(": done in "))
        .filter_map(|l| Some(qualified(name, l.split_whitespace().nth(1)?)))
        .collect()
}

/// The shipped recipes (recipes/*.toml but Table 3, the student and my-pair, which have
/// tests of their own below), every stage at `--scale smoke` on the shared data. They share
/// one work folder, as their plans share stages (en-de's takes en-de-free's, de-en's
/// en-de's, …): each stage runs once, in the first plan that needs it, and the test checks
/// that every stage of every recipe ran.
#[test]
fn every_shipped_recipe_runs_at_smoke_scale() {
    let needs = [
        "ptb-sample",
        "tatoeba-en-de",
        "multi30k",
        "common-voice-sentences",
    ];
    let Some(data) = shared_data("every_shipped_recipe_runs_at_smoke_scale", &needs) else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let mut recipes: Vec<PathBuf> = std::fs::read_dir(repo_root().join("recipes"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .filter(|p| {
            !["table3.toml", "distill-student.toml", "my-pair.toml"]
                .iter()
                .any(|own| p.ends_with(own))
        })
        .collect();
    // de-en's plan holds most of the others' stages: it runs first, so the rest share them.
    recipes.sort_by_key(|p| (!p.ends_with("de-en.toml"), p.clone()));
    assert!(recipes.len() >= 5, "{recipes:?}");
    let started = Instant::now();
    let (mut planned, mut ran) = (BTreeSet::new(), BTreeSet::new());
    for recipe in &recipes {
        planned.extend(planned_stages(recipe, &data, &tmp.path().join("plan")));
        let out = smoke(recipe, &data, &work, &[]);
        assert!(
            out.contains("every stage done"),
            "{}: {out}",
            recipe.display()
        );
        let now = ran_stages(recipe, &out);
        assert!(
            now.is_disjoint(&ran),
            "{}: a stage ran twice: {:?}",
            recipe.display(),
            now.intersection(&ran).collect::<Vec<_>>()
        );
        ran.extend(now);
    }
    println!(
        "{} recipes, {} stages at smoke scale: {:.1} s",
        recipes.len(),
        ran.len(),
        started.elapsed().as_secs_f64()
    );
    assert_eq!(
        planned.difference(&ran).collect::<Vec<_>>(),
        Vec::<&String>::new(),
        "stages planned but never run"
    );
    for recipe in ["en-de", "de-en", "en-de-free", "de-en-free", "ptb-parser"] {
        assert!(planned.contains(&format!("{recipe}:test")), "{planned:?}");
    }

    // The shipped en-de's bundle: the soup of two averages, its provenance the lineage
    // through both free recipes and de-en's.
    let card: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("en-de/bundle/bundle/config.json")).unwrap(),
    )
    .unwrap();
    let lineage: BTreeSet<String> = card["provenance"]["recipe"]["lineage"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            format!(
                "{}:{}",
                s["recipe"].as_str().unwrap(),
                s["stage"].as_str().unwrap()
            )
        })
        .collect();
    for stage in [
        "en-de:soup",
        "en-de:kd-teacher",
        "en-de-free:final",
        "de-en:bundle",
        "en-de:r-final",
    ] {
        assert!(lineage.contains(stage), "{stage}: {lineage:?}");
    }
    assert!(card["metrics"]["bleu_tatoeba_test"].is_number(), "{card}");
}

/// The teacher stage's back-translation and rescoring, with shipped bundles as the models so
/// their outputs are real sentences: back-translated pairs are de-en-free's translation of
/// each German sentence beside the sentence itself; the rescoring teacher picks, for every
/// line, one of the two models' own beam-4 translations (each checked apart from the
/// runner with `transduce translate`), and both models' candidates were scored.
#[test]
fn teachers_back_translate_and_rescore_with_real_bundles() {
    let Some(data) = shared_data(
        "teachers_back_translate_and_rescore_with_real_bundles",
        &[
            "common-voice-sentences/de.txt.gz",
            "tatoeba-en-de/val.en.gz",
        ],
    ) else {
        return;
    };
    let models = repo_root().join("web/models");
    let tmp = tempfile::tempdir().unwrap();
    let recipe = tmp.path().join("teachers.toml");
    std::fs::write(
        &recipe,
        format!(
            "[[stage]]\nname = \"bt\"\nkind = \"teacher\"\nback = true\nmodels = \"{de_en}\"\n\
             src = \"{{data}}/common-voice-sentences/de.txt.gz\"\n\n\
             [[stage]]\nname = \"kd\"\nkind = \"teacher\"\nmodels = \"{en_de}\"\n\
             rescore = \"{en_de_free}\"\nrescore_weight = 0.6\n\
             src = \"{{data}}/tatoeba-en-de/val.en.gz\"\n",
            de_en = s(&models.join("de-en-free")),
            en_de = s(&models.join("en-de")),
            en_de_free = s(&models.join("en-de-free")),
        ),
    )
    .unwrap();
    let work = tmp.path().join("work");
    let out = smoke(&recipe, &data, &work, &[]);
    assert!(out.contains("every stage done"), "{out}");

    // Back-translation: (de-en-free's English, the German original), length-filtered.
    let bt = work.join("teachers/bt");
    let german = lines(&bt.join("sources.txt"));
    assert_eq!(german.len(), 8);
    let english = translate_file(
        &models.join("de-en-free"),
        &bt.join("sources.txt"),
        &tmp.path().join("bt.en"),
        &[],
    );
    let expected: Vec<(&str, &str)> = english
        .lines()
        .zip(german.iter().map(String::as_str))
        .filter(|(e, g)| {
            let (a, b) = (e.split_whitespace().count(), g.split_whitespace().count());
            a > 0 && b > 0 && a <= 2 * b && b <= 2 * a
        })
        .collect();
    assert!(expected.len() >= 6, "{expected:?}");
    let (src, tgt) = (lines(&bt.join("src.txt")), lines(&bt.join("tgt.txt")));
    let got: Vec<(&str, &str)> = src
        .iter()
        .map(String::as_str)
        .zip(tgt.iter().map(String::as_str))
        .collect();
    assert_eq!(got, expected);

    // Rescoring: each line's choice is one of the two models' own translations.
    let kd = work.join("teachers/kd");
    let sources = kd.join("sources.txt");
    let by = |model: &str| -> Vec<String> {
        translate_file(
            &models.join(model),
            &sources,
            &tmp.path().join(model),
            &["--beam", "4"],
        )
        .lines()
        .map(str::to_string)
        .collect()
    };
    let (a, b) = (by("en-de"), by("en-de-free"));
    let chosen = lines(&kd.join("teacher.txt"));
    // Each distinct source once (Tatoeba's val repeats some).
    let n = lines(&sources).len();
    assert!(n >= 4, "{n}");
    assert_eq!(chosen.len(), n);
    for (i, c) in chosen.iter().enumerate() {
        assert!(
            c == &a[i] || c == &b[i],
            "line {i}: {c:?} is neither {:?} nor {:?}",
            a[i],
            b[i]
        );
    }
    let pooled = lines(&kd.join("rescore/union.nbest"));
    let distinct = a.iter().zip(&b).filter(|(x, y)| x != y).count();
    assert_eq!(pooled.len(), n + distinct);
    for scores in ["scores-0.txt", "scores-1.txt"] {
        assert_eq!(lines(&kd.join("rescore").join(scores)).len(), pooled.len());
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// recipes/my-pair.toml, the README's "bring a TSV, get a browser bundle", at smoke scale
/// on a toy TSV: a bundle comes out with its test score and the recipe as provenance; a
/// line without a tab is one error naming the file and line.
#[test]
fn my_pair_recipe_turns_a_tsv_into_a_bundle() {
    let tmp = tempfile::tempdir().unwrap();
    let data = tmp.path().join("data");
    let pair = data.join("my-pair");
    std::fs::create_dir_all(&pair).unwrap();
    let (src, tgt) = corpus(tmp.path());
    let tsv: String = lines(&src)
        .iter()
        .zip(lines(&tgt))
        .map(|(a, b)| format!("{a}\t{b}\n"))
        .collect();
    for name in ["train.tsv", "valid.tsv", "test.tsv"] {
        std::fs::write(pair.join(name), &tsv).unwrap();
    }
    let recipe = repo_root().join("recipes/my-pair.toml");
    let work = tmp.path().join("work");
    let out = smoke(&recipe, &data, &work, &[]);
    assert!(out.contains("every stage done"), "{out}");
    let split = lines(&work.join("my-pair/data/inputs/train-tsv.src"));
    assert_eq!(split, lines(&src)[..split.len()]);
    let card: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("my-pair/bundle/bundle/config.json")).unwrap(),
    )
    .unwrap();
    assert!(card["metrics"]["bleu_test"].is_number(), "{card}");
    assert!(card["metrics"]["bleu_valid"].is_number(), "{card}");
    assert_eq!(card["provenance"]["recipe"]["stage"], "bundle");

    std::fs::write(pair.join("train.tsv"), "1 2\tone two\n3 4 three four\n").unwrap();
    let err = fail(&[
        "recipe",
        "run",
        s(&recipe),
        "--scale",
        "smoke",
        "--data",
        s(&data),
        "--work",
        s(&tmp.path().join("work2")),
    ]);
    assert!(
        err.contains(&format!(
            "{}: line 2: expected source<TAB>target",
            pair.join("train.tsv").display()
        )),
        "{err}"
    );
}

/// The distillation recipe at smoke scale: its teacher is a shipped bundle, so the student's
/// training data must be exactly what `transduce translate` makes of the same sources with
/// the recipe's beam and α (checked apart from the runner), and the exported card carries
/// the recipe's note on running it for real.
#[test]
fn distilled_student_learns_the_teachers_translations() {
    use std::io::BufRead;
    let root = repo_root();
    let test = "distilled_student_learns_the_teachers_translations";
    let Some(data) = shared_data(test, &["tatoeba-en-de", "multi30k"]) else {
        return;
    };
    let train_en = data.join("tatoeba-en-de/train.en.gz");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let recipe = root.join("recipes/distill-student.toml");
    let out = smoke(&recipe, &data, &work, &[]);
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

/// Per-scale values and Table 3 rows: each wrong one is one error at its file, line and
/// field, at plan time.
#[test]
fn bad_scales_and_rows_get_one_error_naming_file_line_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let check = |text: &str, scale: Option<&str>, expected: &str| {
        let extra = scale.map(|sc| vec!["--scale", sc]).unwrap_or_default();
        one_error(dir, text, &extra, expected)
    };
    let header = "[recipe]\nscales = [\"reduced\", \"paper\"]\ndefault_scale = \"reduced\"\n";
    let prepare = PREPARE;
    let train = |extra: &str| {
        format!(
            "{header}{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\n{extra}"
        )
    };
    // A key that is no scale; a scale the recipe does not declare.
    check(
        &train("max_steps = { reduced = 5, papr = 9 }\n"),
        None,
        "13: stage `run`, field `max_steps`: `papr` is not a scale",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\nmax_steps = {{ paper = 5 }}\n"
        ),
        None,
        "10: stage `run`, field `max_steps`: scale `paper` is not one of the recipe's (full, and smoke)",
    );
    // A value missing at the scale asked for; a scale the recipe has not.
    check(
        &train("max_steps = { reduced = 5 }\n"),
        Some("paper"),
        "13: stage `run`, field `max_steps`: no value for scale `paper`",
    );
    check(
        &format!(
            "{prepare}[[stage]]\nname = \"run\"\nkind = \"train\"\ndata = \"@data\"\nmax_steps = 5\n"
        ),
        Some("reduced"),
        "1: [recipe], field `scales`: this recipe has no scale `reduced`",
    );
    check(
        &format!("[recipe]\nscales = [\"reduced\"]\ndefault_scale = \"paper\"\n{prepare}"),
        None,
        "3: [recipe], field `default_scale`: `paper` is not one of the recipe's scales (reduced)",
    );
    check(
        &format!("[recipe]\nscales = [\"reduced\", \"huge\"]\n{prepare}"),
        None,
        "2: [recipe], field `scales`: `huge` is not a scale to declare",
    );
    // Table 3 rows: an unknown row, a width that does not divide, a row with a preset.
    check(
        &train("max_steps = 5\nrow = \"F1\"\n"),
        None,
        "14: stage `run`, field `row`: `F1` is not a row of Table 3",
    );
    check(
        &train("max_steps = 5\nrow = \"B1\"\nwidth_divisor = { reduced = 32, paper = 1 }\n"),
        None,
        "15: stage `run`, field `width_divisor`: row B1's d_k 16 is not a multiple of width_divisor 32",
    );
    let continued = |extra: &str| {
        train(&format!(
            "max_steps = 5\n[[stage]]\nname = \"more\"\nkind = \"train\"\n{extra}"
        ))
    };
    check(
        &continued("continues = \"@run\"\nmax_steps = 5\n"),
        None,
        "18: stage `more`, field `max_steps`: 5 does not pass the 5 steps of the run it continues",
    );
    check(
        &continued("continues = \"@run\"\nmax_steps = 9\nlr_factor = 0.5\n"),
        None,
        "19: stage `more`, field `lr_factor`: a continued run keeps the settings of the run it \
         continues (`continues` and `max_steps` only)",
    );
    check(
        &continued("continues = \"@data\"\nmax_steps = 9\n"),
        None,
        "17: stage `more`, field `continues`:",
    );
    check(
        &train("max_steps = 5\nrow = \"base\"\ndepth_divisor = 4\n"),
        None,
        "15: stage `run`, field `depth_divisor`: row base's N 6 is not a multiple of depth_divisor 4",
    );
    check(
        &train("max_steps = 5\ndepth_divisor = 2\n"),
        None,
        "14: stage `run`, field `depth_divisor`: it divides a `row`'s model",
    );
    check(
        &train("max_steps = 5\nrow = \"A1\"\npreset = \"tiny\"\n"),
        None,
        "15: stage `run`, field `preset`: a `row` is the stage's model",
    );
    check(
        &format!(
            "{}[[stage]]\nname = \"t3\"\nkind = \"table3\"\nrows = [\"@run\"]\nsrc = \"a\"\nref = \"b\"\n",
            train("max_steps = 5\npreset = \"tiny\"\n")
        ),
        None,
        "18: stage `t3`, field `rows`: `@run` trains no Table 3 `row`",
    );
}

/// `--dry-run` of Table 3 at the paper's scale: WMT14 in, 20 rows and the report planned.
#[test]
fn table3_recipe_plans_the_paper_scale_on_wmt14() {
    let tmp = tempfile::tempdir().unwrap();
    let out = run(&[
        "recipe",
        "run",
        s(&repo_root().join("recipes/table3.toml")),
        "--scale",
        "paper",
        "--dry-run",
        "--data",
        s(&tmp.path().join("data")),
        "--work",
        s(&tmp.path().join("work")),
    ]);
    let rows = [
        "base", "A1", "A2", "A3", "A4", "B1", "B2", "C1", "C2", "C3", "C4", "C5", "C6", "C7", "D1",
        "D2", "D3", "D4", "E", "big",
    ];
    let planned: Vec<(String, String)> = out
        .lines()
        .filter_map(|l| {
            let mut words = l.split_whitespace();
            let number = words.next()?;
            number.strip_suffix('.')?.parse::<usize>().ok()?;
            Some((words.next()?.to_string(), words.next()?.to_string()))
        })
        .collect();
    let names: Vec<&str> = planned.iter().map(|(n, _)| n.as_str()).collect();
    let mut expected = vec!["data"];
    expected.extend(rows);
    expected.push("report");
    assert_eq!(names, expected, "{out}");
    assert!(
        planned[1..21].iter().all(|(_, kind)| kind == "train"),
        "{out}"
    );
    assert_eq!(planned[21].1, "table3", "{out}");
    for file in ["wmt14-en-de/train.en", "wmt14-en-de/valid.de"] {
        assert!(
            out.contains(&format!("data/{file} (missing)")),
            "{file}: {out}"
        );
    }
    assert!(out.contains("scripts/get-wmt14.sh"), "{out}");
    // The paper's rows at full width and steps: hundreds of hours each on a CPU, big
    // (3x the steps of a 3x larger model) several times base.
    let hours = |row: &str| -> u64 {
        let line = out
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(row))
            .unwrap();
        let after = line.split('≈').nth(1).unwrap_or_else(|| panic!("{line}"));
        let words: Vec<&str> = after.split_whitespace().collect();
        assert_eq!(words.get(1), Some(&"h"), "{line}");
        words[0].parse().unwrap()
    };
    assert!(hours("base") >= 100, "{out}");
    assert!(hours("big") > 3 * hours("base"), "{out}");
}

/// Table 3 at `--scale smoke`: every row trained (2 steps, widths ÷ 16) and the report.
/// Its table has the paper's rows and figures (typed here from the paper, apart from the
/// code's), and its own figures are the run's: base's perplexity and BLEU equal what
/// `transduce eval ppl` and `translate` + `eval bleu` make of base's run on the same lines.
#[test]
fn table3_recipe_at_smoke_scale_reports_every_row() {
    use std::io::BufRead;
    let root = repo_root();
    let test = "table3_recipe_at_smoke_scale_reports_every_row";
    let Some(data) = shared_data(test, &["multi30k/val.en.gz"]) else {
        return;
    };
    let val_en = data.join("multi30k/val.en.gz");
    let tmp = tempfile::tempdir().unwrap();
    let work = tmp.path().join("work");
    let recipe = root.join("recipes/table3.toml");
    let started = Instant::now();
    let out = smoke(&recipe, &data, &work, &[]);
    println!(
        "table3 at smoke scale: {:.1} s",
        started.elapsed().as_secs_f64()
    );
    assert!(out.contains("every stage done"), "{out}");
    let report = work.join("table3/report");
    let md = std::fs::read_to_string(report.join("table3.md")).unwrap();
    let line = |row: &str| -> Vec<String> {
        let l = md
            .lines()
            .find(|l| l.starts_with(&format!("| {row} ")))
            .unwrap_or_else(|| panic!("no row {row} in {md}"));
        l.trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    // The paper's Table 3, typed in from the paper: settings, steps, PPL, BLEU, params.
    assert_eq!(
        line("base")[..9],
        ["base", "6", "512", "2048", "8", "64", "64", "0.1", "0.1"]
    );
    assert_eq!(line("A1")[4..7], ["1", "512", "512"]);
    assert_eq!(line("C1")[1], "2");
    assert_eq!(line("C5")[2], "1024");
    assert_eq!(line("D3")[8], "0.0");
    assert_eq!(
        line("big")[1..9],
        ["", "1024", "4096", "16", "", "", "0.3", ""]
    );
    let paper = [
        ("base", "100K", "4.92", "25.8", "65"),
        ("A1", "100K", "5.29", "24.9", "(65)"),
        ("B1", "100K", "5.16", "25.1", "58"),
        ("C1", "100K", "6.11", "23.7", "36"),
        ("C7", "100K", "4.75", "26.2", "90"),
        ("D1", "100K", "5.77", "24.6", "(65)"),
        ("E (learned positions)", "100K", "4.92", "25.7", "(65)"),
        ("big", "300K", "4.33", "26.4", "213"),
    ];
    for (row, steps, ppl, bleu, params) in paper {
        let cells = line(row);
        let first = |c: &str| c.split(" / ").next().unwrap().to_string();
        assert_eq!(
            [
                first(&cells[9]),
                first(&cells[10]),
                first(&cells[11]),
                first(&cells[12])
            ],
            [steps, ppl, bleu, params],
            "{row}: {cells:?}"
        );
    }
    // Every row has figures of ours: 2 steps, a perplexity, a BLEU, a parameter count.
    let ours = |row: &str, column: usize| -> String {
        line(row)[column].split(" / ").nth(1).unwrap().to_string()
    };
    let names = [
        "base",
        "A1",
        "A2",
        "A3",
        "A4",
        "B1",
        "B2",
        "C1",
        "C2",
        "C3",
        "C4",
        "C5",
        "C6",
        "C7",
        "D1",
        "D2",
        "D3",
        "D4",
        "E (learned positions)",
        "big",
    ];
    for row in names {
        assert_eq!(ours(row, 9), "2", "{row}");
        assert!(ours(row, 10).parse::<f64>().unwrap() > 1.0, "{row}");
    }
    assert!(md.contains("over 20 rows"), "{md}");
    // Widths ÷ 16 with each row's variation kept: params differ as the rows do.
    let results: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(report.join("results.json")).unwrap())
            .unwrap();
    let params = |row: &str| results["rows"][row]["params"].as_u64().unwrap();
    assert!(
        params("C1") < params("base") && params("base") < params("C3"),
        "{md}"
    );
    assert!(
        params("C5") > params("base") && params("big") > params("C5"),
        "{md}"
    );
    let a1: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(work.join("table3/A1/row-model.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        (
            a1["n_heads"].as_u64(),
            a1["d_k"].as_u64(),
            a1["d_model"].as_u64(),
            a1["n_layers"].as_u64()
        ),
        (Some(1), Some(32), Some(32), Some(3))
    );
    // Depth ÷ 2 alike: C1's N 2 becomes 1, C3's 8 becomes 4.
    let layers = |row: &str| -> Option<u64> {
        let path = work.join(format!("table3/{row}/row-model.json"));
        let config: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        config["n_layers"].as_u64()
    };
    assert_eq!((layers("C1"), layers("C3")), (Some(1), Some(4)));
    let svg = std::fs::read_to_string(report.join("table3-ppl.svg")).unwrap();
    assert_eq!(svg.matches("<circle").count(), 40, "{svg}");

    // Base's figures again, by the subcommands a user would run on the first 8 dev pairs.
    let first8 = |p: &Path| -> String {
        let gz = flate2::read::MultiGzDecoder::new(std::fs::File::open(p).unwrap());
        let lines: Vec<String> = std::io::BufReader::new(gz)
            .lines()
            .take(8)
            .map(|l| l.unwrap())
            .collect();
        lines.join("\n") + "\n"
    };
    let (src, reference) = (tmp.path().join("dev.en"), tmp.path().join("dev.de"));
    std::fs::write(&src, first8(&val_en)).unwrap();
    std::fs::write(&reference, first8(&data.join("multi30k/val.de.gz"))).unwrap();
    let base_run = work.join("table3/base");
    let ppl_out = run(&[
        "eval",
        "ppl",
        "--model",
        s(&base_run),
        "--src",
        s(&src),
        "--tgt",
        s(&reference),
    ]);
    let ppl: f64 = ppl_out
        .split_whitespace()
        .skip_while(|w| *w != "perplexity")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(format!("{ppl:.2}"), ours("base", 10), "{ppl_out}\n{md}");
    let hyp = tmp.path().join("base.de");
    translate_file(&base_run, &src, &hyp, &["--beam", "4", "--alpha", "0.6"]);
    let bleu_out = run(&["eval", "bleu", "--hyp", s(&hyp), "--ref", s(&reference)]);
    let bleu: f64 = bleu_out
        .split_whitespace()
        .skip_while(|w| *w != "=")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(format!("{bleu:.1}"), ours("base", 11), "{bleu_out}\n{md}");

    // Run again: every stage is done, nothing is trained or scored again.
    let again = smoke(&recipe, &data, &work, &[]);
    assert_eq!(again.matches(": done, ").count(), 22, "{again}");
}
