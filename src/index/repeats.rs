//! Finding keys used by more than one sequence of the corpus (SPEC §1 and §7.1: keys are
//! unique across the corpus, an id or, in a file without ids, a line number; of two
//! sequences with the same key that are not adjacent, the later one is invalid).
//!
//! Keys usually increase within each file and the files' key ranges do not overlap; that is
//! checked in one pass over the ids with no memory (a line-mode file's keys always increase,
//! so its first and last are its range). Otherwise the keyed entries are sorted by key
//! (4 bytes per sequence, freed before returning).

use std::ops::Range;

use crate::index::{CorpusIndex, KeyMode};
use crate::parser::RepeatedKey;

/// Ordinals, sorted, of the sequences whose key an earlier sequence of the corpus used.
pub(super) fn find_repeats(index: &CorpusIndex) -> Vec<u32> {
    if keys_are_unique_by_order(index) {
        return Vec::new();
    }
    let mut ordinals: Vec<u32> = keyed_ordinals(index).collect();
    // Stable: equal keys keep file order, so the first of each group is the original.
    ordinals.sort_by_key(|&o| index.sequences[o as usize].key);
    let mut repeated: Vec<u32> = ordinals
        .windows(2)
        .filter(|w| index.sequences[w[0] as usize].key == index.sequences[w[1] as usize].key)
        .map(|w| w[1])
        .collect();
    repeated.sort_unstable();
    repeated
}

/// Ordinals of the sequences that have a key: all but those whose id is too long for 64 bits.
fn keyed_ordinals(index: &CorpusIndex) -> impl Iterator<Item = u32> + '_ {
    (0..index.sequences.len() as u32).filter(|o| index.overflowing_ids.binary_search(o).is_err())
}

/// Whether keys strictly increase within every file and the files' key ranges are disjoint.
fn keys_are_unique_by_order(index: &CorpusIndex) -> bool {
    let mut ranges = Vec::new();
    for f in 0..index.files.len() as u32 {
        let sequences = index.file_sequences(f);
        if index.files[f as usize].mode == KeyMode::Lines {
            // Line numbers: increasing, and never an overflowing id.
            if !sequences.is_empty() {
                let key = |o: u32| index.sequences[o as usize].key;
                ranges.push((key(sequences.start), key(sequences.end - 1)));
            }
            continue;
        }
        let mut range: Option<(u64, u64)> = None;
        for o in sequences {
            if index.overflowing_ids.binary_search(&o).is_ok() {
                continue;
            }
            let key = index.sequences[o as usize].key;
            range = match range {
                None => Some((key, key)),
                Some((lo, hi)) if key > hi => Some((lo, key)),
                Some(_) => return false,
            };
        }
        ranges.extend(range);
    }
    ranges.sort_unstable();
    ranges.windows(2).all(|w| w[0].1 < w[1].0)
}

/// The sequences among `ordinals` (of chunk `chunk`) whose key an earlier sequence used, as
/// the parser of their range takes them: by first line (counted from 1 in the file), and
/// whether the key they repeat is the line-mode key of a sequence of an earlier file
/// (otherwise it is an id; when both are, the line-mode key, as the streaming parser
/// decides).
pub(super) fn repeated_keys(
    index: &CorpusIndex,
    chunk: u32,
    ordinals: Range<u32>,
) -> Vec<RepeatedKey> {
    let c = index.chunk(chunk);
    let first = index.repeated.partition_point(|&o| o < ordinals.start);
    let last = index.repeated.partition_point(|&o| o < ordinals.end);
    index.repeated[first..last]
        .iter()
        .map(|&o| RepeatedKey {
            line: c.first_line + u64::from(index.sequences[o as usize].line),
            repeats_line_key: repeats_line_key(index, c.file, o),
        })
        .collect()
}

