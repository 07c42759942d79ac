//! The Hugging Face cache, laid out as huggingface_hub lays it out (`file_download.py`,
//! `constants.py`), so that a model transformers or candle downloaded is read from it and
//! one imported here is theirs too:
//!
//! ```text
//! $HF_HUB_CACHE/models--ORG--NAME/
//!     refs/REVISION               the commit REVISION last resolved to (refs/pr/1 nests)
//!     blobs/ID                    a file's bytes: ID is a large file's sha256, a small
//!                                 file's ETag (the hub's git blob id), else its sha256
//!     blobs/ID.incomplete         a download under way (huggingface_hub resumes these too)
//!     snapshots/COMMIT/FILE       a relative link to ../../blobs/ID
//! ```
//!
//! Our own addition is `blobs/ID.incomplete.etag`: the ETag of the answer that served the
//! partial file (a CDN's), which a resumed request is conditioned on with `If-Range`.

use std::path::{Path, PathBuf};

use transduce_import::hub::Reference;
use transduce_train::error::{Error, Result, io};
use transduce_train::fsutil;

/// An environment variable's path, unless unset or empty.
fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// huggingface_hub's home: `$HF_HOME`, else `$XDG_CACHE_HOME/huggingface`, else
/// `~/.cache/huggingface`.
fn hf_home() -> PathBuf {
    env_path("HF_HOME").unwrap_or_else(|| {
        env_path("XDG_CACHE_HOME")
            .or_else(|| env_path("HOME").map(|h| h.join(".cache")))
            .unwrap_or_else(std::env::temp_dir)
            .join("huggingface")
    })
}

/// Where models are cached: `$TRANSDUCE_HUB_CACHE`, else huggingface_hub's own choice:
/// `$HF_HUB_CACHE`, else `$HF_HOME/hub` (its home: [`hf_home`]).
pub fn cache_root() -> PathBuf {
    env_path("TRANSDUCE_HUB_CACHE")
        .or_else(|| env_path("HF_HUB_CACHE"))
        .unwrap_or_else(|| hf_home().join("hub"))
}

/// The hub token as huggingface_hub finds it: `$HF_TOKEN`, else the file `hf auth login`
/// writes (`$HF_TOKEN_PATH`, else `$HF_HOME/token`).
pub fn token() -> Option<String> {
    if let Some(token) = std::env::var("HF_TOKEN").ok().filter(|t| !t.is_empty()) {
        return Some(token);
    }
    let path = env_path("HF_TOKEN_PATH").unwrap_or_else(|| hf_home().join("token"));
    let token = std::fs::read_to_string(path).ok()?;
    let token = token.trim();
    (!token.is_empty()).then(|| token.to_string())
}

/// An ETag's value: without `W/` and quotes.
pub fn etag_value(etag: &str) -> &str {
    etag.trim_start_matches("W/").trim_matches('"')
}

/// Whether `HF_HUB_OFFLINE` asks for the cache alone (huggingface_hub reads 1, ON, YES and
/// TRUE in any case).
pub fn offline_mode() -> bool {
    std::env::var("HF_HUB_OFFLINE")
        .is_ok_and(|v| matches!(v.to_ascii_uppercase().as_str(), "1" | "ON" | "YES" | "TRUE"))
}

/// One model's folder of the cache.
pub struct Repo {
    dir: PathBuf,
}

impl Repo {
    pub fn of(cache: &Path, reference: &Reference) -> Repo {
        let folder = format!("models--{}--{}", reference.org, reference.name);
        Repo {
            dir: cache.join(folder),
        }
    }

    /// The commit `revision` last resolved to, if it did.
    pub fn commit_of(&self, revision: &str) -> Option<String> {
        let commit = std::fs::read_to_string(self.refs(revision)).ok()?;
        let commit = commit.trim().to_string();
        is_commit(&commit).then_some(commit)
    }

    /// Records that `revision` resolved to `commit`.
    pub fn set_ref(&self, revision: &str, commit: &str) -> Result<()> {
        let path = self.refs(revision);
        let parent = path.parent().expect("refs/REVISION has a parent");
        std::fs::create_dir_all(parent).map_err(io(parent))?;
        fsutil::write_atomic(&path, commit.as_bytes())
    }

    /// A revision's path parts were checked when its name was parsed (no `.` or `..`).
    fn refs(&self, revision: &str) -> PathBuf {
        revision
            .split('/')
            .fold(self.dir.join("refs"), |path, part| path.join(part))
    }

    /// `name` of `commit`, where the cache holds it whole (its link resolves).
    pub fn cached(&self, commit: &str, name: &str) -> Option<PathBuf> {
        let path = self.dir.join("snapshots").join(commit).join(name);
        path.is_file().then_some(path)
    }

