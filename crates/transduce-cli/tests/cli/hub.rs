//! `transduce import hf:ORG/NAME`: models by name from a hub on the loopback
//! (tests/support/test-hub.mjs, the committed Marian fixtures in the Hugging Face hub's layout),
//! cached, resumed after a broken download, read from the cache with the hub stopped, and
//! every bad answer one clear error with nothing half-written.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::harness::*;

/// The test hub, stopped when dropped.
struct Hub {
    child: Child,
    url: String,
}

impl Hub {
    fn start() -> Hub {
        let script = transduce_testing::repo_root().join("tests/support/test-hub.mjs");
        let mut child = Command::new("node")
            .arg(&script)
            .args(["--port", "0"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| {
                panic!(
                    "node (installed by scripts/test.sh) runs the test hub {}: {e}",
                    script.display()
                )
            });
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("test hub: ")
            .unwrap_or_else(|| panic!("the test hub said {line:?}"))
            .to_string();
        Hub { child, url }
    }
}

impl Drop for Hub {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `transduce import` with `args`, its cache in `cache`; (success, stderr).
fn import(cache: &Path, args: &[&str]) -> (bool, String) {
    let out = bin()
        .arg("import")
        .args(args)
        .env("TRANSDUCE_HUB_CACHE", cache)
        .env_remove("HF_ENDPOINT")
        .env_remove("HF_TOKEN")
        .env("HF_TOKEN_PATH", cache.join("no-token"))
        .env_remove("HF_HUB_OFFLINE")
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn read(dir: &Path, file: &str) -> Vec<u8> {
    std::fs::read(dir.join(file)).unwrap_or_else(|e| panic!("{}: {e}", dir.join(file).display()))
}

/// A folder import of `dir` with `weights` as its checkpoint.
fn folder_import(tmp: &Path, dir: &Path, weights: Option<&Path>) -> PathBuf {
    let folder = tmp.join("folder");
    std::fs::create_dir_all(&folder).unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), folder.join(entry.file_name())).unwrap();
    }
    if let Some(w) = weights {
        std::fs::remove_file(folder.join("model.safetensors")).unwrap();
        std::fs::copy(w, folder.join("pytorch_model.bin")).unwrap();
    }
    let out = tmp.join("folder-bundle");
    run(&[
        "import",
        s(&folder),
        "--out",
        s(&out),
        "--weights",
        "int8",
        "--source",
        "en",
        "--target",
        "de",
    ]);
    out
}

#[test]
fn a_model_by_name_is_the_folders_import_and_loads_again_with_the_hub_stopped() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let hub = Hub::start();
    let out = tmp.path().join("by-name");
    let (ok, said) = import(
        &cache,
        &[
            "hf:Helsinki-NLP/opus-mt-en-de",
            "--hub",
            &hub.url,
            "--out",
            s(&out),
            "--weights",
            "int8",
        ],
    );
    assert!(ok, "{said}");
    assert!(said.contains("downloaded model.safetensors"), "{said}");
    // The same weights and tokenizer as the folder's import; the provenance names the pinned
    // commit and the command that rebuilds it.
    let folder = folder_import(tmp.path(), &marian_fixture("swish"), None);
    for file in ["model.safetensors", "tokenizer.json"] {
        assert!(
            read(&out, file) == read(&folder, file),
            "{file} differs from the folder's"
        );
    }
    let config: serde_json::Value = serde_json::from_slice(&read(&out, "config.json")).unwrap();
    let command = config["provenance"]["commands"][0].as_str().unwrap();
    assert!(
        command.starts_with("transduce import hf:Helsinki-NLP/opus-mt-en-de@")
            && command.ends_with(&format!("--hub {} --weights int8", hub.url)),
        "{command}"
    );
    assert_eq!(config["task"]["source"], "en");
    assert_eq!(config["task"]["target"], "de");

    // Again: from the cache, nothing downloaded.
    let (ok, said) = import(
        &cache,
        &[
            "hf:Helsinki-NLP/opus-mt-en-de",
            "--hub",
            &hub.url,
            "--out",
            s(&out),
            "--weights",
            "int8",
        ],
    );
    assert!(ok && !said.contains("downloaded"), "{said}");
    // The hub stopped: the cached commit.
    let url = hub.url.clone();
    drop(hub);
    let again = tmp.path().join("offline");
    let (ok, said) = import(
        &cache,
        &[
            "hf:Helsinki-NLP/opus-mt-en-de",
            "--hub",
            &url,
            "--out",
            s(&again),
            "--weights",
            "int8",
        ],
    );
    assert!(
        ok && said.contains("the hub is unreachable") && said.contains("using the cached commit"),
        "{said}"
    );
    assert_eq!(read(&again, "config.json"), read(&out, "config.json"));
    // A model never fetched, with the hub stopped.
    let (ok, said) = import(
        &cache,
        &[
            "hf:Helsinki-NLP/opus-mt-fr-en",
            "--hub",
            &url,
            "--out",
            s(&again),
        ],
    );
    assert!(
        !ok && said.contains("unreachable") && said.contains("not cached"),
        "{said}"
    );
}

