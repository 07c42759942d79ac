//! What an imported model's own card says (its README's YAML header), and the model card we
//! write beside the bundle.

use transduce::BundleConfig;

/// The fields of a Hugging Face model card's YAML header that the import reads.
#[derive(Debug, Default, PartialEq)]
pub struct Header {
    /// `license:` (an SPDX-like id, e.g. `cc-by-4.0`, `apache-2.0`).
    pub licence: Option<String>,
    /// `language:` in the order the card lists them (a scalar, `[en, de]`, or a block of
    /// `- en` lines).
    pub languages: Vec<String>,
}

impl Header {
    /// A translation model's source and target where the card lists exactly two languages:
    /// Helsinki-NLP's cards, and the fine-tuned models published from them, list the
    /// source first.
    pub fn pair(&self) -> Option<(String, String)> {
        match self.languages.as_slice() {
            [source, target] if source != target => Some((source.clone(), target.clone())),
            _ => None,
        }
    }
}

/// Reads the YAML header (between a first line `---` and the next `---`): only the plain
/// `key: value` lines it needs, so no YAML parser is involved.
pub fn header(readme: &str) -> Header {
    let mut lines = readme.lines();
    if lines.next().map(str::trim) != Some("---") {
        return Header::default();
    }
    let mut header = Header::default();
    let unquote = |v: &str| v.trim().trim_matches(|c| c == '"' || c == '\'').to_string();
    // Inside `language:`'s block of `- xx` lines.
    let mut in_languages = false;
    for line in lines {
        if line.trim() == "---" {
            break;
        }
        if in_languages {
            if let Some(item) = line.trim_start().strip_prefix("- ") {
                header.languages.push(unquote(item));
                continue;
            }
            in_languages = false;
        }
        if let Some((key, value)) = line.split_once(':') {
            let value = unquote(value);
            match key.trim() {
                "license" | "licence" if !value.is_empty() => header.licence = Some(value),
                "language" => match value.strip_prefix('[').and_then(|v| v.strip_suffix(']')) {
                    Some(list) => {
                        header.languages = list
                            .split(',')
                            .map(unquote)
                            .filter(|l| !l.is_empty())
                            .collect();
                    }
                    None if value.is_empty() => in_languages = true,
                    None => header.languages = vec![value],
                },
                _ => {}
            }
        }
    }
    header
}

/// What a licence asks of a site that ships the weights, where we know it.
pub fn licence_terms(licence: &str, source: &str) -> String {
    match licence.to_ascii_lowercase().as_str() {
        "cc-by-4.0" => format!(
            "CC-BY 4.0: any use, commercial included, provided you credit the source and \
             link the licence, e.g. \"Translation model {source} (CC-BY 4.0, \
             https://creativecommons.org/licenses/by/4.0/), run by transduce\", and say that \
             it was converted."
        ),
        "apache-2.0" => format!(
            "Apache-2.0: any use; keep the licence text and the source's notices ({source}) \
             with the weights, and say that they were converted."
        ),
        "mit" => format!("MIT: any use; keep the copyright notice of {source} with the weights."),
        other => format!(
            "{other}: read the licence of {source} before shipping; this import does not change it."
        ),
    }
}

/// The bundle's README.md: where the weights came from, their licence, and how they run here.
pub fn model_card(
    config: &BundleConfig,
    source: &str,
    bundle_bytes: usize,
    notes: &[String],
) -> String {
    let m = &config.model;
    let p = &config.provenance;
    let d = &config.decoding;
    let mut card = format!(
        "# {source}, imported\n\n\
         A Marian (OPUS-MT) translation model converted into a transduce bundle by \
         `transduce import`. The weights are the original's, renamed and reordered: the \
         network computes the same function (transduce's docs/GUIDE.md, \"OPUS-MT models\", says how this is checked).\n\n\
         | | |\n|---|---|\n\
         | **licence** | **{licence}**. {terms} |\n\
         | source | {source} |\n\
         | model | N = {n}, d_model {dm}, d_ff {dff}, h {h}, {act} FFN, attention and output \
         biases, sources closed by EOS, {params} parameters, vocabulary {v} |\n\
         | weights | {weights:?}, {mb:.1} MB in all |\n\
         | decoding | beam {beam}, α {alpha} over \\|Y\\|^α (transformers' `generate` defaults of the source) |\n\
         | command | `{command}` |\n",
        licence = p.licence,
        terms = licence_terms(&p.licence, source),
        n = match m.decoder_layers {
            Some(d) if d != m.n_layers => format!("{} (encoder), {d} (decoder)", m.n_layers),
            _ => m.n_layers.to_string(),
        },
        dm = m.d_model,
        dff = m.d_ff,
        h = m.n_heads,
        act = format!("{:?}", m.activation).to_lowercase(),
        params = m.num_params(),
        v = m.vocab_size,
        weights = config.weights.unwrap_or(transduce::WeightDtype::F32),
        mb = bundle_bytes as f64 / 1e6,
        beam = d.beam,
        alpha = d.alpha,
        command = p.commands.join(" && "),
    );
    for note in notes {
        card.push_str(&format!("\nNote: {note}.\n"));
    }
    card
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_licence_of_a_hub_card() {
        let readme = "---\nlanguage:\n- en\n- de\ntags:\n- translation\nlicense: cc-by-4.0\n---\n# opus-mt-en-de\n";
        assert_eq!(header(readme).licence.as_deref(), Some("cc-by-4.0"));
        assert_eq!(header("# no header\nlicense: mit\n"), Header::default());
        assert_eq!(
            header("---\nlicense: \"apache-2.0\"\n---\n")
                .licence
                .as_deref(),
            Some("apache-2.0")
        );
    }

    /// The three ways a card's YAML header spells `language:`; two languages make a pair,
    /// source first, any other count none.
    #[test]
    fn reads_the_languages_of_a_card() {
        let block = "---\nlanguage:\n- en\n- de\ntags:\n- translation\nlicense: cc-by-4.0\n---\n";
        assert_eq!(header(block).languages, ["en", "de"]);
        assert_eq!(header(block).pair(), Some(("en".into(), "de".into())));
        let inline = "---\nlanguage: [\"fi\", sv]\n---\n";
        assert_eq!(header(inline).pair(), Some(("fi".into(), "sv".into())));
        assert_eq!(header("---\nlanguage: en\n---\n").pair(), None);
        let many = "---\nlanguage:\n  - en\n  - fr\n  - nl\n---\n";
        assert_eq!(header(many).languages, ["en", "fr", "nl"]);
        assert_eq!(header(many).pair(), None);
        assert_eq!(header("---\nlanguage: [en, en]\n---\n").pair(), None);
    }
}
