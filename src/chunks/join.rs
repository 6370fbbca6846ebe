//! Joining a loaded part of the primary deserializer with the sequences of the same keys in
//! the joined deserializers (composite readers).
//!
//! A joined deserializer's chunks are never loaded whole: for each primary part, the
//! sequences it needs are sorted by position, cut into runs of consecutive sequences, and
//! each run is read and parsed with one positional read by the joined deserializer's own
//! [`ChunkLoader`] (which checks it against that deserializer's index, as for any part). When
//! the files share their order a part needs one read per joined deserializer; in any other
//! order each sequence is read alone. Memory is the part being joined, whatever the order of
//! the keys or the size of the joined files, and the joined part is what the chunk cache
//! holds. A primary sequence whose key a joined deserializer lacks, or whose joined sequence
//! is invalid, becomes an invalid sequence of the part; the diagnostics of joined sequences
//! name their own file and line ([`Diagnostic::joined_at`]).

use std::ops::Range;

use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::config::ReaderConfig;
use crate::diag::{Diagnostic, JoinedPosition, Severity};
use crate::index::{CorpusIndex, JoinedIndex, NO_MATCH};
use crate::parser::{Element, InvalidSequence, ParsedSequences, SequenceInfo, MAX_COLUMN_ENTRIES};

/// [`JoinedLoader::slots`] value of a primary sequence with nothing staged.
const NO_SLOT: u32 = u32::MAX;

/// One joined deserializer's loader and the sequences it staged for the current part.
struct JoinedLoader<T> {
    /// Reads runs of its sequences, checked against its own index.
    loader: ChunkLoader<T>,
    /// Its inputs among the reader's.
    inputs: Range<usize>,
    /// The last run read.
    run: ParsedChunk<T>,
    /// Its sequences for the current part, in the order they were read.
    staged: ParsedSequences<T>,
    /// Per valid primary sequence of the part: its sequence in `staged`, or [`NO_SLOT`].
    slots: Vec<u32>,
    /// Most samples and stored values a column of `staged` holds ([`MAX_COLUMN_ENTRIES`];
    /// lowered in tests).
    max_entries: usize,
}

/// Joins parsed primary parts with the joined deserializers' sequences.
pub(super) struct Joiner<T> {
    joined: Vec<JoinedLoader<T>>,
    /// The primary part as parsed (primary inputs only).
    pub(super) primary: ParsedChunk<T>,
    /// What the joins of the current part found.
    outcome: PartOutcome,
}

/// What joining one primary part found, per valid primary sequence of the part.
#[derive(Default)]
struct PartOutcome {
    /// Its first error from a join, if it failed.
    failed: Vec<Option<Diagnostic>>,
    /// The most counted lines of its deserializers.
    counted: Vec<u32>,
    /// The diagnostics of the joined sequences, filed under their primary sequence's line.
    found: Vec<Diagnostic>,
}

impl<T: Element> Joiner<T> {
    /// A joiner for the joined deserializers of `index`, configured by `config` (the whole
    /// composite configuration).
    pub(super) fn new(index: &CorpusIndex, config: &ReaderConfig) -> Self {
        let joined = index
            .joined
            .iter()
            .enumerate()
            .map(|(j, joined)| {
                let own = config.deserializer_config(j + 1);
                JoinedLoader {
                    loader: ChunkLoader::new(std::sync::Arc::clone(&joined.index), &own),
                    inputs: config.deserializer_inputs(j + 1),
                    run: ParsedChunk::new(&own.inputs),
                    staged: ParsedSequences::new(&own.inputs),
                    slots: Vec::new(),
                    max_entries: MAX_COLUMN_ENTRIES,
                }
            })
            .collect();
        Joiner {
            joined,
            primary: ParsedChunk::new(&config.inputs[config.deserializer_inputs(0)]),
            outcome: PartOutcome::default(),
        }
    }

    /// Removes the index caches of the joined deserializers' files named `name`; returns
    /// those it removed (see [`ChunkLoader::load_part`]).
    pub(super) fn forget_index_caches(&self, name: &str) -> Vec<std::path::PathBuf> {
        self.joined
            .iter()
            .flat_map(|j| j.loader.forget_index_caches(name))
            .collect()
    }

    /// Bytes the joined deserializers' loaders have read.
    pub(super) fn bytes_read(&self) -> u64 {
        self.joined
            .iter()
            .map(|j| j.loader.counters().bytes_read)
            .sum()
    }