/// The cache is the Hugging Face cache as huggingface_hub lays it out (`file_download.py`),
/// which transformers and candle share: an import writes `models--ORG--NAME/refs/main`,
/// each file's bytes as a blob named by its sha256 (the large ones) and the commit's
/// snapshot as relative links to them; a cache another client laid out that way is read with
/// the hub stopped; `HF_HUB_OFFLINE` reads it without asking the hub.
#[test]
fn the_cache_is_the_hugging_face_caches_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let hub = Hub::start();
    let out = tmp.path().join("by-name");
    let name = "hf:Helsinki-NLP/opus-mt-en-de";
    let (ok, said) = import(&cache, &[name, "--hub", &hub.url, "--out", s(&out)]);
    assert!(ok, "{said}");
    let repo = cache.join("models--Helsinki-NLP--opus-mt-en-de");
    let commit = std::fs::read_to_string(repo.join("refs/main")).unwrap();
    assert!(
        commit.len() == 40 && commit.bytes().all(|b| b.is_ascii_hexdigit()),
        "refs/main holds {commit:?}"
    );
    let snapshot = repo.join("snapshots").join(&commit);
    for file in [
        "config.json",
        "vocab.json",
        "source.spm",
        "model.safetensors",
    ] {
        let link = snapshot.join(file);
        let meta = link
            .symlink_metadata()
            .unwrap_or_else(|e| panic!("{}: {e}", link.display()));
        assert!(
            meta.file_type().is_symlink(),
            "{} is not a link",
            link.display()
        );
        let target = std::fs::read_link(&link).unwrap();
        assert!(
            target.starts_with("../../blobs"),
            "{file} links to {}",
            target.display()
        );
        assert!(
            read(&snapshot, file) == read(&marian_fixture("swish"), file),
            "{file}"
        );
    }
    // A large file's blob is named by its sha256, as huggingface_hub names it.
    let weights = read(&snapshot, "model.safetensors");
    let blob = repo
        .join("blobs")
        .join(transduce::bundle::sha256_hex(&weights));
    assert!(blob.is_file(), "no blob {}", blob.display());
    let leftovers: Vec<_> = std::fs::read_dir(repo.join("blobs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("incomplete"))
        .collect();
    assert!(leftovers.is_empty(), "partial files left: {leftovers:?}");

    // A cache laid out by another client, at a commit this hub never served: read with the
    // hub stopped.
    let other = tmp.path().join("other-cache");
    let repo = other.join("models--Helsinki-NLP--opus-mt-en-de");
    let theirs = "0123456789abcdef0123456789abcdef01234567";
    let snapshot = repo.join("snapshots").join(theirs);
    std::fs::create_dir_all(&snapshot).unwrap();
    std::fs::create_dir_all(repo.join("blobs")).unwrap();
    for entry in std::fs::read_dir(marian_fixture("swish")).unwrap() {
        let entry = entry.unwrap();
        let bytes = std::fs::read(entry.path()).unwrap();
        let id = transduce::bundle::sha256_hex(&bytes);
        std::fs::write(repo.join("blobs").join(&id), &bytes).unwrap();
        let target = PathBuf::from("../../blobs").join(&id);
        std::os::unix::fs::symlink(target, snapshot.join(entry.file_name())).unwrap();
    }
    std::fs::create_dir_all(repo.join("refs")).unwrap();
    std::fs::write(repo.join("refs/main"), theirs).unwrap();
    let url = hub.url.clone();
    drop(hub);
    let stopped = tmp.path().join("stopped");
    let (ok, said) = import(&other, &[name, "--hub", &url, "--out", s(&stopped)]);
    assert!(
        ok && said.contains(&format!("using the cached commit {theirs}")),
        "{said}"
    );
    for file in ["model.safetensors", "tokenizer.json"] {
        assert!(read(&stopped, file) == read(&out, file), "{file} differs");
    }
    // HF_HUB_OFFLINE: the cache alone, the hub not asked (none is listening anyway).
    let offline = bin()
        .args([
            "import",
            name,
            "--hub",
            &url,
            "--out",
            s(&tmp.path().join("offline")),
        ])
        .env("TRANSDUCE_HUB_CACHE", &cache)
        .env("HF_HUB_OFFLINE", "1")
        .env_remove("HF_TOKEN")
        .env("HF_TOKEN_PATH", cache.join("no-token"))
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&offline.stderr);
    assert!(
        offline.status.success() && said.contains("HF_HUB_OFFLINE is set; using the cached commit"),
        "{said}"
    );
}

