//! Raw English text → Penn Treebank-style words, the parser's input (§6.3 trains on
//! treebank tokens, so raw text must be cut the same way).

/// Splits raw English into treebank tokens: punctuation stands alone, contractions split
/// (`don't` → `do n't`, `it's` → `it 's`), brackets become `-LRB-`/`-RRB-` and double
/// quotes `` `` `` / `''`. Already tokenized text passes through unchanged.
pub fn ptb_words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for raw in text.split_whitespace() {
        let mut word = raw;
        let mut trailing: Vec<String> = Vec::new();
        // Leading punctuation.
        while let Some(c) = word.chars().next() {
            let tok = match c {
                '"' | '“' => "``".to_string(),
                '(' | '[' | '{' => "-LRB-".to_string(),
                '$' | '#' if word.len() > 1 => c.to_string(),
                '`' if word.starts_with("``") => {
                    word = &word[2..];
                    out.push("``".to_string());
                    continue;
                }
                _ => break,
            };
            out.push(tok);
            word = &word[c.len_utf8()..];
        }
        // Trailing punctuation, collected right to left.
        while let Some(c) = word.chars().last() {
            let tok = match c {
                '.' if word == "." || !is_abbreviation(word) => ".".to_string(),
                ',' | ';' | ':' | '?' | '!' | '%' => c.to_string(),
                ')' | ']' | '}' => "-RRB-".to_string(),
                '"' | '”' => "''".to_string(),
                _ => break,
            };
            trailing.push(tok);
            word = &word[..word.len() - c.len_utf8()];
        }
        if !word.is_empty() {
            split_contraction(word, &mut out);
        }
        out.extend(trailing.into_iter().rev());
    }
    out
}

/// `U.S.`, `Mr.`, `a.m.`: a final period that belongs to the word.
fn is_abbreviation(word: &str) -> bool {
    let body = &word[..word.len() - 1];
    body.contains('.')
        || matches!(
            body,
            "Mr" | "Mrs"
                | "Ms"
                | "Dr"
                | "Prof"
                | "Inc"
                | "Corp"
                | "Co"
                | "Ltd"
                | "Jr"
                | "Sr"
                | "St"
                | "vs"
                | "etc"
                | "Jan"
                | "Feb"
                | "Aug"
                | "Sept"
                | "Oct"
                | "Nov"
                | "Dec"
        )
}

fn split_contraction(word: &str, out: &mut Vec<String>) {
    let lower = word.to_lowercase();
    if lower.ends_with("n't") && word.len() > 3 {
        let cut = word.len() - 3;
        out.push(word[..cut].to_string());
        out.push(word[cut..].to_string());
        return;
    }
    for suffix in ["'s", "'re", "'ve", "'ll", "'d", "'m", "’s"] {
        if lower.ends_with(suffix) && word.len() > suffix.len() {
            let cut = word.len() - suffix.len();
            out.push(word[..cut].to_string());
            out.push(word[cut..].to_string());
            return;
        }
    }
    out.push(word.to_string());
}

#[cfg(test)]
mod tests {
    use super::ptb_words;

    #[test]
    fn treebank_conventions() {
        assert_eq!(
            ptb_words("The dog doesn't bark, it's (very) \"quiet\"."),
            [
                "The", "dog", "does", "n't", "bark", ",", "it", "'s", "-LRB-", "very", "-RRB-",
                "``", "quiet", "''", "."
            ]
        );
        assert_eq!(
            ptb_words("Mr. Smith paid $5 in the U.S."),
            ["Mr.", "Smith", "paid", "$", "5", "in", "the", "U.S."]
        );
    }

    #[test]
    fn tokenized_text_is_unchanged() {
        let text = "Pierre Vinken , 61 years old , will join the board .";
        assert_eq!(ptb_words(text).join(" "), text);
    }
}
