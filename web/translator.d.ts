// Types of translator.js: the browser's Translator API (WICG translation-api) backed by
// transduce bundles.

import type { Adaptation, AdaptOptions, AdaptResult } from "./transduce.js";

export type Availability = "unavailable" | "downloadable" | "downloading" | "available";

export interface TranslatorLanguages {
  /** BCP 47 tags, e.g. "en", "de-CH". */
  sourceLanguage: string;
  targetLanguage: string;
}

/** Receives "downloadprogress" events (ProgressEvent, `loaded` from 0 to 1, `total` 1). */
export interface CreateMonitor extends EventTarget {
  addEventListener(type: "downloadprogress", listener: (event: ProgressEvent) => void, options?: boolean | AddEventListenerOptions): void;
  addEventListener(type: string, listener: EventListenerOrEventListenerObject | null, options?: boolean | AddEventListenerOptions): void;
}

export interface TranslatorCreateOptions extends TranslatorLanguages {
  monitor?: (monitor: CreateMonitor) => void;
  /** Aborting rejects a pending create() and destroys the translator it made. */
  signal?: AbortSignal;
}

export interface TranslateOptions {
  signal?: AbortSignal;
}

export declare class Translator {
  private constructor();
  /** From the registry (configure/install) and the Cache API. */
  static availability(options: TranslatorLanguages): Promise<Availability>;
  /** Rejects with NotSupportedError for a pair without a bundle, AbortError on abort. */
  static create(options: TranslatorCreateOptions): Promise<Translator>;
  readonly sourceLanguage: string;
  readonly targetLanguage: string;
  /** Characters (code points) one call takes: 100,000. */
  readonly inputQuota: number;
  measureInputUsage(input: string, options?: TranslateOptions): Promise<number>;
  /** Rejects with AbortError on abort, QuotaExceededError past inputQuota, InvalidStateError once destroyed. */
  translate(input: string, options?: TranslateOptions): Promise<string>;
  /** Chunks: each sentence's translation with the separator before it, in order. */
  translateStreaming(input: string, options?: TranslateOptions): ReadableStream<string>;
  destroy(): void;
  /**
   * An extension beyond the Translator API: fine-tunes this translator on your own pairs in
   * its worker (nothing leaves the machine) and keeps the result for this language pair
   * across reloads. See transduce.d.ts, `AdaptOptions`.
   */
  adapt(pairs: string | [string, string][], options?: AdaptOptions): Promise<AdaptResult>;
  /** Extension: the shipped weights again, the stored adaptation deleted. */
  reset(): Promise<void>;
  /** Extension: how this translator's weights were adapted, or null. */
  readonly adaptation: Adaptation | null;
  /** Extension: the models it runs, in order (two for a pivot through English). */
  readonly models: { reference?: string; card?: string; token?: string; config: any }[];
  /** Extension: which models were chosen for the pair, and why. */
  readonly model: ModelChoice | null;
}

/** A Helsinki-NLP model family, by its names (web/routes.js). */
export type OpusMtFamily = "tiny" | "base" | "tc-base" | "tc-big" | "tc-bible";

export interface ModelChoice {
  /** The models in order: "Helsinki-NLP/opus-mt-tc-big-en-fr", or a bundle URL of the site's table. */
  names: string[];
  /** Helsinki-NLP's models: each one's family. */
  families?: OpusMtFamily[];
  /** Helsinki-NLP's models: the int8 bundles' bytes together, estimated from the families' shapes. */
  bytes?: number;
  /** Why: "the smallest of the pair's models: …", "no direct model; through English: …". */
  why: string;
}

export interface TranslatorModel extends TranslatorLanguages {
  /** A bundle folder (config.json, tokenizer.json, model.safetensors), or an hf: name. */
  url?: string | URL;
  /** An hf: name ("hf:Helsinki-NLP/opus-mt-en-ROMANCE"), instead of url. */
  model?: string;
  /** A model of many targets: the target's token put before every sentence (">>fra<<"). */
  token?: string;
}

export interface ConfigureOptions {
  /**
   * { "en-de": url } (or "en-US→de" for regional tags), or a list of models; a url may be an
   * hf: name, and an entry { model, token } for a model of many targets.
   */
  models?: Record<string, string | URL | { model: string; token?: string }> | TranslatorModel[];
  /** Where hf: names come from (default "https://huggingface.co"). */
  hub?: string;
  /**
   * Any pair without an entry uses Helsinki-NLP's OPUS-MT models on the hub: the 2020
   * opus-mt-SRC-TGT, the Tatoeba-Challenge tc-base and tc-big, the 6/2 students
   * (opus-mt_tiny_SRC-TGT, three-letter codes), else two through English (sentence by
   * sentence), chosen by `prefer`.
   */
  opusMt?: boolean;
  /**
   * How the model of a pair is chosen: "small" (default), fewest bytes to download;
   * "quality", the best family first (tc-big, tc-base, the 2020 model, the student), a
   * direct model before two through English.
   */
  prefer?: "small" | "quality";
  backend?: "auto" | "webgpu" | "cpu";
  workerUrl?: string | URL;
  /**
   * Check every translation with the registry's model for the reverse pair, where there is
   * one (noisy-channel reranking): both bundles download, each translation takes about 2×.
   */
  channel?: boolean;
}

/** Adds bundles to the registry and sets how translators load them. */
export declare function configure(options?: ConfigureOptions): void;
/** configure(), then globalThis.Translator = Translator where the browser has none (or `replaceNative`); true if it did. */
export declare function install(options?: ConfigureOptions & {
  /**
   * Define this polyfill even where the browser has a Translator of its own (default false:
   * the browser's is kept). A site that wants the same models in every browser, offline
   * once cached, sets it.
   */
  replaceNative?: boolean;
}): boolean;
export default Translator;

/**
 * The models a translator of this package runs, in order: one, or two through English, each
 * with its target token (or undefined). For element.js, which needs each sentence's pieces and
 * attention, not the text alone.
 */
export declare function stagesOf(translator: Translator): { engine: import("./transduce.js").Transduce; token: string | undefined }[];