/// The families OPUS-MT has published since 2021 by their names: tc-big's (the tc
/// fixture's byte-fallback, joint sorted vocabulary) and a tiny student's (6 encoder and 2
/// decoder layers, three-letter codes). The languages come from the name, the
/// translations are transformers'.
#[test]
fn later_families_by_name_translate_as_transformers() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    for (name, fixture, (source, target)) in [
        ("opus-mt-tc-big-en-de", "tc", ("en", "de")),
        ("opus-mt_tiny_eng-deu", "student", ("eng", "deu")),
        (
            "opus-mt-tc-bible-big-en-deu_nld",
            "bible",
            ("en", "deu_nld"),
        ),
    ] {
        let out = tmp.path().join(fixture);
        let (ok, said) = import(
            &tmp.path().join("cache"),
            &[
                &format!("hf:Helsinki-NLP/{name}"),
                "--hub",
                &hub.url,
                "--out",
                s(&out),
            ],
        );
        assert!(ok, "{name}: {said}");
        let config: serde_json::Value =
            serde_json::from_slice(&std::fs::read(out.join("config.json")).unwrap()).unwrap();
        assert!(
            config["task"]["source"] == source && config["task"]["target"] == target,
            "{name}: {config}"
        );
        crate::import::assert_translates_as_transformers(&out, fixture, tmp.path());
    }
}

/// A model of many targets (the bible fixture under tc-bible's name): `--to LANG` puts
/// `>>LANG<<` before every line, and the outputs are transformers' for the sources written
/// with that token; a language the model has no token for is one error naming those it has.
#[test]
fn to_names_the_target_of_a_model_of_many_targets() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    let out = tmp.path().join("bible");
    let (ok, said) = import(
        &tmp.path().join("cache"),
        &[
            "hf:Helsinki-NLP/opus-mt-tc-bible-big-en-deu_nld",
            "--hub",
            &hub.url,
            "--out",
            s(&out),
        ],
    );
    assert!(ok, "{said}");
    let reference: serde_json::Value =
        serde_json::from_slice(&read(&marian_fixture("bible"), "reference.json")).unwrap();
    let cases = reference["generate"].as_array().unwrap();
    for language in ["deu", "nld"] {
        let token = format!(">>{language}<< ");
        let picked: Vec<_> = cases
            .iter()
            .filter_map(|c| {
                let text = c["text"].as_str().unwrap().strip_prefix(&token)?;
                Some((text, c["greedy"]["text"].as_str().unwrap()))
            })
            .collect();
        assert!(picked.len() >= 10, "{language}: {} cases", picked.len());
        // An empty line stays empty: it gets no token.
        let input = tmp.path().join(format!("{language}.txt"));
        let mut text: Vec<&str> = picked.iter().map(|p| p.0).collect();
        text.insert(1, "");
        std::fs::write(&input, text.join("\n") + "\n").unwrap();
        let got = translate_file(
            &out,
            &input,
            &tmp.path().join(format!("{language}.out")),
            &["--beam", "1", "--to", language],
        );
        let mut want: Vec<&str> = picked.iter().map(|p| p.1).collect();
        want.insert(1, "");
        assert_eq!(got.lines().collect::<Vec<_>>(), want, "--to {language}");
    }
    let refused = bin()
        .args(["translate", "--model", s(&out), "--to", "swe", "--quiet"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success()
            && said.contains("--to swe")
            && said.contains(">>swe<<")
            && said.contains(">>deu<< >>fra<< >>nld<<"),
        "{said}"
    );
}

