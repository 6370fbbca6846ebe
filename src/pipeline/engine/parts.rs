//! The parts chunks are loaded in, the unit of the loaders and of the cache: runs of whole
//! sequences of about [`PART_BYTES`], so that one chunk is parsed on every loader
//! ([`part_size`] cuts a small corpus finer). Where the index build parsed the text while
//! scanning it (see `PipelineOptions::parse_while_indexing`), what a parsed piece holds of
//! a chunk is made a part of its own where it can be one, so that the part's first load
//! takes it whole ([`Parts::new`]). The planner and the packers find the part of each
//! sequence here.

use crate::index::stash::StashPiece;
use crate::index::CorpusIndex;
use crate::pipeline::part_finder::PartFinder;

/// The default of [`PipelineOptions::part_bytes`].
///
/// [`PipelineOptions::part_bytes`]: super::PipelineOptions::part_bytes
pub const PART_BYTES: u64 = 1 << 20;

/// The smallest part [`part_size`] cuts a small corpus into.
pub(super) const SMALLEST_PART_BYTES: u64 = 64 << 10;

/// The part size for a corpus of `total` bytes on `loaders` loader threads: `asked`
/// ([`PipelineOptions::part_bytes`]), or on a corpus of fewer than four such parts per
/// loader, parts that give every loader four (of at least [`SMALLEST_PART_BYTES`]), so that
/// the loaders finish a small corpus together rather than one parsing the last part alone.
///
/// [`PipelineOptions::part_bytes`]: super::PipelineOptions::part_bytes
pub(super) fn part_size(asked: u64, total: u64, loaders: usize) -> u64 {
    let four_each = total
        .div_ceil(4 * loaders.max(1) as u64)
        .max(SMALLEST_PART_BYTES);
    asked.min(four_each).max(1)
}

/// The parts chunks are loaded in: the cache's unit.
pub(super) struct Parts {
    /// Per part: its chunk and its sequences (indices within the chunk).
    pub(super) parts: Vec<(u32, std::ops::Range<u32>)>,
    /// Per chunk: its parts (ids).
    pub(super) of_chunk: Vec<std::ops::Range<u32>>,
    /// The part of each index ordinal.
    finder: PartFinder,
}

/// Where a part's sequences are in the stash: the piece parsed while indexing that holds
/// them, and which of the piece's sequences they are; `None` for a part to read and parse.
pub(super) type PiecePlace = Option<(u32, std::ops::Range<u32>)>;

/// The sequences of a chunk a stash piece holds, as a part: the chunk's sequences, and the
/// piece's.
struct Adopted {
    within_chunk: std::ops::Range<u32>,
    piece: u32,
    within_piece: std::ops::Range<u32>,
}

/// The index ordinal of the sequence of file `file` that starts at byte `offset`, if one
/// does.
fn ordinal_at(index: &CorpusIndex, file: u32, offset: u64) -> Option<u32> {
    let chunks = index.files[file as usize].chunks.clone();
    let in_file = &index.chunks[chunks.start as usize..chunks.end as usize];
    let k = chunks.start + in_file.partition_point(|c| c.end() <= offset) as u32;
    let within = sequence_at(index, k, offset)?;
    let c = index.chunks.get(k as usize)?;
    (within < c.sequences.len()).then_some(c.sequences.start + within as u32)
}

/// Which of `chunk`'s sequences starts at byte `offset` of its file (the chunk's sequence
/// count for its end), if one does.
fn sequence_at(index: &CorpusIndex, chunk: u32, offset: u64) -> Option<usize> {
    let c = index.chunks.get(chunk as usize)?;
    let within = u32::try_from(offset.checked_sub(c.start)?).ok()?;
    let entries = index.chunk_sequences(chunk);
    let i = entries.partition_point(|e| e.offset < within);
    match entries.get(i) {
        Some(e) if e.offset == within => Some(i),
        None if offset == c.end() => Some(entries.len()),
        _ => None,
    }
}

impl Parts {
    /// The most parts a chunk was cut into (at least 1).
    pub(super) fn parts_per_chunk(&self) -> usize {
        self.of_chunk
            .iter()
            .map(|r| r.len())
            .max()
            .unwrap_or(1)
            .max(1)
    }

