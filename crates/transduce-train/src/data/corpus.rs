//! Reading text corpora: one sentence a line, plain or gzip, split on `\n` only (some real
//! corpora contain U+0085 or U+2028 inside sentences, which `str::lines` would not split
//! on but other tools do).

use std::fs::File;
use std::io::Read;
use std::path::Path;

use flate2::read::MultiGzDecoder;

use crate::error::{Error, Result, io};

/// Reads a whole file, decompressing `.gz` (detected by magic bytes, not by name).
pub fn read_bytes(path: &Path) -> Result<Vec<u8>> {
    let mut raw = Vec::new();
    File::open(path)
        .and_then(|mut f| f.read_to_end(&mut raw))
        .map_err(io(path))?;
    decompress(raw, path)
}

/// The bytes themselves, or, when they start with gzip's magic bytes, what they
/// decompress to; `path` names the source in errors.
fn decompress(raw: Vec<u8>, path: &Path) -> Result<Vec<u8>> {
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        MultiGzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .map_err(|e| Error::Format {
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
    lines(&read_bytes(path)?, path)
}

/// [`read_lines`] of bytes already read; `path` names them in errors.
fn lines(bytes: &[u8], path: &Path) -> Result<Vec<String>> {
    if bytes.is_empty() {
        return Err(Error::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    body.split(|&b| b == b'\n')
        .enumerate()
        .map(|(i, line)| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            String::from_utf8(line.to_vec()).map_err(|e| Error::Utf8 {
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
        return Err(Error::LineCount {
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

    /// Any bytes, plain or gzip-compressed: the lines or one error naming the line, never
    /// a panic. What is read keeps every character but the line ends (U+0085 and U+2028
    /// stay inside lines); an error's line is the first that is not UTF-8.
    #[test]
    fn fuzz_corpus_reading() {
        let seeds: [&[u8]; 5] = [
            b"A man in an orange hat.\nEin Mann mit Hut.\n",
            "a\u{85}b\nc\u{2028}d\r\ne\r\n\r\n".as_bytes(),
            b"ok\nalso ok\n\xff\xfe\nafter\n",
            b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03",
            b"no final newline\r",
        ];
        let path = Path::new("corpus.txt");
        transduce_fuzz::Target::new("corpus", seeds)
            .dictionary([&b"\x1f\x8b"[..], b"\r", b"\n", "\u{85}".as_bytes(), b"\xc2"])
            .cases(20_000)
            .run(|input| {
                let read = lines(input, path);
                match &read {
                    Ok(lines) => {
                        let body = input.strip_suffix(b"\n").unwrap_or(input);
                        let breaks = body.iter().filter(|&&b| b == b'\n').count();
                        assert_eq!(lines.len(), breaks + 1);
                        let text = std::str::from_utf8(input).unwrap();
                        let count = |s: &str, c: char| s.matches(c).count();
                        for c in ['\u{85}', '\u{2028}'] {
                            let kept: usize = lines.iter().map(|l| count(l, c)).sum();
                            assert_eq!(kept, count(text, c));
                        }
                        // Each line is its segment less at most one final `\r`.
                        let bytes: usize = lines.iter().map(|l| l.len()).sum();
                        let crs = body
                            .split(|&b| b == b'\n')
                            .filter(|l| l.ends_with(b"\r"))
                            .count();
                        assert_eq!(bytes + crs + breaks, body.len());
                        assert!(lines.iter().all(|l| !l.contains('\n')));
                    }
                    Err(Error::Utf8 { line, .. }) => {
                        let body = input.strip_suffix(b"\n").unwrap_or(input);
                        let bad = body.split(|&b| b == b'\n').nth(line - 1).unwrap();
                        let bad = bad.strip_suffix(b"\r").unwrap_or(bad);
                        assert!(std::str::from_utf8(bad).is_err(), "line {line}");
                    }
                    Err(Error::EmptyFile { .. }) => assert!(input.is_empty()),
                    Err(e) => panic!("unexpected error {e}"),
                }
                // The same bytes gzip-compressed read the same; corrupt gzip is an error.
                let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
                gz.write_all(input).unwrap();
                let zipped = decompress(gz.finish().unwrap(), path).unwrap();
                assert_eq!(zipped, input);
                let _ = decompress(input.to_vec(), path);
                read.is_ok()
            });
    }
}