    /// Joins the parsed primary part in [`primary`](Self::primary) (chunk `chunk`, sequences
    /// `part` of it) into `into`, which holds every input of the reader.
    pub(super) fn join(
        &mut self,
        index: &CorpusIndex,
        chunk: u32,
        part: Range<u32>,
        into: &mut ParsedChunk<T>,
    ) -> Result<(), LoadError> {
        let ordinals = self.primary_ordinals(index, chunk, part.clone())?;
        let outcome = &mut self.outcome;
        outcome.failed.clear();
        outcome.failed.resize(ordinals.len(), None);
        outcome.counted.clear();
        let primary = &self.primary.sequences.sequences;
        outcome
            .counted
            .extend(primary.iter().map(|s| s.counted_lines));
        outcome.found.clear();
        for (j, joined_index) in index.joined.iter().enumerate() {
            self.stage(j, joined_index, &ordinals)?;
        }
        self.assemble(into);
        into.chunk = chunk;
        into.part = part;
        Ok(())
    }

    /// The index ordinal of each valid sequence of the primary part.
    fn primary_ordinals(
        &self,
        index: &CorpusIndex,
        chunk: u32,
        part: Range<u32>,
    ) -> Result<Vec<u32>, LoadError> {
        let c = index.chunk(chunk);
        let entries = &index.chunk_sequences(chunk)[part.start as usize..part.end as usize];
        let mut ordinals = Vec::with_capacity(self.primary.sequences.len());
        let mut e = 0;
        for info in &self.primary.sequences.sequences {
            while e < entries.len() && c.first_line + u64::from(entries[e].line) < info.line {
                e += 1;
            }
            if entries
                .get(e)
                .is_none_or(|entry| c.first_line + u64::from(entry.line) != info.line)
            {
                return Err(LoadError::Changed {
                    file: index.files[c.file as usize].name.clone(),
                    detail: format!("line {} holds a sequence that was not indexed", info.line),
                });
            }
            ordinals.push(c.sequences.start + part.start + e as u32);
            e += 1;
        }
        Ok(ordinals)
    }

    /// Reads the sequences of joined deserializer `j` that the part's valid primary
    /// sequences (with index `ordinals`) need, in runs, into its staging buffers; records
    /// missing keys and invalid joined sequences as failures.
    fn stage(
        &mut self,
        j: usize,
        joined_index: &JoinedIndex,
        ordinals: &[u32],
    ) -> Result<(), LoadError> {
        let jl = &mut self.joined[j];
        jl.staged.truncate(0);
        jl.slots.clear();
        jl.slots.resize(ordinals.len(), NO_SLOT);
        let primary = &self.primary.sequences.sequences;
        let outcome = &mut self.outcome;
        // (joined ordinal, primary sequence), by joined ordinal.
        let mut wanted: Vec<(u32, u32)> = Vec::with_capacity(ordinals.len());
        for (v, &ordinal) in ordinals.iter().enumerate() {
            if outcome.failed[v].is_some() {
                continue;
            }
            match joined_index.matches[ordinal as usize] {
                NO_MATCH => {
                    let info = &primary[v];
                    let error = Diagnostic::new(
                        Severity::Error,
                        info.line,
                        1,
                        format!("no sequence with key {} in {}", info.key, joined_index.name),
                    );
                    outcome.found.push(error.clone());
                    outcome.failed[v] = Some(error);
                }
                m => wanted.push((m, v as u32)),
            }
        }
        if !wanted.windows(2).all(|w| w[0].0 < w[1].0) {
            wanted.sort_unstable();
        }
        // One check of the joined files for all the runs, before their data is used.
        jl.loader.defer_checks();
        let read = read_runs(jl, &joined_index.index, &wanted, primary, outcome);
        let checked = jl.loader.check_deferred();
        read.and(checked)
    }

