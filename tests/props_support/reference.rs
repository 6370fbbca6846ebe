//! A deliberately naive reference parser, written from SPEC §1 and §7.1-7.3 only: split the
//! file into lines, each line on `|`, each sample on whitespace, and convert with
//! `str::parse`. It is slow and simple on purpose; it handles any bytes, so it also checks
//! the real parser on invalid input.

use std::collections::HashSet;

use ctf_reader::parser::StreamOptions;
use ctf_reader::{InputConfig, StorageFormat};

use super::grammar::{is_number, is_printable, is_ws, split_joined};
use super::run::{parse_bits, Flt, SampleSnap, SeqSnap};

/// What one line holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LineClass {
    /// The line has an error (its sequence is invalid).
    Bad,
    /// The line is valid: its configured samples and how many dense samples are padded.
    Good {
        /// `(input, sample)` in the order written.
        samples: Vec<(usize, SampleSnap)>,
        /// Lines of zero-padded dense samples on it.
        padded: u32,
    },
}

/// Classifies the part of a line after its leading digits (the id, if any).
pub fn classify<T: Flt>(content: &[u8], inputs: &[InputConfig]) -> LineClass {
    classify_inner::<T>(content, inputs).unwrap_or(LineClass::Bad)
}

fn classify_inner<T: Flt>(content: &[u8], inputs: &[InputConfig]) -> Option<LineClass> {
    let mut segments = content.split(|&b| b == b'|');
    let before_first_pipe = segments.next().unwrap_or_default();
    if !before_first_pipe.iter().all(|&b| is_ws(b)) {
        return None;
    }
    let mut seen = vec![false; inputs.len()];
    let mut samples = Vec::new();
    let mut padded = 0;
    for seg in segments {
        if seg.first() == Some(&b'#') {
            continue; // a comment, or the continuation of one after an escaped `|#`
        }
        if seg.iter().any(|&b| !is_ws(b) && !is_printable(b)) {
            return None;
        }
        let name_len = seg.iter().position(|&b| is_ws(b)).unwrap_or(seg.len());
        if name_len == 0 {
            return None;
        }
        let (name, rest) = seg.split_at(name_len);
        let Some(i) = inputs.iter().position(|c| c.alias.as_bytes() == name) else {
            continue; // not configured: skipped
        };
        if std::mem::replace(&mut seen[i], true) {
            return None; // twice on one line
        }
        let dim = inputs[i].dim;
        let tokens = rest.split(|&b| is_ws(b)).filter(|t| !t.is_empty());
        let sample = match inputs[i].format {
            StorageFormat::Dense => {
                let mut values = Vec::new();
                for tok in tokens {
                    for piece in split_joined(tok)? {
                        values.push(parse_bits::<T>(piece)?);
                    }
                }
                if values.len() > dim {
                    return None;
                }
                if values.len() < dim {
                    padded += 1;
                    values.resize(dim, 0); // +0.0 has all bits clear
                }
                SampleSnap::Dense(values)
            }
            StorageFormat::Sparse => {
                let mut entries = Vec::new();
                for tok in tokens {
                    let colon = tok.iter().position(|&b| b == b':')?;
                    let (index, value) = (&tok[..colon], &tok[colon + 1..]);
                    if index.is_empty() || !index.iter().all(u8::is_ascii_digit) {
                        return None;
                    }
                    let index: u64 = std::str::from_utf8(index).ok()?.parse().ok()?;
                    if index >= dim as u64 || !is_number(value) {
                        return None;
                    }
                    let value = parse_bits::<T>(std::str::from_utf8(value).ok()?)?;
                    entries.push((index as u32, value));
                }
                SampleSnap::Sparse(entries)
            }
        };
        samples.push((i, sample));
    }
    Some(LineClass::Good { samples, padded })
}

/// Which sequence a line belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// None (blank lines before the first content, or a group without data).
    Nothing,
    /// The valid sequence with this index.
    Valid(usize),
    /// The invalid sequence with this index.
    Invalid(usize),
}

/// An invalid sequence as the reference sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RefInvalid {
    /// Its key (`None` when the id does not fit in 64 bits).
    pub key: Option<u64>,
    /// 1-based first line.
    pub line: u64,
    /// Valid sequences before it.
    pub valid_before: usize,
    /// Line of its first error.
    pub first_error_line: u64,
}

/// The reference's reading of one file.
#[derive(Clone, Debug)]
pub struct RefOut {
    /// Physical lines.
    pub lines: u64,
    /// Lines with no configured sample and no error.
    pub skipped: u64,
    /// Valid sequences.
    pub seqs: Vec<SeqSnap>,
    /// Invalid sequences.
    pub invalid: Vec<RefInvalid>,
    /// Owner of each line (index = line - 1).
    pub owner: Vec<Owner>,
    /// Length in bytes of each line (without its line feed; line 1 without the BOM).
    pub line_len: Vec<usize>,
    /// Lines of zero-padded dense samples inside valid sequences (one entry per sample).
    pub padded_in_valid: Vec<u64>,
    /// The file has an id line without configured data or errors that starts a new id: SPEC
    /// does not say whether such a line opens a sequence, so callers skip the
    /// sequence-level comparison.
    pub ambiguous: bool,
}

struct Group {
    key: Option<u64>,
    first_line: u64,
    lines: Vec<u64>,
    key_error: bool,
    first_bad: Option<u64>,
    counted: u32,
    samples: Vec<Vec<SampleSnap>>,
    padded: Vec<u64>,
}

/// Parses a whole file; `None` when the file is fatally unreadable (UTF-16 BOM, or nothing
/// but a BOM and whitespace).
pub fn reference<T: Flt>(
    text: &[u8],
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
) -> Option<RefOut> {
    reference_in_corpus::<T>(text, inputs, options, key_base, &mut HashSet::new())
}

