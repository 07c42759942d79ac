//! # transduce-web
//!
//! The browser side of transduce: a [`Engine`] holds one bundle and decodes it on the CPU
//! (the host decoder, wasm SIMD) or, in the module built with `webgpu`, on WebGPU (the GPU
//! decoder of `transduce-gpu`); it translates, parses (§6.3) and returns attention weights
//! (Figures 3–5 of the paper). A GPU that fails or is lost mid-request hands that request,
//! and every later one, to the CPU.
//!
//! Every entry point returns `Result` to JavaScript: a bad bundle, empty or oversized text
//! becomes an exception with a message, never a panic (which would kill the module).
//! Every device read is awaited (a synchronous read panics on WebGPU).
//!
//! The JavaScript wrapper in `web/transduce.js` adds what the browser owns: fetching with
//! progress, the Cache API, the Web Worker and the choice of backend in `auto` mode.

mod attention;
mod backend;
#[cfg(feature = "threads")]
mod threads;
mod tree;

use serde::Serialize;
use wasm_bindgen::prelude::*;

use std::cell::{Cell, RefCell};

use transduce::bundle::{Bundle, BundleFiles};
use transduce::burn::prelude::Device;
use transduce::decode::{self, Constraint, DecodeOptions, Hypothesis};
use transduce::task::channel::Channel;
use transduce::task::translate::split_sentences;
use transduce::task::words::ptb_words;
use transduce::task::{Parser, parse::print_tree};
use transduce::{BundleConfig, Task};

pub use backend::BackendChoice;

/// Longest input accepted by one call, in characters: 100,000 (a long article). Longer
/// text is an error, not a silent cut.
pub const MAX_CHARS: usize = 100_000;
/// A sentence of more words than this is translated in pieces of this many words: the
/// models are trained on sentences, and one huge sequence would be slow and poor.
pub const MAX_WORDS: usize = 60;
/// Most sentences [`Engine::translate_batch`] takes in one call: bounds the decoder's
/// batch (and its memory) whatever the text.
pub const MAX_BATCH: usize = 64;

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

fn js_error(e: impl std::fmt::Display) -> JsError {
    JsError::new(&e.to_string())
}

fn to_js<T: Serialize>(value: &T) -> Result<JsValue, JsError> {
    value
        .serialize(&serde_wasm_bindgen::Serializer::json_compatible())
        .map_err(js_error)
}

/// The sentences of a text, as the translator splits them (so a page can show them).
#[wasm_bindgen(js_name = splitSentences)]
pub fn split_sentences_js(text: &str) -> Vec<String> {
    split_sentences(text)
        .into_iter()
        .map(|r| text[r].to_string())
        .collect()
}

/// The words of raw English as the parser sees them (Penn Treebank tokens).
#[wasm_bindgen(js_name = treebankWords)]
pub fn treebank_words(text: &str) -> Vec<String> {
    ptb_words(text)
}

#[wasm_bindgen]
extern "C" {
    /// The exports of the `transduce-relaxed` module, instantiated over this module's memory
    /// by the worker (web/worker.js) where the browser validates relaxed SIMD.
    pub type RelaxedKernel;
    #[wasm_bindgen(method)]
    fn dot(this: &RelaxedKernel, w: u32, x: u32, sums: u32, m: u32, groups: u32, n_padded: u32);
}

thread_local! {
    /// This module's relaxed kernel: each page module (CPU, WebGPU) has its own, bound to
    /// its own memory.
    static RELAXED: RefCell<Option<RelaxedKernel>> = const { RefCell::new(None) };
}

/// [`transduce::host::int8::RelaxedDot`] over the JavaScript call: wasm32 pointers are
/// offsets into the memory both modules share.
#[cfg(target_arch = "wasm32")]
unsafe fn relaxed_dot(
    w: *const i8,
    x: *const i8,
    sums: *mut i32,
    m: usize,
    groups: usize,
    n_padded: usize,
) {
    RELAXED.with_borrow(|kernel| {
        if let Some(kernel) = kernel {
            kernel.dot(
                w as u32,
                x as u32,
                sums as u32,
                m as u32,
                groups as u32,
                n_padded as u32,
            )
        }
    })
}

