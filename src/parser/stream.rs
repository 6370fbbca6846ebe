//! The incremental parser: bytes in (in pieces of any size), complete sequences out.
//!
//! It finds lines, strips the UTF-8 BOM, decides between id mode and line mode from the
//! first byte that is not whitespace (CNTK-BEHAVIOUR §4.1: a digit there is an id, which
//! alone of the file's ids may follow whitespace; with `skipSequenceIds`, digits there are
//! skipped like those at the start of any line), groups lines into sequences, applies the
//! sequence rules of SPEC §1 and §7.1 and rolls back invalid sequences. It knows nothing of
//! files: the reader feeds it the bytes of one file after another and attaches file names to
//! what it reports. Feeding the same bytes split at any point gives the same result.

use std::fmt;

use memchr::{memchr, memrchr};

use crate::config::InputConfig;
use crate::diag::{Diagnostic, Severity};
use crate::parser::columns::{BufferLengths, ParsedSequences, SequenceInfo};
use crate::parser::line::{skip_space, LineLead, LineParser};
use crate::parser::number::Element;
use crate::parser::seen_keys::SeenKeys;
use crate::parser::word::{leading_digits, load_word, low_bytes};
use crate::quote::{quote, QUOTED_BYTES};

/// Options of the sequence rules that are not about inputs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// Ignore ids: every line is its own sequence (`skipSequenceIds`).
    pub skip_sequence_ids: bool,
    /// A sequence with more than one sample of any input is an error (`frameMode`).
    pub frame_mode: bool,
}

/// An error that stops the reading of a file (as opposed to an invalid sequence).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FatalDataError {
    /// 1-based line, or 0 when the error concerns the whole file.
    pub line: u64,
    /// 1-based column in bytes, or 0.
    pub col: u64,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for FatalDataError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// An invalid sequence: its key and its first error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InvalidSequence {
    /// The sequence key.
    pub key: u64,
    /// 1-based first line of the sequence.
    pub line: u64,
    /// Its first error (also among the diagnostics, possibly of an earlier step: a sequence
    /// can span several [`StreamParser::feed`] calls).
    pub first_error: Diagnostic,
    /// Number of complete sequences that precede it in [`StreamParser::sequences`].
    pub valid_before: usize,
}

/// Counts kept while parsing (for `ctf validate`'s summary).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ParseCounts {
    /// Physical lines seen.
    pub lines: u64,
    /// Lines that belong to no sequence: blank, comment-only, or only unconfigured inputs.
    pub skipped_lines: u64,
    /// Valid sequences produced.
    pub sequences: u64,
    /// Sequences rejected as invalid.
    pub invalid_sequences: u64,
    /// Errors reported.
    pub errors: u64,
    /// Warnings reported.
    pub warnings: u64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Undecided,
    Ids,
    Lines,
}

/// Whether a file's sequences are delimited by ids or by lines (CNTK-BEHAVIOUR §4.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum KeyMode {
    /// Sequences are runs of lines with the same leading id; keys are the ids.
    Ids,
    /// Every line is its own sequence; keys are 0-based line numbers across the corpus.
    Lines,
}

/// A sequence of a byte range whose key an earlier sequence of the corpus used, as the index
/// lists it for [`StreamParser::start_range`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RepeatedKey {
    /// 1-based line number of the sequence's first line.
    pub line: u64,
    /// Whether the key it repeats is the line-mode key of a sequence in an earlier file
    /// without ids (its line number across the corpus) rather than an id.
    pub repeats_line_key: bool,
}

/// How the parser learns that a key repeats one used by an earlier sequence: an id, or in
/// line mode the line number across the corpus (SPEC §1: keys are unique across the corpus).
#[derive(Clone, Debug)]
enum RepeatCheck {
    /// Whole files: remember every id seen, and the line-mode keys of the sequences of files
    /// without ids, as runs of consecutive keys where they increase (module `seen_keys`: a
    /// file numbered 0, 1, 2, … takes one run, and so does a file without ids whose lines
    /// are all sequences).
    Track { ids: SeenKeys, line_keys: SeenKeys },
    /// A byte range of a file: the index lists the (sorted) sequences whose key repeats an
    /// earlier one anywhere in the corpus.
    Given {
        repeated: Vec<RepeatedKey>,
        next: usize,
    },
}

impl RepeatCheck {
    /// A check that has seen no key yet.
    fn new() -> Self {
        RepeatCheck::Track {
            ids: SeenKeys::default(),
            line_keys: SeenKeys::default(),
        }
    }

    /// The listed repeat of the sequence starting at `line`, if any (lines come in order).
    fn given(repeated: &[RepeatedKey], next: &mut usize, line: u64) -> Option<RepeatedKey> {
        while repeated.get(*next).is_some_and(|r| r.line < line) {
            *next += 1;
        }
        repeated.get(*next).copied().filter(|r| r.line == line)
    }

    /// Whether the id-mode sequence with `id` starting at `line` repeats an earlier key: if
    /// so, the message of its error.
    fn id_repeat(&mut self, id: u64, line: u64) -> Option<String> {
        let repeats_line_key = match self {
            RepeatCheck::Track { ids, line_keys } => {
                let line_key = line_keys.contains(id);
                let seen = !ids.insert(id);
                if !line_key && !seen {
                    return None;
                }
                line_key
            }
            RepeatCheck::Given { repeated, next } => {
                Self::given(repeated, next, line)?.repeats_line_key
            }
        };
        Some(if repeats_line_key {
            format!(
                "sequence id {id} was already used as the key of an earlier sequence in a file \
                 without ids (whose keys are 0-based line numbers across the corpus)"
            )
        } else {
            format!(
                "sequence id {id} was already used by an earlier sequence (an id may repeat \
                 only on adjacent lines of one file)"
            )
        })
    }

    /// Whether the line-mode sequence with `key` at `line` repeats an earlier key (which can
    /// only be an id: the files' line numbers do not overlap): if so, the message of its
    /// error. Records the key as used.
    fn line_key_repeat(&mut self, key: u64, line: u64) -> Option<String> {
        let repeated = match self {
            RepeatCheck::Track { ids, line_keys } => {
                line_keys.insert(key);
                !ids.is_empty() && ids.contains(key)
            }
            RepeatCheck::Given { repeated, next } => Self::given(repeated, next, line).is_some(),
        };
        repeated.then(|| {
            format!(
                "sequence {key} repeats the id {key} of an earlier sequence (in a file without \
                 ids a sequence's key is its 0-based line number across the corpus, and keys \
                 must be unique)"
            )
        })
    }
}

#[derive(Clone, Debug)]
struct OpenSequence {
    key: u64,
    /// The id that opened the sequence; `None` in line mode and for an id beyond 64 bits
    /// (which no later line continues).
    id: Option<u64>,
    /// The id's bytes as written on the line that opened the sequence (as a little-endian
    /// word), when they are 1 to 7 digits; [`NO_ID_BYTES`] otherwise.
    id_bytes: u64,
    /// The id's bytes and the byte after them on the line that opened the sequence (a
    /// little-endian word, `id_lead_mask` covering them), when the id is 1 to 7 digits: a
    /// line that begins with them continues the sequence (the byte after the id is no digit),
    /// found with one comparison. Otherwise a mask of 0 and bits of 1, which match nothing.
    id_lead: u64,
    id_lead_mask: u64,
    /// The id's length in bytes, where `id_lead` is set.
    id_len: usize,
    line: u64,
    counted_lines: u32,
    errors: u32,
    first_error: Option<Diagnostic>,
    /// Where its first line starts in the text fed (its length is measured from there),
    /// and while runs are recorded in line mode where its line ends (see [`ParsedRun`]).
    start: usize,
    end: usize,
}

/// A sequence (or an id-mode run of lines) the parser found, as recorded while
/// [`StreamParser::record_runs`] is on: what the index scan needs to know of it, so that a
/// part parsed anyway can stand for the part's scan (module `index::stash`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParsedRun {
    /// Byte offset of its first line in the text fed since the range started.
    pub start: usize,
    /// In line mode, the byte offset just past its line; in id mode 0 (the next run's start,
    /// or the end of the text, ends it).
    pub end: usize,
    /// 1-based line number of its first line.
    pub line: u64,
    /// Its key, as in [`SequenceInfo::key`].
    pub key: u64,
    /// Whether its key is an id.
    pub is_id: bool,
    /// Its position among the complete sequences output since the range started; `None`
    /// for an id-mode run without a configured input, which is no sequence, and for an
    /// invalid sequence.
    pub sequence: Option<u32>,
}

/// Lines [`StreamParser::continue_run`] lets pass without trying a run of single values
/// after one that refused its first line.
const RUN_PAUSE: u8 = 16;

/// [`OpenSequence::id_bytes`] of a sequence whose lines are compared by id value only.
const NO_ID_BYTES: u64 = u64::MAX;

const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

/// Length of the byte order mark that starts a file whose first bytes are `head` (at least
/// three of them, unless the file is shorter): 3 for UTF-8's, 0 for none. UTF-16's is fatal.
pub(crate) fn byte_order_mark_len(head: &[u8]) -> Result<usize, FatalDataError> {
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        return Err(FatalDataError {
            line: 1,
            col: 1,
            message: "the file starts with a UTF-16 byte order mark; only UTF-8 (or ASCII) text \
                      is supported"
                .to_string(),
        });
    }
    Ok(if head.starts_with(UTF8_BOM) {
        UTF8_BOM.len()
    } else {
        0
    })
}

/// The error for a file with nothing but a byte order mark and whitespace.
pub(crate) fn empty_file_error() -> FatalDataError {
    FatalDataError {
        line: 0,
        col: 0,
        message: "the file is empty".to_string(),
    }
}