/// [`reference`] for one file of a corpus: `seen_keys` holds the keys of the earlier files'
/// sequences, ids and line-mode keys alike (keys are unique across the corpus, SPEC §1), and
/// receives this file's.
pub fn reference_in_corpus<T: Flt>(
    text: &[u8],
    inputs: &[InputConfig],
    options: StreamOptions,
    key_base: u64,
    seen_keys: &mut HashSet<u64>,
) -> Option<RefOut> {
    if text.starts_with(b"\xFF\xFE") || text.starts_with(b"\xFE\xFF") {
        return None;
    }
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    if text.iter().all(|&b| is_ws(b) || b == b'\n') {
        return None;
    }
    let mut lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    let mut out = RefOut {
        lines: lines.len() as u64,
        skipped: 0,
        seqs: Vec::new(),
        invalid: Vec::new(),
        owner: vec![Owner::Nothing; lines.len()],
        line_len: lines.iter().map(|l| l.len()).collect(),
        padded_in_valid: Vec::new(),
        ambiguous: false,
    };
    let mut id_mode = None;
    // Whitespace before the first id, skipped.
    let mut lead = 0;
    let mut open: Option<Group> = None;
    let new_group = |key, first_line, key_error| Group {
        key,
        first_line,
        lines: Vec::new(),
        key_error,
        first_bad: None,
        counted: 0,
        samples: vec![Vec::new(); inputs.len()],
        padded: Vec::new(),
    };
    for (i, line) in lines.iter().enumerate() {
        let line_no = i as u64 + 1;
        let ids = match id_mode {
            Some(ids) => ids,
            None if line.iter().all(|&b| is_ws(b)) => {
                out.skipped += 1;
                continue;
            }
            None => {
                // The first byte that is not whitespace decides; CNTK skips the whitespace
                // before the first id (the only id that may follow whitespace).
                let first = line.iter().position(|&b| !is_ws(b)).unwrap_or(0);
                // With skipSequenceIds its digits are skipped as at the start of any line.
                let ids = !options.skip_sequence_ids && line[first].is_ascii_digit();
                id_mode = Some(ids);
                if line[first].is_ascii_digit() {
                    lead = first;
                }
                ids
            }
        };
        let line = &line[std::mem::take(&mut lead)..];
        let digits = line.iter().take_while(|b| b.is_ascii_digit()).count();
        let class = classify::<T>(&line[digits..], inputs);
        let no_data = matches!(&class, LineClass::Good { samples, .. } if samples.is_empty());
        if !ids {
            close(open.take(), &mut out, options);
            open = Some(new_group(Some(key_base + line_no - 1), line_no, false));
        } else if digits > 0 {
            let id: Option<u64> = std::str::from_utf8(&line[..digits])
                .ok()
                .and_then(|s| s.parse().ok());
            let same = open
                .as_ref()
                .is_some_and(|g| g.key.is_some() && g.key == id);
            if !same {
                close(open.take(), &mut out, options);
                let key_error = match id {
                    None => true,
                    Some(id) => !seen_keys.insert(id),
                };
                open = Some(new_group(id, line_no, key_error));
                if no_data {
                    out.ambiguous = true;
                }
            }
        }
        let group = open.as_mut().expect("id mode starts with an id line");
        group.lines.push(line_no);
        match class {
            LineClass::Bad => {
                group.first_bad.get_or_insert(line_no);
            }
            LineClass::Good { samples, padded } => {
                if samples.is_empty() {
                    out.skipped += 1;
                } else {
                    group.counted += 1;
                    for (input, s) in samples {
                        group.samples[input].push(s);
                    }
                    group.padded.extend((0..padded).map(|_| line_no));
                }
            }
        }
        if !ids {
            // A line that is a sequence uses its key (a blank or comment-only line does not).
            if group.first_bad.is_some() || group.counted > 0 {
                group.key_error = !seen_keys.insert(group.key.expect("a line-mode key"));
            }
            close(open.take(), &mut out, options);
        }
    }
    close(open.take(), &mut out, options);
    Some(out)
}

fn close(group: Option<Group>, out: &mut RefOut, options: StreamOptions) {
    let Some(g) = group else { return };
    if !g.key_error && g.first_bad.is_none() && g.counted == 0 {
        return; // no configured data: not a sequence
    }
    let counts: Vec<usize> = g.samples.iter().map(Vec::len).collect();
    let longest = counts.iter().copied().max().unwrap_or(0);
    // SPEC §1 states the line-count rule without exception (the generators never set
    // definesMBSize, for which CNTK counted lines differently).
    let rule_broken =
        counts.contains(&0) || g.counted as usize > longest || (options.frame_mode && longest > 1);
    if g.key_error || g.first_bad.is_some() || rule_broken {
        let first_error_line = match (g.key_error, g.first_bad) {
            (false, Some(bad)) => bad,
            _ => g.first_line,
        };
        for &l in &g.lines {
            out.owner[l as usize - 1] = Owner::Invalid(out.invalid.len());
        }
        out.invalid.push(RefInvalid {
            key: g.key,
            line: g.first_line,
            valid_before: out.seqs.len(),
            first_error_line,
        });
    } else {
        for &l in &g.lines {
            out.owner[l as usize - 1] = Owner::Valid(out.seqs.len());
        }
        out.padded_in_valid.extend(&g.padded);
        out.seqs.push(SeqSnap {
            key: g.key.expect("valid sequences have a key"),
            line: g.first_line,
            counted_lines: g.counted,
            inputs: g.samples,
        });
    }
}
