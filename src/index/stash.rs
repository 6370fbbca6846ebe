//! Parsing while indexing: on a cold start the scan helpers can parse a part instead of
//! scanning it, derive from the parse exactly what the scan would have found, and keep the
//! parsed sequences (the "stash") for the engine's loaders, which then do not read and
//! parse that text a second time.
//!
//! A part is parsed in id mode as two pieces: its first run of lines (which may continue the
//! run open before the part, so its parse is only used for the index) and the rest. In line
//! mode it is one piece. Of the rest, the sequences before the part's last one (the run still
//! open at its end, which may go on in the next part) are kept: their text, from the start
//! of a sequence to the start of the next, is what a loader would read for a part of a chunk
//! that begins and ends there, and the engine makes them such parts (see
//! `pipeline::engine`).
//!
//! Only a clean part is derived from its parse: one without any error or warning, whose first
//! line (in id mode) starts with an id of at most 19 digits. Anything else (rare in real
//! data) is scanned as before, so the index is exactly the scan's; the tests compare them
//! part by part. The parse differs from a loader's only in its line numbers (counted from
//! the part's first line) and line-mode keys, which the engine shifts, and in repeated ids,
//! which it checks: a part holding a repeated id is parsed again by a loader.
//!
//! The stash is bounded: the helpers stop parsing once the sequences kept hold
//! [`StashRequest::max_bytes`], and scan the rest.

use std::any::Any;

use crate::config::{InputConfig, ReaderConfig};
use crate::index::scan::{OpenRun, ScannedSequence, SegmentScan};
use crate::parser::{
    BufferLengths, Element, KeyMode, ParsedRun, ParsedSequences, StreamOptions, StreamParser,
};
use crate::sync::atomic::{AtomicBool, AtomicU64, Ordering};
// The parser factory is immutable and not one of the scan's synchronization points, so it
// is counted by `std`'s `Arc`, which holds a trait object.
use std::sync::Arc;

/// What the scan of a part found, as [`crate::index::scan::Scanner::scan_segment`] and its
/// scanner report it.
pub(crate) struct DerivedScan {
    pub(crate) scan: SegmentScan,
    pub(crate) input_lines: Vec<u64>,
}

/// Parsed sequences of a file kept for the engine: those whose text is `start..end`.
pub struct StashPiece {
    /// The file (its number in the corpus).
    pub file: u32,
    /// Byte offset of the first sequence's first line.
    pub start: u64,
    /// Byte offset of the next sequence's first line, just past the text parsed.
    pub end: u64,
    /// The line number the parse gave the piece's first line (counted from the scan's part;
    /// the engine shifts the parse's lines, and line-mode keys, to the index's by the first
    /// sequence, and the tests parse the piece's text from this line to compare).
    #[cfg_attr(not(test), allow(dead_code))]
    pub first_line: u64,
    /// Bytes the parsed sequences hold.
    pub heap_bytes: u64,
    /// The parsed sequences: a `ParsedSequences<T>` of the engine's element type.
    pub parsed: Box<dyn Any + Send + Sync>,
}

/// Parses a part of a file for the scan (implemented for each element type).
pub(crate) trait SegmentParser: Send {
    /// Parses `text` (complete lines, ending with a line feed) starting at byte `offset` of
    /// a file in `mode` whose line-mode keys start at `key_base`, its first line counted as
    /// line 1. Returns what the scan would have found, its sequences in `sequences` (emptied
    /// first, so that the scan's lists are reused), and the sequences to keep, if any;
    /// `None` if the part is not clean (it is then scanned; `sequences` is left empty).
    fn parse(
        &mut self,
        mode: KeyMode,
        key_base: u64,
        offset: u64,
        text: &[u8],
        sequences: &mut Vec<ScannedSequence>,
    ) -> Option<(DerivedScan, Option<StashPiece>)>;
}

