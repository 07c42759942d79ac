//! The corpora and named sets stages read, and how a scale cuts them: at `smoke` every
//! file to a few lines, so a recipe's every stage runs in seconds.

use std::path::{Path, PathBuf};

use transduce_train::data;
use transduce_train::error::{Error, Result};

use super::format::Scale;
use super::outputs::write_lines;
use super::plan::Plan;

/// Lines of each training corpus at `--scale smoke`.
pub const SMOKE_TRAIN_LINES: usize = 300;

/// Lines of each validation, test or teacher corpus at `--scale smoke`.
pub const SMOKE_EVAL_LINES: usize = 8;

/// Trees of each test treebank at `--scale smoke` (a parser's beam is 21 wide).
const SMOKE_TREES: usize = 2;

/// A named set of sentence pairs (`src`, `ref`, or one `tsv`) or of treebank trees
/// (`trees`).
#[derive(Clone, Debug)]
pub struct TestSet {
    pub name: String,
    pub data: SetData,
}

#[derive(Clone, Debug)]
pub enum SetData {
    Pairs {
        src: PathBuf,
        reference: PathBuf,
    },
    /// `source<TAB>reference` lines, split into `Pairs` when the stage runs.
    Tsv(PathBuf),
    Trees(PathBuf),
}

impl SetData {
    /// The file with one line per sentence (or tree) of the set.
    pub fn lines_file(&self) -> &Path {
        match self {
            SetData::Pairs { src, .. } => src,
            SetData::Tsv(f) | SetData::Trees(f) => f,
        }
    }
}

/// `[{ name = "…", src = "…", ref = "…" }, …]` or `[{ name = "…", trees = "…" }, …]`.
pub fn read(plan: &Plan, node: usize, field: &str) -> Result<Vec<TestSet>> {
    let (recipe, stage) = plan.stage_of(node);
    let err = |message: String| recipe.error(stage, field, message);
    let value = &stage
        .fields
        .get(field)
        .ok_or_else(|| plan.missing(node, field))?
        .value;
    let toml::Value::Array(items) = value else {
        return Err(err(
            "expected a list of sets, e.g. [{ name = \"val\", src = \"…\", ref = \"…\" }]".into(),
        ));
    };
    if items.is_empty() {
        return Err(err("an empty list".into()));
    }
    let mut out: Vec<TestSet> = Vec::new();
    for item in items {
        let toml::Value::Table(t) = item else {
            return Err(err(format!("{item} is not a table {{ name, src, ref }}")));
        };
        let path = |key: &str| -> Result<Option<PathBuf>> {
            match t.get(key) {
                None => Ok(None),
                Some(v) => {
                    let input = super::format::input(v, &plan.context.data, &recipe.dir())
                        .map_err(|e| err(format!("`{key}`: {e}")))?;
                    plan.file(node, field, &input).map(Some)
                }
            }
        };
        let name = match t.get("name") {
            Some(toml::Value::String(s))
                if !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') =>
            {
                s.clone()
            }
            _ => {
                return Err(err(
                    "each set needs a `name` of letters, digits and `_` (it names the metric)"
                        .into(),
                ));
            }
        };
        if let Some(k) = t
            .keys()
            .find(|k| !matches!(k.as_str(), "name" | "src" | "ref" | "tsv" | "trees"))
        {
            return Err(err(format!(
                "set `{name}`: no field `{k}`; a set has name and src + ref, tsv, or trees"
            )));
        }
        if out.iter().any(|s| s.name == name) {
            return Err(err(format!("two sets named `{name}`")));
        }
        let data = match (path("src")?, path("ref")?, path("tsv")?, path("trees")?) {
            (Some(src), Some(reference), None, None) => SetData::Pairs { src, reference },
            (None, None, Some(tsv), None) => SetData::Tsv(tsv),
            (None, None, None, Some(trees)) => SetData::Trees(trees),
            _ => {
                return Err(err(format!(
                    "set `{name}`: give src and ref or tsv (translation), or trees (parsing)"
                )));
            }
        };
        out.push(TestSet { name, data });
    }
    Ok(out)
}

/// The sets as a stage decodes them: TSV files split into their sides, and at `smoke`
/// every file cut to the scale's lines (into `dir`).
pub fn at_scale(sets: &[TestSet], dir: &Path, scale: Scale) -> Result<Vec<TestSet>> {
    let smoke = scale == Scale::Smoke;
    sets.iter()
        .map(|set| {
            let cut = |p: &PathBuf, ext: &str, n: usize| {
                if !smoke {
                    return Ok(p.clone());
                }
                corpus(
                    std::slice::from_ref(p),
                    Some(n),
                    &dir.join(format!("{}.{ext}", set.name)),
                )
            };
            let data = match &set.data {
                SetData::Pairs { src, reference } => SetData::Pairs {
                    src: cut(src, "src", SMOKE_EVAL_LINES)?,
                    reference: cut(reference, "ref", SMOKE_EVAL_LINES)?,
                },
                SetData::Tsv(tsv) => {
                    let limit = smoke.then_some(SMOKE_EVAL_LINES);
                    let (src, reference) = split_tsv(
                        std::slice::from_ref(tsv),
                        limit,
                        &dir.join(format!("{}.tsv", set.name)),
                    )?;
                    SetData::Pairs { src, reference }
                }
                SetData::Trees(t) => SetData::Trees(cut(t, "trees", SMOKE_TREES)?),
            };
            Ok(TestSet {
                name: set.name.clone(),
                data,
            })
        })
        .collect()
}

/// The lines of several files (gzip or not), the first `limit` of them.
pub fn read_corpus(files: &[PathBuf], limit: Option<usize>) -> Result<Vec<String>> {
    let mut lines = Vec::new();
    for f in files {
        lines.extend(data::corpus::read_lines(f)?);
        if limit.is_some_and(|n| lines.len() >= n) {
            break;
        }
    }
    if let Some(n) = limit {
        lines.truncate(n);
    }
    Ok(lines)
}

/// One file of the corpus: the file itself when it is one and whole, else the files
/// joined (and cut to `limit` lines) into `out`.
pub fn corpus(files: &[PathBuf], limit: Option<usize>, out: &Path) -> Result<PathBuf> {
    if let ([only], None) = (files, limit) {
        return Ok(only.clone());
    }
    let lines = read_corpus(files, limit)?;
    write_lines(out, lines.iter().map(String::as_str))?;
    Ok(out.to_path_buf())
}

/// The two sides of `source<TAB>target` files (the first `limit` lines), written to
/// `OUT.src` and `OUT.tgt`; a line without a tab is an error naming its file and line.
pub fn split_tsv(
    files: &[PathBuf],
    limit: Option<usize>,
    out: &Path,
) -> Result<(PathBuf, PathBuf)> {
    let (mut src, mut tgt) = (Vec::new(), Vec::new());
    'files: for f in files {
        for (i, line) in data::corpus::read_lines(f)?.into_iter().enumerate() {
            if limit.is_some_and(|n| src.len() >= n) {
                break 'files;
            }
            let Some((s, t)) = line.split_once('\t') else {
                return Err(Error::Format {
                    path: f.clone(),
                    message: format!("line {}: expected source<TAB>target", i + 1),
                });
            };
            src.push(s.to_string());
            tgt.push(t.to_string());
        }
    }
    let (a, b) = (out.with_extension("src"), out.with_extension("tgt"));
    write_lines(&a, src.iter().map(String::as_str))?;
    write_lines(&b, tgt.iter().map(String::as_str))?;
    Ok((a, b))
}
