//! Greedy and beam search (§6.1) over the GPU decoder's steps, with the constrained
//! decoding of parsing (§6.3): each row's allowed tokens go to the GPU as a bit mask and
//! are applied before the top-k.

use transduce::decode::{
    self, BeamSearch, Constraint, DecodeOptions, Hypothesis, RowView, search_mask,
};
use transduce::tokenizer::BOS;
use transduce::{Error, Result};

use crate::GpuModel;
use crate::shaders::MAX_KEYS;
use crate::workspace::{
    Candidate, Counts, GREEDY_GROUP, Input, NO_LIMIT, NONE, Row, Shape, Workspace,
};

/// A batch's decoding on the GPU: its workspace and counters.
struct Run<'a> {
    model: &'a GpuModel,
    ws: Workspace,
    counts: Counts,
    vocab: usize,
}

impl<'a> Run<'a> {
    /// Checks the sources, makes (or reuses) the workspace and runs the encoder.
    fn start(
        model: &'a GpuModel,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
        k: usize,
    ) -> Result<(Run<'a>, Vec<usize>)> {
        options.validate()?;
        let c = &model.resident.config;
        decode::check_sources(c, sources)?;
        decode::check_focus(c, constraint)?;
        let limits: Vec<usize> = sources
            .iter()
            .map(|s| decode::max_output_len(c, s.len(), options))
            .collect();
        // Output limits count the caller's source; the encoder reads it with EOS where the
        // model's sources end with it.
        let sources = c.source_rows(sources);
        let sources = &sources[..];
        let cap = limits.iter().copied().max().unwrap_or(1);
        let longest = sources.iter().map(Vec::len).max().unwrap_or(1);
        if cap > MAX_KEYS || longest > MAX_KEYS {
            return Err(Error::Input(format!(
                "the GPU decoder attends over at most {MAX_KEYS} positions; this batch needs \
                 {}: decode it on the CPU",
                cap.max(longest)
            )));
        }
        let shape = Shape {
            sources: sources.len(),
            source_rows: sources.iter().map(Vec::len).sum(),
            rows: sources.len() * options.beam.max(1),
            cap,
            k,
            positions: cap.max(longest),
        };
        let ws = model.take_workspace(shape)?;
        let mut run = Run {
            model,
            ws,
            counts: Counts::default(),
            vocab: c.vocab_size,
        };
        run.ws.encode(&model.resident, sources, &mut run.counts);
        Ok((run, limits))
    }