/// Makes a [`SegmentParser`] per scan helper.
pub(crate) type SegmentParsers = Arc<dyn Fn() -> Box<dyn SegmentParser> + Send + Sync>;

/// Asks the index build to parse while it scans, and how much to keep.
#[derive(Clone)]
pub(crate) struct StashRequest {
    pub(crate) parsers: SegmentParsers,
    /// Most bytes of parsed sequences kept.
    pub(crate) max_bytes: u64,
}

impl StashRequest {
    /// A request for the engine's element type `T`, parsing as `config` says (the first
    /// deserializer's inputs).
    pub(crate) fn new<T: Element>(config: &ReaderConfig, max_bytes: u64) -> Self {
        let options = StreamOptions {
            skip_sequence_ids: config.skip_sequence_ids,
            frame_mode: config.frame_mode,
        };
        Self::for_inputs::<T>(
            &config.inputs[config.deserializer_inputs(0)],
            options,
            max_bytes,
        )
    }

    /// A request for element type `T`, parsing `inputs` with `options`.
    pub(crate) fn for_inputs<T: Element>(
        inputs: &[InputConfig],
        options: StreamOptions,
        max_bytes: u64,
    ) -> Self {
        let inputs = inputs.to_vec();
        let defining = inputs.iter().position(|i| i.defines_mb_size);
        StashRequest {
            parsers: Arc::new(move || {
                Box::new(PartParser::<T>::new(&inputs, options, defining)) as Box<dyn SegmentParser>
            }),
            max_bytes,
        }
    }
}

/// The room left in the stash, shared by the helpers.
pub(crate) struct StashBudget {
    max_bytes: u64,
    used: AtomicU64,
    full: AtomicBool,
}

impl StashBudget {
    pub(crate) fn new(max_bytes: u64) -> Self {
        StashBudget {
            max_bytes,
            used: AtomicU64::new(0),
            full: AtomicBool::new(false),
        }
    }

    /// Whether parts are still worth parsing (the stash has room).
    pub(crate) fn has_room(&self) -> bool {
        !self.full.load(Ordering::Relaxed)
    }

    /// Takes room for `bytes`; false (and no more room from now on) if they do not fit.
    pub(crate) fn take(&self, bytes: u64) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        if before.saturating_add(bytes) <= self.max_bytes {
            return true;
        }
        self.used.fetch_sub(bytes, Ordering::Relaxed);
        self.full.store(true, Ordering::Relaxed);
        false
    }
}