#[test]
fn legacy_and_zip_checkpoints_by_name_equal_their_folder_imports() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    for (name, bin) in [
        ("Helsinki-NLP/opus-mt-de-en", "relu.pytorch_model.bin"),
        (
            "Helsinki-NLP/opus-mt-nl-en",
            "relu.legacy.pytorch_model.bin",
        ),
    ] {
        let out = tmp.path().join(bin);
        let (ok, said) = import(
            &tmp.path().join("cache"),
            &[
                &format!("hf:{name}"),
                "--hub",
                &hub.url,
                "--out",
                s(&out),
                "--weights",
                "int8",
                "--source",
                "en",
                "--target",
                "de",
            ],
        );
        assert!(
            ok && said.contains("downloaded pytorch_model.bin"),
            "{name}: {said}"
        );
        let dir = tmp.path().join(format!("{bin}-folder"));
        std::fs::create_dir_all(&dir).unwrap();
        let folder = folder_import(&dir, &marian_fixture("relu"), Some(&marian_fixture(bin)));
        assert!(
            read(&out, "model.safetensors") == read(&folder, "model.safetensors"),
            "{name}"
        );
    }
}

#[test]
fn a_broken_download_resumes_and_a_damaged_one_is_never_used() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("bundle");
    let name = "hf:Helsinki-NLP/opus-mt-en-de";
    // Cut halfway: an error that says to run again, no bundle, a partial file kept aside.
    let (ok, said) = import(
        &cache,
        &[
            name,
            "--hub",
            &format!("{}/~cut", hub.url),
            "--out",
            s(&out),
        ],
    );
    assert!(
        !ok && said.contains("broke off after") && said.contains("resume"),
        "{said}"
    );
    assert!(!out.join("config.json").exists());
    // Run again: it resumes where it stopped.
    let (ok, said) = import(&cache, &[name, "--hub", &hub.url, "--out", s(&out)]);
    assert!(ok && said.contains("(resumed at"), "{said}");

    // A damaged body (its sha256 is not the hub's): refused and deleted.
    let fresh = tmp.path().join("cache2");
    let (ok, said) = import(
        &fresh,
        &[
            name,
            "--hub",
            &format!("{}/~corrupt", hub.url),
            "--out",
            s(&tmp.path().join("b2")),
        ],
    );
    assert!(
        !ok && said.contains("is damaged") && said.contains("deleted"),
        "{said}"
    );
    // Nothing of it kept: no partial file, no blob linked as source.spm.
    let repo = fresh.join("models--Helsinki-NLP--opus-mt-en-de");
    let names = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir).map_or(Vec::new(), |entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
    };
    let partial: Vec<String> = names(&repo.join("blobs"))
        .into_iter()
        .filter(|n| n.contains("incomplete"))
        .collect();
    assert!(partial.is_empty(), "partial files kept: {partial:?}");
    for commit in names(&repo.join("snapshots")) {
        let link = repo.join("snapshots").join(commit).join("source.spm");
        assert!(link.symlink_metadata().is_err(), "{} kept", link.display());
    }
    // A body shorter than its Content-Length.
    let (ok, said) = import(
        &tmp.path().join("cache3"),
        &[
            name,
            "--hub",
            &format!("{}/~short", hub.url),
            "--out",
            s(&tmp.path().join("b3")),
        ],
    );
    assert!(!ok && said.contains("broke off"), "{said}");
}

