// Types of the transduce browser API (transduce.js).

export type Backend = "auto" | "webgpu" | "cpu";

export interface LoadOptions {
  /** "auto" (default): WebGPU on a hardware adapter, otherwise the CPU. */
  backend?: Backend;
  /** Download progress of each bundle file. */
  onProgress?: (p: { file: string; loaded: number; total: number; cached: boolean }) => void;
  /** Keep bundle files in the Cache API (default true). */
  cache?: boolean;
  /** Where worker.js lives (default: next to transduce.js). */
  workerUrl?: string | URL;
}

export interface BundleBytes {
  config: ArrayBuffer | Uint8Array;
  tokenizer: ArrayBuffer | Uint8Array;
  weights: ArrayBuffer | Uint8Array;
}

export interface DecodeOptions {
  /** Beam size; 1 is greedy. Default: the bundle's (4 for translation, 21 for parsing). */
  beam?: number;
  /** Length-penalty exponent α. */
  alpha?: number;
  /** Output may be this many tokens longer than the input. */
  maxExtra?: number;
}

export interface SentenceTranslation {
  source: string;
  target: string;
  sourceTokens: string[];
  targetTokens: string[];
  sourceIds: number[];
  targetIds: number[];
}

export interface TranslateResult {
  text: string;
  sentences: SentenceTranslation[];
  ms: number;
}

export interface TreeNode {
  /** Constituent label, or the POS tag (`XX`) of a word. */
  label: string;
  word?: string;
  children?: TreeNode[];
}

export interface ParseResult {
  words: string[];
  tree: TreeNode;
  /** The tree in Penn Treebank brackets. */
  bracketed: string;
  /** False when the unconstrained output had to be repaired. */
  wellFormed: boolean;
  ms: number;
}

export interface AttentionLayer {
  heads: number;
  rows: number;
  cols: number;
  /** Row-major [head][row][col]. */
  data: number[];
}

export interface Attention {
  sourceTokens: string[];
  /** Output tokens, `</s>` last. */
  targetTokens: string[];
  encoderSelf: AttentionLayer[];
  decoderSelf: AttentionLayer[];
  cross: AttentionLayer[];
}

export class TransduceError extends Error {}

export class Transduce {
  static load(source: string | URL | BundleBytes, options?: LoadOptions): Promise<Transduce>;
  readonly backend: "webgpu" | "cpu";
  readonly device: string;
  readonly fallbackReason?: string;
  readonly config: any;
  readonly task: "translate" | "parse";
  translate(
    text: string,
    options?: DecodeOptions & {
      onPartial?: (p: { index: number; count: number; sentence: SentenceTranslation; text: string }) => void;
    },
  ): Promise<TranslateResult>;
  parse(text: string, options?: DecodeOptions & { constrained?: boolean }): Promise<ParseResult>;
  attention(sentence: SentenceTranslation): Promise<Attention>;
  free(): void;
}

export default Transduce;