/// Where the first run of lines of `text` ends (the start of the first line whose id is
/// another), or `text.len()`; `None` unless the first line starts with an id of at most 19
/// digits, or if a later line's id is longer (left to the scan).
fn first_run_end(text: &[u8]) -> Option<usize> {
    let id_at = |at: usize| -> Option<Option<u64>> {
        let digits = text[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        match digits {
            0 => Some(None),
            1..=19 => Some(Some(
                text[at..at + digits]
                    .iter()
                    .fold(0u64, |v, &b| v * 10 + u64::from(b - b'0')),
            )),
            _ => None,
        }
    };
    let first = id_at(0)??;
    let mut at = 0;
    while at < text.len() {
        match id_at(at)? {
            Some(id) if id != first => return Some(at),
            _ => {}
        }
        at += memchr::memchr(b'\n', &text[at..]).map_or(text.len() - at, |n| n + 1);
    }
    Some(text.len())
}

/// A [`SegmentParser`] for element type `T`.
struct PartParser<T> {
    parser: StreamParser<T>,
    inputs: Vec<InputConfig>,
    defining: Option<usize>,
    /// Run lists done with, for the next pieces to record into ([`Self::keep_runs`]), so
    /// that each part does not grow new ones from nothing.
    spare_runs: Vec<Vec<ParsedRun>>,
    diagnostics: Vec<crate::diag::Diagnostic>,
    invalid: Vec<crate::parser::InvalidSequence>,
    /// A buffer for the first run's sequences (id mode; not kept).
    head: Option<ParsedSequences<T>>,
    /// The text size and output buffer lengths of the last piece kept, to size the next.
    last_rest: Option<(u64, BufferLengths)>,
}

/// One piece parsed: its runs (starts from the part's start) and sequences.
struct Piece<T> {
    runs: Vec<ParsedRun>,
    sequences: ParsedSequences<T>,
}

impl<T: Element> PartParser<T> {
    fn new(inputs: &[InputConfig], options: StreamOptions, defining: Option<usize>) -> Self {
        PartParser {
            parser: StreamParser::new(inputs, options),
            inputs: inputs.to_vec(),
            defining,
            spare_runs: Vec::new(),
            diagnostics: Vec::new(),
            invalid: Vec::new(),
            head: None,
            last_rest: None,
        }
    }

    /// Keeps `runs`'s memory for a later piece to record into (at most two lists: the
    /// pieces of one part).
    fn keep_runs(&mut self, runs: Vec<ParsedRun>) {
        if runs.capacity() > 0 && self.spare_runs.len() < 2 {
            self.spare_runs.push(runs);
        }
    }

    /// Parses `text` (at `base` within the part) as a range of `mode` from line
    /// `first_line`; `None` if it has any diagnostic or invalid sequence.
    fn parse_piece(
        &mut self,
        mode: KeyMode,
        key_base: u64,
        first_line: u64,
        base: usize,
        text: &[u8],
        into: &mut ParsedSequences<T>,
    ) -> Option<Vec<ParsedRun>> {
        self.parser
            .start_range(mode, first_line, key_base, Vec::new());
        self.parser
            .record_runs_into(self.spare_runs.pop().unwrap_or_default());
        let parsed = self
            .parser
            .feed(text)
            .and_then(|()| self.parser.finish_file());
        let mut runs = Vec::new();
        self.parser.take_runs(&mut runs);
        self.parser
            .take_output(into, &mut self.diagnostics, &mut self.invalid);
        if parsed.is_err() || !self.diagnostics.is_empty() || !self.invalid.is_empty() {
            self.keep_runs(runs);
            return None;
        }
        for run in &mut runs {
            run.start += base;
            if run.end != 0 {
                run.end += base;
            }
        }
        Some(runs)
    }

    /// The samples of a run: its lines holding a configured input, or its samples of the
    /// `definesMBSize` input (as the scan counts them).
    fn samples(&self, run: &ParsedRun, sequences: &ParsedSequences<T>) -> u64 {
        match (run.sequence, self.defining) {
            (None, _) => 0,
            (Some(s), Some(input)) => sequences.sample_count(s as usize, input) as u64,
            (Some(s), None) => u64::from(sequences.sequences[s as usize].counted_lines),
        }
    }
}

impl<T: Element> SegmentParser for PartParser<T> {
    fn parse(
        &mut self,
        mode: KeyMode,
        key_base: u64,
        offset: u64,
        text: &[u8],
        sequences: &mut Vec<ScannedSequence>,
    ) -> Option<(DerivedScan, Option<StashPiece>)> {
        sequences.clear();
        // Id mode: the first run, then the rest; line mode: the whole part.
        let split = match mode {
            KeyMode::Ids => first_run_end(text)?,
            KeyMode::Lines => 0,
        };
        let mut head = Piece {
            runs: Vec::new(),
            sequences: self
                .head
                .take()
                .unwrap_or_else(|| ParsedSequences::new(&self.inputs)),
        };
        let mut rest = Piece {
            runs: Vec::new(),
            sequences: ParsedSequences::new(&self.inputs),
        };
        let mut lines = 0;
        let mut clean = true;
        let parts = [
            (&mut head, 0..split, true),
            (&mut rest, split..text.len(), false),
        ];
        for (piece, range, first_run) in parts {
            if clean && !range.is_empty() {
                let base = range.start;
                if let (true, Some((bytes, lengths))) = (base == split, &self.last_rest) {
                    // The rest's buffers leave with it: the parser's next ones are sized
                    // like the last ones kept, not grown.
                    self.parser
                        .reserve_output(lengths, range.len() as u64, *bytes);
                }
                // The first run may end a sequence begun in the part before: not a whole
                // sequence to check against the rules of one (and not kept).
                self.parser.skip_sequence_rules(first_run);
                match self.parse_piece(
                    mode,
                    key_base,
                    lines + 1,
                    base,
                    &text[range],
                    &mut piece.sequences,
                ) {
                    Some(runs) => piece.runs = runs,
                    None => clean = false,
                }
                lines = self.parser.lines_in_file();
            }
        }
        if clean && split < text.len() {
            self.last_rest = Some(((text.len() - split) as u64, rest.sequences.buffer_lengths()));
        }
        let derived = clean
            .then(|| self.derive(mode, offset, text.len(), lines, [&head, &rest], sequences))
            .flatten();
        if derived.is_none() {
            sequences.clear();
        }
        let Piece {
            runs: mut rest_runs,
            sequences: rest_sequences,
        } = rest;
        let result =
            derived.map(|derived| (derived, keep_rest(offset, &mut rest_runs, rest_sequences)));
        self.head = Some(head.sequences);
        self.keep_runs(head.runs);
        self.keep_runs(rest_runs);
        result
    }
}

/// The sequences of a part's rest to keep (`sequences`, whose runs are `runs`): all but its
/// last run's (which may go on in the next part, and is popped from `runs`), as the text
/// from its first run's start to its last run's.
fn keep_rest<T: Element>(
    offset: u64,
    runs: &mut Vec<ParsedRun>,
    mut sequences: ParsedSequences<T>,
) -> Option<StashPiece> {
    let last = runs.pop()?;
    let first = *runs.first()?;
    if let Some(s) = last.sequence {
        sequences.truncate(s as usize);
    }
    if sequences.is_empty() {
        return None;
    }
    Some(StashPiece {
        file: 0,
        start: offset + first.start as u64,
        end: offset + last.start as u64,
        first_line: first.line,
        heap_bytes: sequences.heap_bytes() as u64,
        parsed: Box::new(sequences),
    })
}

impl<T: Element> PartParser<T> {
    /// What the scan of the part would have found, from its pieces' runs (its sequences
    /// appended to `sequences`).
    fn derive(
        &self,
        mode: KeyMode,
        offset: u64,
        len: usize,
        lines: u64,
        pieces: [&Piece<T>; 2],
        sequences: &mut Vec<ScannedSequence>,
    ) -> Option<DerivedScan> {
        sequences.reserve(pieces.iter().map(|p| p.runs.len()).sum());
        let mut input_lines = vec![0u64; self.inputs.len()];
        for piece in pieces {
            for (input, count) in input_lines.iter_mut().enumerate() {
                *count += piece.sequences.columns[input].sample_count() as u64;
            }
            for run in &piece.runs {
                sequences.push(ScannedSequence {
                    key: run.key,
                    is_id: run.is_id,
                    start: offset + run.start as u64,
                    end: offset + run.end as u64,
                    line: run.line,
                    samples: self.samples(run, &piece.sequences),
                });
            }
        }
        let end = offset + len as u64;
        let tail = match mode {
            KeyMode::Lines => None,
            KeyMode::Ids => {
                // Each run ends where the next starts; the last is still open.
                let mut next_start = end;
                for seq in sequences.iter_mut().rev() {
                    seq.end = next_start;
                    next_start = seq.start;
                }
                let last = sequences.pop()?;
                if !last.is_id || sequences.first().is_some_and(|s| !s.is_id) {
                    return None;
                }
                Some(OpenRun::of(&last))
            }
        };
        Some(DerivedScan {
            scan: SegmentScan {
                lead: None,
                tail,
                lines,
                end,
            },
            input_lines,
        })
    }
}