/// The hub as huggingface.co answers (the test hub's `~real`): relative 307s for small
/// files, large files from a CDN on another origin whose ETag is a Xet hash, not the
/// sha256; 401 for a repository that does not exist. The import is the same bundle as from
/// the plain hub; a cut download resumes (If-Range on the CDN's own ETag); a damaged one is
/// refused by the listing's sha256. A hub that rate-limits or fails leaves the cached
/// revision usable.
#[test]
fn the_real_hubs_redirects_cdn_and_errors_hold() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    let name = "hf:Helsinki-NLP/opus-mt-en-de";
    let plain = tmp.path().join("plain");
    let (ok, said) = import(
        &tmp.path().join("cache0"),
        &[name, "--hub", &hub.url, "--out", s(&plain)],
    );
    assert!(ok, "{said}");
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("real");
    let (ok, said) = import(
        &cache,
        &[
            name,
            "--hub",
            &format!("{}/~real+cut", hub.url),
            "--out",
            s(&out),
        ],
    );
    assert!(!ok && said.contains("broke off after"), "{said}");
    let (ok, said) = import(
        &cache,
        &[
            name,
            "--hub",
            &format!("{}/~real", hub.url),
            "--out",
            s(&out),
        ],
    );
    assert!(ok && said.contains("(resumed at"), "{said}");
    assert_eq!(
        read(&out, "model.safetensors"),
        read(&plain, "model.safetensors")
    );
    assert_eq!(read(&out, "tokenizer.json"), read(&plain, "tokenizer.json"));

    let (ok, said) = import(
        &tmp.path().join("cache2"),
        &[
            name,
            "--hub",
            &format!("{}/~real+corrupt", hub.url),
            "--out",
            s(&tmp.path().join("b2")),
        ],
    );
    assert!(
        !ok && said.contains("is damaged") && said.contains("deleted"),
        "{said}"
    );
    // Rate-limited (429) or failing (503): the cached revision serves; a model not cached
    // is one error naming the status.
    for mode in ["limited", "down"] {
        let again = tmp.path().join(format!("again-{mode}"));
        let (ok, said) = import(
            &cache,
            &[
                name,
                "--hub",
                &format!("{}/~{mode}", hub.url),
                "--out",
                s(&again),
            ],
        );
        assert!(
            ok && said.contains("using the cached commit"),
            "{mode}: {said}"
        );
        assert_eq!(
            read(&again, "model.safetensors"),
            read(&plain, "model.safetensors")
        );
    }
    let (ok, said) = import(
        &tmp.path().join("cache4"),
        &[
            name,
            "--hub",
            &format!("{}/~limited", hub.url),
            "--out",
            s(&tmp.path().join("b4")),
        ],
    );
    assert!(
        !ok && said.contains("HTTP 429") && said.contains("not cached"),
        "{said}"
    );
    let (ok, said) = import(
        &tmp.path().join("cache3"),
        &[
            "hf:nobody/nothing",
            "--hub",
            &format!("{}/~real", hub.url),
            "--out",
            s(&tmp.path().join("b3")),
        ],
    );
    assert!(
        !ok && said.contains("HTTP 401") && said.contains("no such model"),
        "{said}"
    );
}

