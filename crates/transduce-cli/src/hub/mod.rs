//! `transduce import hf:ORG/NAME`: a model's files from the Hugging Face hub (or any server
//! with its layout, `--hub`), kept in the Hugging Face cache ([`cache`]), which transformers
//! and candle share.
//!
//! Files are fetched at the listing's commit. A file is moved into the cache only once its
//! length matches `Content-Length` and its sha256 the listing's (`lfs.sha256`; else the
//! hub's `X-Linked-Etag` where that is a sha256, never a CDN's ETag, which is a Xet hash): a
//! partial file is never read. A cut download resumes with `If-Range` on the ETag of the
//! answer that served it. The token (`HF_TOKEN`) goes to the hub's origin only, its
//! redirects there included. With the hub unreachable, rate-limiting or failing, or with
//! `HF_HUB_OFFLINE` set, a revision whose files are all cached is read from there.

mod cache;

use std::io::{Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

use transduce_import::hub::{Listing, Reference, parse_listing};
use transduce_import::{ModelFiles, OPTIONAL, PYTORCH, REQUIRED, SAFETENSORS};

use transduce_train::error::{Error, Result, io};

use cache::Repo;
pub use cache::cache_root;

/// The model's files, and the commit they are of.
pub struct Fetched {
    pub files: ModelFiles,
    pub commit: String,
}

struct Client {
    agent: ureq::Agent,
    hub: String,
    token: Option<String>,
}

/// A failed request: the hub could not be reached at all, or it answered.
enum Failure {
    Unreachable(String),
    Status(u16, String),
    /// A gated repository (401 or 403 with `X-Error-Code: GatedRepo`, as huggingface_hub's
    /// `_http.py` reads it): whether a token was sent.
    Gated(bool),
}

impl Client {
    fn new(hub: &str) -> Client {
        let agent = ureq::Agent::config_builder()
            // Redirects are followed here, so the first answer's headers (the commit, the
            // content's ETag) are seen.
            .max_redirects(0)
            .http_status_as_error(false)
            .timeout_connect(Some(Duration::from_secs(30)))
            .timeout_per_read(Some(Duration::from_secs(120)))
            .user_agent(concat!("transduce/", env!("CARGO_PKG_VERSION")))
            .build()
            .new_agent();
        Client {
            agent,
            hub: hub.trim_end_matches('/').to_string(),
            token: cache::token(),
        }
    }

    /// GET `url`, following up to 5 redirects; the final response and the headers that
    /// matter: the first answer's `X-Repo-Commit` and linked ETag (the hub's, which a
    /// redirect to its CDN does not repeat) and the final answer's own ETag (what a
    /// `Range` request to the same URL is conditioned on).
    fn get(
        &self,
        url: &str,
        range: Option<(u64, &str)>,
    ) -> std::result::Result<(ureq::http::Response<ureq::Body>, Headers), Failure> {
        let mut url = url.to_string();
        let mut first = Headers::default();
        let hub_origin = origin(&self.hub).to_string();
        for hop in 0..6 {
            let mut request = self.agent.get(&url);
            if let Some((from, etag)) = range {
                request = request
                    .header("Range", &format!("bytes={from}-"))
                    .header("If-Range", etag);
            }
            // The token goes to the hub's own origin only (its relative redirects
            // included), never to another origin it redirects to (its CDN), as
            // huggingface_hub and browsers do.
            if let Some(token) = &self.token
                && origin(&url) == hub_origin
            {
                request = request.header("Authorization", &format!("Bearer {token}"));
            }
            let response = request
                .call()
                .map_err(|e| Failure::Unreachable(format!("{url}: {e}")))?;
            let header = |name: &str| {
                response
                    .headers()
                    .get(name)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_string)
            };
            if hop == 0 {
                first = Headers {
                    commit: header("x-repo-commit"),
                    linked: header("x-linked-etag").or_else(|| header("etag")),
                    own: None,
                };
            }
            let status = response.status().as_u16();
            if (300..400).contains(&status) && status != 304 {
                let location = header("location").ok_or_else(|| {
                    Failure::Status(status, format!("{url}: a redirect without a Location"))
                })?;
                url = join(&url, &location);
                continue;
            }
            if !(200..300).contains(&status) {
                let code = header("x-error-code").unwrap_or_default();
                if code == "GatedRepo" {
                    return Err(Failure::Gated(self.token.is_some()));
                }
                let code = if code.is_empty() {
                    code
                } else {
                    format!(" ({code})")
                };
                return Err(Failure::Status(
                    status,
                    format!("{url}: HTTP {status}{code}"),
                ));
            }
            first.own = header("etag");
            return Ok((response, first));
        }
        Err(Failure::Status(
            310,
            format!("{url}: more than 5 redirects"),
        ))
    }
}