    /// Writes the joined part into `into`: the valid primary sequences that every join
    /// completed, with all inputs; the others among the invalid sequences, in line order;
    /// every diagnostic in line order.
    fn assemble(&mut self, into: &mut ParsedChunk<T>) {
        let primary = &mut self.primary;
        let out = &mut into.sequences;
        out.truncate(0);
        let outcome = &mut self.outcome;
        let primary_inputs = primary.sequences.columns.len();
        let all_joined = outcome.failed.iter().all(Option::is_none);
        // Columns that every sequence of the part fills in order move over whole; the others
        // get exactly the room they need (the cache counts capacity) and are copied.
        if all_joined {
            for (to, from) in out.columns.iter_mut().zip(&mut primary.sequences.columns) {
                std::mem::swap(to, from);
            }
        } else {
            for (to, from) in out.columns.iter_mut().zip(&primary.sequences.columns) {
                to.reserve_for(from);
            }
        }
        let moved: Vec<bool> = self
            .joined
            .iter_mut()
            .map(|jl| {
                let in_order = all_joined
                    && jl.staged.len() == jl.slots.len()
                    && (0..jl.slots.len()).all(|v| jl.slots[v] as usize == v);
                for (to, from) in out.columns[jl.inputs.clone()]
                    .iter_mut()
                    .zip(&mut jl.staged.columns)
                {
                    match in_order {
                        true => std::mem::swap(to, from),
                        false => to.reserve_for(from),
                    }
                }
                in_order
            })
            .collect();
        out.sequences.reserve_exact(primary.sequences.len());
        let mut joined_invalid = Vec::new();
        for (v, info) in primary.sequences.sequences.iter().enumerate() {
            if let Some(error) = &outcome.failed[v] {
                joined_invalid.push(InvalidSequence {
                    key: info.key,
                    line: info.line,
                    first_error: error.clone(),
                    valid_before: 0,
                });
                continue;
            }
            if !all_joined {
                for (to, from) in out.columns[..primary_inputs]
                    .iter_mut()
                    .zip(&primary.sequences.columns)
                {
                    to.push_sequence_of(from, v);
                }
            }
            for (jl, _) in self.joined.iter().zip(&moved).filter(|(_, moved)| !**moved) {
                let slot = jl.slots[v] as usize;
                for (to, from) in out.columns[jl.inputs.clone()]
                    .iter_mut()
                    .zip(&jl.staged.columns)
                {
                    to.push_sequence_of(from, slot);
                }
            }
            out.sequences.push(SequenceInfo {
                counted_lines: outcome.counted[v],
                ..*info
            });
        }
        // Invalid sequences: the primary's own and the failed joins, by line.
        let mut invalid = std::mem::take(&mut primary.invalid);
        if !joined_invalid.is_empty() {
            invalid.extend(joined_invalid);
            invalid.sort_by_key(|s| s.line);
        }
        for seq in &mut invalid {
            seq.valid_before = out.sequences.partition_point(|s| s.line < seq.line);
        }
        into.invalid = invalid;
        let mut diagnostics = std::mem::take(&mut primary.diagnostics);
        if !outcome.found.is_empty() {
            diagnostics.append(&mut outcome.found);
            diagnostics.sort_by_key(|d| d.line);
        }
        into.diagnostics = diagnostics;
    }
}

