//! The encoder pass and the cached decoder step of [`HostModel`] (§3.1, §6.1).

use super::{HostModel, add_norm, attend, feed_forward, rows};
use crate::error::{Error, Result};

/// Scratch buffers reused across layers and steps.
#[derive(Clone, Debug, Default)]
struct Scratch {
    qkv: Vec<f32>,
    context: Vec<f32>,
    projected: Vec<f32>,
    hidden: Vec<f32>,
    scores: Vec<f32>,
    /// Where each position's keys and values start in a layer's cache, for one row.
    at: Vec<usize>,
}

/// An incremental decode of a batch on the host: the encoder's output and per-layer
/// caches. Row r of the batch decodes source `row_source[r]`; beams of one source share
/// its encoder–decoder keys and values.
#[derive(Clone, Debug)]
pub struct HostState {
    /// First encoder row and length of each source (sources are stored unpadded).
    offsets: Vec<usize>,
    lengths: Vec<usize>,
    /// Encoder output `[Σ lengths, d_model]`, kept for word focus only.
    memory: Option<Vec<f32>>,
    /// Per decoder layer: the sources' keys and values, `[Σ lengths, h·d_k + h·d_v]`.
    cross: Vec<Vec<f32>>,
    row_source: Vec<usize>,
    /// Per decoder layer: keys and values of the positions fed so far,
    /// `[slots, capacity, h·d_k + h·d_v]`. At step t row r writes position t of slot r;
    /// where its earlier positions are is in `ancestry`.
    own: Vec<Vec<f32>>,
    slots: usize,
    capacity: usize,
    /// `[rows, capacity]`: the slot holding each fed position of each row. Re-ranking beams
    /// (§6.1) copies these indices, not the cached keys and values.
    ancestry: Vec<u32>,
    /// Target positions already fed.
    position: usize,
    /// The most positions the search will feed ([`HostState::limit_positions`]): the
    /// caches' capacity doubles up to it, not past it.
    limit: usize,
    scratch: Scratch,
    /// A step's output buffer given back by the search ([`HostState::recycle`]): the next
    /// step writes its `[rows, vocab]` scores there instead of into fresh pages.
    spare: Vec<f32>,
}

impl HostState {
    /// Takes the buffer last given back (empty if none).
    pub fn take_spare(&mut self) -> Vec<f32> {
        std::mem::take(&mut self.spare)
    }

    /// Gives a step's output buffer back for the next step.
    pub fn recycle(&mut self, buffer: Vec<f32>) {
        self.spare = buffer;
    }

    /// Tells the state that no row will be fed more than `positions` tokens (the search's
    /// longest output limit), so its caches grow to that and no further: doubling alone
    /// took a 70-token limit to 128 positions, 45% of the caches never written.
    pub fn limit_positions(&mut self, positions: usize) {
        self.limit = positions.max(1);
    }

    /// Rows in the batch.
    pub fn rows(&self) -> usize {
        self.row_source.len()
    }

    /// Keeps (or repeats) rows: row i of the result is row `parents[i]` now. Only the
    /// rows' ancestry moves (`position` indices a row); cached keys and values stay put.
    pub fn select(&mut self, parents: &[usize]) {
        let (t, stride) = (self.position, self.capacity);
        let mut ancestry = vec![0u32; parents.len() * stride];
        for (i, &p) in parents.iter().enumerate() {
            ancestry[i * stride..i * stride + t]
                .copy_from_slice(&self.ancestry[p * stride..p * stride + t]);
        }
        self.ancestry = ancestry;
        self.row_source = parents.iter().map(|&p| self.row_source[p]).collect();
    }
}