/// Makes the int8 products of the models loaded from now on use the relaxed-SIMD kernel
/// (the `transduce-relaxed` module's exports over this module's memory), or the SIMD128
/// one (`undefined`). Returns whether the relaxed kernel is in use: it is checked against
/// plain loops first, and a browser whose instruction disagrees keeps SIMD128. Both give
/// the same outputs.
#[wasm_bindgen(js_name = useRelaxedSimd)]
pub fn use_relaxed_simd(kernel: Option<RelaxedKernel>) -> bool {
    let on = kernel.is_some();
    RELAXED.set(kernel);
    #[cfg(target_arch = "wasm32")]
    {
        let dot: transduce::host::int8::RelaxedDot = relaxed_dot;
        let used = transduce::host::int8::use_relaxed_dot(on.then_some(dot));
        if !used {
            RELAXED.set(None);
        }
        used
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        let _ = on;
        false
    }
}

/// A loaded bundle, decoded on the CPU or (when loaded with WebGPU) on the GPU.
#[wasm_bindgen]
pub struct Engine {
    bundle: Bundle,
    gpu: Option<backend::Gpu>,
    /// Where the next request decodes.
    active: Cell<BackendChoice>,
    /// Why the GPU was given up, once it failed.
    gpu_fault: RefCell<Option<String>>,
    parser: Option<Parser>,
}

fn check_text(text: &str) -> Result<(), String> {
    if text.trim().is_empty() {
        return Err("the text is empty".into());
    }
    let chars = text.chars().count();
    if chars > MAX_CHARS {
        return Err(format!(
            "the text has {chars} characters; at most {MAX_CHARS} are accepted in one call"
        ));
    }
    Ok(())
}

/// What a JavaScript value is, for error messages.
fn type_name(value: &JsValue) -> String {
    if value.is_null() {
        "null".into()
    } else if value.is_array() {
        "an array".into()
    } else {
        value.js_typeof().as_string().unwrap_or_default()
    }
}

fn options_from(bundle: &Bundle, options: JsValue) -> Result<DecodeOptions, JsError> {
    if !(options.is_undefined() || options.is_null() || options.is_object()) || options.is_array() {
        return Err(JsError::new(&format!(
            "options must be an object, not {}",
            type_name(&options)
        )));
    }
    // Fields not given keep the bundle's defaults, which are range-checked here as well.
    let mut merged = serde_json::to_value(&bundle.config.decoding).map_err(js_error)?;
    if !(options.is_undefined() || options.is_null()) {
        let given: serde_json::Value = serde_wasm_bindgen::from_value(options)
            .map_err(|e| JsError::new(&format!("options: {e}")))?;
        let serde_json::Value::Object(given) = given else {
            return Err(JsError::new("options must be an object"));
        };
        for (k, v) in given {
            if !matches!(k.as_str(), "beam" | "alpha" | "maxExtra") {
                return Err(JsError::new(&format!(
                    "options: unknown field `{k}` (expected beam, alpha, maxExtra)"
                )));
            }
            merged[k] = v;
        }
    }
    let options: DecodeOptions =
        serde_json::from_value(merged).map_err(|e| JsError::new(&format!("options: {e}")))?;
    if options.beam == 0 || options.beam > 64 {
        return Err(JsError::new("options.beam must be between 1 and 64"));
    }
    if !options.alpha.is_finite() || options.alpha < 0.0 {
        return Err(JsError::new("options.alpha must be a non-negative number"));
    }
    if options.max_extra > 1000 {
        return Err(JsError::new("options.maxExtra must be at most 1000"));
    }
    Ok(options)
}

