//! Grouping a file's sequences into chunks (CNTK-BEHAVIOUR §4.2).
//!
//! Sequences arrive in file order. A new chunk starts when the current one is empty or when
//! its bytes so far plus the next sequence's would exceed the limit: `chunkSizeInBytes`,
//! capped at the file size and at 4 GiB (offsets within a chunk are 32-bit). A sequence
//! larger than the limit gets a chunk of its own; chunks never split a sequence and never
//! span files. `chunkSizeInBytes = 0` gives one sequence per chunk.

use crate::index::scan::ScannedSequence;
use crate::index::{Chunk, SequenceEntry};
use crate::parser::stream::sequence_too_long_message;

/// Why a sequence cannot be indexed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChunkingError {
    /// 1-based line of the sequence.
    pub line: u64,
    /// What is wrong.
    pub message: String,
}

/// The longest sequence the index takes by default, in bytes (4 GiB − 1): offsets and
/// lengths within a chunk are 32-bit.
pub const MAX_SEQUENCE_BYTES: u64 = u32::MAX as u64;

/// Limits of the index's 32-bit fields.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IndexLimits {
    /// Longest sequence in bytes.
    pub max_sequence_bytes: u64,
    /// Most sequences in a corpus.
    pub max_sequences: u64,
}

impl Default for IndexLimits {
    fn default() -> Self {
        IndexLimits {
            max_sequence_bytes: MAX_SEQUENCE_BYTES,
            max_sequences: u64::from(u32::MAX),
        }
    }
}

/// Appends the sequences of one file to the corpus's chunks and sequences.
pub struct FileChunker {
    file: u32,
    limit: u64,
    limits: IndexLimits,
    /// Whether the last chunk in the corpus's list belongs to this file.
    has_chunk: bool,
    first_chunk: u32,
}

impl FileChunker {
    /// A chunker for file number `file` of `file_size` bytes, whose chunks will follow the
    /// `chunks_so_far` chunks of earlier files.
    pub fn new(
        file: u32,
        chunk_size_in_bytes: u64,
        file_size: u64,
        chunks_so_far: usize,
        limits: IndexLimits,
    ) -> Self {
        FileChunker {
            file,
            limit: chunk_size_in_bytes
                .min(file_size)
                .min(limits.max_sequence_bytes),
            limits,
            has_chunk: false,
            first_chunk: chunks_so_far as u32,
        }
    }

    /// Adds the next sequence of the file.
    pub fn push(
        &mut self,
        seq: &ScannedSequence,
        chunks: &mut Vec<Chunk>,
        sequences: &mut Vec<SequenceEntry>,
    ) -> Result<(), ChunkingError> {
        let len = seq.end - seq.start;
        if len > self.limits.max_sequence_bytes {
            return Err(ChunkingError {
                line: seq.line,
                message: sequence_too_long_message(
                    // An id too long for 64 bits has a placeholder key (no id, no line key).
                    (seq.is_id || seq.key != u64::MAX).then_some(seq.key),
                    len,
                    self.limits.max_sequence_bytes,
                ),
            });
        }
        if sequences.len() as u64 >= self.limits.max_sequences {
            return Err(ChunkingError {
                line: seq.line,
                message: format!(
                    "the corpus has more than {} sequences, the most one reader can index",
                    self.limits.max_sequences
                ),
            });
        }
        let ordinal = sequences.len() as u32;
        let start_new = match chunks.last() {
            Some(c) if self.has_chunk => {
                u64::from(c.len) + len > self.limit
                    || seq.end - c.start > self.limits.max_sequence_bytes
            }
            _ => true,
        };
        if start_new {
            chunks.push(Chunk {
                file: self.file,
                start: seq.start,
                len: 0,
                first_line: seq.line,
                sequences: ordinal..ordinal,
                samples: 0,
            });
            self.has_chunk = true;
        }
        let Some(chunk) = chunks.last_mut() else {
            unreachable!("a chunk was pushed above")
        };
        // The chunk spans at most `max_sequence_bytes` (≤ u32::MAX) bytes, and a sequence's
        // lines and samples are fewer than its bytes, so every value below fits in 32 bits.
        sequences.push(SequenceEntry {
            key: seq.key,
            offset: (seq.start - chunk.start) as u32,
            len: len as u32,
            samples: seq.samples as u32,
            line: (seq.line - chunk.first_line) as u32,
        });
        chunk.len = (seq.end - chunk.start) as u32;
        chunk.sequences.end = ordinal + 1;
        chunk.samples += seq.samples;
        Ok(())
    }