/// Incremental CTF parser for one configuration.
pub struct StreamParser<T> {
    lines: LineParser,
    out: ParsedSequences<T>,
    diags: Vec<Diagnostic>,
    invalid: Vec<InvalidSequence>,
    options: StreamOptions,
    carry: Vec<u8>,
    at_file_start: bool,
    saw_content: bool,
    mode: Mode,
    /// Whether the next line to open a sequence is the first line with content of its file
    /// (only a BOM and whitespace before it), where the whitespace before the digits is
    /// skipped in line mode too, as CNTK skips it ([`open_line`](Self::open_line)).
    at_first_content: bool,
    /// 1-based number of the next line of the current file.
    next_line: u64,
    /// Line-mode key of the first line of the current file.
    key_base: u64,
    repeats: RepeatCheck,
    open: Option<OpenSequence>,
    counts: ParseCounts,
    /// Lines left before [`continue_run`](Self::continue_run) tries a run of single values
    /// again, after one that refused its first line ([`RUN_PAUSE`]).
    run_pause: u8,
    scratch_counts: Vec<usize>,
    /// The runs found since recording started ([`record_runs`](Self::record_runs)).
    runs: Option<Vec<ParsedRun>>,
    /// Bytes of the current range fed so far, and where the buffer being processed starts
    /// among them (kept while recording runs).
    fed: usize,
    buf_base: usize,
    /// Whether sequences skip the sequence-level rules
    /// ([`skip_sequence_rules`](Self::skip_sequence_rules)).
    rules_skipped: bool,
    /// Longest line, line feed excluded, that [`feed`](Self::feed) holds whole
    /// ([`limit_line_bytes`](Self::limit_line_bytes)).
    max_line_bytes: usize,
    /// Longest valid sequence, in bytes from its first line's start to the next sequence's
    /// ([`limit_sequence_bytes`](Self::limit_sequence_bytes)).
    max_sequence_bytes: usize,
}

impl<T: Element> StreamParser<T> {
    /// A parser for the given inputs, ready for the first file.
    pub fn new(inputs: &[InputConfig], options: StreamOptions) -> Self {
        StreamParser {
            lines: LineParser::new(inputs),
            out: ParsedSequences::new(inputs),
            diags: Vec::new(),
            invalid: Vec::new(),
            options,
            carry: Vec::new(),
            at_file_start: true,
            saw_content: false,
            mode: Mode::Undecided,
            at_first_content: false,
            next_line: 1,
            key_base: 0,
            repeats: RepeatCheck::new(),
            open: None,
            counts: ParseCounts::default(),
            run_pause: 0,
            scratch_counts: Vec::new(),
            runs: None,
            fed: 0,
            buf_base: 0,
            rules_skipped: false,
            max_line_bytes: usize::MAX,
            max_sequence_bytes: usize::MAX,
        }
    }

    /// Makes a line longer than `max` bytes (its line feed excluded) a fatal error at its
    /// first column, found as soon as that many of its bytes have been fed, so that a file
    /// without line feeds (a binary file, one with CR line ends, `/dev/zero`) cannot make the
    /// parser hold more than `max` bytes of it. Until this is called (or with `usize::MAX`),
    /// a line is held whole whatever its length.
    pub fn limit_line_bytes(&mut self, max: usize) {
        self.max_line_bytes = max;
    }

    /// Makes a sequence longer than `max` bytes an error of that sequence, with the message
    /// of the index, which refuses such a sequence ([`IndexLimits`]): its bytes run from the
    /// start of its first line to the start of the next sequence's (in line mode, past its
    /// line's line feed), or to the end of the file. Until this is called (or with
    /// `usize::MAX`), a sequence may be of any length.
    ///
    /// [`IndexLimits`]: crate::index::chunking::IndexLimits
    pub fn limit_sequence_bytes(&mut self, max: usize) {
        self.max_sequence_bytes = max;
    }

    /// Forgets everything about the corpus read so far (seen ids, counts, buffered data), to
    /// read a new corpus with the same configuration and buffers.
    pub fn reset(&mut self) {
        self.start_file(0);
        self.out.truncate(0);
        self.diags.clear();
        self.invalid.clear();
        self.repeats = RepeatCheck::new();
        self.counts = ParseCounts::default();
    }

    /// Gives up the current file after a fatal error of its own (it cannot be read on, or
    /// [`feed`](Self::feed) refused it): the sequence it left open is dropped, neither
    /// delivered nor counted, and so are the bytes of its unfinished line. The sequences it
    /// completed stay. Call [`start_file`](Self::start_file) before the next file.
    pub fn abandon_file(&mut self) {
        if self.open.take().is_some() {
            self.out.rollback_sequence();
        }
        self.carry.clear();
    }

    /// Prepares for the next file of the corpus; its line-mode keys start at `key_base`.
    /// Ids seen in earlier files stay seen (keys are unique across the corpus).
    pub fn start_file(&mut self, key_base: u64) {
        self.carry.clear();
        self.at_file_start = true;
        self.saw_content = false;
        self.mode = Mode::Undecided;
        self.at_first_content = false;
        self.next_line = 1;
        self.key_base = key_base;
        self.open = None;
        self.fed = 0;
    }

    /// Records, from now until [`take_runs`](Self::take_runs), every sequence found, and in
    /// id mode every run of lines (also one without a configured input), with where it
    /// starts in the text fed since the range or file started.
    pub fn record_runs(&mut self) {
        let buffer = self.runs.take().unwrap_or_default();
        self.record_runs_into(buffer);
    }

    /// As [`record_runs`](Self::record_runs), recording into `buffer` (emptied first), so
    /// that a caller parsing range after range reuses the memory of runs it is done with.
    pub fn record_runs_into(&mut self, mut buffer: Vec<ParsedRun>) {
        buffer.clear();
        self.runs = Some(buffer);
    }

    /// Until called again with `false`, does not check the sequences ended against the rules
    /// that need a whole sequence (an input without a sample, a line without a sample of the
    /// longest input, `frameMode`): for text whose first sequence may be the end of one
    /// begun before it, whose parse is not kept (the index build's first run of a part).
    /// Errors within lines are still reported.
    pub fn skip_sequence_rules(&mut self, skip: bool) {
        self.rules_skipped = skip;
    }

    /// Moves the runs recorded into `into` (emptied first) and stops recording.
    pub fn take_runs(&mut self, into: &mut Vec<ParsedRun>) {
        into.clear();
        if let Some(runs) = self.runs.take() {
            *into = runs;
        }
    }

    /// Number of lines of the current file seen so far (including a final line without LF
    /// once [`finish_file`](Self::finish_file) has run).
    pub fn lines_in_file(&self) -> u64 {
        self.next_line - 1
    }

    /// Complete sequences parsed so far (since the last [`clear`](Self::clear)).
    pub fn sequences(&self) -> &ParsedSequences<T> {
        &self.out
    }

