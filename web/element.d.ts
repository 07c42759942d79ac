// Types of element.js: a page's DOM translated in place.

import type { Transduce } from "./transduce.js";
import type { Translator } from "./translator.js";

export interface TranslateElementOptions {
  /** The target language (BCP 47, e.g. "de"). */
  to: string;
  /** The source language; default: the nearest `lang` attribute on or above the element. */
  from?: string;
  /**
   * The model: a loaded Transduce or a Translator of translator.js; default: the pair's
   * Translator, made with Translator.create() (destroyed by stop() and restore()).
   */
  translator?: Transduce | Translator;
  /** Blocks far below the view wait until the visitor scrolls near them (default true). */
  lazy?: boolean;
  /** After every request: blocks translated, and blocks found so far. */
  onProgress?: (progress: { translated: number; total: number }) => void;
  /** Decoding for every request (default: the model's own, from its config.json). */
  decode?: { beam?: number; alpha?: number; maxExtra?: number };
  /** The decoder layer whose cross-attention places inline elements (default: the last). */
  alignmentLayer?: number;
}

/** A translation of a page's content, in progress or done. */
export declare class PageTranslation {
  private constructor();
  /** Resolves when the blocks in view at the start are translated; rejects if the model cannot load. */
  readonly ready: Promise<void>;
  /** Blocks translated, and blocks found so far (lazy ones out of view included). */
  readonly progress: { translated: number; total: number };
  /** Resolves when no block waits for a request (lazy blocks out of view do not count). */
  idle(): Promise<void>;
  /** Nothing more is translated; what is translated stays. */
  stop(): void;
  /** Stops, and gives back the original DOM exactly: nodes, text, attributes, `lang`. */
  restore(): void;
  /** `hook` runs after restore(). */
  onRestore(hook: () => void): void;
}

/**
 * Translates `root`'s content (itself included) in place: blocks grouped as Firefox groups
 * them, inline elements moved (not re-created) to where the cross-attention puts their
 * words, `translate="no"`, code, scripts, styles, editable content and text already in the
 * target language left as they are.
 */
export declare function translateElement(root: Element, options: TranslateElementOptions): PageTranslation;

/** The whole document, its `lang` set to the target while translated. */
export declare function translateDocument(options: TranslateElementOptions, doc?: Document): PageTranslation;

