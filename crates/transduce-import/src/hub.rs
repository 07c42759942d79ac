//! Models by name, as the Hugging Face hub lays them out: `hf:ORG/NAME[@REVISION]`, files at
//! `{hub}/{ORG}/{NAME}/resolve/{REVISION}/{file}` and the file list at
//! `{hub}/api/models/{ORG}/{NAME}[/revision/{REVISION}]`. The fetching itself is the
//! caller's (the CLI over HTTP, the browser's worker with `fetch`).

use std::fmt;

use transduce::WeightDtype;

/// The hub a name refers to unless told otherwise.
pub const DEFAULT_HUB: &str = "https://huggingface.co";
/// The revision of a name without one.
pub const DEFAULT_REVISION: &str = "main";

/// A model on the hub: `hf:ORG/NAME[@REVISION]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reference {
    pub org: String,
    pub name: String,
    pub revision: Option<String>,
}

fn name_part(part: &str) -> bool {
    !part.is_empty()
        && part.len() <= 96
        && part != "."
        && part != ".."
        && part
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Reference {
    /// `None` when `text` is not an `hf:` name at all (a bundle folder or URL); else the
    /// reference, or why it is not one.
    pub fn parse(text: &str) -> Option<Result<Reference, String>> {
        let rest = text.strip_prefix("hf:")?;
        Some(Self::parse_repo(rest).map_err(|why| {
            format!(
                "{text:?} is not a model name like hf:Helsinki-NLP/opus-mt-en-fr[@REVISION]: {why}"
            )
        }))
    }

    fn parse_repo(rest: &str) -> Result<Reference, String> {
        let (repo, revision) = match rest.split_once('@') {
            Some((repo, rev)) => (repo, Some(rev)),
            None => (rest, None),
        };
        let (org, name) = repo
            .split_once('/')
            .ok_or("it needs an organisation and a name, ORG/NAME")?;
        if !name_part(org) || !name_part(name) {
            return Err("ORG and NAME are letters, digits, `-`, `_` and `.`".into());
        }
        if let Some(rev) = revision
            && (rev.is_empty()
                || rev.len() > 128
                || rev
                    .split('/')
                    .any(|p| p.is_empty() || p == "." || p == "..")
                || !rev
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/')))
        {
            return Err(
                "a revision is a branch, tag or commit: letters, digits, `-`, `_`, `.`, `/`".into(),
            );
        }
        Ok(Reference {
            org: org.to_string(),
            name: name.to_string(),
            revision: revision.map(str::to_string),
        })
    }

    /// `ORG/NAME`.
    pub fn repo(&self) -> String {
        format!("{}/{}", self.org, self.name)
    }

    pub fn revision(&self) -> &str {
        self.revision.as_deref().unwrap_or(DEFAULT_REVISION)
    }

    /// Where `file` of this revision is served.
    pub fn resolve_url(&self, hub: &str, file: &str) -> String {
        format!(
            "{}/{}/{}/resolve/{}/{file}",
            hub.trim_end_matches('/'),
            self.org,
            self.name,
            self.revision().replace('/', "%2F")
        )
    }

    /// Where the hub lists the model's files and the commit of its revision (`blobs=true`:
    /// with each large file's sha256 and size).
    pub fn api_url(&self, hub: &str) -> String {
        let base = format!(
            "{}/api/models/{}/{}",
            hub.trim_end_matches('/'),
            self.org,
            self.name
        );
        match &self.revision {
            Some(rev) => format!("{base}/revision/{}?blobs=true", rev.replace('/', "%2F")),
            None => format!("{base}?blobs=true"),
        }
    }

    /// The same model pinned to `commit`.
    pub fn at(&self, commit: &str) -> Reference {
        Reference {
            revision: Some(commit.to_string()),
            ..self.clone()
        }
    }
}

impl fmt::Display for Reference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "hf:{}/{}", self.org, self.name)?;
        if let Some(rev) = &self.revision {
            write!(f, "@{rev}")?;
        }
        Ok(())
    }
}

/// The command recorded in a bundle imported by name: the one that rebuilds it, the same
/// whether the CLI or a browser converted it (so both write the same bytes).
pub fn command(reference: &Reference, hub: &str, weights: WeightDtype) -> String {
    let weights = match weights {
        WeightDtype::F32 => "f32",
        WeightDtype::F16 => "f16",
        WeightDtype::Int8 => "int8",
    };
    let hub = hub.trim_end_matches('/');
    if hub == DEFAULT_HUB {
        format!("transduce import {reference} --weights {weights}")
    } else {
        format!("transduce import {reference} --hub {hub} --weights {weights}")
    }
}