impl HostModel {
    /// Runs the encoder over `sources` (ids, no padding needed) and opens a decode with
    /// one row per source.
    pub fn start(&self, sources: &[Vec<u32>]) -> Result<HostState> {
        let c = &self.config;
        // EOS closes each source of models that read it ([`crate::config::ModelConfig::source_row`]).
        let sources = c.source_rows(sources);
        let sources = &sources[..];
        let d = c.d_model;
        let (hk, hv) = (c.n_heads * c.d_k, c.n_heads * c.d_v);
        let vocab = c.vocab_size as u32;
        let mut offsets = Vec::with_capacity(sources.len());
        let mut total = 0;
        for (i, s) in sources.iter().enumerate() {
            if let Some(bad) = s.iter().find(|&&id| id >= vocab) {
                return Err(Error::Input(format!(
                    "source {i} has token id {bad}, outside the vocabulary of {vocab}"
                )));
            }
            offsets.push(total);
            total += s.len();
        }
        let lengths: Vec<usize> = sources.iter().map(Vec::len).collect();
        let table = self.src_embedding.as_ref().unwrap_or(&self.embedding);
        let mut x = Vec::with_capacity(total * d);
        for s in sources {
            self.embed(table, self.src_positions.as_deref(), s, 0, &mut x);
        }
        let mut scratch = Scratch::default();
        for layer in &self.encoder {
            let Scratch {
                qkv,
                context,
                projected,
                hidden,
                scores,
                ..
            } = &mut scratch;
            layer.qkv.apply(&x, total, qkv);
            let width = 2 * hk + hv;
            context.clear();
            context.resize(total * hv, 0.0);
            for (&start, &len) in offsets.iter().zip(&lengths) {
                let rows = &qkv[start * width..(start + len) * width];
                for p in 0..len {
                    attend(
                        &rows[p * width..p * width + hk],
                        rows,
                        hk,
                        |j| hk + j * width,
                        len,
                        c,
                        scores,
                        &mut context[(start + p) * hv..(start + p + 1) * hv],
                    );
                }
            }
            layer.o.apply(context, total, projected);
            add_norm(&mut x, projected, &layer.attn_norm);
            feed_forward(
                &x,
                total,
                (&layer.fc1, &layer.fc2, c.activation),
                hidden,
                projected,
            );
            add_norm(&mut x, projected, &layer.ffn_norm);
        }
        let cross = self
            .decoder
            .iter()
            .map(|layer| {
                let mut kv = Vec::new();
                layer.cross_kv.apply(&x, total, &mut kv);
                kv
            })
            .collect();
        Ok(HostState {
            offsets,
            lengths,
            memory: self.config.word_focus.then_some(x),
            cross,
            row_source: (0..sources.len()).collect(),
            own: vec![Vec::new(); self.decoder.len()],
            slots: 0,
            capacity: 0,
            limit: usize::MAX,
            ancestry: Vec::new(),
            position: 0,
            scratch,
            spare: Vec::new(),
        })
    }

    /// Feeds one token per row, appending its keys and values to the caches, and writes
    /// the next-token log-probabilities `[rows, vocab]` to `out`. `focus` gives each
    /// row's source position for word-focus models (negative or past the source: none).
    pub fn step(
        &self,
        state: &mut HostState,
        tokens: &[u32],
        focus: Option<&[i32]>,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        self.step_raw(state, tokens, focus, out)?;
        out.chunks_exact_mut(self.config.vocab_size)
            .for_each(rows::log_softmax);
        Ok(())
    }