/// Reads the `wanted` sequences of a joined deserializer (index `jindex`), as (joined ordinal,
/// primary sequence) sorted by ordinal, in runs of consecutive sequences within a chunk, and
/// stages each for its primary sequence (of `primary`); an invalid or empty one fails it.
/// Their diagnostics go to the outcome, filed under their primary sequence's line. A single
/// run whose sequences are all valid (files in the same order) is staged as parsed, without
/// a copy.
fn read_runs<T: Element>(
    jl: &mut JoinedLoader<T>,
    jindex: &CorpusIndex,
    wanted: &[(u32, u32)],
    primary: &[SequenceInfo],
    outcome: &mut PartOutcome,
) -> Result<(), LoadError> {
    let PartOutcome {
        failed,
        counted,
        found,
    } = outcome;
    let mut start = 0;
    while start < wanted.len() {
        let first = wanted[start].0;
        let chunk = jindex.chunks.partition_point(|c| c.sequences.end <= first) as u32;
        let c = jindex.chunk(chunk);
        let mut end = start + 1;
        while end < wanted.len()
            && wanted[end].0 == wanted[end - 1].0 + 1
            && wanted[end].0 < c.sequences.end
        {
            end += 1;
        }
        let run = &wanted[start..end];
        let within = first - c.sequences.start..run[run.len() - 1].0 - c.sequences.start + 1;
        jl.loader.load_part(chunk, within, &mut jl.run)?;
        // The loader checked the run against the index: as many valid sequences as the run
        // has, and no invalid one, means each is the run's sequence of the same rank.
        let whole = start == 0
            && end == wanted.len()
            && jl.run.invalid.is_empty()
            && jl.run.sequences.len() == run.len();
        if whole {
            std::mem::swap(&mut jl.staged, &mut jl.run.sequences);
        }
        let file = &jindex.files[c.file as usize].name;
        let (mut valid, mut invalid, mut diag) = (0, 0, 0);
        for (k, &(m, v)) in run.iter().enumerate() {
            let v = v as usize;
            let entry = &jindex.sequences[m as usize];
            let line = c.first_line + u64::from(entry.line);
            let next_line = run.get(k + 1).map_or(u64::MAX, |&(next, _)| {
                c.first_line + u64::from(jindex.sequences[next as usize].line)
            });
            let filed_under = primary[v].line;
            let relocate = |d: &Diagnostic| {
                let mut moved = Diagnostic::new(d.severity, filed_under, 1, d.message.clone());
                moved.joined_at = Some(Box::new(JoinedPosition {
                    file: file.clone(),
                    line: d.line,
                    col: d.col,
                }));
                moved
            };
            while diag < jl.run.diagnostics.len() && jl.run.diagnostics[diag].line < next_line {
                found.push(relocate(&jl.run.diagnostics[diag]));
                diag += 1;
            }
            if whole {
                jl.slots[v] = k as u32;
                counted[v] = counted[v].max(jl.staged.sequences[k].counted_lines);
                continue;
            }
            let parsed = &jl.run.sequences;
            // An error of the join itself (not one of the joined file's), if any.
            let refused = if parsed.sequences.get(valid).is_some_and(|s| s.line == line) {
                let fits = (jl.staged.columns.iter().zip(&parsed.columns))
                    .all(|(to, from)| to.has_room_within(from, valid, jl.max_entries));
                let refused = if fits {
                    jl.slots[v] = jl.staged.len() as u32;
                    for (to, from) in jl.staged.columns.iter_mut().zip(&parsed.columns) {
                        to.push_sequence_of(from, valid);
                    }
                    let info = parsed.sequences[valid];
                    jl.staged.sequences.push(info);
                    counted[v] = counted[v].max(info.counted_lines);
                    None
                } else {
                    // The columns' offsets are 32-bit (`MAX_COLUMN_ENTRIES`); the sequences
                    // joined to one primary part cannot hold more.
                    Some(format!(
                        "the sequence with key {} is too large: with the other sequences joined \
                         to its part it holds more than {} samples or stored values of one input",
                        entry.key, jl.max_entries
                    ))
                };
                valid += 1;
                refused
            } else if jl.run.invalid.get(invalid).is_some_and(|s| s.line == line) {
                failed[v] = Some(relocate(&jl.run.invalid[invalid].first_error));
                invalid += 1;
                None
            } else {
                Some(format!(
                    "the sequence with key {} holds no input of this file's deserializer",
                    entry.key
                ))
            };
            if let Some(message) = refused {
                let error = relocate(&Diagnostic::new(Severity::Error, line, 1, message));
                found.push(error.clone());
                failed[v] = Some(error);
            }
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::InputConfig;
    use crate::index::build::{build_index, CacheMode, IndexingOptions};
    use crate::parser::Sample;

    #[test]
    fn a_joined_sequence_past_the_column_limit_fails_its_primary_sequence() {
        let dir = tempfile::tempdir().unwrap();
        let (x, y) = (dir.path().join("x.ctf"), dir.path().join("y.ctf"));
        std::fs::write(&x, "0 |x 1\n1 |x 2\n2 |x 3\n").unwrap();
        // Key 9, which no primary sequence has, splits the reads into two runs, so that the
        // joined sequences are staged one by one (a single run is taken whole).
        std::fs::write(&y, "0 |y 1:1\n9 |y 5:1\n1 |y 1:1 2:1 3:1\n2 |y 4:1\n").unwrap();
        let config = ReaderConfig::builder()
            .file(x.to_string_lossy())
            .input(InputConfig::dense("x", 1))
            .then_deserializer()
            .file(y.to_string_lossy())
            .input(InputConfig::sparse("y", 7))
            .build()
            .unwrap();
        let mut options = IndexingOptions::for_config(&config);
        options.cache = CacheMode::Off;
        let index = build_index(&config, &options).unwrap().index;
        let mut loader = ChunkLoader::<f32>::new(index, &config);
        let mut into = ParsedChunk::new(&config.inputs);
        // Staged in key order: 1 value, then 3 (past a limit of 3 with the first), then 1.
        loader.joiner.as_mut().unwrap().joined[0].max_entries = 3;
        loader.load(0, &mut into).unwrap();
        let keys: Vec<u64> = into.sequences.sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [0, 2]);
        let y = &into.sequences.columns[1];
        let samples: Vec<Sample<'_, f32>> = (0..y.sample_count()).map(|i| y.sample(i)).collect();
        let one = |index| Sample::Sparse {
            indices: std::slice::from_ref(index).into(),
            values: (&[1.0][..]).into(),
        };
        assert_eq!(samples, [one(&1), one(&4)]);
        assert_eq!(into.invalid.len(), 1);
        assert_eq!(into.invalid[0].key, 1);
        let error = &into.invalid[0].first_error;
        assert!(error.message.contains("key 1 is too large"), "{error:?}");
        assert_eq!(error.line, 2, "filed under the primary sequence's line");
        let at = error
            .joined_at
            .as_ref()
            .expect("the joined file's own position");
        assert_eq!((at.line, at.col), (3, 1));
        assert!(into.diagnostics.contains(error));
    }
}