    /// Errors and warnings in the order found (since the last [`clear`](Self::clear)).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.diags
    }

    /// Invalid sequences found (since the last [`clear`](Self::clear)).
    pub fn invalid_sequences(&self) -> &[InvalidSequence] {
        &self.invalid
    }

    /// Running counts since the parser was created.
    pub fn counts(&self) -> ParseCounts {
        self.counts
    }

    /// Drops the complete sequences and the diagnostics handed out so far.
    pub fn clear(&mut self) {
        self.out.clear_complete();
        self.diags.clear();
        self.invalid.clear();
    }

    /// Keeps only the first `n` complete sequences (the reader cuts a batch at a failure).
    pub fn truncate_sequences(&mut self, n: usize) {
        self.out.truncate(n);
    }

    /// Parses the next piece of the current file.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), FatalDataError> {
        // Where `data` starts among the bytes fed (for the runs recorded).
        let mut data_base = self.fed;
        self.fed += data.len();
        if self.at_file_start {
            let needed = UTF8_BOM.len().saturating_sub(self.carry.len());
            let take = needed.min(data.len());
            self.carry.extend_from_slice(&data[..take]);
            data = &data[take..];
            data_base += take;
            if self.carry.len() < UTF8_BOM.len() && data.is_empty() {
                return Ok(()); // wait for more bytes to decide on the BOM
            }
            self.check_file_start()?;
        }
        // Only a piece that, with the line carried over, exceeds the limit can hold a line
        // that does: the blocks of a read are far smaller than any useful limit.
        if self.carry.len().saturating_add(data.len()) > self.max_line_bytes {
            if let Some(start) = self.too_long_line(data) {
                // The lines before it are parsed as they would be had the text come in
                // smaller pieces.
                self.feed_lines(&data[..start], data_base);
                self.carry = Vec::new();
                return Err(FatalDataError {
                    line: self.next_line,
                    col: 1,
                    message: format!(
                        "the line is longer than {max} bytes; a sequence must be at most {max} \
                         bytes (is the file text with line feeds?)",
                        max = self.max_line_bytes
                    ),
                });
            }
        }
        self.feed_lines(data, data_base);
        Ok(())
    }

    /// Where the first line longer than the limit starts in `data` (0 when it is the line
    /// carried over), if the line carried over and `data` hold one.
    fn too_long_line(&self, data: &[u8]) -> Option<usize> {
        let max = self.max_line_bytes;
        let (mut start, mut held) = (0, self.carry.len());
        loop {
            let end = memchr(b'\n', &data[start..]).map_or(data.len(), |nl| start + nl);
            if held + (end - start) > max {
                return Some(start);
            }
            if end == data.len() {
                return None;
            }
            (start, held) = (end + 1, 0);
        }
    }

    /// The rest of [`feed`](Self::feed), past the start of the file, for lines within the
    /// limit: `data` starts at byte `data_base` of the text fed.
    fn feed_lines(&mut self, mut data: &[u8], mut data_base: usize) {
        if !self.carry.is_empty() {
            let Some(nl) = memchr(b'\n', data) else {
                self.carry.extend_from_slice(data);
                return;
            };
            self.buf_base = data_base.wrapping_sub(self.carry.len());
            self.carry.extend_from_slice(&data[..=nl]);
            let line = std::mem::take(&mut self.carry);
            self.process_lines(&line);
            self.carry = line;
            self.carry.clear();
            data = &data[nl + 1..];
            data_base += nl + 1;
        }
        match memrchr(b'\n', data) {
            Some(last) => {
                self.buf_base = data_base;
                self.process_lines(&data[..=last]);
                self.carry.extend_from_slice(&data[last + 1..]);
            }
            None => self.carry.extend_from_slice(data),
        }
    }

    /// Ends the current file: parses a last line without a line feed and closes the last
    /// sequence. An empty file (nothing but a BOM and whitespace) is a fatal error.
    pub fn finish_file(&mut self) -> Result<(), FatalDataError> {
        if self.at_file_start {
            self.check_file_start()?;
        }
        if !self.carry.is_empty() {
            // The last line is parsed exactly as if it ended with a line feed. (The bytes
            // held back to look for a BOM may already end with one.)
            let mut line = std::mem::take(&mut self.carry);
            self.buf_base = self.fed.wrapping_sub(line.len());
            if line.last() != Some(&b'\n') {
                line.push(b'\n');
            }
            self.process_lines(&line);
            self.carry = line;
            self.carry.clear();
        }
        self.end_sequence(self.fed);
        if !self.saw_content {
            return Err(empty_file_error());
        }
        Ok(())
    }

    /// Prepares to parse a byte range of a file that the index has mapped: it starts at the
    /// first line of a sequence, line `first_line` (1-based) of a file in `mode` whose
    /// line-mode keys start at `key_base`. `repeated` lists, sorted by line, the range's
    /// sequences whose key an earlier sequence of the corpus used. End the range with
    /// [`finish_file`](Self::finish_file).
    pub fn start_range(
        &mut self,
        mode: KeyMode,
        first_line: u64,
        key_base: u64,
        repeated: Vec<RepeatedKey>,
    ) {
        self.start_file(key_base);
        self.at_file_start = false;
        self.saw_content = true;
        self.next_line = first_line;
        self.mode = match mode {
            KeyMode::Ids => Mode::Ids,
            KeyMode::Lines => Mode::Lines,
        };
        self.repeats = RepeatCheck::Given { repeated, next: 0 };
    }

    /// Marks the range begun by [`start_range`](Self::start_range) as starting at its file's
    /// first line with content (only a BOM and whitespace come before it in the file): as in
    /// the parse of the whole file, that line's digits are skipped even after whitespace in
    /// line mode (CNTK-BEHAVIOUR §4.1).
    pub fn range_starts_at_first_content(&mut self) {
        self.at_first_content = true;
    }

    /// Reserves output room for text `num / den` times the size of text that gave buffers of
    /// `lengths` (see [`ParsedSequences::reserve_like`]).
    pub fn reserve_output(&mut self, lengths: &BufferLengths, num: u64, den: u64) {
        self.out.reserve_like(lengths, num, den);
    }

    /// Moves the complete sequences, diagnostics and invalid sequences parsed so far into the
    /// given buffers (whose old contents are dropped and whose capacity the parser reuses).
    pub fn take_output(
        &mut self,
        sequences: &mut ParsedSequences<T>,
        diagnostics: &mut Vec<Diagnostic>,
        invalid: &mut Vec<InvalidSequence>,
    ) {
        std::mem::swap(sequences, &mut self.out);
        std::mem::swap(diagnostics, &mut self.diags);
        std::mem::swap(invalid, &mut self.invalid);
        self.out.truncate(0);
        self.diags.clear();
        self.invalid.clear();
    }

    /// Examines the first bytes of the file (in `carry`): UTF-8 BOM skipped, UTF-16 rejected.
    fn check_file_start(&mut self) -> Result<(), FatalDataError> {
        self.at_file_start = false;
        let bom = byte_order_mark_len(&self.carry)?;
        self.carry.drain(..bom);
        Ok(())
    }

    /// Processes the complete lines of `buf`, which ends with a line feed.
    fn process_lines(&mut self, buf: &[u8]) {
        // One check of the columns' limit for all the lines, rather than one per sample.
        if !self
            .out
            .has_room_for_text(buf.len(), self.lines.max_entries())
        {
            self.process_lines_near_limit(buf);
            return;
        }
        let mut pos = 0;
        while pos < buf.len() {
            pos = self.process_line::<true>(buf, pos) + 1;
            if self.mode == Mode::Ids {
                if self.run_pause > 0 {
                    self.run_pause -= 1;
                } else if self.lines.takes_single_values() {
                    pos = self.continue_run(buf, pos, true);
                } else if self.lines.takes_several_values() {
                    pos = self.continue_run(buf, pos, false);
                }
            }
        }
        self.out.count_text(buf.len());
    }

    /// Takes the lines from `pos` on that continue the open sequence (its id and the byte
    /// after it, compared at once) and that a quick path would take whole, in one loop
    /// ([`LineParser::single_value_run`], [`LineParser::several_values_run`]), for
    /// [`process_lines`](Self::process_lines), which checked the columns' room. The steps of
    /// [`process_line`](Self::process_line) that do not change within such a run (the
    /// file's mode, the open sequence, the learnt sample starts, the inputs' formats and
    /// columns) are taken once per run, and the line counts once at its end. A line of the
    /// sequence that the run does not take is parsed as if no run had been: by
    /// `process_line` after a run of several values (whose quick path, tried there again,
    /// may pause itself), at once after a run of single values. Returns where the next line
    /// to parse starts.
    ///
    /// In memory on one core this parses seed 004's rows, the ragged shape and the seq shape
    /// in 0.74–0.83, 0.67–0.74 and 0.78–0.79 of the time `process_line` alone took (two
    /// runs of alternating builds), with 22%, 22% and 17% fewer instructions
    /// (`valgrind --tool=callgrind`); the seq shape with 37% fewer since its lines have a
    /// loop of their own (`sparse_pair_run`). Since seed 004's rows and the seq shape's
    /// lines are taken a block of 64 bytes at a time where they allow (`line_blocks`), they
    /// parse in 0.65 and 0.78 of the time before (criterion).
    #[inline(never)]
    fn continue_run(&mut self, buf: &[u8], pos: usize, single: bool) -> usize {
        let lead = match &self.open {
            Some(o) if o.id_lead_mask != 0 => LineLead {
                bits: o.id_lead,
                mask: o.id_lead_mask,
                id_len: o.id_len,
            },
            _ => return pos,
        };
        // A sequence's last line ends no run: nothing to set one up for.
        if pos >= buf.len() || !lead.begins(load_word(buf, pos)) {
            return pos;
        }
        let run = if single {
            self.lines.single_value_run(buf, pos, &lead, &mut self.out)
        } else {
            self.lines
                .several_values_run(buf, pos, &lead, &mut self.out)
        };
        self.next_line += run.taken;
        self.counts.lines += run.taken;
        if let Some(open) = &mut self.open {
            let taken = u32::try_from(run.taken).unwrap_or(u32::MAX);
            open.counted_lines = open.counted_lines.saturating_add(taken);
        }
        if !(single && run.refused) {
            return run.next;
        }
        if run.taken == 0 {
            // Lines of a single value the quick path refuses, one after another (each with
            // a comment, say): a run set up before each costs more than it takes.
            self.run_pause = RUN_PAUSE;
        }
        // A line of the sequence that the single-value path refuses (which changes nothing
        // when it does) is parsed the general way at once, as `process_line` would after
        // trying it: not tried twice.
        let line_no = self.next_line;
        self.next_line += 1;
        self.counts.lines += 1;
        let content = run.next + lead.id_len;
        self.parse_line_fully::<true>(buf, run.next, content, line_no) + 1
    }

    /// [`process_lines`](Self::process_lines) when a line might take a column to its limit:
    /// checked line by line.
    #[cold]
    #[inline(never)]
    fn process_lines_near_limit(&mut self, buf: &[u8]) {
        let mut pos = 0;
        while pos < buf.len() {
            pos = self.process_line::<false>(buf, pos) + 1;
        }
    }

    /// Processes the line starting at `start`; returns the position of its line feed.
    /// `ROOM_CHECKED`: the caller found the columns have room for the whole text and counts
    /// it ([`LineParser::parse_line_checking`]); otherwise the line is checked and counted
    /// itself.
    #[inline(always)]
    fn process_line<const ROOM_CHECKED: bool>(&mut self, buf: &[u8], start: usize) -> usize {
        let line_no = self.next_line;
        self.next_line += 1;
        self.counts.lines += 1;
        if self.mode == Mode::Undecided {
            let p = skip_space(buf, start);
            if buf[p] == b'\n' {
                self.counts.skipped_lines += 1;
                return p;
            }
            // The first byte past the leading whitespace decides, as in CNTK, which skips
            // it before the first id (CNTK-BEHAVIOUR §3.1, §4.1): a digit starts an id.
            self.mode = if !self.options.skip_sequence_ids && buf[p].is_ascii_digit() {
                Mode::Ids
            } else {
                Mode::Lines
            };
            self.saw_content = true;
            self.at_first_content = true;
        }
        // The id: digits at the very start of the line (ignored in line mode, like CNTK). A
        // line whose id bytes are those of the line that opened the open sequence continues
        // it (most lines of a file of sequences), without reading the id's value: at once when
        // the byte after them is the same too (no digit counting), else by counting them.
        let word = load_word(buf, start);
        let content = match &self.open {
            Some(o) if word & o.id_lead_mask == o.id_lead => start + o.id_len,
            _ => {
                let digits = leading_digits(word);
                let continues = digits > 0
                    && digits < 8
                    && matches!(&self.open, Some(o) if o.id_bytes == low_bytes(word, digits));
                if continues {
                    start + digits as usize
                } else {
                    self.open_line(buf, start, word, digits, line_no)
                }
            }
        };
        let quick = if ROOM_CHECKED {
            self.lines.quick_line(buf, content, &mut self.out)
        } else {
            None
        };
        let line_end = match quick {
            // Taken whole by a quick path: samples, and no diagnostic to count or keep.
            Some((_, line_end)) => {
                if let Some(open) = &mut self.open {
                    open.counted_lines = open.counted_lines.saturating_add(1);
                }
                line_end
            }
            None => self.parse_line_fully::<ROOM_CHECKED>(buf, start, content, line_no),
        };
        if self.mode == Mode::Lines {
            // (A last line without a line feed ends where the text does.)
            let end = self.buf_base.wrapping_add(line_end + 1).min(self.fed);
            if let Some(open) = &mut self.open {
                open.end = end;
            }
            self.end_sequence(end);
        }
        line_end
    }

    /// Parses the line whose content (after the id) starts at `content` the general way,
    /// for [`process_line`](Self::process_line), and counts its diagnostics, errors and
    /// samples; returns the position of its line feed.
    #[inline(always)]
    fn parse_line_fully<const ROOM_CHECKED: bool>(
        &mut self,
        buf: &[u8],
        start: usize,
        content: usize,
        line_no: u64,
    ) -> usize {
        let before = self.diags.len();
        let (outcome, line_end) = if ROOM_CHECKED {
            self.lines.parse_line_checking::<T, false>(
                buf,
                start,
                content,
                line_no,
                &mut self.out,
                &mut self.diags,
            )
        } else {
            self.lines
                .parse_line(buf, start, content, line_no, &mut self.out, &mut self.diags)
        };
        let added = (self.diags.len() - before) as u64;
        self.counts.warnings += added - u64::from(outcome.errors);
        if let Some(open) = &mut self.open {
            if outcome.errors > 0 {
                if open.first_error.is_none() {
                    open.first_error = self.diags[before..]
                        .iter()
                        .find(|d| d.severity == Severity::Error)
                        .cloned();
                }
                open.errors = open.errors.saturating_add(outcome.errors);
            }
            if outcome.samples > 0 {
                open.counted_lines = open.counted_lines.saturating_add(1);
            } else if outcome.errors == 0 {
                self.counts.skipped_lines += 1;
            }
        }
        line_end
    }

    /// Reads the id at the start of the line at `start` (whose first 8 bytes are `word`, of
    /// which `digits` lead), and ends the open sequence and begins the next where the line
    /// starts one. Returns where the line's content starts, after the id.
    ///
    /// In id mode with no sequence open (the first line with content of a file, or the first
    /// line of a range, which starts a sequence) the id may follow whitespace, which CNTK
    /// skips at the start of a file: only there. So may, in line mode, the digits of the
    /// file's first line with content, which CNTK's parser then skips as it skips the digits
    /// at the start of every line (its index starts that line's sequence past the
    /// whitespace; CNTK-BEHAVIOUR §3.2, §4.1). The sequence still starts at the line's start,
    /// as in the index, and columns still count from it.
    fn open_line(
        &mut self,
        buf: &[u8],
        start: usize,
        mut word: u64,
        mut digits: u32,
        line_no: u64,
    ) -> usize {
        let mut id_start = start;
        // (In line mode, where no sequence is open at a line's start, one test of a flag.)
        if (self.mode == Mode::Ids || self.at_first_content) && self.open.is_none() {
            self.at_first_content = false;
            id_start = skip_space(buf, start);
            if id_start != start {
                word = load_word(buf, id_start);
                digits = leading_digits(word);
            }
        }
        let mut content = id_start;
        let mut id_value = 0u64;
        while buf[content].is_ascii_digit() {
            // Up to 19 digits cannot overflow; longer ids are parsed again below.
            id_value = id_value
                .wrapping_mul(10)
                .wrapping_add(u64::from(buf[content] - b'0'));
            content += 1;
        }
        let id = if content - id_start <= 19 {
            Some(id_value)
        } else {
            parse_long_id(&buf[id_start..content])
        };
        match self.mode {
            Mode::Ids if content > id_start => {
                let same = matches!(&self.open, Some(o) if o.id.is_some() && o.id == id);
                if !same {
                    self.end_sequence(self.buf_base.wrapping_add(start));
                    self.begin_sequence(id.unwrap_or(u64::MAX), id, line_no, start);
                    if let (Some(open), Some(_), 1..=7) = (&mut self.open, id, digits) {
                        open.id_bytes = low_bytes(word, digits);
                        // The id and the byte after it: 2 to 8 bytes.
                        open.id_lead_mask = u64::MAX >> (8 * (7 - digits));
                        open.id_lead = word & open.id_lead_mask;
                        open.id_len = digits as usize;
                    }
                    match id {
                        None => {
                            self.sequence_error(line_no, long_id_message(&buf[id_start..content]))
                        }
                        Some(id) => {
                            if let Some(message) = self.repeats.id_repeat(id, line_no) {
                                self.sequence_error(line_no, message);
                            }
                        }
                    }
                }
            }
            Mode::Ids => {
                if self.open.is_none() {
                    // Unreachable: the first non-blank line of an id-mode file has an id.
                    self.begin_sequence(u64::MAX, None, line_no, start);
                }
            }
            _ => {
                self.begin_sequence(self.key_base + line_no - 1, None, line_no, start);
            }
        }
        content
    }

    /// Opens a sequence whose first line starts at `start` of the buffer being processed.
    fn begin_sequence(&mut self, key: u64, id: Option<u64>, line: u64, start: usize) {
        self.open = Some(OpenSequence {
            key,
            id,
            id_bytes: NO_ID_BYTES,
            id_lead: 1,
            id_lead_mask: 0,
            id_len: 0,
            line,
            counted_lines: 0,
            errors: 0,
            first_error: None,
            start: self.buf_base.wrapping_add(start),
            end: 0,
        });
    }

    /// Records the open sequence as a run (while recording) that became output sequence
    /// `sequence`, if any.
    fn record_run(&mut self, sequence: Option<u32>) {
        if let (Some(runs), Some(open)) = (&mut self.runs, &self.open) {
            runs.push(ParsedRun {
                start: open.start,
                end: open.end,
                line: open.line,
                key: open.key,
                is_id: open.id.is_some() && self.mode == Mode::Ids,
                sequence,
            });
        }
    }

    /// Records an error of the open sequence at column 1 of `line`.
    fn sequence_error(&mut self, line: u64, message: String) {
        let diag = Diagnostic::new(Severity::Error, line, 1, message);
        if let Some(open) = &mut self.open {
            if open.first_error.is_none() {
                open.first_error = Some(diag.clone());
            }
            open.errors += 1;
        }
        self.diags.push(diag);
    }

    /// Ends the open sequence, whose bytes end at `end` of the text fed (where the next
    /// sequence's first line starts, past its line in line mode, or the end of the file).
    fn end_sequence(&mut self, end: usize) {
        let Some(open) = &self.open else { return };
        let (key, line, counted_lines) = (open.key, open.line, open.counted_lines);
        let named = match self.mode {
            Mode::Ids => open.id,
            _ => Some(key),
        };
        // The index refuses a span that is too long whatever it holds: every id-mode run
        // (one without configured data too), and in line mode each line with a configured
        // input or an error.
        let indexed = self.mode == Mode::Ids || open.errors > 0 || counted_lines > 0;
        let bytes = end.wrapping_sub(open.start);
        if indexed && bytes > self.max_sequence_bytes {
            // (An error of the sequence, so the rules below are not checked.)
            let max = self.max_sequence_bytes as u64;
            self.sequence_error(line, sequence_too_long_message(named, bytes as u64, max));
        }
        let Some(open) = &self.open else { return };
        if open.errors == 0 && open.counted_lines == 0 {
            if self.mode == Mode::Ids {
                self.record_run(None); // its id still counts as used (SPEC §7.1)
            }
            self.open = None;
            return; // no configured data: not a sequence
        }
        if self.mode == Mode::Lines {
            if let Some(message) = self.repeats.line_key_repeat(key, line) {
                self.sequence_error(line, message);
            }
        }
        let Some(open) = &self.open else { return };
        if open.errors == 0 && !self.rules_skipped {
            if let Some(message) = self.sequence_rule_violation(key, counted_lines) {
                self.sequence_error(line, message);
            }
        }
        if self.runs.is_some() {
            let sequence = match &self.open {
                Some(o) if o.first_error.is_none() => Some(self.out.len() as u32),
                _ => None,
            };
            self.record_run(sequence);
        }
        let Some(open) = self.open.take() else { return };
        self.counts.errors += u64::from(open.errors);
        match open.first_error {
            Some(first_error) => {
                self.out.rollback_sequence();
                self.counts.invalid_sequences += 1;
                self.invalid.push(InvalidSequence {
                    key: open.key,
                    line: open.line,
                    first_error,
                    valid_before: self.out.len(),
                });
            }
            None => {
                self.out.commit_sequence(SequenceInfo {
                    key: open.key,
                    line: open.line,
                    counted_lines: open.counted_lines,
                });
                self.counts.sequences += 1;
            }
        }
    }

    /// The first sequence-level rule the open (error-free) sequence breaks, if any.
    fn sequence_rule_violation(&mut self, key: u64, counted_lines: u32) -> Option<String> {
        let mut counts = std::mem::take(&mut self.scratch_counts);
        self.out.open_sequence_counts(&mut counts);
        // The fewest and most samples of an input, in one pass: the names of the inputs
        // without a sample are gathered only for the message.
        let (fewest, longest) = counts
            .iter()
            .fold((usize::MAX, 0), |(fewest, longest), &n| {
                (fewest.min(n), longest.max(n))
            });
        let result = if fewest == 0 {
            let missing: Vec<String> = counts
                .iter()
                .zip(self.lines.names())
                .filter(|(n, _)| **n == 0)
                .map(|(_, name)| format!("'{name}'"))
                .collect();
            Some(format!(
                "sequence {} has no sample of input {}",
                key,
                missing.join(", ")
            ))
        } else if (counted_lines as usize) > longest {
            Some(format!(
                "sequence {} has {} lines but its longest input has {} samples (an input \
                 must have a sample on every line of the sequence)",
                key, counted_lines, longest
            ))
        } else if self.options.frame_mode && longest > 1 {
            Some(format!(
                "sequence {} has {longest} samples, but frameMode requires one sample per \
                 sequence",
                key
            ))
        } else {
            None
        };
        self.scratch_counts = counts;
        result
    }
}

