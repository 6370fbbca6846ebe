//! Finding ids used by more than one sequence of the corpus (SPEC §7.1: of two sequences with
//! the same id that are not adjacent, the later one is invalid).
//!
//! Ids are usually increasing within each file and the files' id ranges do not overlap; that
//! is checked in one pass with no memory. Otherwise the id entries are sorted by key (4 bytes
//! per sequence, freed before returning).

use crate::index::{CorpusIndex, KeyMode};

/// Ordinals, sorted, of the sequences whose id an earlier sequence of the corpus used.
pub(super) fn find_repeats(index: &CorpusIndex) -> Vec<u32> {
    if ids_are_unique_by_order(index) {
        return Vec::new();
    }
    let mut ordinals: Vec<u32> = id_ordinals(index).collect();
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

/// Ordinals of the sequences whose key is an id: those of id-mode files, except ids too long
/// for 64 bits.
fn id_ordinals(index: &CorpusIndex) -> impl Iterator<Item = u32> + '_ {
    (0..index.files.len() as u32)
        .filter(|&f| index.files[f as usize].mode == KeyMode::Ids)
        .flat_map(|f| index.file_sequences(f))
        .filter(|o| index.overflowing_ids.binary_search(o).is_err())
}

/// Whether ids strictly increase within every file and the files' id ranges are disjoint.
fn ids_are_unique_by_order(index: &CorpusIndex) -> bool {
    let mut ranges = Vec::new();
    for f in 0..index.files.len() as u32 {
        if index.files[f as usize].mode != KeyMode::Ids {
            continue;
        }
        let mut range: Option<(u64, u64)> = None;
        for o in index.file_sequences(f) {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::{Chunk, IndexedFile, SequenceEntry};

    fn corpus(files: &[(&[u64], KeyMode)], overflowing: &[u32]) -> CorpusIndex {
        let mut index = CorpusIndex::default();
        for (f, (keys, mode)) in files.iter().enumerate() {
            let first = index.sequences.len() as u32;
            for &key in keys.iter() {
                index.sequences.push(SequenceEntry {
                    key,
                    offset: 0,
                    len: 1,
                    samples: 1,
                    line: 0,
                });
            }
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
                lines: keys.len() as u64,
                key_base: 0,
                chunks: chunk..chunk + 1,
                input_lines: vec![],
            });
        }
        index.overflowing_ids = overflowing.to_vec();
        index
    }

    #[test]
    fn sorted_disjoint_files_have_no_repeats() {
        let c = corpus(
            &[(&[5, 7, 9], KeyMode::Ids), (&[1, 2, 3], KeyMode::Ids)],
            &[],
        );
        assert!(ids_are_unique_by_order(&c));
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
    fn line_mode_keys_and_overflowing_ids_are_not_ids() {
        let c = corpus(
            &[
                (&[0, 1, 2], KeyMode::Lines),
                (&[2, u64::MAX, u64::MAX], KeyMode::Ids),
            ],
            &[4],
        );
        // Key 2 of the line-mode file is a line number, and ordinal 4 overflowed, so the
        // genuine id u64::MAX (ordinal 5) is the first of its kind.
        assert!(find_repeats(&c).is_empty());
        let c = corpus(&[(&[u64::MAX, 1, u64::MAX], KeyMode::Ids)], &[]);
        assert_eq!(find_repeats(&c), [2]);
    }
}