    /// One step over `views` (sentence, prefix, length limit per row), feeding `last`;
    /// `parents[r]` is the previous step's row that row r continues.
    async fn step(
        &mut self,
        t: usize,
        views: &[RowView<'_>],
        last: &[u32],
        parents: &[usize],
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Candidate>> {
        let focus = if self.model.resident.config.word_focus {
            decode::focus_rows(constraint, views.iter().map(|v| (v.sentence, v.prefix)))
        } else {
            None
        };
        let rows: Vec<Row> = views
            .iter()
            .enumerate()
            .map(|(r, v)| Row {
                token: last[r],
                src: v.sentence as u32,
                pos: t as u32,
                parent: parents[r] as u32,
                focus: focus.as_ref().map_or(-1, |f| f[r]),
                limit: NO_LIMIT,
            })
            .collect();
        let masks: Vec<Option<Vec<bool>>> = views
            .iter()
            .map(|&v| search_mask(constraint, v, self.vocab))
            .collect();
        let words = self.ws.words();
        let bits = if masks.iter().all(Option::is_none) {
            Vec::new()
        } else {
            let mut bits = vec![u32::MAX; views.len() * words];
            for (r, mask) in masks.iter().enumerate() {
                if let Some(mask) = mask {
                    let row = &mut bits[r * words..(r + 1) * words];
                    row.fill(0);
                    for (id, _) in mask.iter().enumerate().filter(|(_, ok)| **ok) {
                        row[id / 32] |= 1 << (id % 32);
                    }
                }
            }
            bits
        };
        self.ws
            .step(&self.model.resident, t, &rows, &bits, &mut self.counts)
            .await
    }

    /// Greedy decoding in groups of up to [`GREEDY_GROUP`] steps, one submit and one read
    /// each, with two groups in flight: each step is fed by the GPU from the previous
    /// step's choices, and the next group is submitted before this one's candidates are
    /// read. Groups shrink to single steps as the live sentences near their expected end.
    /// Finished rows stay in the batch (their outputs are ignored) until fewer than half
    /// the rows are live; then the host waits for the group in flight and uploads the live
    /// rows alone. Same choices as the step-by-step loop: the GPU applies each row's length
    /// limit itself.
    async fn pipelined_greedy(
        &mut self,
        sources: &[Vec<u32>],
        limits: &[usize],
        penalty: decode::Penalty,
    ) -> Result<Vec<Hypothesis>> {
        let mut outputs = vec![Hypothesis::default(); sources.len()];
        let cap = self.ws.shape.cap;
        // The sentence each GPU row decodes; None once it has finished.
        let mut batch: Vec<Option<usize>> = (0..sources.len()).map(Some).collect();
        let row = |s: usize, token: u32, t: usize, parent: usize| Row {
            token,
            src: s as u32,
            pos: t as u32,
            parent: parent as u32,
            focus: -1,
            limit: limits[s] as u32,
        };
        let mut upload: Option<Vec<Row>> =
            Some((0..sources.len()).map(|s| row(s, BOS, 0, s)).collect());
        let mut in_flight = std::collections::VecDeque::new();
        let mut next_t = 0;
        let mut ahead = true;
        loop {
            // Keep two steps in flight while the batch is mostly live; a step after a
            // compaction starts from the host's rows.
            while next_t < cap && (in_flight.is_empty() || (ahead && in_flight.len() < 2)) {
                let input = match &upload {
                    Some(rows) => Input::Host(rows),
                    None => Input::Gpu(batch.len()),
                };
                // Whole groups while every live sentence is far from its expected end
                // (its source's length, plus a few), smaller ones near it: steps past the
                // last sentence's end are computed for nothing.
                let horizon = batch
                    .iter()
                    .flatten()
                    .map(|&s| sources[s].len() + 3)
                    .max()
                    .unwrap_or(0);
                let steps = (horizon.saturating_sub(next_t) / 2)
                    .clamp(1, GREEDY_GROUP)
                    .min(cap - next_t);
                let group = self.ws.submit_group(
                    &self.model.resident,
                    next_t,
                    steps,
                    input,
                    &[],
                    &mut self.counts,
                );
                upload = None;
                in_flight.push_back(group);
                next_t += steps;
            }
            let Some(group) = in_flight.pop_front() else {
                break;
            };
            let picks = self.ws.read(&self.model.resident, group).await?;
            for step in picks.chunks(batch.len()) {
                for (slot, pick) in batch.iter_mut().zip(step) {
                    let Some(s) = *slot else { continue };
                    let (token, lp) = pick.choice();
                    if !decode::greedy_extend(&mut outputs[s], token, lp, penalty) {
                        *slot = None;
                    }
                }
            }
            let live = batch.iter().flatten().count();
            if live == 0 {
                break;
            }
            ahead = 2 * live >= batch.len();
            if !ahead && in_flight.is_empty() {
                // The live rows alone, each continuing its row of the last step read.
                let t = next_t;
                let mut rows = Vec::with_capacity(live);
                let mut kept = Vec::with_capacity(live);
                for (r, slot) in batch.iter().enumerate() {
                    if let Some(s) = *slot {
                        let last = *outputs[s].tokens.last().expect("a live row has output");
                        rows.push(row(s, last, t, r));
                        kept.push(Some(s));
                    }
                }
                batch = kept;
                upload = Some(rows);
                ahead = true;
            }
        }
        Ok(outputs)
    }

    fn finish(self) {
        let mut total = self.model.counts.get();
        total += self.counts;
        self.model.counts.set(total);
        self.model.give_back(self.ws);
    }
}

impl GpuModel {
    /// The best output ids of each source: greedy for `beam <= 1`, beam search otherwise.
    pub async fn best_outputs(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Vec<u32>>> {
        Ok(decode::best_of_each(
            self.hypotheses(sources, options, constraint).await?,
        ))
    }

    /// Each source's finished hypotheses, best first: greedy's one for `beam <= 1`, beam
    /// search's (at most `beam`) otherwise.
    pub async fn hypotheses(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Vec<Hypothesis>>> {
        if options.beam <= 1 {
            Ok(self
                .greedy(sources, options, constraint)
                .await?
                .into_iter()
                .map(|h| vec![h])
                .collect())
        } else {
            self.beam_search(sources, options, constraint).await
        }
    }

    /// Greedy decoding: the most probable allowed token at every step. A row that reaches
    /// its length limit must emit EOS there; finished rows leave the batch.
    pub async fn greedy(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Hypothesis>> {
        let greedy = DecodeOptions {
            beam: 1,
            ..options.clone()
        };
        let (mut run, limits) = Run::start(self, sources, &greedy, constraint, 1)?;
        // Without a constraint or word focus, each step's input is the previous step's
        // choice, which the GPU writes itself: the next step runs while the host reads.
        if constraint.is_none() && !self.resident.config.word_focus {
            let outputs = run
                .pipelined_greedy(sources, &limits, options.penalty())
                .await;
            run.finish();
            return outputs;
        }
        let mut outputs = vec![Hypothesis::default(); sources.len()];
        let mut active: Vec<usize> = (0..sources.len()).collect();
        let mut last = vec![BOS; sources.len()];
        let mut parents: Vec<usize> = (0..sources.len()).collect();
        let mut t = 0;
        while !active.is_empty() {
            let views: Vec<RowView> = active
                .iter()
                .enumerate()
                .map(|(index, &s)| RowView {
                    index,
                    sentence: s,
                    prefix: &outputs[s].tokens,
                    last_position: outputs[s].tokens.len() + 1 >= limits[s],
                })
                .collect();
            let picks = run.step(t, &views, &last, &parents, constraint).await;
            let picks = match picks {
                Ok(p) => p,
                Err(e) => {
                    run.finish();
                    return Err(e);
                }
            };
            let mut next_active = Vec::with_capacity(active.len());
            parents.clear();
            last.clear();
            for (r, (&s, pick)) in active.iter().zip(picks).enumerate() {
                let (token, lp) = pick.choice();
                if decode::greedy_extend(&mut outputs[s], token, lp, options.penalty()) {
                    parents.push(r);
                    next_active.push(s);
                    last.push(token);
                }
            }
            active = next_active;
            t += 1;
        }
        run.finish();
        Ok(outputs)
    }

    /// Beam search with the GNMT length penalty (§6.1): each row's 2k best extensions are
    /// ranked on the GPU, the search's bookkeeping is [`BeamSearch`]'s. Returns each
    /// sentence's finished hypotheses, best first.
    pub async fn beam_search(
        &self,
        sources: &[Vec<u32>],
        options: &DecodeOptions,
        constraint: Option<&dyn Constraint>,
    ) -> Result<Vec<Vec<Hypothesis>>> {
        let k = options.beam.max(1);
        let (mut run, limits) = Run::start(self, sources, options, constraint, 2 * k)?;
        let mut search = BeamSearch::new(limits, options)?;
        let mut last = vec![BOS; sources.len()];
        let mut parents: Vec<usize> = (0..sources.len()).collect();
        let mut t = 0;
        while !search.is_done() {
            let views = search.row_views();
            let candidates = match run.step(t, &views, &last, &parents, constraint).await {
                Ok(c) => c,
                Err(e) => {
                    run.finish();
                    return Err(e);
                }
            };
            drop(views);
            let per_row = 2 * k;
            (parents, last) = search.advance(|row, beam, base, n, out| {
                let ranked = &candidates[row.index * per_row..(row.index + 1) * per_row];
                for c in ranked.iter().take(n) {
                    if c.id == NONE || !c.log_prob.is_finite() {
                        break;
                    }
                    out.push((base + c.log_prob as f64, beam, c.id));
                }
            });
            t += 1;
        }
        run.finish();
        Ok(search.finish())
    }
}