/// What the hub's listing (`/api/models/ORG/NAME?blobs=true`) says: the commit of the
/// revision, its files, and the sha256 of each large (LFS or Xet) file: what a download is
/// checked against, since after the hub's redirect to its CDN the answer's own ETag is a
/// Xet hash, not the content's sha256. Hubs and mirrors that leave fields out give `None`
/// / empty lists.
#[derive(Debug, Default, PartialEq)]
pub struct Listing {
    pub commit: Option<String>,
    pub files: Vec<String>,
    /// (file, sha256 in lowercase hex) for the files the listing gives `lfs.sha256` of.
    pub sha256: Vec<(String, String)>,
}

impl Listing {
    /// The listed sha256 of `file`, if the listing gives one.
    pub fn sha256_of(&self, file: &str) -> Option<&str> {
        self.sha256
            .iter()
            .find(|(name, _)| name == file)
            .map(|(_, sum)| sum.as_str())
    }
}

/// Reads a listing's JSON; anything else (an HTML error page, say) is an error that says
/// what came back.
pub fn parse_listing(bytes: &[u8]) -> Result<Listing, String> {
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| {
        let start = String::from_utf8_lossy(&bytes[..bytes.len().min(40)]).into_owned();
        format!("not JSON ({e}); it begins {start:?}")
    })?;
    let object = value.as_object().ok_or("not a JSON object")?;
    let commit = object
        .get("sha")
        .and_then(|v| v.as_str())
        .map(str::to_string);
    let siblings = object
        .get("siblings")
        .and_then(|v| v.as_array())
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut files = Vec::new();
    let mut sha256 = Vec::new();
    for f in siblings {
        let Some(name) = f.get("rfilename").and_then(|n| n.as_str()) else {
            continue;
        };
        files.push(name.to_string());
        let sum = f.pointer("/lfs/sha256").and_then(|v| v.as_str());
        if let Some(sum) = sum.filter(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            sha256.push((name.to_string(), sum.to_ascii_lowercase()));
        }
    }
    Ok(Listing {
        commit,
        files,
        sha256,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_and_give_the_hubs_urls() {
        assert!(Reference::parse("models/en-de/").is_none());
        let r = Reference::parse("hf:Helsinki-NLP/opus-mt-en-fr")
            .unwrap()
            .unwrap();
        assert_eq!(r.repo(), "Helsinki-NLP/opus-mt-en-fr");
        assert_eq!(
            r.resolve_url("https://huggingface.co/", "config.json"),
            "https://huggingface.co/Helsinki-NLP/opus-mt-en-fr/resolve/main/config.json"
        );
        assert_eq!(
            r.api_url("http://127.0.0.1:9"),
            "http://127.0.0.1:9/api/models/Helsinki-NLP/opus-mt-en-fr?blobs=true"
        );
        let pinned = Reference::parse("hf:a/b@refs/pr/1").unwrap().unwrap();
        assert_eq!(
            pinned.resolve_url("h", "x"),
            "h/a/b/resolve/refs%2Fpr%2F1/x"
        );
        assert_eq!(
            pinned.api_url("h"),
            "h/api/models/a/b/revision/refs%2Fpr%2F1?blobs=true"
        );
        assert_eq!(pinned.to_string(), "hf:a/b@refs/pr/1");
        for bad in [
            "hf:",
            "hf:a",
            "hf:a/",
            "hf:../b",
            "hf:a/b/c",
            "hf:a/b@",
            "hf:a/b@x/../y",
            "hf:a b/c",
        ] {
            let e = Reference::parse(bad).unwrap().unwrap_err();
            assert!(e.contains("is not a model name"), "{bad}: {e}");
        }
        assert_eq!(
            command(&r.at("abc"), DEFAULT_HUB, WeightDtype::Int8),
            "transduce import hf:Helsinki-NLP/opus-mt-en-fr@abc --weights int8"
        );
    }

    #[test]
    fn listings_are_read_or_refused() {
        let l =
            parse_listing(br#"{"sha":"abc","siblings":[{"rfilename":"config.json"}]}"#).unwrap();
        assert_eq!(l.commit.as_deref(), Some("abc"));
        assert_eq!(l.files, ["config.json"]);
        assert_eq!(l.sha256_of("config.json"), None);
        let sum = "AB".repeat(32);
        let l = parse_listing(
            format!(
                r#"{{"sha":"abc","siblings":[{{"rfilename":"model.safetensors","lfs":{{"sha256":"{sum}","size":3}}}},{{"rfilename":"x","lfs":{{"sha256":"not-hex"}}}}]}}"#
            )
            .as_bytes(),
        )
        .unwrap();
        assert_eq!(
            l.sha256_of("model.safetensors"),
            Some("ab".repeat(32).as_str())
        );
        assert_eq!(l.sha256_of("x"), None);
        let e = parse_listing(b"<!doctype html><title>404</title>").unwrap_err();
        assert!(e.contains("not JSON") && e.contains("<!doctype"), "{e}");
    }
}