    /// Where a download of `name` at `commit` grows: the blob's own `.incomplete` when its
    /// sha256 is listed (the name huggingface_hub gives it), else one per commit and file.
    pub fn partial(&self, commit: &str, name: &str, listed_sum: Option<&str>) -> Result<PathBuf> {
        let blobs = self.dir.join("blobs");
        std::fs::create_dir_all(&blobs).map_err(io(&blobs))?;
        Ok(match listed_sum.filter(|s| is_blob_id(s)) {
            Some(sum) => blobs.join(format!("{sum}.incomplete")),
            None => blobs.join(format!("{commit}.{name}.incomplete")),
        })
    }

    /// Moves a finished download (`part`, checked) to its blob `id` and links it from
    /// `commit`'s snapshot as `name`. A blob already there is the same content: kept.
    pub fn store(&self, part: &Path, commit: &str, name: &str, id: &str) -> Result<PathBuf> {
        let blob = self.dir.join("blobs").join(id);
        if blob.is_file() {
            std::fs::remove_file(part).map_err(io(part))?;
        } else {
            std::fs::rename(part, &blob).map_err(io(&blob))?;
        }
        let snapshot = self.dir.join("snapshots").join(commit);
        std::fs::create_dir_all(&snapshot).map_err(io(&snapshot))?;
        let link = snapshot.join(name);
        if link.symlink_metadata().is_ok() {
            std::fs::remove_file(&link).map_err(io(&link))?;
        }
        link_to(&PathBuf::from("../../blobs").join(id), &blob, &link)?;
        Ok(link)
    }
}

/// A relative link where the system has them, else a copy (as huggingface_hub does on
/// Windows without developer mode).
fn link_to(relative: &Path, blob: &Path, link: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        let _ = blob;
        std::os::unix::fs::symlink(relative, link).map_err(io(link))
    }
    #[cfg(not(unix))]
    {
        let _ = relative;
        std::fs::copy(blob, link).map(|_| ()).map_err(io(link))
    }
}

/// A commit id as the hub gives them (hex), safe as a folder name.
pub fn is_commit(text: &str) -> bool {
    (7..=64).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A blob id (a sha256, or an ETag's value) safe as a file name.
fn is_blob_id(text: &str) -> bool {
    (1..=128).contains(&text.len())
        && !text.starts_with('.')
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// The blob id of a file: its listed sha256, else the hub's ETag (quotes and `W/` gone),
/// else the sha256 of its bytes.
pub fn blob_id(listed_sum: Option<&str>, etag: Option<&str>, bytes: &[u8]) -> String {
    let etag = etag.map(|e| etag_value(e).to_string());
    listed_sum
        .map(str::to_string)
        .into_iter()
        .chain(etag)
        .find(|id| is_blob_id(id))
        .unwrap_or_else(|| transduce::bundle::sha256_hex(bytes))
}

/// A commit the hub named that cannot be a folder name: refused, not followed.
pub fn check_commit(reference: &Reference, commit: &str) -> Result<()> {
    if is_commit(commit) {
        return Ok(());
    }
    Err(Error::Usage(format!(
        "{reference}: the hub named commit {commit:?}, which is not a commit id"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_can_be_file_names() {
        assert!(is_commit("06018c79aa61cc0e6cba3ed72a6e8d3a0a1b2c3d"));
        assert!(!is_commit("../../etc"));
        assert!(!is_commit("main"));
        let sum = "ab".repeat(32);
        assert_eq!(blob_id(Some(&sum), Some("\"x\""), b""), sum);
        assert_eq!(blob_id(None, Some("W/\"1234abcd\""), b""), "1234abcd");
        // An ETag that cannot be a file name: the content's sha256.
        assert_eq!(
            blob_id(None, Some("\"../x\""), b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn refs_nest_as_huggingface_hub_writes_them() {
        let tmp = tempfile::tempdir().unwrap();
        let reference = Reference::parse("hf:Helsinki-NLP/opus-mt-en-de@refs/pr/1")
            .unwrap()
            .unwrap();
        let repo = Repo::of(tmp.path(), &reference);
        let commit = "0123456789abcdef0123456789abcdef01234567";
        repo.set_ref("refs/pr/1", commit).unwrap();
        let written = tmp
            .path()
            .join("models--Helsinki-NLP--opus-mt-en-de/refs/refs/pr/1");
        assert_eq!(std::fs::read_to_string(written).unwrap(), commit);
        assert_eq!(repo.commit_of("refs/pr/1").as_deref(), Some(commit));
        assert_eq!(repo.commit_of("main"), None);
    }
}