#[derive(Default)]
struct Headers {
    commit: Option<String>,
    /// The first answer's `X-Linked-Etag` (else its ETag): a large file's sha256.
    linked: Option<String>,
    /// The final answer's ETag (after a redirect to a CDN: a Xet hash).
    own: Option<String>,
}

/// `scheme://host:port` of a URL.
fn origin(url: &str) -> &str {
    let start = url.find("://").map_or(0, |i| i + 3);
    url[start..].find('/').map_or(url, |j| &url[..start + j])
}

/// `location` against the URL it answered (absolute, or a path on the same host).
fn join(base: &str, location: &str) -> String {
    if location.contains("://") {
        return location.to_string();
    }
    let origin_end = base
        .find("://")
        .and_then(|i| base[i + 3..].find('/').map(|j| i + 3 + j))
        .unwrap_or(base.len());
    if location.starts_with('/') {
        format!("{}{location}", &base[..origin_end])
    } else {
        let dir = base.rfind('/').map_or(base, |i| &base[..=i]);
        format!("{dir}{location}")
    }
}

fn hub_error(reference: &Reference, message: String) -> Error {
    Error::Usage(format!("{reference}: {message}"))
}

/// A gated repository's error: what to do, with a token sent or without.
fn gated(reference: &Reference, hub: &str, token: bool) -> Error {
    let page = format!(
        "{}/{}/{}",
        hub.trim_end_matches('/'),
        reference.org,
        reference.name
    );
    hub_error(
        reference,
        if token {
            format!(
                "a gated model, and HF_TOKEN's account has not been granted access: ask for \
                 it at {page} while logged in as that account"
            )
        } else {
            format!(
                "a gated model: accept its conditions at {page} while logged in, then set \
                 HF_TOKEN to a token of that account"
            )
        },
    )
}

/// The ETag's content sum where it is one (the hub's ETag of a large file is its sha256).
fn sha256_etag(etag: &str) -> Option<String> {
    let tag = cache::etag_value(etag);
    (tag.len() == 64 && tag.bytes().all(|b| b.is_ascii_hexdigit())).then(|| tag.to_lowercase())
}

/// The model's files at `reference`, from the cache or the hub.
pub fn fetch(reference: &Reference, hub: &str, cache: &Path) -> Result<Fetched> {
    let client = Client::new(hub);
    let repo = Repo::of(cache, reference);
    if cache::offline_mode() {
        return offline(reference, &repo, "HF_HUB_OFFLINE is set");
    }
    let listing = match client.get(&reference.api_url(hub), None) {
        Ok((response, _)) => {
            let mut body = Vec::new();
            response
                .into_body()
                .into_reader()
                .take(16 << 20)
                .read_to_end(&mut body)
                .map_err(|e| hub_error(reference, format!("reading the listing: {e}")))?;
            Some(parse_listing(&body).map_err(|e| {
                hub_error(
                    reference,
                    format!("{}: the listing is {e}", reference.api_url(hub)),
                )
            })?)
        }
        // A hub without the listing: the files are asked for one by one.
        Err(Failure::Status(404, what)) if what.ends_with("(RevisionNotFound)") => {
            return Err(hub_error(
                reference,
                format!("{what}: no revision {} on {hub}", reference.revision()),
            ));
        }
        Err(Failure::Status(404, _)) => None,
        Err(Failure::Status(401, what)) => {
            return Err(hub_error(
                reference,
                format!("{what}: no such model on {hub}, or it needs a token (set HF_TOKEN)"),
            ));
        }
        Err(Failure::Gated(token)) => return Err(gated(reference, hub, token)),
        // Rate-limited or failing: as unreachable, the cached revision serves.
        Err(Failure::Status(status, what)) if status == 429 || status >= 500 => {
            let limit = if status == 429 {
                " (the hub limits how often it is asked; try again later)"
            } else {
                ""
            };
            return offline(reference, &repo, &format!("the hub answered {what}{limit}"));
        }
        Err(Failure::Status(_, what)) => return Err(hub_error(reference, what)),
        Err(Failure::Unreachable(why)) => {
            return offline(reference, &repo, &format!("the hub is unreachable ({why})"));
        }
    };
    let commit = listing.as_ref().and_then(|l| l.commit.clone());
    if let Some(commit) = &commit {
        cache::check_commit(reference, commit)?;
    }
    fetch_files(reference, &client, &repo, listing, commit)
}