/// The message for sequence `key` (`None` for an id too long for 64 bits, whose key is only
/// a placeholder), of `bytes` bytes, longer than the `max` a sequence may have: the same
/// whether the parser or the index finds it.
pub(crate) fn sequence_too_long_message(key: Option<u64>, bytes: u64, max: u64) -> String {
    let sequence = match key {
        Some(key) => format!("sequence {key}"),
        None => "the sequence of an id too long for 64 bits".to_string(),
    };
    format!("{sequence} is {bytes} bytes long; a sequence must be at most {max} bytes")
}

/// The message for the id `digits`, too long for 64 bits: the id itself, or with more than
/// [`QUOTED_BYTES`] digits its count and its first digits (a line of a million digits
/// is one line of message, not a million characters).
fn long_id_message(digits: &[u8]) -> String {
    if digits.len() <= QUOTED_BYTES {
        format!(
            "sequence id '{}' does not fit in 64 bits",
            quote(digits, QUOTED_BYTES)
        )
    } else {
        format!(
            "sequence id of {} digits ('{}...') does not fit in 64 bits",
            digits.len(),
            quote(digits, QUOTED_BYTES)
        )
    }
}

/// Parses an id of more than 19 digits: `None` when it does not fit in 64 bits.
fn parse_long_id(digits: &[u8]) -> Option<u64> {
    digits.iter().try_fold(0u64, |acc, &d| {
        acc.checked_mul(10)?.checked_add(u64::from(d - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::columns::Sample;

    fn inputs() -> Vec<InputConfig> {
        vec![InputConfig::dense("a", 1), InputConfig::sparse("b", 5)]
    }

    struct Parsed {
        keys: Vec<u64>,
        lines: Vec<u64>,
        errors: Vec<(u64, String)>,
        counts: ParseCounts,
    }

    fn parse_pieces(pieces: &[&[u8]], options: StreamOptions) -> Result<Parsed, FatalDataError> {
        let mut p = StreamParser::<f32>::new(&inputs(), options);
        p.start_file(0);
        for piece in pieces {
            p.feed(piece)?;
        }
        p.finish_file()?;
        let seqs = p.sequences();
        Ok(Parsed {
            keys: seqs.sequences.iter().map(|s| s.key).collect(),
            lines: seqs.sequences.iter().map(|s| s.line).collect(),
            errors: p
                .diagnostics()
                .iter()
                .filter(|d| d.severity == Severity::Error)
                .map(|d| (d.line, d.message.clone()))
                .collect(),
            counts: p.counts(),
        })
    }

    fn parse(text: &str) -> Parsed {
        parse_pieces(&[text.as_bytes()], StreamOptions::default()).expect("not fatal")
    }

    /// A parser of `inputs`, set up by `configure`, that was fed `text` as a file in pieces
    /// of `piece` bytes; and the fatal error that stopped it, if one did.
    fn fed_in_pieces(
        inputs: &[InputConfig],
        text: &[u8],
        piece: usize,
        configure: impl FnOnce(&mut StreamParser<f32>),
    ) -> (StreamParser<f32>, Option<FatalDataError>) {
        let mut p = StreamParser::<f32>::new(inputs, StreamOptions::default());
        configure(&mut p);
        p.start_file(0);
        let fatal = text
            .chunks(piece)
            .try_for_each(|chunk| p.feed(chunk))
            .and_then(|()| p.finish_file())
            .err();
        (p, fatal)
    }

    /// The runs recorded over `text` fed in pieces of `piece` bytes, as a file.
    fn runs_of(text: &[u8], piece: usize) -> Vec<ParsedRun> {
        let (mut p, fatal) = fed_in_pieces(&inputs(), text, piece, |p| p.record_runs());
        assert!(fatal.is_none(), "{fatal:?}");
        let mut runs = Vec::new();
        p.take_runs(&mut runs);
        runs
    }

    /// The keys parsed before `text`'s fatal error (or all of them), and that error's line,
    /// column and message, with lines limited to `max` bytes and `text` fed in pieces of
    /// `piece`.
    fn keys_within_line_limit(
        text: &[u8],
        piece: usize,
        max: usize,
    ) -> (Vec<u64>, Option<(u64, u64, String)>) {
        let inputs = [InputConfig::dense("a", 1)];
        let (p, fatal) = fed_in_pieces(&inputs, text, piece, |p| p.limit_line_bytes(max));
        let fatal = fatal.map(|e| (e.line, e.col, e.message));
        let keys = p.sequences().sequences.iter().map(|s| s.key).collect();
        (keys, fatal)
    }

    #[test]
    fn a_line_over_the_limit_is_fatal_at_its_start_whatever_the_pieces_fed() {
        // Line 3 is 11 bytes, its line feed excluded (a CR counts); the others at most 10.
        // With a BOM (not counted), CRLF line ends, the long line last without a line feed,
        // and a line of exactly 10 bytes.
        let cases: [(&[u8], Option<u64>); 5] = [
            (b"1 |a 1\n2 |a 22\n3 |a 123456\n4 |a 4\n", Some(3)),
            (
                b"\xEF\xBB\xBF1 |a 1\n2 |a 22\n3 |a 123456\n4 |a 4\n",
                Some(3),
            ),
            (b"1 |a 1\r\n2 |a 22\r\n3 |a 12345\r\n4 |a 4\r\n", Some(3)),
            (b"1 |a 1\n2 |a 22\n3 |a 123456", Some(3)),
            (b"\xEF\xBB\xBF1 |a 1\n2 |a 22\n3 |a 12345\n4 |a 4", None),
        ];
        for (text, fatal_line) in cases {
            for piece in 1..=text.len() {
                let (keys, fatal) = keys_within_line_limit(text, piece, 10);
                let what = format!("{:?} in pieces of {piece}", String::from_utf8_lossy(text));
                match fatal_line {
                    Some(line) => {
                        assert_eq!(keys, [1], "{what}");
                        let (at, col, message) = fatal.expect(&what);
                        assert_eq!((at, col), (line, 1), "{what}");
                        assert!(
                            message.starts_with("the line is longer than 10 bytes"),
                            "{what}"
                        );
                    }
                    None => assert_eq!((keys, fatal), (vec![1, 2, 3, 4], None), "{what}"),
                }
            }
        }
        // A file without a line feed holds no more than the limit: the error comes as soon
        // as the limit is passed, with pieces that never end the line, and the bytes held
        // are released.
        let mut p =
            StreamParser::<f32>::new(&[InputConfig::dense("a", 1)], StreamOptions::default());
        p.limit_line_bytes(1000);
        p.start_file(0);
        let zeros = [0u8; 64];
        let fed = (1..).find(|_| p.feed(&zeros).is_err()).unwrap();
        assert_eq!(fed, 16, "1,024 bytes fed when the error came");
        assert_eq!(p.carry.capacity(), 0);
    }

    #[test]
    fn a_sequence_over_the_limit_is_an_error_of_its_own_whatever_the_pieces_fed() {
        // Id mode: sequence 1 is 14 bytes (two lines), 2 is 7, 3 is 15 (two lines and a
        // blank one, up to the next id), 4 has no configured input, and 5 has no line feed
        // (9 bytes: the end of the file ends it).
        let ids: &[u8] = b"1 |a 1\n1 |a 2\n2 |a 3\n3 |a 4\n3 |a 5\n\n4 |b 6666\n5 |a 6789";
        // Line mode: a blank line and a comment-only line are no sequences, so they are not
        // measured; the last line has no line feed.
        let lines: &[u8] = b"|a 1\n\n|# a long comment\n|a 222222\n|a 3";
        /// The text, the limit, the too-long sequences' keys and lengths, the valid
        /// sequences' keys.
        type Case<'a> = (&'a [u8], usize, &'a [(u64, u64)], &'a [u64]);
        let cases: [Case; 6] = [
            (ids, 15, &[], &[1, 2, 3, 5]),
            (ids, 14, &[(3, 15)], &[1, 2, 5]),
            (ids, 8, &[(1, 14), (3, 15), (4, 10), (5, 9)], &[2]),
            (lines, 10, &[], &[0, 3, 4]),
            (lines, 9, &[(3, 10)], &[0, 4]),
            (lines, 3, &[(0, 5), (3, 10), (4, 4)], &[]),
        ];
        let inputs = [InputConfig::dense("a", 1)]; // b is outside the configuration
        for (text, limit, too_long, valid) in cases {
            for piece in 1..=text.len() {
                let what = format!("{:?} in pieces of {piece}", String::from_utf8_lossy(text));
                let (p, fatal) =
                    fed_in_pieces(&inputs, text, piece, |p| p.limit_sequence_bytes(limit));
                assert!(fatal.is_none(), "{what}: {fatal:?}");
                let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
                assert_eq!(keys, valid, "{what}");
                let refused: Vec<(u64, u64)> = p
                    .invalid_sequences()
                    .iter()
                    .map(|s| {
                        let bytes = too_long.iter().find(|(k, _)| *k == s.key).expect(&what).1;
                        let message = sequence_too_long_message(Some(s.key), bytes, limit as u64);
                        assert_eq!(s.first_error.message, message, "{what}");
                        assert_eq!(s.first_error.col, 1, "{what}");
                        (s.key, bytes)
                    })
                    .collect();
                assert_eq!(refused, too_long, "{what}");
            }
        }
    }

    #[test]
    fn an_id_too_long_for_64_bits_is_named_so_when_its_sequence_is_too_long() {
        // Its key is only a placeholder: the messages name the id, never 18446744073709551615.
        let inputs = [InputConfig::dense("a", 1)];
        let text = b"99999999999999999999 |a 1\n5 |a 2\n";
        let (p, fatal) = fed_in_pieces(&inputs, text, text.len(), |p| p.limit_sequence_bytes(10));
        assert!(fatal.is_none());
        let errors: Vec<(u64, &str)> = p
            .diagnostics()
            .iter()
            .map(|d| (d.line, d.message.as_str()))
            .collect();
        assert_eq!(
            errors,
            [
                (
                    1,
                    "sequence id '99999999999999999999' does not fit in 64 bits"
                ),
                (
                    1,
                    "the sequence of an id too long for 64 bits is 26 bytes long; a sequence \
                     must be at most 10 bytes"
                )
            ]
        );
    }

    #[test]
    fn sequences_skip_the_whole_sequence_rules_only_while_asked() {
        // Sequence 4 has no sample of b: while the rules are skipped it is a sequence like
        // any other; checked again, it is invalid. Errors within lines are always reported.
        let parse = |text: &[u8], skip: bool| {
            let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
            p.start_range(KeyMode::Ids, 1, 0, Vec::new());
            p.skip_sequence_rules(skip);
            p.feed(text).unwrap();
            p.finish_file().unwrap();
            (p.sequences().len(), p.diagnostics().len())
        };
        assert_eq!(parse(b"4 |a 1\n4 |a 2\n", true), (1, 0));
        assert_eq!(parse(b"4 |a 1\n4 |a 2\n", false), (0, 1));
        assert_eq!(parse(b"4 |a x\n", true), (0, 1));
    }

    #[test]
    fn runs_record_where_they_start_whatever_the_pieces_fed() {
        // Id mode after a byte order mark: runs with and without a configured input, the
        // last line without a line feed.
        let ids = b"\xEF\xBB\xBF1 |a 1 |b 1:1\n1 |a 2 |b 0:1\n\n2 |x 9\n |# c\n3 |a 3 |b 2:1\r\n\
                    4 |a 4 |b 3:1";
        let at = |line: &[u8]| ids.windows(line.len()).position(|w| w == line).unwrap();
        for piece in 1..=ids.len() {
            let runs = runs_of(ids, piece);
            let found: Vec<_> = runs
                .iter()
                .map(|r| (r.start, r.line, r.key, r.is_id, r.sequence))
                .collect();
            assert_eq!(
                found,
                [
                    (3, 1, 1, true, Some(0)),
                    (at(b"2 |x"), 4, 2, true, None),
                    (at(b"3 |a"), 6, 3, true, Some(1)),
                    (at(b"4 |a"), 7, 4, true, Some(2)),
                ],
                "pieces of {piece}"
            );
        }
        // Line mode: a run per line holding a configured input, with where its line ends.
        let lines = b"|a 1 |b 1:1\n\n|x 2\n|a 3 |b 2:1\r\n|# c\n|a 4 |b 4:1";
        let at = |line: &[u8]| lines.windows(line.len()).position(|w| w == line).unwrap();
        let (second, third) = (at(b"|a 3"), at(b"|a 4"));
        for piece in 1..=lines.len() {
            let runs = runs_of(lines, piece);
            let found: Vec<_> = runs
                .iter()
                .map(|r| (r.start, r.end, r.line, r.key, r.sequence))
                .collect();
            assert_eq!(
                found,
                [
                    (0, 12, 1, 0, Some(0)),
                    (second, second + 13, 4, 3, Some(1)),
                    (third, lines.len(), 6, 5, Some(2)),
                ],
                "pieces of {piece}"
            );
        }
    }

    #[test]
    fn id_mode_groups_consecutive_lines() {
        let p = parse("7 |a 1 |b\n7 |a 2\n|a 3\n  |a 4\n9 |a 5 |b 1:1\n");
        assert_eq!(p.keys, [7, 9]);
        assert_eq!(p.lines, [1, 5]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
    }

    #[test]
    fn ids_continue_by_value_whatever_their_bytes() {
        // `07` continues 7 (by value) and 7 after it still does; 8 digits (no id bytes kept)
        // and an id right before its `|` continue too; 70 and 8 do not continue 7.
        let p = parse(concat!(
            "7 |a 1 |b\n07 |a 2\n7 |a 3\n70 |a 4 |b\n8 |a 5 |b\n",
            "12345678 |a 6 |b\n12345678 |a 7\n9|a 8 |b\n9|a 9\n",
        ));
        assert_eq!(p.keys, [7, 70, 8, 12_345_678, 9]);
        assert_eq!(p.lines, [1, 4, 5, 6, 8]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.counts.lines, 9);
    }

    #[test]
    fn lines_of_a_single_value_group_and_count_like_any_other() {
        // After its first line each sequence is lines of one value (`a`, dense of dim 1) or
        // one entry (`b`), most of them taken at once by the single-value path; an entry it
        // does not take (index 9 is past dim 5) is reported by the general parse.
        let text = concat!(
            "1 |a 1 |b 0:1\n1 |a 2\n1 |a 300\n1 |a -4\n",
            "2 |a 5 |b 1:1\n2 |b 2:3\n2 |b 4:1\n",
            "3 |a 6\n3 |a 7\n3 |b 9:1\n",
        );
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        p.start_file(0);
        p.feed(text.as_bytes()).unwrap();
        p.finish_file().unwrap();
        let c = p.counts();
        assert_eq!(
            (
                c.lines,
                c.sequences,
                c.invalid_sequences,
                c.errors,
                c.warnings
            ),
            (10, 2, 1, 1, 0)
        );
        assert_eq!(p.diagnostics()[0].line, 10);
        let out = p.sequences();
        assert_eq!(
            out.sequences.iter().map(|s| s.key).collect::<Vec<_>>(),
            [1, 2]
        );
        let dense = |seq: usize| -> Vec<f32> {
            out.samples(seq, 0)
                .flat_map(|s| match s {
                    Sample::Dense(values) => values.to_vec(),
                    Sample::Sparse { .. } => panic!("a is dense"),
                })
                .collect()
        };
        let sparse = |seq: usize| -> Vec<(Vec<u32>, Vec<f32>)> {
            out.samples(seq, 1)
                .map(|s| match s {
                    Sample::Sparse { indices, values } => (indices.to_vec(), values.to_vec()),
                    Sample::Dense(_) => panic!("b is sparse"),
                })
                .collect()
        };
        assert_eq!(dense(0), [1.0, 2.0, 300.0, -4.0]);
        assert_eq!(sparse(0), [(vec![0], vec![1.0])]);
        assert_eq!(dense(1), [5.0]);
        assert_eq!(
            sparse(1),
            [
                (vec![1], vec![1.0]),
                (vec![2], vec![3.0]),
                (vec![4], vec![1.0])
            ]
        );
    }

    #[test]
    fn a_line_continues_by_its_ids_bytes_and_the_byte_after_or_the_long_way() {
        // Lines beginning with the opening line's id and the byte after it (a space here,
        // 8 bytes for the 7-digit id) continue at once; a tab or `|` after the id, or a line
        // of just the id, continue the long way; `123` is not `12` followed by a digit.
        let p = parse(concat!(
            "1234567 |a 1 |b\n1234567 |a 2\n1234567\t|a 3\n1234567|a 4\n",
            "12 |a 5 |b\n123 |a 6 |b\n123 |a 7\n1 |a 8 |b\n1\n1 |a 9\n",
        ));
        assert_eq!(p.keys, [1_234_567, 12, 123, 1]);
        assert_eq!(p.lines, [1, 5, 6, 8]);
        assert!(p.errors.is_empty(), "{:?}", p.errors);
        assert_eq!(p.counts.lines, 10);
    }

    #[test]
    fn line_mode_when_the_first_line_has_no_id() {
        // Leading blank lines still count for the keys; later ids are ignored.
        let p = parse("\n\n|a 1 |b\n5 |a 2 |b\n\n|# comment\n|a 3 |b");
        assert_eq!(p.keys, [2, 3, 6]);
        assert_eq!(p.counts.skipped_lines, 4);
        let p = parse_pieces(
            &[b"1 |a 1 |b\n1 |a 2 |b\n"],
            StreamOptions {
                skip_sequence_ids: true,
                frame_mode: false,
            },
        )
        .unwrap();
        assert_eq!(p.keys, [0, 1]);
    }

    #[test]
    fn whitespace_before_the_first_id_is_skipped_and_keeps_id_mode() {
        // CNTK skips the whitespace before a file's first id (CNTK-BEHAVIOUR §3.1, §4.1):
        // the first byte that is not whitespace decides the mode, in any pieces.
        for text in [
            &b"  5 |a 1 |b\n5 |a 2 |b\n6 |a 3 |b\n"[..],
            b"\t5 |a 1 |b\n5 |a 2 |b\n6 |a 3 |b\n",
            b"\xEF\xBB\xBF \r\t5 |a 1 |b\n5 |a 2 |b\n6 |a 3 |b",
            b"\n \r\n\t 5 |a 1 |b\n5 |a 2 |b\n6 |a 3 |b\n",
        ] {
            for piece in 1..=text.len() {
                let pieces: Vec<&[u8]> = text.chunks(piece).collect();
                let p = parse_pieces(&pieces, StreamOptions::default()).unwrap();
                assert_eq!(p.keys, [5, 6], "{text:?} in pieces of {piece}");
                assert!(p.errors.is_empty(), "{text:?}: {:?}", p.errors);
            }
        }
        // Only the first id may follow whitespace: on a later line the digits are junk.
        let p = parse("  5 |a 1 |b\n  5 |a 2 |b\n");
        assert_eq!(p.keys, [] as [u64; 0]);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].0, 2);
        // Columns still count from the line's first byte.
        let mut parser = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        parser.feed(b"  5 |a x |b\n").unwrap();
        parser.finish_file().unwrap();
        let d = &parser.diagnostics()[0];
        assert_eq!((d.severity, d.line, d.col), (Severity::Error, 1, 8));
        // Whitespace then a pipe, or anything else, still means line mode.
        assert_eq!(parse("  |a 1 |b\n5 |a 2 |b\n").keys, [0, 1]);
        let skip = StreamOptions {
            skip_sequence_ids: true,
            frame_mode: false,
        };
        let p = parse_pieces(&[b"  |a 1 |b\n5 |a 2 |b\n"], skip).unwrap();
        assert_eq!(p.keys, [0, 1]);
    }

    #[test]
    fn skip_sequence_ids_skips_digits_after_the_whitespace_that_starts_a_file() {
        // CNTK's index starts a file's first sequence past its leading whitespace (BOM and
        // blank lines included), and its parser skips the digits at the start of every
        // sequence's rows (CNTK-BEHAVIOUR §3.2, §4.1): with `skipSequenceIds`, `  5 |a 1` as
        // the first line is a sequence whose key is its line, with the id skipped.
        let skip = StreamOptions {
            skip_sequence_ids: true,
            frame_mode: false,
        };
        for (text, keys) in [
            (&b"  5 |a 1 |b\n6 |a 2 |b\n"[..], [0, 1]),
            (b"\t77|a 1 |b\n|a 2 |b", [0, 1]),
            (b"\xEF\xBB\xBF \r5 |a 1 |b\n6 |a 2 |b\n", [0, 1]),
            (b"\n \r\n\t 5 |a 1 |b\n|a 2 |b\n", [2, 3]),
        ] {
            for piece in 1..=text.len() {
                let pieces: Vec<&[u8]> = text.chunks(piece).collect();
                let p = parse_pieces(&pieces, skip).unwrap();
                assert_eq!(p.keys, keys, "{text:?} in pieces of {piece}");
                assert!(p.errors.is_empty(), "{text:?}: {:?}", p.errors);
            }
        }
        // Digits that follow whitespace on a later line are junk, as in CNTK, whose parser
        // skips digits only at a row's first byte; digits there are skipped.
        let p = parse_pieces(&[b"  5 |a 1 |b\n  6 |a 2 |b\n7 |a 3 |b\n"], skip).unwrap();
        assert_eq!(p.keys, [0, 2]);
        assert_eq!(p.errors.len(), 1);
        assert_eq!(p.errors[0].0, 2);
        // A line of only an id holds nothing; columns count from the line's first byte.
        let p = parse_pieces(&[b"  5\n|a 1 |b\n"], skip).unwrap();
        assert_eq!(p.keys, [1]);
        assert_eq!(p.counts.skipped_lines, 1);
        let mut parser = StreamParser::<f32>::new(&inputs(), skip);
        parser.feed(b"  5 |a x |b\n").unwrap();
        parser.finish_file().unwrap();
        let d = &parser.diagnostics()[0];
        assert_eq!((d.severity, d.line, d.col), (Severity::Error, 1, 8));
    }

    #[test]
    fn a_line_mode_range_at_a_files_first_content_skips_digits_after_whitespace() {
        // The chunk loader marks a range that starts at its file's first line with content;
        // any other line-mode range keeps digits after whitespace as junk.
        let skip = StreamOptions {
            skip_sequence_ids: true,
            frame_mode: false,
        };
        let text = b" \t 5 |a 1 |b\n6 |a 2 |b\n";
        let mut p = StreamParser::<f32>::new(&inputs(), skip);
        p.start_range(KeyMode::Lines, 3, 10, Vec::new());
        p.range_starts_at_first_content();
        p.feed(text).unwrap();
        p.finish_file().unwrap();
        let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [12, 13]);
        assert!(p.diagnostics().is_empty());
        let mut p = StreamParser::<f32>::new(&inputs(), skip);
        p.start_range(KeyMode::Lines, 3, 10, Vec::new());
        p.feed(text).unwrap();
        p.finish_file().unwrap();
        let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [13]);
        assert_eq!(p.diagnostics()[0].line, 3);
    }

    #[test]
    fn a_range_may_start_with_whitespace_before_its_first_id() {
        // The index starts the first sequence of a file at its line's first byte, so a range
        // parse in id mode begins there too.
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        p.start_range(KeyMode::Ids, 3, 0, Vec::new());
        p.feed(b" \t 5 |a 1 |b\n5 |a 2 |b\n6 |a 3 |b\n").unwrap();
        p.finish_file().unwrap();
        let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [5, 6]);
        assert!(p.diagnostics().is_empty());
    }

    #[test]
    fn bom_and_file_level_errors() {
        let p = parse("\u{feff}3 |a 1 |b");
        assert_eq!(p.keys, [3]);
        for bad in [
            &b"\xFF\xFE|\x00a"[..],
            b"\xFE\xFF\x00|",
            b"",
            b"  \n\r\n\t",
            b"\xEF\xBB\xBF",
        ] {
            let err = parse_pieces(&[bad], StreamOptions::default()).err();
            assert!(err.is_some(), "{bad:?}");
        }
    }

    #[test]
    fn sequence_rules() {
        // A non-adjacent repeated id invalidates the later sequence only.
        let p = parse("1 |a 1 |b\n2 |a 1 |b\n1 |a 1 |b\n");
        assert_eq!(p.keys, [1, 2]);
        assert_eq!(p.errors.len(), 1);
        assert!(p.errors[0].1.contains("sequence id 1 was already used"));
        // A configured input missing from the sequence.
        let p = parse("1 |a 1\n1 |a 2\n2 |a 1 |b\n");
        assert_eq!(p.keys, [2]);
        assert!(p.errors[0].1.contains("no sample of input 'b'"));
        // More lines than the longest input has samples.
        let p = parse("1 |a 1\n1 |b 1:1\n");
        assert!(p.keys.is_empty());
        assert!(p.errors[0]
            .1
            .contains("has 2 lines but its longest input has 1 samples"));
        // Lines without configured inputs are not lines of the sequence.
        let p = parse("1 |a 1 |b\n1 |# nothing\n1 |zz 4\n\n");
        assert_eq!(p.keys, [1]);
        assert_eq!(p.counts.skipped_lines, 3);
        // A too-long id.
        let p = parse("99999999999999999999 |a 1 |b\n");
        assert!(p.errors[0]
            .1
            .contains("sequence id '99999999999999999999' does not fit in 64 bits"));
        // A very long one: its length and first digits.
        let p = parse(&format!("{} |a 1 |b\n", "12".repeat(500_000)));
        let want = format!(
            "sequence id of 1000000 digits ('{}...') does not fit in 64 bits",
            "12".repeat(20)
        );
        assert!(p.errors[0].1.ends_with(&want), "{}", p.errors[0].1);
    }

    #[test]
    fn an_id_beyond_64_bits_does_not_continue_into_the_next_line() {
        let p = parse("99999999999999999999 |a 1 |b\n18446744073709551615 |a 2 |b\n");
        assert_eq!(p.keys, [u64::MAX]);
        assert_eq!(p.errors.len(), 1);
    }

    #[test]
    fn tiny_files_ending_in_a_line_feed_have_one_line() {
        for text in ["0\n", "|a\n", "7 |a 1 |b\n"] {
            let p = parse_pieces(&[text.as_bytes()], StreamOptions::default()).unwrap();
            assert_eq!(p.counts.lines, 1, "{text:?}");
        }
    }

    #[test]
    fn ids_mark_boundaries_even_without_configured_data() {
        // Sequence 2 starts on a comment-only line; the id-less line after it continues it.
        let p = parse("1 |a 1 |b\n2 |# c\n|a 2 |b\n");
        assert_eq!(p.keys, [1, 2]);
        assert_eq!(p.lines, [1, 2]);
        // Its id counts as used even when it never holds configured data.
        let p = parse("1 |a 1 |b\n2 |zz 1\n3 |a 1 |b\n2 |a 1 |b\n");
        assert_eq!(p.keys, [1, 3]);
        assert!(p.errors[0].1.contains("sequence id 2 was already used"));
    }

    /// Parses `files` as one corpus (line-mode keys continuing across them): the keys of the
    /// valid sequences, and each error's line and message.
    fn parse_corpus(files: &[&str]) -> (Vec<u64>, Vec<(u64, String)>) {
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        let mut key_base = 0;
        for text in files {
            p.start_file(key_base);
            p.feed(text.as_bytes()).unwrap();
            p.finish_file().unwrap();
            key_base += p.lines_in_file();
        }
        let keys = p.sequences().sequences.iter().map(|s| s.key).collect();
        let errors = p
            .diagnostics()
            .iter()
            .map(|d| (d.line, d.message.clone()))
            .collect();
        (keys, errors)
    }

    #[test]
    fn keys_are_unique_across_files_of_either_mode() {
        // File 1, line mode: keys 0 and 1 (line 3, blank, is no sequence). File 2, ids: 2 is
        // no key yet, 1 and 0 are line-mode keys of file 1, 8 is new. File 3, line mode from
        // key 3 + 4 = 7: its second line's key is the id 8.
        let (keys, errors) = parse_corpus(&[
            "|a 1 |b\n|a 2 |b\n\n",
            "2 |a 3 |b\n1 |a 4 |b\n0 |a 5 |b\n8 |a 6 |b\n",
            "|a 7 |b\n|a 8 |b\n|a 9 |b\n",
        ]);
        assert_eq!(keys, [0, 1, 2, 8, 7, 9]);
        let used_as_line_key = |id: u64| {
            format!(
                "sequence id {id} was already used as the key of an earlier sequence in a file \
                 without ids (whose keys are 0-based line numbers across the corpus)"
            )
        };
        assert_eq!(
            errors,
            [
                (2, used_as_line_key(1)),
                (3, used_as_line_key(0)),
                (
                    2,
                    "sequence 8 repeats the id 8 of an earlier sequence (in a file without \
                     ids a sequence's key is its 0-based line number across the corpus, and \
                     keys must be unique)"
                        .to_string()
                )
            ]
        );
        // An id that repeats both an id and a line-mode key is said to repeat the line key
        // (as the index says, which looks for the line key only).
        let (keys, errors) = parse_corpus(&["1 |a 1 |b\n", "|a 2 |b\n", "1 |a 3 |b\n"]);
        assert_eq!(keys, [1]);
        assert_eq!(errors.len(), 2);
        assert_eq!(errors[1], (1, used_as_line_key(1)));
        // A line-mode line that is no sequence (only an input not configured) repeats nothing.
        let (keys, errors) = parse_corpus(&["5 |a 1 |b\n", "|a 2 |b\n|zz 3\n", "2 |a 3 |b\n"]);
        assert_eq!((keys, errors), (vec![5, 1, 2], vec![]));
    }

    #[test]
    fn a_range_reports_the_repeats_the_index_lists() {
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        let repeated = |line, repeats_line_key| RepeatedKey {
            line,
            repeats_line_key,
        };
        p.start_range(
            KeyMode::Ids,
            4,
            0,
            vec![repeated(4, true), repeated(6, false)],
        );
        p.feed(b"7 |a 1 |b\n8 |a 2 |b\n9 |a 3 |b\n").unwrap();
        p.finish_file().unwrap();
        p.start_range(KeyMode::Lines, 2, 10, vec![repeated(3, false)]);
        p.feed(b"|a 4 |b\n|a 5 |b\n").unwrap();
        p.finish_file().unwrap();
        let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
        assert_eq!(keys, [8, 11]);
        let errors: Vec<(u64, &str)> = p
            .diagnostics()
            .iter()
            .map(|d| (d.line, &d.message[..d.message.find(" (").unwrap()]))
            .collect();
        assert_eq!(
            errors,
            [
                (
                    4,
                    "sequence id 7 was already used as the key of an earlier sequence in a file \
                     without ids"
                ),
                (6, "sequence id 9 was already used by an earlier sequence"),
                (3, "sequence 12 repeats the id 12 of an earlier sequence")
            ]
        );
    }

    #[test]
    fn frame_mode_rejects_multi_sample_sequences() {
        let frame = StreamOptions {
            skip_sequence_ids: false,
            frame_mode: true,
        };
        let p = parse_pieces(&[b"1 |a 1 |b\n1 |a 2 |b\n2 |a 3 |b\n"], frame).unwrap();
        assert_eq!(p.keys, [2]);
        assert!(p.errors[0].1.contains("frameMode"));
    }

    #[test]
    fn any_split_parses_like_the_whole() {
        let text = "\u{feff}1 |a 1 |b 2:1\r\n1 |a 2 |b\n\n2 |a x |b\n3\t|a 3 |b 4:4 |# c\n3 |a 4";
        let whole = parse(text);
        let bytes = text.as_bytes();
        for split in 0..=bytes.len() {
            let p = parse_pieces(
                &[&bytes[..split], &bytes[split..]],
                StreamOptions::default(),
            )
            .unwrap();
            assert_eq!(p.keys, whole.keys, "split at {split}");
            assert_eq!(p.errors, whole.errors, "split at {split}");
            assert_eq!(p.counts, whole.counts, "split at {split}");
        }
        let bytewise: Vec<&[u8]> = bytes.chunks(1).collect();
        let p = parse_pieces(&bytewise, StreamOptions::default()).unwrap();
        assert_eq!(p.keys, whole.keys);
        assert_eq!(whole.keys, [1, 3]);
    }

    #[test]
    fn the_column_limit_is_checked_whatever_the_text_fed_at_once() {
        // Sequence 1 has 3 samples of `a` and 4 stored values of `b`, sequence 2 one more
        // of each: with a limit of 4, sequence 2 passes it on both inputs, whether the text
        // comes whole (one check for all its lines would not do) or line by line.
        let text = "1 |a 1 |b 0:1 1:1\n1 |a 2 |b 2:1\n1 |a 3 |b 3:1\n\
                    2 |a 4 |b 4:1\n2 |a 5\n3 |a 6 |b 0:1\n";
        let parse_with_limit = |pieces: &[&[u8]]| {
            let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
            p.lines.set_max_entries(4);
            p.start_file(0);
            for piece in pieces {
                p.feed(piece).unwrap();
            }
            p.finish_file().unwrap();
            let keys: Vec<u64> = p.sequences().sequences.iter().map(|s| s.key).collect();
            let errors: Vec<(u64, u64, String)> = p
                .diagnostics()
                .iter()
                .map(|d| (d.line, d.col, d.message.clone()))
                .collect();
            (keys, errors)
        };
        let (keys, errors) = parse_with_limit(&[text.as_bytes()]);
        assert_eq!(keys, [1], "{errors:?}");
        assert_eq!(errors.len(), 3, "{errors:?}");
        assert_eq!((errors[0].0, errors[0].1), (4, 11));
        assert!(
            errors[0].2.contains("more than 4 stored values"),
            "{errors:?}"
        );
        assert_eq!((errors[1].0, errors[1].1), (5, 3));
        assert!(errors[1].2.contains("more than 4 samples"), "{errors:?}");
        let lines: Vec<&[u8]> = text.as_bytes().split_inclusive(|&b| b == b'\n').collect();
        assert_eq!(parse_with_limit(&lines), (keys, errors));
    }

    #[test]
    fn invalid_sequence_spanning_pieces_is_reported_once() {
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        p.start_file(0);
        p.feed(b"1 |a 1 |b\n2 |a x |b\n").unwrap();
        assert!(p.invalid_sequences().is_empty(), "sequence 2 is still open");
        p.clear();
        p.feed(b"2 |a 3 |b\n3 |a 1 |b\n").unwrap();
        assert_eq!(p.invalid_sequences().len(), 1);
        let invalid = &p.invalid_sequences()[0];
        assert_eq!((invalid.key, invalid.line), (2, 2));
        assert!(invalid.first_error.message.contains("malformed number 'x'"));
    }

    /// Output reserved from a similar part's lengths holds the next part without growing
    /// (a grown buffer is copied), and the parse is the same as without it.
    #[test]
    fn output_reserved_like_a_similar_part_does_not_grow() {
        let text = b"|a 1 |b 0:1 1:2\n|a 2\n|a 3 |b 4:1\n";
        let mut p = StreamParser::<f32>::new(&inputs(), StreamOptions::default());
        p.start_file(0);
        p.feed(text).unwrap();
        p.finish_file().unwrap();
        let lengths = p.sequences().buffer_lengths();
        let first = p.sequences().clone();
        let mut out = ParsedSequences::new(&inputs());
        let (mut diags, mut invalid) = (Vec::new(), Vec::new());
        p.take_output(&mut out, &mut diags, &mut invalid);
        // Twice the text: room for twice the lengths, kept while parsing it.
        p.reserve_output(&lengths, 2, 1);
        let capacities = |s: &ParsedSequences<f32>| {
            let mut c: Vec<usize> = s
                .columns
                .iter()
                .flat_map(|c| {
                    [
                        c.values.capacity(),
                        c.indices.capacity(),
                        c.sample_offsets.capacity(),
                        c.sequence_offsets.capacity(),
                    ]
                })
                .collect();
            c.push(s.sequences.capacity());
            c
        };
        let reserved = capacities(p.sequences());
        let wanted = lengths.columns.iter().flatten().chain([&lengths.sequences]);
        for (have, &len) in reserved.iter().zip(wanted) {
            assert!(*have >= 2 * len, "{reserved:?} for {lengths:?}");
        }
        p.start_file(0);
        p.feed(text).unwrap();
        p.feed(text).unwrap();
        p.finish_file().unwrap();
        assert_eq!(capacities(p.sequences()), reserved, "no buffer grew");
        let mut twice = first.clone();
        twice.append(&first).unwrap();
        assert_eq!(p.sequences().columns, twice.columns);
    }
}