/// Pieces of at most [`MAX_WORDS`] words.
fn word_chunks(sentence: &str) -> Vec<String> {
    let words: Vec<&str> = sentence.split_whitespace().collect();
    words.chunks(MAX_WORDS).map(|c| c.join(" ")).collect()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct SentenceResult {
    source: String,
    target: String,
    source_tokens: Vec<String>,
    target_tokens: Vec<String>,
    source_ids: Vec<u32>,
    target_ids: Vec<u32>,
}

impl SentenceResult {
    /// The result for `text` before any of it is translated.
    fn of(text: &str) -> SentenceResult {
        SentenceResult {
            source: text.trim().to_string(),
            target: String::new(),
            source_tokens: Vec::new(),
            target_tokens: Vec::new(),
            source_ids: Vec::new(),
            target_ids: Vec::new(),
        }
    }
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ParseResult {
    words: Vec<String>,
    tree: tree::Node,
    bracketed: String,
    well_formed: bool,
}

#[wasm_bindgen]
impl Engine {
    /// Loads a bundle from its three files. `backend` is `"cpu"` or `"webgpu"` (no
    /// fallback here: the JavaScript wrapper decides, so it can report why). `verified`:
    /// the files come from the worker's own store of models it converted and checked, so
    /// their sha256 sums are not computed again ([`Bundle::from_files_verified`]).
    pub async fn load(
        config: Vec<u8>,
        tokenizer: Vec<u8>,
        weights: Vec<u8>,
        backend: String,
        verified: Option<bool>,
    ) -> Result<Engine, JsError> {
        let choice: BackendChoice = backend.parse().map_err(|e: String| JsError::new(&e))?;
        // Parse the config before touching a GPU: a corrupt bundle fails fast.
        BundleConfig::from_json(&config).map_err(js_error)?;
        let files = BundleFiles {
            config,
            tokenizer,
            weights,
        };
        // Always read on the CPU: the host decoder is the fallback, and the GPU decoder
        // uploads from its arrays. An int8 bundle is read in int8 only (no f32 copy).
        let mut bundle = if verified == Some(true) {
            Bundle::from_files_verified(files, &Device::flex())
        } else {
            Bundle::from_files(files, &Device::flex())
        }
        .map_err(js_error)?;
        if choice == BackendChoice::WebGpu {
            // The GPU decoder multiplies in f32 (an int8 bundle's weights as q·scale); the
            // CPU beside it does too, so that a request gives the same output whichever of
            // the two runs it (and a lost GPU's paragraph is finished identically).
            bundle.dequantize();
        }
        let gpu = match choice {
            BackendChoice::WebGpu => Some(
                backend::Gpu::load(&bundle)
                    .await
                    .map_err(|e| JsError::new(&e))?,
            ),
            BackendChoice::Cpu => None,
        };
        let parser = match bundle.config.task {
            Task::Parse => Some(Parser::new(&bundle).map_err(js_error)?),
            Task::Translate { .. } => None,
        };
        Ok(Engine {
            bundle,
            gpu,
            active: Cell::new(choice),
            gpu_fault: RefCell::new(None),
            parser,
        })
    }

    /// Where the next request decodes: `"webgpu"` or `"cpu"` (after a GPU failure, `"cpu"`).
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.active.get().to_string()
    }

    /// The adapter's description (WebGPU), or the CPU decoder's.
    #[wasm_bindgen(getter)]
    pub fn device(&self) -> String {
        match (self.active.get(), &self.gpu) {
            (BackendChoice::WebGpu, Some(gpu)) => gpu.description.clone(),
            _ => {
                let int8 = self.bundle.host().is_some_and(|h| h.is_int8());
                #[cfg(target_arch = "wasm32")]
                let relaxed = transduce::host::int8::relaxed_dot_active();
                #[cfg(not(target_arch = "wasm32"))]
                let relaxed = false;
                #[cfg(feature = "threads")]
                let threads = threads::decode_threads();
                #[cfg(not(feature = "threads"))]
                let threads = 1;
                format!(
                    "{} ({}{})",
                    backend::CPU_DEVICE,
                    match (int8, relaxed) {
                        (true, true) => "int8, relaxed SIMD",
                        (true, false) => "int8",
                        _ => "f32",
                    },
                    if threads > 1 {
                        format!(", {threads} threads")
                    } else {
                        String::new()
                    }
                )
            }
        }
    }

    /// The GPU decoder is loaded (whichever backend is active).
    #[wasm_bindgen(getter, js_name = hasGpu)]
    pub fn has_gpu(&self) -> bool {
        self.gpu.is_some()
    }

    /// Why the GPU was given up (it failed or was lost), or `undefined`.
    #[wasm_bindgen(getter, js_name = gpuFault)]
    pub fn gpu_fault(&self) -> Option<String> {
        self.gpu_fault.borrow().clone()
    }

    /// Sends the following requests to `"cpu"` or `"webgpu"` (the latter only when the GPU
    /// decoder is loaded and has not failed): how `auto` picks per request.
    #[wasm_bindgen(js_name = useBackend)]
    pub fn use_backend(&self, backend: String) -> Result<(), JsError> {
        let choice: BackendChoice = backend.parse().map_err(|e: String| JsError::new(&e))?;
        if choice == BackendChoice::WebGpu {
            if self.gpu.is_none() {
                return Err(JsError::new("this engine was loaded without WebGPU"));
            }
            if let Some(fault) = self.gpu_fault.borrow().as_ref() {
                return Err(JsError::new(&format!("the GPU was given up: {fault}")));
            }
        }
        self.active.set(choice);
        Ok(())
    }

    /// Destroys the GPU device, as the browser may at any time (tests of the fallback).
    #[wasm_bindgen(js_name = loseDevice)]
    pub fn lose_device(&self) {
        if let Some(gpu) = &self.gpu {
            gpu.lose();
        }
    }

    /// The bundle's `config.json` as an object (task, model, decoding, metrics, provenance).
    #[wasm_bindgen(getter)]
    pub fn config(&self) -> Result<JsValue, JsError> {
        to_js(&self.bundle.config)
    }

    /// The language codes (`>>fra<<` …) the model's vocabulary holds, sorted: the targets
    /// of a model of many targets (empty for a model of one).
    #[wasm_bindgen(getter, js_name = languageTokens)]
    pub fn language_tokens(&self) -> Vec<String> {
        self.bundle.tokenizer.language_tokens()
    }

    /// Checks a request before any work: the options first (so a bad option is reported
    /// whatever the text), then that the text is a string, not empty and not longer than
    /// [`MAX_CHARS`]. The worker calls it before splitting a text into sentences.
    #[wasm_bindgen(js_name = checkRequest)]
    pub fn check_request(&self, text: JsValue, options: JsValue) -> Result<(), JsError> {
        options_from(&self.bundle, options)?;
        let Some(text) = text.as_string() else {
            return Err(JsError::new(&format!(
                "the text must be a string, not {}",
                type_name(&text)
            )));
        };
        check_text(&text).map_err(|e| JsError::new(&e))
    }

    /// Translates one sentence (text the caller got from [`split_sentences_js`]); a
    /// sentence longer than [`MAX_WORDS`] words is translated in pieces whose outputs are
    /// joined. `options`: `{ beam, alpha, maxExtra }`, each optional.
    pub async fn translate(&self, text: String, options: JsValue) -> Result<JsValue, JsError> {
        if self.parser.is_some() {
            return Err(JsError::new("this bundle is a parser: call parse()"));
        }
        let options = options_from(&self.bundle, options)?;
        check_text(&text).map_err(|e| JsError::new(&e))?;
        let mut out = SentenceResult::of(&text);
        for piece in word_chunks(&text) {
            let source = self
                .bundle
                .tokenizer
                .encode(piece.trim())
                .map_err(js_error)?;
            if source.is_empty() {
                continue;
            }
            let target = self
                .best_outputs(std::slice::from_ref(&source), &options, None)
                .await
                .map_err(js_error)?
                .pop()
                .unwrap_or_default();
            let text = self.bundle.tokenizer.decode(&target).map_err(js_error)?;
            if !out.target.is_empty() && !text.is_empty() {
                out.target.push(' ');
            }
            out.target.push_str(&text);
            out.source_ids.extend(source);
            out.target_ids.extend(target);
        }
        out.source_tokens = self.token_strings(&out.source_ids);
        out.target_tokens = self.token_strings(&out.target_ids);
        to_js(&out)
    }

    /// Translates several sentences (each as [`Engine::translate`] would) decoded together
    /// as one batch: a paragraph costs about as many decoder steps as its longest
    /// sentence, not the sum of all. Returns the results in order.
    #[wasm_bindgen(js_name = translateBatch)]
    pub async fn translate_batch(
        &self,
        sentences: Vec<String>,
        options: JsValue,
    ) -> Result<JsValue, JsError> {
        self.translate_sentences(sentences, options, None).await
    }

    /// [`Engine::translate_batch`] with noisy-channel reranking (Yee et al. 2019): every
    /// translation the beam finished is checked by `reverse`, a translator the other way
    /// (on the CPU), and the best by beam score + `weight` · log p(source | translation) /
    /// lp(|source|) is kept, as `transduce translate --channel` ranks. About twice the time
    /// of the plain search.
    #[wasm_bindgen(js_name = translateBatchWithChannel)]
    pub async fn translate_batch_with_channel(
        &self,
        sentences: Vec<String>,
        options: JsValue,
        reverse: &Engine,
        weight: f64,
    ) -> Result<JsValue, JsError> {
        let channel = Channel::new(&self.bundle, &reverse.bundle, weight).map_err(js_error)?;
        self.translate_sentences(sentences, options, Some(channel))
            .await
    }

    /// Checks that `reverse` can rerank this engine's translations with `weight` (a
    /// translator from this one's target to its source; a finite weight), before any work.
    #[wasm_bindgen(js_name = checkChannel)]
    pub fn check_channel(&self, reverse: &Engine, weight: f64) -> Result<(), JsError> {
        if self.parser.is_some() {
            return Err(JsError::new(
                "this bundle is a parser: only translators take a channel",
            ));
        }
        Channel::new(&self.bundle, &reverse.bundle, weight).map_err(js_error)?;
        Ok(())
    }

    async fn translate_sentences(
        &self,
        sentences: Vec<String>,
        options: JsValue,
        channel: Option<Channel<'_>>,
    ) -> Result<JsValue, JsError> {
        if self.parser.is_some() {
            return Err(JsError::new("this bundle is a parser: call parse()"));
        }
        let options = options_from(&self.bundle, options)?;
        if sentences.is_empty() {
            return Err(JsError::new("no sentences to translate"));
        }
        if sentences.len() > MAX_BATCH {
            return Err(JsError::new(&format!(
                "{} sentences in one batch; at most {MAX_BATCH} are accepted",
                sentences.len()
            )));
        }
        for (i, text) in sentences.iter().enumerate() {
            check_text(text).map_err(|e| JsError::new(&format!("sentence {i}: {e}")))?;
        }
        // Each sentence's pieces (word chunks) are sources of the one batch.
        let mut owner = Vec::new();
        let mut pieces = Vec::new();
        let mut sources = Vec::new();
        for (i, text) in sentences.iter().enumerate() {
            for piece in word_chunks(text) {
                let ids = self
                    .bundle
                    .tokenizer
                    .encode(piece.trim())
                    .map_err(js_error)?;
                if !ids.is_empty() {
                    owner.push(i);
                    pieces.push(piece);
                    sources.push(ids);
                }
            }
        }
        let outputs = match (sources.is_empty(), channel) {
            (true, _) => Vec::new(),
            (false, None) => self
                .best_outputs(&sources, &options, None)
                .await
                .map_err(js_error)?,
            (false, Some(channel)) => self
                .channel_outputs(&pieces, &sources, &options, channel)
                .await
                .map_err(js_error)?,
        };
        let mut results: Vec<SentenceResult> = sentences
            .iter()
            .map(|text| SentenceResult::of(text))
            .collect();
        for ((&i, source), target) in owner.iter().zip(sources).zip(outputs) {
            let text = self.bundle.tokenizer.decode(&target).map_err(js_error)?;
            let out = &mut results[i];
            if !out.target.is_empty() && !text.is_empty() {
                out.target.push(' ');
            }
            out.target.push_str(&text);
            out.source_ids.extend(source);
            out.target_ids.extend(target);
        }
        for out in &mut results {
            out.source_tokens = self.token_strings(&out.source_ids);
            out.target_tokens = self.token_strings(&out.target_ids);
        }
        to_js(&results)
    }

    /// Parses one English sentence (raw text; split into treebank words here) into a
    /// tree. `options`: `{ beam, alpha, maxExtra }` (defaults §6.3: 21, 0.3, 300);
    /// `constrained` (default true) keeps every output a well-formed tree.
    pub async fn parse(
        &self,
        text: String,
        options: JsValue,
        constrained: Option<bool>,
    ) -> Result<JsValue, JsError> {
        let Some(parser) = &self.parser else {
            return Err(JsError::new("this bundle translates: call translate()"));
        };
        let options = options_from(&self.bundle, options)?;
        check_text(&text).map_err(|e| JsError::new(&e))?;
        let words = ptb_words(&text);
        if words.len() > 4 * MAX_WORDS {
            return Err(JsError::new(&format!(
                "the sentence has {} words; the parser takes at most {}",
                words.len(),
                4 * MAX_WORDS
            )));
        }
        let parse = parser
            .parse_by(
                &self.bundle.tokenizer,
                &[&self.bundle.config.model],
                std::slice::from_ref(&words),
                &options,
                constrained.unwrap_or(true),
                async |sources: &[Vec<u32>], constraint: &dyn Constraint| {
                    self.best_outputs(sources, &options, Some(constraint)).await
                },
            )
            .await
            .map_err(js_error)?
            .pop()
            .ok_or_else(|| JsError::new("the parser returned nothing"))?;
        to_js(&ParseResult {
            bracketed: print_tree(&parse.tree, false),
            tree: tree::Node::from(&parse.tree),
            words,
            well_formed: parse.well_formed,
        })
    }

    /// Attention weights of the model reading `sourceIds` and writing `targetIds` (from a
    /// translation result), every layer and head: `{ sourceTokens, targetTokens,
    /// encoderSelf, decoderSelf, cross }`, each a list of layers of `{ heads, rows, cols,
    /// data }` with `data` row-major `[head][row][col]`.
    pub async fn attention(
        &self,
        source_ids: Vec<u32>,
        target_ids: Vec<u32>,
    ) -> Result<JsValue, JsError> {
        let maps = attention::maps(&self.bundle, &source_ids, &target_ids)
            .await
            .map_err(js_error)?;
        let mut target_tokens = self.token_strings(&target_ids);
        target_tokens.push("</s>".to_string());
        to_js(&attention::Attention {
            // The encoder's positions: the source closed by EOS where the model reads it so.
            source_tokens: self.token_strings(&self.bundle.config.model.source_row(&source_ids)),
            target_tokens,
            encoder_self: maps.0,
            decoder_self: maps.1,
            cross: maps.2,
        })
    }

    /// Each source's best output ids on the active backend. A GPU failure (device lost,
    /// out of memory, any device error) moves this request and all later ones to the CPU;
    /// [`Engine::gpu_fault`] says why.
    async fn best_outputs(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> transduce::Result<Vec<Vec<u32>>> {
        let on_gpu = self
            .gpu_first(async |gpu| gpu.best_outputs(sources, options, constraint).await)
            .await;
        match on_gpu {
            Some(outputs) => Ok(outputs),
            None => {
                #[cfg(feature = "threads")]
                if let (None, Some(host)) = (constraint, self.bundle.host())
                    && let Some(outputs) = threads::best_outputs(host, sources, options)
                {
                    return outputs;
                }
                decode::best_outputs_async(self.bundle.scorer(), sources, options, constraint).await
            }
        }
    }

    /// Each source's finished hypotheses on the active backend, best first, with the GPU
    /// fallback of [`Engine::best_outputs`].
    async fn hypotheses(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
    ) -> transduce::Result<Vec<Vec<Hypothesis>>> {
        match self
            .gpu_first(async |gpu| gpu.hypotheses(sources, options).await)
            .await
        {
            Some(lists) => Ok(lists),
            None => decode::hypotheses_async(self.bundle.scorer(), sources, options, None).await,
        }
    }

    /// `run` on the GPU when it is the active backend; `None` when the CPU must take the
    /// request instead. A request the GPU decoder does not take (too long for its
    /// attention, too large a batch) or bad input goes to the CPU, which decodes it or says
    /// what is wrong; any other GPU failure moves this request and all later ones there.
    async fn gpu_first<T>(
        &self,
        run: impl AsyncFnOnce(&backend::Gpu) -> transduce::Result<T>,
    ) -> Option<T> {
        let (BackendChoice::WebGpu, Some(gpu)) = (self.active.get(), &self.gpu) else {
            return None;
        };
        match run(gpu).await {
            Ok(out) => Some(out),
            Err(transduce::Error::Input(_)) => None,
            Err(e) => {
                self.gpu_fault.borrow_mut().get_or_insert(e.to_string());
                self.active.set(BackendChoice::Cpu);
                None
            }
        }
    }

    /// Each source's output ids chosen among the beam's finished hypotheses by `channel`
    /// (`texts[i]` is source i's text, which the reverse model scores).
    async fn channel_outputs(
        &self,
        texts: &[String],
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        channel: Channel<'_>,
    ) -> transduce::Result<Vec<Vec<u32>>> {
        let lists = self.hypotheses(sources, options).await?;
        let candidates = lists
            .iter()
            .map(|list| {
                list.iter()
                    .map(|h| self.bundle.tokenizer.decode(&h.tokens))
                    .collect::<transduce::Result<Vec<String>>>()
            })
            .collect::<transduce::Result<Vec<_>>>()?;
        let scores = channel
            .scores_async(texts, &candidates, options.alpha)
            .await?;
        Ok(lists
            .into_iter()
            .zip(scores)
            .map(|(mut list, scores)| {
                let beam: Vec<f64> = list.iter().map(|h| h.score).collect();
                match channel.rank(&beam, &scores).first() {
                    Some(&(k, _)) => std::mem::take(&mut list[k].tokens),
                    None => Vec::new(),
                }
            })
            .collect())
    }

    fn token_strings(&self, ids: &[u32]) -> Vec<String> {
        ids.iter()
            .map(|&id| self.bundle.tokenizer.id_to_token(id).unwrap_or_default())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_sentences_are_cut_into_word_chunks() {
        let text = (0..150)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ");
        let chunks = word_chunks(&text);
        assert_eq!(chunks.len(), 3);
        assert_eq!(chunks.join(" "), text);
        assert!(chunks.iter().all(|c| c.split(' ').count() <= MAX_WORDS));
    }
}