    /// The ids of this file's chunks, once its last sequence is pushed.
    pub fn finish(&self, chunks: &[Chunk]) -> std::ops::Range<u32> {
        self.first_chunk..chunks.len() as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(start: u64, end: u64, line: u64) -> ScannedSequence {
        ScannedSequence {
            key: line,
            is_id: true,
            start,
            end,
            line,
            samples: 1,
        }
    }

    fn chunk_sizes(chunk_size: u64, seqs: &[ScannedSequence], file_size: u64) -> Vec<Vec<u32>> {
        let mut chunks = Vec::new();
        let mut entries = Vec::new();
        let mut c = FileChunker::new(0, chunk_size, file_size, 0, IndexLimits::default());
        for s in seqs {
            c.push(s, &mut chunks, &mut entries).unwrap();
        }
        assert_eq!(c.finish(&chunks), 0..chunks.len() as u32);
        chunks
            .iter()
            .map(|ch| {
                entries[ch.sequences.start as usize..ch.sequences.end as usize]
                    .iter()
                    .map(|e| e.offset)
                    .collect()
            })
            .collect()
    }

    #[test]
    fn chunks_follow_cntk_rule() {
        // Sequences of 10 bytes, with a 5-byte gap (a skipped line) before the third.
        let seqs = [
            seq(0, 10, 1),
            seq(10, 20, 2),
            seq(25, 35, 4),
            seq(35, 45, 5),
        ];
        assert_eq!(chunk_sizes(0, &seqs, 45), [[0], [0], [0], [0]]);
        assert_eq!(chunk_sizes(1, &seqs, 45), [[0], [0], [0], [0]]);
        assert_eq!(chunk_sizes(20, &seqs, 45), vec![vec![0, 10], vec![0, 10]]);
        // The gap is not counted for the incoming sequence (20 + 10 <= 30), but it is part
        // of the chunk's length (35 + 10 > 30).
        assert_eq!(chunk_sizes(30, &seqs, 45), vec![vec![0, 10, 25], vec![0]]);
        assert_eq!(chunk_sizes(1 << 40, &seqs, 45), [[0, 10, 25, 35]]);
    }

    #[test]
    fn limits_are_errors() {
        let limits = IndexLimits {
            max_sequence_bytes: 100,
            max_sequences: 2,
        };
        let mut chunks = Vec::new();
        let mut entries = Vec::new();
        let mut c = FileChunker::new(0, 1000, 1000, 0, limits);
        let long = c.push(&seq(0, 101, 1), &mut chunks, &mut entries);
        assert!(long.unwrap_err().message.contains("101 bytes"));
        c.push(&seq(0, 100, 1), &mut chunks, &mut entries).unwrap();
        c.push(&seq(100, 150, 2), &mut chunks, &mut entries)
            .unwrap();
        let many = c.push(&seq(150, 160, 3), &mut chunks, &mut entries);
        assert_eq!(many.unwrap_err().line, 3);
        // An id too long for 64 bits is named so, not by its placeholder key.
        let overflowing = ScannedSequence {
            key: u64::MAX,
            is_id: false,
            ..seq(0, 101, 1)
        };
        let long = c.push(&overflowing, &mut chunks, &mut entries);
        assert_eq!(
            long.unwrap_err().message,
            "the sequence of an id too long for 64 bits is 101 bytes long; a sequence must be \
             at most 100 bytes"
        );
        // A chunk never spans more than the limit, gaps included.
        assert_eq!(chunks.len(), 2);
    }
}
