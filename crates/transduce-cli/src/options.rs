//! The valid ranges of the numeric command-line options.
//!
//! clap applies these parsers when it reads the command line, before any file is opened
//! or any work is done. A bad value therefore gets one error that names the option and its
//! range, even when there is no input to work on. Without them, `--beam 0` became greedy
//! decoding, `--alpha NaN` changed the output and `--vocab-size 0` learned an empty
//! vocabulary.

/// A compute precision: `f32`, `f16` or `bf16` (mixed-precision training).
pub fn precision(s: &str) -> Result<transduce::Precision, String> {
    transduce::Precision::from_name(s)
        .ok_or_else(|| format!("`{s}` is not a precision; expected f32, f16 or bf16"))
}

/// A whole number of at least 1: beam and batch sizes, step, epoch and checkpoint counts.
pub fn count(s: &str) -> Result<usize, String> {
    at_least(s, 1)
}

/// A beam size k: 1 (greedy) to the bundle format's largest, [`DecodeOptions::MAX_BEAM`].
///
/// [`DecodeOptions::MAX_BEAM`]: transduce::DecodeOptions::MAX_BEAM
pub fn beam(s: &str) -> Result<usize, String> {
    let max = transduce::DecodeOptions::MAX_BEAM;
    let k = count(s)?;
    if k > max {
        return Err(format!("{k} is too large; expected a beam of 1 to {max}"));
    }
    Ok(k)
}

/// [`count`] for options held as `u64`.
pub fn count_u64(s: &str) -> Result<u64, String> {
    count(s).map(|n| n as u64)
}

/// A vocabulary size: the four special tokens (`<pad> <s> </s> <unk>`) and at least one
/// learned token.
pub fn vocab_size(s: &str) -> Result<usize, String> {
    at_least(s, 5)
}

/// A finite number ≥ 0: the length penalty α (§6.1; 0 turns it off).
pub fn non_negative(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x < 0.0 {
        return Err(format!("{x} is negative; expected a finite number ≥ 0"));
    }
    Ok(x)
}

/// A finite number > 0: learning-rate factors, minutes.
pub fn positive(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if x <= 0.0 {
        return Err(format!("{x} is not positive; expected a finite number > 0"));
    }
    Ok(x)
}

/// A probability in [0, 1): dropout P_drop and label smoothing ε_ls (§5.4). At 1, dropout
/// would drop everything and smoothing would leave no weight on the reference.
pub fn probability(s: &str) -> Result<f64, String> {
    let x = number(s)?;
    if !(0.0..1.0).contains(&x) {
        return Err(format!("{x} is outside [0, 1)"));
    }
    Ok(x)
}

fn at_least(s: &str, min: usize) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a whole number; expected one ≥ {min}"))?;
    if n < min {
        return Err(format!("{n} is too small; expected a whole number ≥ {min}"));
    }
    Ok(n)
}

fn number(s: &str) -> Result<f64, String> {
    let x: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a number"))?;
    if !x.is_finite() {
        return Err(format!("`{s}` is not a finite number"));
    }
    Ok(x)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        assert_eq!(count("1"), Ok(1));
        assert_eq!(count(" 32 "), Ok(32));
        for bad in ["0", "-1", "1.5", "", "x"] {
            assert!(count(bad).is_err(), "{bad}");
        }
        assert_eq!(beam("1"), Ok(1));
        assert_eq!(beam("1024"), Ok(1024));
        for bad in ["0", "1025", "99999999999999999999"] {
            assert!(beam(bad).is_err(), "{bad}");
        }
        assert_eq!(vocab_size("5"), Ok(5));
        assert!(vocab_size("4").is_err());
        assert_eq!(non_negative("0"), Ok(0.0));
        assert_eq!(non_negative("0.6"), Ok(0.6));
        for bad in ["-0.1", "NaN", "nan", "inf", "-inf", "1e999", "x"] {
            assert!(non_negative(bad).is_err(), "{bad}");
        }
        assert_eq!(positive("1e-3"), Ok(1e-3));
        assert!(positive("0").is_err());
        assert_eq!(probability("0"), Ok(0.0));
        assert_eq!(probability("0.1"), Ok(0.1));
        for bad in ["1", "1.5", "-0.1", "NaN"] {
            assert!(probability(bad).is_err(), "{bad}");
        }
    }
}
