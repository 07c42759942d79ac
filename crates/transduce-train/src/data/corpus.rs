//! Reading text corpora: one sentence a line, plain or gzip, split on `\n` only (some real
//! corpora contain U+0085 or U+2028 inside sentences, which `str::lines` would not split
//! on but other tools do).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::{CliError, Result, io};

/// Reads a whole file, decompressing `.gz` (detected by magic bytes, not by name).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut raw))
        .map_err(io(path))?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| CliError::Format {
                path: path.to_path_buf(),
                message: format!("corrupt gzip data: {e}"),
            })?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

/// The lines of a text file: split on `\n` only, a trailing `\r` removed, every line
/// checked to be UTF-8 (an error names the file and line). An empty file is an error.
pub fn read_lines(path: &Path) -> Result<Vec<String>> {
    let bytes = read_bytes(path)?;
    if bytes.is_empty() {
        return Err(CliError::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(&bytes);
    body.split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            String::from_utf8(line.to_vec()).map_err(|e| CliError::Utf8 {
                path: path.to_path_buf(),
                line: i + 1,
                detail: e.utf8_error().to_string(),
            })
        })
        .collect()
}

/// Reads a parallel corpus: two files with the same number of lines.
pub fn read_parallel(src: &Path, tgt: &Path) -> Result<Vec<(String, String)>> {
    let s = read_lines(src)?;
    let t = read_lines(tgt)?;
    if s.len() != t.len() {
        return Err(CliError::LineCount {
            src_path: src.to_path_buf(),
            src_lines: s.len(),
            tgt_path: tgt.to_path_buf(),
            tgt_lines: t.len(),
        });
    }
    Ok(s.into_iter().zip(t).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn write(dir: &Path, name: &str, bytes: &[u8]) -> std::path::PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn splits_on_newline_only_and_reads_gzip() {
        let dir = tempfile::tempdir().unwrap();
        let text = "a\u{85}b\nc\u{2028}d\r\ne\n";
        let plain = write(dir.path(), "p.txt", text.as_bytes());
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(text.as_bytes()).unwrap();
        let zipped = write(dir.path(), "z.gz", &gz.finish().unwrap());
        for p in [plain, zipped] {
            assert_eq!(read_lines(&p).unwrap(), vec!["a\u{85}b", "c\u{2028}d", "e"]);
        }
    }

    #[test]
    fn errors_name_file_and_line() {
        let dir = tempfile::tempdir().unwrap();
        let bad = write(dir.path(), "bad.txt", b"ok\nalso ok\n\xff\xfe\n");
        let e = read_lines(&bad).unwrap_err().to_string();
        assert!(e.contains("bad.txt, line 3: invalid UTF-8"), "{e}");

        let empty = write(dir.path(), "empty.txt", b"");
        let e = read_lines(&empty).unwrap_err().to_string();
        assert!(e.contains("empty.txt: the file is empty"), "{e}");

        let a = write(dir.path(), "a.en", b"1\n2\n3\n");
        let b = write(dir.path(), "b.de", b"1\n2\n");
        let e = read_parallel(&a, &b).unwrap_err().to_string();
        assert!(
            e.contains("a.en has 3 lines") && e.contains("b.de has 2"),
            "{e}"
        );

        let missing = dir.path().join("nope.txt");
        assert!(
            read_lines(&missing)
                .unwrap_err()
                .to_string()
                .contains("nope.txt")
        );
    }
}