#[test]
fn bad_answers_are_one_error_each() {
    let tmp = tempfile::tempdir().unwrap();
    let hub = Hub::start();
    let cache = tmp.path().join("cache");
    let out = tmp.path().join("never");
    let cases: [(&str, String, &str); 6] = [
        (
            "hf:Helsinki-NLP/opus-mt-xx-yy",
            hub.url.clone(),
            "no such model",
        ),
        (
            "hf:test/opus-mt-en-xx-novocab",
            hub.url.clone(),
            "the model has no vocab.json",
        ),
        (
            "hf:test/opus-mt-en-xx-refused",
            hub.url.clone(),
            "config.json: field `normalize_before`",
        ),
        (
            "hf:Helsinki-NLP/opus-mt-en-de",
            format!("{}/~html", hub.url),
            "the listing is not JSON",
        ),
        (
            "hf:Helsinki-NLP/opus-mt-en-de",
            format!("{}/~moved", hub.url),
            "moved during the download",
        ),
        (
            "hf:Helsinki-NLP/opus-mt-en-de@v9",
            hub.url.clone(),
            "no revision v9",
        ),
    ];
    for (name, url, expected) in cases {
        let (ok, said) = import(&cache, &[name, "--hub", &url, "--out", s(&out)]);
        assert!(!ok, "{name} at {url} should fail");
        assert!(said.contains(expected), "{name} at {url}: {said}");
        assert_eq!(
            said.lines().filter(|l| l.starts_with("error")).count(),
            1,
            "{said}"
        );
    }
    assert!(!out.exists(), "nothing was written");
    let (ok, said) = import(&cache, &["hf:not-a-name", "--out", s(&out)]);
    assert!(!ok && said.contains("is not a model name"), "{said}");
    let (ok, said) = import(
        &cache,
        &[
            s(&marian_fixture("swish")),
            "--hub",
            &hub.url,
            "--out",
            s(&out),
        ],
    );
    assert!(
        !ok && said.contains("--hub goes with a model name"),
        "{said}"
    );
}

/// A pull request's revision (`@refs/pr/1`: other weights on the test hub), a renamed
/// repository (the hub's relative 307) and a gated one (401 or 403 with
/// `X-Error-Code: GatedRepo`) by name: each the folder's import of its files, or one error
/// saying what to do.
#[test]
fn pull_requests_renames_and_gated_repositories_as_the_hub_serves_them() {
    let tmp = tempfile::tempdir().unwrap();
    let cache = tmp.path().join("cache");
    let hub = Hub::start();
    let by_name = |name: &str, out: &str, token: Option<&str>| {
        let mut command = bin();
        command
            .args(["import", name, "--hub", &hub.url, "--weights", "int8"])
            .args(["--out", s(&tmp.path().join(out))])
            .env("TRANSDUCE_HUB_CACHE", &cache)
            .env_remove("HF_ENDPOINT")
            .env_remove("HF_TOKEN")
            .env("HF_TOKEN_PATH", tmp.path().join("token"));
        if let Some(t) = token {
            command.env("HF_TOKEN", t);
        }
        let out = command.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let weights = |out: &str| read(&tmp.path().join(out), "model.safetensors");
    let (ok, said) = by_name("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/1", "pr", None);
    assert!(ok, "{said}");
    let relu_copy = folder_import(tmp.path(), &marian_fixture("relu-copy"), None);
    assert!(
        weights("pr") == read(&relu_copy, "model.safetensors"),
        "refs/pr/1: the pull request's weights"
    );
    let (ok, said) = by_name("hf:Helsinki-NLP/opus-mt-en-de", "main", None);
    assert!(ok, "{said}");
    assert!(
        weights("main") != weights("pr"),
        "main is not the pull request"
    );
    let (ok, said) = by_name(
        "hf:Helsinki-NLP/opus-mt-en-de-renamed-from",
        "renamed",
        None,
    );
    assert!(ok, "{said}");
    assert!(
        weights("renamed") == weights("main"),
        "a rename: the new name's model"
    );

    let (ok, said) = by_name("hf:test/gated-en-de", "gated", None);
    assert!(
        !ok && said.contains("a gated model: accept its conditions"),
        "{said}"
    );
    assert!(said.contains("set HF_TOKEN"), "{said}");
    let (ok, said) = by_name("hf:test/gated-en-de", "gated", Some("hf_someoneelse"));
    assert!(
        !ok && said.contains("has not been granted access"),
        "{said}"
    );
    let (ok, said) = by_name("hf:test/gated-en-de", "gated", Some("hf_testtokengranted"));
    assert!(ok, "{said}");
    assert!(weights("gated") == weights("main"), "gated, with the token");
    // The token in the file `hf auth login` writes (here at HF_TOKEN_PATH), as
    // huggingface_hub reads it when HF_TOKEN is not set.
    std::fs::write(tmp.path().join("token"), "hf_testtokengranted\n").unwrap();
    let (ok, said) = by_name("hf:test/gated-en-de", "gated-file", None);
    assert!(ok, "{said}");
    assert!(
        weights("gated-file") == weights("main"),
        "gated, with the token file"
    );
}
