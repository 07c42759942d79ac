//! A compact binary cache of token ids, so training does not re-tokenize the corpus.
//!
//! Layout (little-endian): magic `TDCACHE1`, u32 id width (2 or 4 bytes), u64 pair count,
//! then per pair u32 source length, u32 target length, and the ids.

use std::path::Path;

use crate::error::{Error, Result, io};

const MAGIC: &[u8; 8] = b"TDCACHE1";

/// Tokenized sentence pairs (ids without BOS/EOS).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pairs {
    pub src: Vec<Vec<u32>>,
    pub tgt: Vec<Vec<u32>>,
}

impl Pairs {
    pub fn len(&self) -> usize {
        self.src.len()
    }

    pub fn is_empty(&self) -> bool {
        self.src.is_empty()
    }

    pub fn push(&mut self, src: Vec<u32>, tgt: Vec<u32>) {
        self.src.push(src);
        self.tgt.push(tgt);
    }

    /// The sources as `model`'s encoder reads them: closed by EOS where its sources end
    /// with it (imported Marian models, [`transduce::ModelConfig::source_row`]).
    pub fn close_sources(&mut self, model: &transduce::ModelConfig) {
        if model.source_eos {
            self.src = model.source_rows(&self.src).into_owned();
        }
    }
}

pub fn write(path: &Path, pairs: &Pairs) -> Result<()> {
    let max = pairs
        .src
        .iter()
        .chain(&pairs.tgt)
        .flat_map(|s| s.iter().copied())
        .max()
        .unwrap_or(0);
    let width: u32 = if max <= u16::MAX as u32 { 2 } else { 4 };
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&width.to_le_bytes());
    out.extend_from_slice(&(pairs.len() as u64).to_le_bytes());
    for (s, t) in pairs.src.iter().zip(&pairs.tgt) {
        out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        out.extend_from_slice(&(t.len() as u32).to_le_bytes());
        for &id in s.iter().chain(t) {
            if width == 2 {
                out.extend_from_slice(&(id as u16).to_le_bytes());
            } else {
                out.extend_from_slice(&id.to_le_bytes());
            }
        }
    }
    crate::fsutil::write_atomic(path, &out)
}

pub fn read(path: &Path) -> Result<Pairs> {
    let bytes = std::fs::read(path).map_err(io(path))?;
    let bad = |message: &str| Error::Format {
        path: path.to_path_buf(),
        message: format!("not a token cache or truncated: {message}"),
    };
    let mut pos = 0usize;
    let mut take = |n: usize| -> Result<&[u8]> {
        let slice = bytes
            .get(pos..pos + n)
            .ok_or_else(|| bad("unexpected end"))?;
        pos += n;
        Ok(slice)
    };
    if take(8)? != MAGIC {
        return Err(bad("wrong magic"));
    }
    let width = u32::from_le_bytes(take(4)?.try_into().unwrap()) as usize;
    if width != 2 && width != 4 {
        return Err(bad("bad id width"));
    }
    let n = u64::from_le_bytes(take(8)?.try_into().unwrap()) as usize;
    let mut pairs = Pairs::default();
    for _ in 0..n {
        let sl = u32::from_le_bytes(take(4)?.try_into().unwrap()) as usize;
        let tl = u32::from_le_bytes(take(4)?.try_into().unwrap()) as usize;
        let mut ids = |len: usize| -> Result<Vec<u32>> {
            let raw = take(len * width)?;
            Ok(raw
                .chunks_exact(width)
                .map(|c| {
                    if width == 2 {
                        u16::from_le_bytes([c[0], c[1]]) as u32
                    } else {
                        u32::from_le_bytes([c[0], c[1], c[2], c[3]])
                    }
                })
                .collect())
        };
        let s = ids(sl)?;
        let t = ids(tl)?;
        pairs.push(s, t);
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.bin");
        let mut pairs = Pairs::default();
        pairs.push(vec![4, 5, 6], vec![7]);
        pairs.push(vec![70_000], vec![8, 9]);
        write(&path, &pairs).unwrap();
        assert_eq!(read(&path).unwrap(), pairs);
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 3]).unwrap();
        let e = read(&path).unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
    }
}
