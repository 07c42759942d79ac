// Types of the transduce browser API (transduce.js).

export type Backend = "auto" | "webgpu" | "cpu";

export interface LoadOptions {
  /**
   * "auto" (default): on a hardware adapter both backends are timed once per adapter and
   * model (cached), and each request goes to the faster for its size; otherwise the CPU.
   */
  backend?: Backend;
  /**
   * In "auto", measure even a software adapter or Firefox's WebGPU (default false). An
   * array measures on requests of those many sentences only (default `[1, 8]`: one
   * sentence and a paragraph); `[1]` measures fastest.
   */
  calibrate?: boolean | number[];
  /**
   * Download progress of each bundle file (`url`: the file's, for a bundle folder; a
   * channel's files too). A model by name reports its files by name, without `url`, then
   * `converting: true` while the browser converts it.
   */
  onProgress?: (p: { file: string; url?: string; loaded: number; total: number; cached: boolean; converting?: boolean }) => void;
  /** Keep bundle files in the Cache API (default true). */
  cache?: boolean;
  /**
   * int8 products with relaxed-SIMD dot products where the browser has them (default
   * true); false keeps SIMD128 everywhere: the same outputs, slower.
   */
  relaxedSimd?: boolean;
  /** Where worker.js lives (default: next to transduce.js). */
  workerUrl?: string | URL;
  /**
   * A translator the other way that checks every translation the beam finished
   * (noisy-channel reranking, Yee et al. 2019; as `transduce translate --channel`). It
   * decodes on the CPU; each translation takes about twice as long.
   */
  channel?: string | URL | BundleBytes;
  /** Its score's weight (default: the `channel.weight` in the model's config.json). */
  channelWeight?: number;
  /** Load the stored adaptation of this model where there is one (default true). */
  adapted?: boolean;
  /** Where `hf:ORG/NAME` names come from (default "https://huggingface.co"). */
  hub?: string;
  /** How a model loaded by name is converted: "int8" (default), "f16" or "f32". */
  weights?: "int8" | "f16" | "f32";
  /**
   * A model by name whose name and card do not give its languages (a fine-tuned model
   * under its author's own name): state them. They win over the name's and the card's.
   */
  languages?: { source: string; target: string };
  /**
   * A Hugging Face access token, for a gated or private model by name. Sent to the hub
   * only: the browser drops it on the redirect to the CDN (another origin), and it is
   * never stored.
   */
  token?: string;
}

/**
 * What went wrong, where known (models by name; hub.js lists them): the hub's and the
 * download's codes, then the import's own (crates/transduce-import), and "quota" as a
 * warning. Any other string is a code a later version added.
 */
export type ErrorCode =
  | "bad-name" | "options" | "not-found" | "missing-file" | "unreachable" | "rate-limited" | "http"
  | "truncated" | "corrupt" | "bad-listing" | "moved" | "gated" | "import" | "unsupported" | "no-licence"
  | "no-languages" | "quota" | (string & {});

/** A model loaded by name (`hf:ORG/NAME`). */
export interface HubModel {
  /** The name pinned to the commit it was converted from: "hf:ORG/NAME@COMMIT". */
  reference: string;
  /** The model card (README.md): its licence and the credit it asks for. */
  card: string;
  /** From this browser's cache (offline: the hub was unreachable). */
  cached: boolean;
  offline: boolean;
  /** What could not be done but did not stop the load, e.g. { code: "quota" }. */
  warning?: { code: ErrorCode; message: string };
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
  /** The line of the input it came from (0 first): each line is split into sentences. */
  line: number;
}

