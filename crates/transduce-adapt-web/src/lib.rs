//! # transduce-adapt-web
//!
//! Adaptation in the browser: a translator fine-tuned on the visitor's own sentence pairs
//! inside the page's worker, with the model crate's training step
//! ([`transduce::train::adapt`]: burn autodiff and Adam over the CPU backend), the same
//! recipe as `transduce adapt`. Its own wasm module, fetched only when the visitor adapts,
//! so a visit that only translates downloads none of it.
//!
//! The worker drives it a step at a time ([`Adaptation::step`]) and yields between steps,
//! so a Cancel is heard and progress is drawn; [`Adaptation::finish`] gives the adapted
//! bundle's files. Every entry point returns `Result`: bad pairs or options become one
//! exception naming the line or field, never a panic.

use serde::Serialize;
use wasm_bindgen::prelude::*;

use transduce::bundle::{BundleFiles, WeightDtype};
use transduce::train::adapt::{AdaptOptions, Adapter, parse_pairs};

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

/// How many pairs `text` holds, or the error naming its first bad line (for the page to
/// check a paste before it adapts). `name` starts the message ("Your pairs, line 3: …").
#[wasm_bindgen(js_name = countPairs)]
pub fn count_pairs(text: &[u8], name: &str) -> Result<usize, JsError> {
    parse_pairs(text, name).map(|p| p.len()).map_err(js_error)
}

/// A fine-tuning in progress.
#[wasm_bindgen]
pub struct Adaptation {
    adapter: Option<Adapter>,
}

#[wasm_bindgen]
impl Adaptation {
    /// Starts from a translator's three bundle files. `pairs` and `replay` are UTF-8 text,
    /// one `source<TAB>translation` a line (`replay` may be empty: no general pairs);
    /// `names` say where each came from, for errors. `options`: `{ steps, learningRate,
    /// pairsPerStep, replayPerStep, seed }`, each optional (the recipe's defaults).
    #[wasm_bindgen(constructor)]
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Vec<u8>,
        tokenizer: Vec<u8>,
        weights: Vec<u8>,
        pairs: &[u8],
        pairs_name: &str,
        replay: &[u8],
        replay_name: &str,
        options: JsValue,
    ) -> Result<Adaptation, JsError> {
        let options: AdaptOptions = if options.is_undefined() || options.is_null() {
            AdaptOptions::default()
        } else {
            serde_wasm_bindgen::from_value(options)
                .map_err(|e| JsError::new(&format!("adapt options: {e}")))?
        };
        let pairs = parse_pairs(pairs, pairs_name).map_err(js_error)?;
        let replay = if replay.is_empty() {
            Vec::new()
        } else {
            parse_pairs(replay, replay_name).map_err(js_error)?
        };
        let files = BundleFiles {
            config,
            tokenizer,
            weights,
        };
        let adapter = Adapter::new(&files, &pairs, &replay, (pairs_name, replay_name), options)
            .map_err(js_error)?;
        Ok(Adaptation {
            adapter: Some(adapter),
        })
    }

    fn adapter(&mut self) -> Result<&mut Adapter, JsError> {
        self.adapter
            .as_mut()
            .ok_or_else(|| JsError::new("this adaptation has finished"))
    }

    /// Steps the recipe takes.
    #[wasm_bindgen(getter)]
    pub fn steps(&self) -> usize {
        self.adapter.as_ref().map_or(0, Adapter::steps)
    }

    /// Steps taken.
    #[wasm_bindgen(getter)]
    pub fn done(&self) -> usize {
        self.adapter.as_ref().map_or(0, Adapter::done)
    }

    /// One optimizer step: `{ step, steps, loss }`.
    pub fn step(&mut self) -> Result<JsValue, JsError> {
        let report = self.adapter()?.step().map_err(js_error)?;
        to_js(&report)
    }

    /// The adapted bundle: `{ config, tokenizer, weights }` (Uint8Arrays), the weights
    /// stored as `weights` says (`"f32"`, `"f16"`, `"int8"`), by default as the shipped ones
    /// were (int8 stays int8: same size, same decoder).
    pub fn finish(&mut self, weights: Option<String>) -> Result<JsValue, JsError> {
        let dtype: Option<WeightDtype> = weights
            .map(|w| {
                serde_json::from_value(serde_json::Value::String(w.clone())).map_err(|_| {
                    JsError::new(&format!(
                        "adapt options: weights \"{w}\": expected \"f32\", \"f16\" or \"int8\""
                    ))
                })
            })
            .transpose()?;
        let adapter = self
            .adapter
            .take()
            .ok_or_else(|| JsError::new("this adaptation has finished"))?;
        let dtype = dtype.unwrap_or(adapter.stored());
        let files = adapter.finish(dtype).map_err(js_error)?;
        let out = js_sys::Object::new();
        for (name, bytes) in [
            ("config", &files.config),
            ("tokenizer", &files.tokenizer),
            ("weights", &files.weights),
        ] {
            js_sys::Reflect::set(&out, &name.into(), &js_sys::Uint8Array::from(&bytes[..]))
                .map_err(|_| JsError::new("cannot build the result object"))?;
        }
        Ok(out.into())
    }
}