/// The hub is unreachable, rate-limiting or failing, or not to be asked (`why` says
/// which): the revision's files from the cache, if all are there.
fn offline(reference: &Reference, repo: &Repo, why: &str) -> Result<Fetched> {
    let Some(commit) = repo.commit_of(reference.revision()) else {
        return Err(hub_error(
            reference,
            format!("{why}, and this revision is not cached"),
        ));
    };
    let mut files = ModelFiles::new();
    for name in REQUIRED
        .iter()
        .chain(&OPTIONAL)
        .chain(&[SAFETENSORS, PYTORCH])
    {
        if let Some(path) = repo.cached(&commit, name) {
            files.insert(*name, std::fs::read(&path).map_err(io(&path))?);
        }
    }
    let complete =
        REQUIRED.iter().all(|f| files.get(f).is_some()) && files.weights_file().is_some();
    if !complete {
        return Err(hub_error(
            reference,
            format!("{why}, and the cache holds only part of commit {commit}"),
        ));
    }
    eprintln!("{why}; using the cached commit {commit}");
    Ok(Fetched { files, commit })
}

fn fetch_files(
    reference: &Reference,
    client: &Client,
    repo: &Repo,
    listing: Option<Listing>,
    mut commit: Option<String>,
) -> Result<Fetched> {
    let listed = listing.as_ref().map(|l| l.files.clone());
    let has = |name: &str| {
        listed
            .as_ref()
            .is_none_or(|files| files.iter().any(|f| f == name))
    };
    // Required files first (config.json tells a missing model at once), then the optional
    // ones, then the weights.
    let mut wanted: Vec<(&str, bool)> = REQUIRED.iter().map(|f| (*f, true)).collect();
    wanted.extend(OPTIONAL.iter().filter(|f| has(f)).map(|f| (*f, false)));
    match &listed {
        Some(files) => {
            let weights = transduce_import::weights_file_of(files.iter().map(String::as_str))
                .ok_or_else(|| {
                    hub_error(
                        reference,
                        "the model lists neither model.safetensors nor pytorch_model.bin".into(),
                    )
                })?;
            wanted.push((weights, true));
        }
        None => {
            wanted.push((SAFETENSORS, false));
            wanted.push((PYTORCH, false));
        }
    }
    let mut files = ModelFiles::new();
    for (name, required) in wanted {
        if name == PYTORCH && files.get(SAFETENSORS).is_some() {
            continue;
        }
        let sum = listing.as_ref().and_then(|l| l.sha256_of(name));
        match download(reference, client, repo, name, &mut commit, sum)? {
            Some(bytes) => files.insert(name, bytes),
            None if required => {
                return Err(hub_error(
                    reference,
                    format!(
                        "{} answered 404: {}",
                        reference.resolve_url(&client.hub, name),
                        if name == REQUIRED[0] {
                            match &reference.revision {
                                Some(rev) => {
                                    format!("no such model or revision {rev} on {}", client.hub)
                                }
                                None => format!("no such model on {}", client.hub),
                            }
                        } else {
                            format!("the model has no {name}")
                        }
                    ),
                ));
            }
            None => {}
        }
    }
    if files.weights_file().is_none() {
        return Err(hub_error(
            reference,
            "the model has neither model.safetensors nor pytorch_model.bin".into(),
        ));
    }
    let commit = commit.unwrap_or_else(|| reference.revision().to_string());
    if cache::is_commit(&commit) {
        repo.set_ref(reference.revision(), &commit)?;
    }
    Ok(Fetched { files, commit })
}