    /// Cuts every chunk into parts of about `part_bytes`, and makes what each of `pieces`
    /// (the sequences parsed while indexing, in file order) holds of a chunk a part of its
    /// own where it can be one (see [`Parts::adoptable`]). Returns the parts and, per part,
    /// its place in the pieces.
    pub(super) fn new(
        index: &CorpusIndex,
        part_bytes: u64,
        pieces: &[StashPiece],
    ) -> (Self, Vec<PiecePlace>) {
        let mut parts = Vec::new();
        let mut piece_of = Vec::new();
        let mut of_chunk = Vec::with_capacity(index.chunks.len());
        let mut next_piece = 0;
        for chunk in 0..index.chunks.len() as u32 {
            let first_part = parts.len() as u32;
            let c = index.chunk(chunk);
            let entries = index.chunk_sequences(chunk);
            // Cut only after a sequence with samples that is not the chunk's last one, so
            // that sequences without samples stay with the sequence carrying their errors
            // (the next with samples, or the last; see `source::Notes`).
            let last_carrier = entries.iter().rposition(|e| e.samples > 0);
            let may_cut_after =
                |i: usize| entries[i].samples > 0 && last_carrier.is_some_and(|last| i < last);
            // What the pieces overlapping the chunk hold of it. A piece going on past the
            // chunk's end is left for the next chunk too.
            let mut adopted = Vec::new();
            while let Some(piece) = pieces.get(next_piece) {
                if (piece.file, piece.start) >= (c.file, c.end()) {
                    break;
                }
                if let Some(a) = Self::adoptable(index, chunk, piece, &may_cut_after) {
                    adopted.push(Adopted {
                        piece: next_piece as u32,
                        ..a
                    });
                }
                if (piece.file, piece.end) > (c.file, c.end()) {
                    break;
                }
                next_piece += 1;
            }
            let mut adopted = adopted.into_iter().peekable();
            let mut start = 0usize;
            let mut bytes = 0u64;
            let mut i = 0;
            while i < entries.len() {
                if let Some(a) = adopted.next_if(|a| a.within_chunk.start as usize == i) {
                    if start < i {
                        parts.push((chunk, start as u32..i as u32));
                        piece_of.push(None);
                    }
                    i = a.within_chunk.end as usize;
                    parts.push((chunk, a.within_chunk));
                    piece_of.push(Some((a.piece, a.within_piece)));
                    (start, bytes) = (i, 0);
                    continue;
                }
                bytes += u64::from(entries[i].len);
                if (bytes >= part_bytes && may_cut_after(i)) || i + 1 == entries.len() {
                    parts.push((chunk, start as u32..(i + 1) as u32));
                    piece_of.push(None);
                    (start, bytes) = (i + 1, 0);
                }
                i += 1;
            }
            of_chunk.push(first_part..parts.len() as u32);
        }
        let starts = parts
            .iter()
            .map(|(chunk, within)| index.chunk(*chunk).sequences.start + within.start)
            .collect();
        let parts = Parts {
            finder: PartFinder::new(starts, index.sequences.len() as u32),
            parts,
            of_chunk,
        };
        (parts, piece_of)
    }

    /// The sequences of `chunk` that `piece` holds, if a part can be exactly them: the text
    /// the piece and the chunk share begins and ends at sequences (or at the chunk's ends),
    /// parts may be cut before and after them, and none of them has a repeated id (the parse
    /// while indexing did not know the repeats). Their place among the piece's parsed
    /// sequences: every sequence with samples of a piece (which has no invalid sequence)
    /// was parsed, and none without.
    fn adoptable(
        index: &CorpusIndex,
        chunk: u32,
        piece: &StashPiece,
        may_cut_after: &dyn Fn(usize) -> bool,
    ) -> Option<Adopted> {
        let c = index.chunk(chunk);
        let entries = index.chunk_sequences(chunk);
        let (from, to) = (piece.start.max(c.start), piece.end.min(c.end()));
        if piece.file != c.file || from >= to {
            return None;
        }
        let (first, end) = (
            sequence_at(index, chunk, from)?,
            sequence_at(index, chunk, to)?,
        );
        let cuts = (first == 0 || may_cut_after(first - 1))
            && (end == entries.len() || may_cut_after(end - 1));
        let ordinals = c.sequences.start + first as u32..c.sequences.start + end as u32;
        let repeats = index.repeated.partition_point(|&o| o < ordinals.start)
            != index.repeated.partition_point(|&o| o < ordinals.end);
        if first >= end || !cuts || repeats {
            return None;
        }
        // The piece's sequences before the part: those with samples from its start.
        let counted = |range: std::ops::Range<u32>| -> u32 {
            index.sequences[range.start as usize..range.end as usize]
                .iter()
                .filter(|e| e.samples > 0)
                .count() as u32
        };
        let piece_first = if piece.start < c.start {
            ordinal_at(index, c.file, piece.start)?
        } else {
            ordinals.start
        };
        let before = counted(piece_first..ordinals.start);
        Some(Adopted {
            within_chunk: first as u32..end as u32,
            piece: 0,
            within_piece: before..before + counted(ordinals),
        })
    }

    /// The part holding the sequence of index ordinal `ordinal`.
    #[inline]
    pub(super) fn part_of_ordinal(&self, ordinal: u32) -> u32 {
        self.finder.find(ordinal)
    }
}