    /// [`HostModel::step`] up to the logits `[rows, vocab]` (no softmax): for a search
    /// that normalizes each row where it reads it.
    pub fn step_raw(
        &self,
        state: &mut HostState,
        tokens: &[u32],
        focus: Option<&[i32]>,
        out: &mut Vec<f32>,
    ) -> Result<()> {
        let c = &self.config;
        let d = c.d_model;
        let (hk, hv) = (c.n_heads * c.d_k, c.n_heads * c.d_v);
        let rows = state.rows();
        if tokens.len() != rows {
            return Err(Error::Input(format!(
                "{} tokens fed to a batch of {rows} rows",
                tokens.len()
            )));
        }
        if let Some(bad) = tokens.iter().find(|&&t| t as usize >= c.vocab_size) {
            return Err(Error::Input(format!(
                "token id {bad} is outside the vocabulary"
            )));
        }
        let t = state.position;
        let width = hk + hk + hv;
        let kv_width = hk + hv;
        if t >= state.capacity || rows > state.slots {
            let capacity = if t >= state.capacity {
                (2 * state.capacity).max(16).min(state.limit.max(t + 1))
            } else {
                state.capacity
            };
            grow(state, kv_width, rows.max(state.slots), capacity);
        }
        let per_slot = state.capacity * kv_width;
        for r in 0..rows {
            state.ancestry[r * state.capacity + t] = r as u32;
        }

        let mut x = Vec::with_capacity(rows * d);
        for &token in tokens {
            self.embed(
                &self.embedding,
                self.tgt_positions.as_deref(),
                &[token],
                t,
                &mut x,
            );
        }
        if let (Some(memory), Some(focus)) = (&state.memory, focus) {
            for (r, &f) in focus.iter().enumerate() {
                let s = state.row_source[r];
                if f >= 0 && (f as usize) < state.lengths[s] {
                    let m = (state.offsets[s] + f as usize) * d;
                    for (x, m) in x[r * d..(r + 1) * d].iter_mut().zip(&memory[m..m + d]) {
                        *x += m;
                    }
                }
            }
        }

        for (layer, (cache, cross)) in self
            .decoder
            .iter()
            .zip(state.own.iter_mut().zip(&state.cross))
        {
            let Scratch {
                qkv,
                context,
                projected,
                hidden,
                scores,
                at,
            } = &mut state.scratch;
            // Masked self-attention: the new position sees itself and every earlier one.
            layer.qkv.apply(&x, rows, qkv);
            context.clear();
            context.resize(rows * hv, 0.0);
            for r in 0..rows {
                let row = &qkv[r * width..(r + 1) * width];
                cache[r * per_slot + t * kv_width..][..kv_width].copy_from_slice(&row[hk..]);
                let ancestry = &state.ancestry[r * state.capacity..][..t + 1];
                at.clear();
                at.extend(
                    ancestry
                        .iter()
                        .enumerate()
                        .map(|(j, &slot)| slot as usize * per_slot + j * kv_width),
                );
                attend(
                    &row[..hk],
                    cache,
                    hk,
                    |j| at[j],
                    t + 1,
                    c,
                    scores,
                    &mut context[r * hv..(r + 1) * hv],
                );
            }
            layer.o.apply(context, rows, projected);
            add_norm(&mut x, projected, &layer.self_norm);

            // Encoder–decoder attention over the row's source.
            layer.cross_q.apply(&x, rows, qkv);
            for r in 0..rows {
                let s = state.row_source[r];
                let first = state.offsets[s] * kv_width;
                attend(
                    &qkv[r * hk..(r + 1) * hk],
                    cross,
                    hk,
                    |j| first + j * kv_width,
                    state.lengths[s],
                    c,
                    scores,
                    &mut context[r * hv..(r + 1) * hv],
                );
            }
            layer.cross_o.apply(context, rows, projected);
            add_norm(&mut x, projected, &layer.cross_norm);

            feed_forward(
                &x,
                rows,
                (&layer.fc1, &layer.fc2, c.activation),
                hidden,
                projected,
            );
            add_norm(&mut x, projected, &layer.ffn_norm);
        }
        state.position += 1;

        self.project(&x, rows, out);
        Ok(())
    }
}

/// Re-lays the self-attention caches out as `slots` slots of `capacity` positions, and
/// the ancestry with the new row stride.
fn grow(state: &mut HostState, kv_width: usize, slots: usize, capacity: usize) {
    let used = state.position * kv_width;
    let old = state.capacity * kv_width;
    for cache in &mut state.own {
        let mut bigger = vec![0.0; slots * capacity * kv_width];
        if used > 0 {
            for r in 0..state.slots {
                bigger[r * capacity * kv_width..][..used]
                    .copy_from_slice(&cache[r * old..][..used]);
            }
        }
        *cache = bigger;
    }
    let rows = state.row_source.len();
    let t = state.position;
    let mut ancestry = vec![0u32; rows * capacity];
    for r in 0..rows {
        ancestry[r * capacity..r * capacity + t]
            .copy_from_slice(&state.ancestry[r * state.capacity..r * state.capacity + t]);
    }
    state.ancestry = ancestry;
    state.slots = slots;
    state.capacity = capacity;
}