/// Whether the key of id-mode sequence `ordinal` (of file `file`) is the line-mode key of a
/// sequence of an earlier file.
fn repeats_line_key(index: &CorpusIndex, file: u32, ordinal: u32) -> bool {
    if index.files[file as usize].mode == KeyMode::Lines {
        return false; // line numbers never overlap: it repeats an id
    }
    let key = index.sequences[ordinal as usize].key;
    (0..file).any(|f| {
        let indexed = &index.files[f as usize];
        if indexed.mode != KeyMode::Lines
            || !(indexed.key_base..indexed.key_base + indexed.lines).contains(&key)
        {
            return false;
        }
        let sequences = index.file_sequences(f);
        index.sequences[sequences.start as usize..sequences.end as usize]
            .binary_search_by_key(&key, |e| e.key)
            .is_ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Chunk, IndexedFile, SequenceEntry};

    /// One chunk per file, a sequence per line; a line-mode file's keys are given as its
    /// line numbers across the corpus (the lines between them blank).
    fn corpus(files: &[(&[u64], KeyMode)], overflowing: &[u32]) -> CorpusIndex {
        let mut index = CorpusIndex::default();
        let mut key_base = 0;
        for (f, (keys, mode)) in files.iter().enumerate() {
            let first = index.sequences.len() as u32;
            for (line, &key) in keys.iter().enumerate() {
                let line = match mode {
                    KeyMode::Ids => line as u32,
                    KeyMode::Lines => (key - key_base) as u32,
                };
                index.sequences.push(SequenceEntry {
                    key,
                    offset: 0,
                    len: 1,
                    samples: 1,
                    line,
                });
            }
            let lines = match mode {
                KeyMode::Ids => keys.len() as u64,
                KeyMode::Lines => keys.last().map_or(0, |&k| k + 1 - key_base),
            };
            let chunk = index.chunks.len() as u32;
            index.chunks.push(Chunk {
                file: f as u32,
                start: 0,
                len: 1,
                first_line: 1,
                sequences: first..index.sequences.len() as u32,
                samples: keys.len() as u64,
            });
            index.files.push(IndexedFile {
                name: format!("f{f}"),
                path: format!("f{f}").into(),
                stamp: Default::default(),
                content_hash: 0,
                mode: *mode,
                lines,
                key_base,
                chunks: chunk..chunk + 1,
                input_lines: vec![],
            });
            key_base += lines;
        }
        index.overflowing_ids = overflowing.to_vec();
        index
    }

    fn repeated_of_chunk(index: &CorpusIndex, chunk: u32) -> Vec<(u64, bool)> {
        index
            .repeated_keys(chunk, index.chunk(chunk).sequences.clone())
            .iter()
            .map(|r| (r.line, r.repeats_line_key))
            .collect()
    }

    #[test]
    fn sorted_disjoint_files_have_no_repeats() {
        let c = corpus(
            &[
                (&[15, 17, 19], KeyMode::Ids),
                (&[3, 4, 6], KeyMode::Lines),
                (&[1, 2], KeyMode::Ids),
            ],
            &[],
        );
        assert!(keys_are_unique_by_order(&c));
        assert!(find_repeats(&c).is_empty());
    }

    #[test]
    fn later_occurrences_are_repeats_within_and_across_files() {
        let c = corpus(
            &[(&[5, 3, 5, 8], KeyMode::Ids), (&[3, 9, 5], KeyMode::Ids)],
            &[],
        );
        assert_eq!(find_repeats(&c), [2, 4, 6]);
    }

    #[test]
    fn line_mode_keys_and_ids_repeat_each_other_across_files() {
        // File 0, line mode: keys 0, 1, 3 (line 2 blank). File 1, ids 2, 3, an overflowing
        // id (ordinal 5), the genuine id u64::MAX and 9. File 2, line mode from key 9.
        let mut c = corpus(
            &[
                (&[0, 1, 3], KeyMode::Lines),
                (&[2, 3, u64::MAX, u64::MAX, 9], KeyMode::Ids),
                (&[9, 10], KeyMode::Lines),
            ],
            &[5],
        );
        assert_eq!(c.files[2].key_base, 9);
        assert!(!keys_are_unique_by_order(&c));
        // Id 2 is the key of no sequence of file 0 (a blank line); id 3 is, so ordinal 4
        // repeats it; line key 9 (ordinal 8) repeats the id 9 before it.
        c.repeated = find_repeats(&c);
        assert_eq!(c.repeated, [4, 8]);
        assert_eq!(repeated_of_chunk(&c, 1), [(2, true)]);
        assert_eq!(repeated_of_chunk(&c, 2), [(1, false)]);
        assert!(repeated_of_chunk(&c, 0).is_empty());
        // A part of a chunk lists only its own.
        assert!(c.repeated_keys(1, 3..4).is_empty());
        let c = corpus(&[(&[u64::MAX, 1, u64::MAX], KeyMode::Ids)], &[]);
        assert_eq!(find_repeats(&c), [2]);
    }

    #[test]
    fn an_id_repeating_both_an_id_and_a_line_key_repeats_the_line_key() {
        // Id 3; line keys 1, 2, 3 (the 3 repeats the id); id 3 again.
        let mut c = corpus(
            &[
                (&[3], KeyMode::Ids),
                (&[1, 2, 3], KeyMode::Lines),
                (&[3], KeyMode::Ids),
            ],
            &[],
        );
        c.repeated = find_repeats(&c);
        assert_eq!(c.repeated, [3, 4]);
        assert_eq!(repeated_of_chunk(&c, 1), [(3, false)]);
        assert_eq!(repeated_of_chunk(&c, 2), [(1, true)]);
    }
}
