//! The loader threads: each parses the parts it is asked for (by the planner ahead of its
//! minibatches, or by a packer whose part is not in memory) into the shared cache.
//!
//! On a cold start the index build may parse the parts it reads (see
//! [`PipelineOptions::parse_while_indexing`]): a part that such a parse holds whole is taken
//! from it by its first load instead of read and parsed, and is the same part either way.
//!
//! [`PipelineOptions::parse_while_indexing`]: super::PipelineOptions::parse_while_indexing

use std::sync::Arc;
use std::time::Instant;

use super::parts::PiecePlace;
use super::{add_time, Loaded, Shared};
use crate::chunks::{ChunkLoader, LoadError, ParsedChunk};
use crate::index::stash::StashPiece;
use crate::parser::{Element, ParsedSequences};
use crate::source::LoadedChunk;
use crate::sync::atomic::Ordering;
use crate::sync::channel::Receiver;
use crate::sync::Arc as ChunkArc;

/// A loader thread: parses the chunks it is asked for into the cache.
pub(super) fn run_loader<T: Element>(shared: &Shared<T>, queue: &Receiver<u32>) {
    let mut loader = ChunkLoader::<T>::new(Arc::clone(&shared.index), &shared.config);
    loop {
        let Ok(part) = queue.recv() else {
            return; // the source is shutting down
        };
        if shared.cache.is_closed() {
            // Shutting down: the requests still queued (up to the cache's capacity, the
            // whole corpus with the default window) are dropped, not parsed.
            return;
        }
        let (chunk, sequences) = shared.parts.parts[part as usize].clone();
        let before = loader.counters();
        let started = Instant::now();
        let stashed = take_stashed(shared, part);
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut parsed = ParsedChunk::new(&shared.config.inputs);
            let adopted = stashed.is_some_and(|stashed| {
                loader.adopt_part(chunk, sequences.clone(), stashed, &mut parsed)
            });
            if adopted {
                shared.parts_from_stash.fetch_add(1, Ordering::Relaxed);
                return Ok(LoadedChunk::new(&shared.index, parsed));
            }
            loader
                .load_part(chunk, sequences, &mut parsed)
                .map(|()| LoadedChunk::new(&shared.index, parsed))
        }));
        add_time(&shared.parse_nanos, started);
        let after = loader.counters();
        shared.chunks_loaded.fetch_add(
            after.chunks_loaded - before.chunks_loaded,
            Ordering::Relaxed,
        );
        shared
            .bytes_read
            .fetch_add(after.bytes_read - before.bytes_read, Ordering::Relaxed);
        let loaded: Loaded<T> = match outcome {
            Ok(Ok(chunk)) => Ok(ChunkArc::new(chunk)),
            Ok(Err(e)) => Err(ChunkArc::new(e)),
            Err(_) => Err(ChunkArc::new(LoadError::Panicked {
                file: shared.index.files[shared.index.chunk(chunk).file as usize]
                    .name
                    .clone(),
            })),
        };
        let bytes = match &loaded {
            Ok(chunk) => chunk.heap_bytes(),
            Err(_) => 0,
        };
        shared.note_parsed(after.bytes_read - before.bytes_read, bytes);
        shared.cache.insert(part, loaded, bytes);
    }
}

/// The sequences parsed while indexing that are all of `part`'s, if its first load has not
/// taken them yet (a part evicted and loaded again reads its text).
fn take_stashed<T>(shared: &Shared<T>, part: u32) -> Option<ParsedSequences<T>> {
    let mut stash = shared.stash.lock().unwrap_or_else(|e| e.into_inner());
    stash.get_mut(part as usize)?.take()
}

/// Per part, the sequences of `pieces` (parsed while indexing) that are all of its own, as
/// `piece_of` places the parts in them. A piece that several parts share (one straddling
/// chunks) keeps the sequences of its largest part in place and gives copies of the others'
/// to their parts, so that no load copies most of a piece: copying a 2 MB piece's
/// sequences took a loader 0.3–0.6 ms in the gap before the first minibatch, where taking a
/// piece whole takes 30–70 µs. A part whose sequences cannot be copied (or whose piece is
/// not of `T`) gets none and is read from its file. The pieces no part holds are dropped.
pub(super) fn stash_per_part<T: Element>(
    inputs: &[crate::config::InputConfig],
    piece_of: &[PiecePlace],
    pieces: Vec<StashPiece>,
) -> Vec<Option<ParsedSequences<T>>> {
    let mut parts_of_piece = vec![Vec::new(); pieces.len()];
    for (part, placed) in piece_of.iter().enumerate() {
        if let Some((piece, within)) = placed {
            if let Some(parts) = parts_of_piece.get_mut(*piece as usize) {
                parts.push((part, within.start as usize..within.end as usize));
            }
        }
    }
    let mut stash: Vec<Option<ParsedSequences<T>>> = piece_of.iter().map(|_| None).collect();
    for (piece, parts) in pieces.into_iter().zip(parts_of_piece) {
        // The largest part keeps the piece's own sequences.
        let Some((kept, (kept_part, kept_within))) = parts
            .iter()
            .enumerate()
            .max_by_key(|(_, (_, within))| within.len())
        else {
            continue;
        };
        let Ok(parsed) = piece.parsed.downcast::<ParsedSequences<T>>() else {
            continue;
        };
        let mut parsed = *parsed;
        for (i, (part, within)) in parts.iter().enumerate() {
            if i != kept {
                stash[*part] = copy_range(inputs, &parsed, within.clone());
            }
        }
        parsed.truncate(kept_within.end);
        parsed.drain_front(kept_within.start);
        stash[*kept_part] = Some(parsed);
    }
    stash
}

/// A copy of the sequences `range` of `parsed`.
fn copy_range<T: Element>(
    inputs: &[crate::config::InputConfig],
    parsed: &ParsedSequences<T>,
    range: std::ops::Range<usize>,
) -> Option<ParsedSequences<T>> {
    let mut copy = ParsedSequences::new(inputs);
    copy.append_range(parsed, range).ok()?;
    Some(copy)
}
