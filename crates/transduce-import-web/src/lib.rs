//! # transduce-import-web
//!
//! The import in the browser: a Marian (OPUS-MT) model's files, fetched by the worker from
//! the hub, become a bundle through the same [`transduce_import::import`] as
//! `transduce import`, so the bundle is byte for byte the CLI's. Its own wasm module: the
//! conversion holds the checkpoint and the bundle at once, and a wasm memory never
//! shrinks, so the worker instantiates this module for one conversion and then drops it,
//! leaving the translating module at the size of the bundle it decodes.
//!
//! Every entry point returns `Result`: a bad file becomes a JavaScript `Error` whose `code`
//! and `file` say what and where (never a panic, which would kill the module).

use wasm_bindgen::prelude::*;

use transduce::WeightDtype;
use transduce_import::hub::{self, Reference};
use transduce_import::{ModelFiles, Options, import};

#[wasm_bindgen(start)]
fn start() {
    console_error_panic_hook::set_once();
}

/// A JavaScript `Error` with `code` and `file`.
fn error(code: &str, file: Option<&str>, message: &str) -> JsValue {
    let e = js_sys::Error::new(message);
    let set = |k: &str, v: JsValue| {
        let _ = js_sys::Reflect::set(&e, &JsValue::from_str(k), &v);
    };
    set("code", JsValue::from_str(code));
    set("file", file.map_or(JsValue::NULL, JsValue::from_str));
    e.into()
}

fn field(options: &JsValue, name: &str) -> Result<Option<String>, JsValue> {
    if options.is_undefined() || options.is_null() {
        return Ok(None);
    }
    let v = js_sys::Reflect::get(options, &JsValue::from_str(name))
        .map_err(|_| error("options", None, &format!("options.{name}: unreadable")))?;
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    v.as_string()
        .map(Some)
        .ok_or_else(|| error("options", None, &format!("options.{name} must be a string")))
}

/// One conversion: the model's files are added one by one (each copied into this module's
/// memory once, so the page can let go of its copy), then [`Conversion::run`].
#[wasm_bindgen]
pub struct Conversion {
    files: Option<ModelFiles>,
}

#[wasm_bindgen]
impl Conversion {
    #[wasm_bindgen(constructor)]
    pub fn new() -> Conversion {
        Conversion {
            files: Some(ModelFiles::new()),
        }
    }

    /// Adds a file (`config.json`, `model.safetensors`, …).
    pub fn add(&mut self, name: &str, bytes: Vec<u8>) -> Result<(), JsValue> {
        let files = self
            .files
            .as_mut()
            .ok_or_else(|| error("used", None, "this conversion has already run"))?;
        files.insert(name, bytes);
        Ok(())
    }

    /// Converts. `options`: `{ reference: "hf:ORG/NAME@COMMIT", hub, weights: "int8" |
    /// "f16" | "f32" (default int8), licence, source, target }`. Resolves to `{ config,
    /// tokenizer, weights }` (Uint8Arrays: the bundle's three files), `card` (its
    /// README.md) and `name`.
    pub fn run(&mut self, options: JsValue) -> Result<JsValue, JsValue> {
        let files = self
            .files
            .take()
            .ok_or_else(|| error("used", None, "this conversion has already run"))?;
        let reference = field(&options, "reference")?
            .ok_or_else(|| error("options", None, "options.reference is required"))?;
        let reference = Reference::parse(&reference)
            .unwrap_or_else(|| Err(format!("{reference:?} is not an hf: name")))
            .map_err(|e| error("reference", None, &e))?;
        let hub_url = field(&options, "hub")?.unwrap_or_else(|| hub::DEFAULT_HUB.to_string());
        let weights = match field(&options, "weights")?.as_deref() {
            None | Some("int8") => WeightDtype::Int8,
            Some("f16") => WeightDtype::F16,
            Some("f32") => WeightDtype::F32,
            Some(other) => {
                return Err(error(
                    "options",
                    None,
                    &format!("options.weights is {other:?}; expected \"int8\", \"f16\" or \"f32\""),
                ));
            }
        };
        let imported = import(
            files,
            &Options {
                weights,
                licence: field(&options, "licence")?,
                name: Some(reference.repo()),
                folder: None,
                source: field(&options, "source")?,
                target: field(&options, "target")?,
                command: hub::command(&reference, &hub_url, weights),
            },
        )
        .map_err(|e| error(e.code.as_str(), e.file.as_deref(), &e.to_string()))?;
        let out = js_sys::Object::new();
        let set = |k: &str, v: JsValue| js_sys::Reflect::set(&out, &JsValue::from_str(k), &v);
        let bytes = |b: &[u8]| JsValue::from(js_sys::Uint8Array::from(b));
        set("config", bytes(&imported.files.config))?;
        set("tokenizer", bytes(&imported.files.tokenizer))?;
        set("weights", bytes(&imported.files.weights))?;
        set("card", JsValue::from_str(&imported.card))?;
        set("name", JsValue::from_str(&imported.name))?;
        Ok(out.into())
    }
}

impl Default for Conversion {
    fn default() -> Self {
        Self::new()
    }
}
