//! The page's cores: a rayon pool whose threads are Web Workers over this module's shared
//! memory (wasm threads), in the module built with `threads`
//! (`scripts/build/threads-wasm.sh`: atomics, bulk memory, a shared memory).
//!
//! The worker (web/worker.js) loads that module only where the page is cross-origin
//! isolated (`SharedArrayBuffer` needs it), calls [`start_threads`], then starts one helper
//! worker (web/thread.js) per pool thread over the same module and memory; each calls
//! [`run_thread`] and serves the pool from then on. A batch of sentences on the CPU is then
//! split over the pool as `transduce translate --threads` splits a file's batches: each
//! thread decodes a smaller batch with the host decoder, and the outputs are the same as
//! one batch's (every search is batch-invariant).

use std::sync::{Mutex, OnceLock, mpsc};

use rayon::prelude::*;
use wasm_bindgen::prelude::*;

use transduce::decode::{self, DecodeOptions};
use transduce::host::HostModel;

/// The pool's threads waiting for a helper worker to run them.
static WAITING: Mutex<Option<mpsc::Receiver<rayon::ThreadBuilder>>> = Mutex::new(None);

/// The pool, once started. Not rayon's global pool: building that waits for every thread
/// to run, and the helper workers only start after this call returns.
static POOL: OnceLock<rayon::ThreadPool> = OnceLock::new();

/// Starts a pool of `threads` threads (the worker passes `navigator.hardwareConcurrency`);
/// each becomes real when a helper worker calls [`run_thread`]. Once per module.
#[wasm_bindgen(js_name = startThreads)]
pub fn start_threads(threads: usize) -> Result<(), JsError> {
    if threads == 0 {
        return Err(JsError::new("a pool needs at least one thread"));
    }
    if POOL.get().is_some() {
        return Err(JsError::new("the threads are already started"));
    }
    let (send, receive) = mpsc::channel();
    *WAITING.lock().unwrap_or_else(|e| e.into_inner()) = Some(receive);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .thread_name(|i| format!("transduce-{i}"))
        .spawn_handler(move |thread| {
            send.send(thread)
                .map_err(|_| std::io::Error::other("the pool's queue is closed"))
        })
        .build()
        .map_err(|e| JsError::new(&format!("cannot start {threads} threads: {e}")))?;
    POOL.set(pool)
        .map_err(|_| JsError::new("the threads are already started"))
}

/// Runs one of the pool's threads on the calling helper worker; returns only when the pool
/// ends (never, while the page lives). The helper must have registered the relaxed-SIMD
/// kernel first, if the main worker did ([`crate::use_relaxed_simd`] is per thread).
#[wasm_bindgen(js_name = runThread)]
pub fn run_thread() -> Result<(), JsError> {
    let thread = WAITING
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .ok_or_else(|| JsError::new("runThread before startThreads"))?
        .recv()
        .map_err(|_| JsError::new("every thread of the pool is already running"))?;
    thread.run();
    Ok(())
}

/// Threads the CPU decoder uses: the pool's, or 1 before it starts.
#[wasm_bindgen(js_name = decodeThreads)]
pub fn decode_threads() -> usize {
    POOL.get().map_or(1, rayon::ThreadPool::current_num_threads)
}

/// The best output of each source on the host decoder, the batch shared out over the pool
/// (`None` when there is no pool or one source is all there is: the caller decodes it).
pub fn best_outputs(
    host: &HostModel,
    sources: &[Vec<u32>],
    options: &DecodeOptions,
) -> Option<transduce::Result<Vec<Vec<u32>>>> {
    let pool = POOL.get()?;
    let threads = pool.current_num_threads();
    if threads < 2 || sources.len() < 2 {
        return None;
    }
    // Longest first, dealt in turn: each thread gets a like mix of lengths, so none is
    // left decoding the long sentences alone (a batch lasts as long as its longest output).
    let mut order: Vec<usize> = (0..sources.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(sources[i].len()));
    let shares: Vec<Vec<usize>> = (0..threads.min(sources.len()))
        .map(|t| order.iter().copied().skip(t).step_by(threads).collect())
        .collect();
    let decoded: transduce::Result<Vec<Vec<Vec<u32>>>> = pool.install(|| {
        shares
            .par_iter()
            .map(|share| {
                let batch: Vec<Vec<u32>> = share.iter().map(|&i| sources[i].clone()).collect();
                decode::best_outputs(host, &batch, options, None)
            })
            .collect()
    });
    Some(decoded.map(|decoded| {
        let mut outputs = vec![Vec::new(); sources.len()];
        for (share, outs) in shares.iter().zip(decoded) {
            for (&i, out) in share.iter().zip(outs) {
                outputs[i] = out;
            }
        }
        outputs
    }))
}
