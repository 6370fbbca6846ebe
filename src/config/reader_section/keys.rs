//! The parameter names a reader section may hold, and the "did you mean" suggestion for a
//! name that is not one of them.

/// Parameters the CTF reader reads (reader, deserializer or enclosing record).
pub(crate) const READER_PARAMS: [&str; 18] = [
    "file",
    "input",
    "precision",
    "randomize",
    "randomizationSeed",
    "randomizationWindow",
    "sampleBasedRandomizationWindow",
    "skipSequenceIds",
    "maxErrors",
    "traceLevel",
    "chunkSizeInBytes",
    "keepDataInMemory",
    "frameMode",
    "cacheIndex",
    "verbosity",
    "randomizer",
    "numDataPartitions",
    "partitionIndex",
];

/// Other keys that real reader sections carry (CNTK-BEHAVIOUR §2.1, composite reader, and
/// the selection of the reader itself); they are accepted without a warning.
const OTHER_READER_KEYS: [&str; 13] = [
    "readerType",
    // CNTK's legacy readers' key, which real CTF configurations carry (Examples/Text/ATIS).
    "miniBatchMode",
    // The chunk cache's size of CNTK's first CTF reader; the cache here is sized by the
    // window and `keepDataInMemory`.
    "numChunksToCache",
    "deserializers",
    "type",
    "module",
    "truncated",
    "truncationLength",
    "multiThreadedDeserialization",
    "localTimeline",
    "checkData",
    "useNumericSequenceKeys",
    "hashSequenceKeys",
];

/// Parameters of one input record.
pub(crate) const INPUT_PARAMS: [&str; 4] = ["dim", "format", "alias", "definesMBSize"];

/// Whether `name` is a known reader or deserializer key (case-insensitive).
pub(crate) fn is_reader_key(name: &str) -> bool {
    reader_keys().any(|k| k.eq_ignore_ascii_case(name))
}

/// Every known reader or deserializer key.
pub(crate) fn reader_keys() -> impl Iterator<Item = &'static str> {
    READER_PARAMS.into_iter().chain(OTHER_READER_KEYS)
}

/// The closest of `candidates` to `name`, if it is close enough to be a likely typo.
pub(crate) fn suggest(
    name: &str,
    candidates: impl Iterator<Item = &'static str>,
) -> Option<&'static str> {
    let name = name.to_ascii_lowercase();
    let limit = (name.chars().count() / 3).clamp(1, 3);
    candidates
        .map(|c| (distance(&name, &c.to_ascii_lowercase()), c))
        .filter(|(d, _)| *d <= limit)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Edit distance counting insertions, deletions, substitutions and swaps of adjacent
/// characters (optimal string alignment).
fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let width = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * width];
    let at = |i: usize, j: usize| i * width + j;
    for i in 0..=a.len() {
        d[at(i, 0)] = i;
    }
    for j in 0..=b.len() {
        d[at(0, j)] = j;
    }
    for i in 1..=a.len() {
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut best = (d[at(i - 1, j)] + 1)
                .min(d[at(i, j - 1)] + 1)
                .min(d[at(i - 1, j - 1)] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                best = best.min(d[at(i - 2, j - 2)] + 1);
            }
            d[at(i, j)] = best;
        }
    }
    d[at(a.len(), b.len())]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distances() {
        assert_eq!(distance("radnomize", "randomize"), 1);
        assert_eq!(distance("", "abc"), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
    }

    #[test]
    fn suggestions() {
        assert_eq!(suggest("radnomize", reader_keys()), Some("randomize"));
        assert_eq!(suggest("Precison", reader_keys()), Some("precision"));
        assert_eq!(
            suggest("chunkSizeInByte", reader_keys()),
            Some("chunkSizeInBytes")
        );
        assert_eq!(suggest("dimm", INPUT_PARAMS.into_iter()), Some("dim"));
        assert_eq!(suggest("labelMappingFile", reader_keys()), None);
        assert_eq!(suggest("xyz", reader_keys()), None);
    }

    #[test]
    fn known_keys_are_case_insensitive() {
        assert!(is_reader_key("READERTYPE"));
        assert!(!is_reader_key("definesMBSize"));
    }
}