/// One file of the revision: from the cache when complete there, else downloaded (at the
/// listing's commit where known, so a push mid-download cannot mix commits; resumed where a
/// partial download of the same content is). Checked against `listed_sum` (the listing's
/// sha256), else the hub's linked ETag where that is a sha256. `None` for a 404.
fn download(
    reference: &Reference,
    client: &Client,
    repo: &Repo,
    name: &str,
    commit: &mut Option<String>,
    listed_sum: Option<&str>,
) -> Result<Option<Vec<u8>>> {
    if let Some(cached) = commit.as_deref().and_then(|c| repo.cached(c, name)) {
        return std::fs::read(&cached).map(Some).map_err(io(&cached));
    }
    let url = match commit.as_deref() {
        Some(c) => reference.at(c).resolve_url(&client.hub, name),
        None => reference.resolve_url(&client.hub, name),
    };
    // A partial download is kept per commit; resumed only when the commit is known, with
    // `If-Range` on the ETag the answer that served it gave (a CDN's own).
    let part = commit
        .as_deref()
        .map(|c| repo.partial(c, name, listed_sum))
        .transpose()?;
    let resume = part.as_ref().and_then(|p| {
        let etag = std::fs::read_to_string(etag_of(p)).ok()?;
        let len = std::fs::metadata(p).ok()?.len();
        (len > 0).then_some((len, etag))
    });
    let started = Instant::now();
    let (response, headers) = match client.get(&url, resume.as_ref().map(|(n, e)| (*n, e.as_str())))
    {
        Ok(r) => r,
        Err(Failure::Status(404, _)) => return Ok(None),
        Err(Failure::Gated(token)) => return Err(gated(reference, &client.hub, token)),
        Err(Failure::Status(_, what)) | Err(Failure::Unreachable(what)) => {
            return Err(hub_error(reference, what));
        }
    };
    match (commit.as_deref(), headers.commit.as_deref()) {
        (Some(listed), Some(served)) if listed != served => {
            return Err(hub_error(
                reference,
                format!(
                    "revision {} moved during the download: the listing said commit \
                     {listed}, {name} came from {served}; import it again",
                    reference.revision()
                ),
            ));
        }
        (None, Some(served)) => {
            cache::check_commit(reference, served)?;
            *commit = Some(served.to_string());
        }
        _ => {}
    }
    // A hub that names no commit (a plain file server): the files go under the revision.
    let c = commit
        .clone()
        .unwrap_or_else(|| reference.revision().replace('/', "%2F"));
    let part = match part {
        Some(part) => part,
        None => repo.partial(&c, name, listed_sum)?,
    };
    let etag_path = etag_of(&part);
    let partial = response.status().as_u16() == 206;
    let mut bytes = if partial {
        std::fs::read(&part).map_err(io(&part))?
    } else {
        Vec::new()
    };
    let expected = response
        .headers()
        .get("content-length")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(|n| n + bytes.len() as u64);
    if let Some(etag) = &headers.own {
        std::fs::write(&etag_path, etag).map_err(io(&etag_path))?;
    }
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(partial)
        .write(true)
        .truncate(!partial)
        .open(&part)
        .map_err(io(&part))?;
    let mut reader = response.into_body().into_reader();
    let mut buffer = vec![0u8; 1 << 16];
    let resumed_from = bytes.len();
    loop {
        let n = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) => {
                return Err(hub_error(
                    reference,
                    format!(
                        "{url}: the download broke off after {} bytes ({e}); run the same \
                         command again to resume it",
                        bytes.len()
                    ),
                ));
            }
        };
        out.write_all(&buffer[..n]).map_err(io(&part))?;
        bytes.extend_from_slice(&buffer[..n]);
    }
    out.sync_all().map_err(io(&part))?;
    drop(out);
    if let Some(expected) = expected
        && expected != bytes.len() as u64
    {
        return Err(hub_error(
            reference,
            format!(
                "{url}: {} bytes arrived where Content-Length said {expected}; run the same \
                 command again to resume it",
                bytes.len()
            ),
        ));
    }
    let sum = listed_sum
        .map(str::to_string)
        .or_else(|| headers.linked.as_deref().and_then(sha256_etag));
    if let Some(sum) = &sum {
        let found = transduce::bundle::sha256_hex(&bytes);
        if found != *sum {
            let _ = std::fs::remove_file(&part);
            let _ = std::fs::remove_file(&etag_path);
            return Err(hub_error(
                reference,
                format!(
                    "{url}: the download is damaged (sha256 {found}, the hub says {sum}); \
                     it was deleted, run the same command again"
                ),
            ));
        }
    }
    let id = cache::blob_id(sum.as_deref(), headers.linked.as_deref(), &bytes);
    repo.store(&part, &c, name, &id)?;
    let _ = std::fs::remove_file(&etag_path);
    let seconds = started.elapsed().as_secs_f64();
    eprintln!(
        "downloaded {name}: {:.1} MB in {seconds:.1} s{}",
        bytes.len() as f64 / 1e6,
        if resumed_from > 0 {
            format!(" (resumed at {:.1} MB)", resumed_from as f64 / 1e6)
        } else {
            String::new()
        }
    );
    Ok(Some(bytes))
}

/// The ETag of the answer that served a partial download, kept beside it.
fn etag_of(part: &Path) -> std::path::PathBuf {
    let mut name = part.as_os_str().to_owned();
    name.push(".etag");
    name.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redirects_join_as_browsers_join_them() {
        assert_eq!(join("http://h:1/a/b/c", "/cdn/x"), "http://h:1/cdn/x");
        assert_eq!(join("http://h:1/a/b/c", "https://cdn/y"), "https://cdn/y");
        assert_eq!(join("http://h:1/a/b/c", "d"), "http://h:1/a/b/d");
        assert_eq!(
            sha256_etag("\"ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef0123456789\""),
            Some("abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789".into())
        );
        assert_eq!(sha256_etag("\"1234-abc\""), None);
    }
}