export interface TranslateResult {
  text: string;
  sentences: SentenceTranslation[];
  /** Whether the reverse model reranked the translations. */
  channel: boolean;
  ms: number;
  /** Where it ran, on what, and why (auto's measurement, a lost GPU). */
  backend: "webgpu" | "cpu";
  device: string;
  why?: string;
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
  /** Where it ran, on what, and why (auto's measurement, a lost GPU). */
  backend: "webgpu" | "cpu";
  device: string;
  why?: string;
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

/** How loaded weights were adapted (config.json's `adaptation`). */
export interface Adaptation {
  /** The visitor's pairs trained on (all adaptations of this model together). */
  pairs: number;
  /** General pairs mixed in. */
  replay: number;
  steps: number;
  learning_rate: number;
  seed: number;
  /** sha256 of the shipped weights this adaptation started from. */
  from_sha256: string;
}

/** After each step. */
export interface AdaptProgress {
  /** Steps done. */
  step: number;
  steps: number;
  /** The step's label-smoothed loss per target token. */
  loss: number;
  elapsedMs: number;
  /** Estimated from the steps so far. */
  remainingMs: number;
}

export interface AdaptOptions {
  onProgress?: (progress: AdaptProgress) => void;
  /** Aborting stops after the current step; the model and the stored weights stay as they were. */
  signal?: AbortSignal;
  /** Optimizer steps (default 30). */
  steps?: number;
  /** Adam's constant learning rate (default 1e-4). */
  learningRate?: number;
  /** Your pairs per step (default 4). */
  pairsPerStep?: number;
  /** General pairs per step (default 12). */
  replayPerStep?: number;
  /** Fixes batches and dropout (default 1): the same pairs and seed give the same weights. */
  seed?: number;
  /** General pairs (one `source\ttranslation` a line) instead of the bundle's replay.tsv; false: none. */
  replay?: string | false;
  /** Keep the result in the browser for this model, found by later loads (default true). */
  store?: boolean;
}

export interface AdaptResult {
  adaptation: Adaptation;
  /** Whether it was stored (false where the browser has no Cache API, or store: false). */
  stored: boolean;
  storeError?: string;
  ms: number;
}

export class TransduceError extends Error {
  /** What went wrong (null where no code applies). */
  readonly code: ErrorCode | null;
  /** The model's file at fault (e.g. "config.json"), or null. */
  readonly file: string | null;
  /**
   * With code "rate-limited": the seconds the hub asks to wait, where its CORS answer lets a
   * page read them (huggingface.co's does not: null there).
   */
  readonly retryAfter?: number | null;
}

export class Transduce {
  /** A bundle folder URL, its bytes, or an OPUS-MT model by name: "hf:ORG/NAME[@REVISION]". */
  static load(source: string | URL | BundleBytes, options?: LoadOptions): Promise<Transduce>;
  /** For a model loaded by name: where it came from, its card, cache state. */
  readonly hub?: HubModel;
  readonly backend: "webgpu" | "cpu";
  readonly device: string;
  readonly fallbackReason?: string;
  /**
   * The CPU decoder's threads: navigator.hardwareConcurrency where the page is cross-origin
   * isolated (COOP same-origin + COEP require-corp), else 1 with the reason.
   */
  readonly threads: { threads: number; reason?: string };
  /** Why the last request ran where it did. */
  readonly why?: string;
  /** auto's measurement, when it ran: milliseconds per request size on each backend. */
  readonly calibration?: {
    ms: Record<string, { cpu: number; webgpu: number }>;
    gpuFrom: number | null;
    reason: string;
    adapter: string;
    cached?: boolean;
  };
  readonly config: any;
  /** A model of many targets: its target-language codes (`[">>deu<<", ">>nld<<"]`); else []. */
  readonly languageTokens: string[];
  readonly task: "translate" | "parse";
  /** The reverse model loaded with `channel`: its config.json and the weight in use. */
  readonly channel?: { config: any; weight: number };
  /** How the loaded weights were adapted, or null for the shipped ones. */
  readonly adaptation: Adaptation | null;
  /**
   * Fine-tunes the translator on your own pairs, in the worker, on the CPU: nothing leaves
   * the machine. `pairs`: text, one `source<TAB>translation` a line, or [source, translation]
   * lists. The result decodes from then on and is stored for this model (see `store`).
   */
  adapt(pairs: string | [string, string][], options?: AdaptOptions): Promise<AdaptResult>;
  /** The shipped weights again; the stored adaptation is deleted. */
  reset(): Promise<void>;
  translate(
    text: string,
    options?: DecodeOptions & {
      /** Rerank with the reverse model (default: true when one was loaded). */
      channel?: boolean;
      /**
       * A model of many targets: the target's code (e.g. "nld"), put before every sentence
       * as `>>nld<<`. An error names the codes the model has (see `languageTokens`).
       */
      to?: string;
      /** Text put before every sentence (e.g. ">>nld<< "); not with `to`. */
      prefix?: string;
      onPartial?: (p: { index: number; count: number; sentence: SentenceTranslation; text: string }) => void;
    },
  ): Promise<TranslateResult>;
  parse(text: string, options?: DecodeOptions & { constrained?: boolean }): Promise<ParseResult>;
  attention(sentence: SentenceTranslation): Promise<Attention>;
  /**
   * The worker's wasm memory in bytes (a wasm memory never shrinks: the most the model has
   * needed at once, its load included).
   */
  memory(): Promise<{ wasmBytes: number; modules: { cpu?: number; webgpu?: number; adapt?: number } }>;
  /** Destroys the GPU device (as a browser may): later requests run on the CPU. */
  loseDevice(): Promise<void>;
  free(): void;
}

export default Transduce;
