//! The indexer's scan: sequence boundaries, keys and sample counts from raw bytes, without
//! decoding a value.
//!
//! [`Scanner`] is a byte-level state machine fed a file in pieces of any size; it keeps no
//! line in memory, so a line of any length costs nothing. It jumps between `|` and line
//! feeds (module `search`, or memchr on long lines) and looks only at what decides the
//! index: the id at the start of a line, the name after each `|`, and comments. It must
//! agree exactly with the parser ([`crate::parser::StreamParser`]) on which spans form
//! sequences: the chunk loader checks every chunk it parses against the index and takes a
//! disagreement for a changed file.
//!
//! - Id mode: every run of lines with the same id is an entry (even one holding no configured
//!   input: its id still counts as used, SPEC §7.1).
//! - Line mode: a line is an entry if it holds a configured input, or if it holds something
//!   the parser reports as an error (junk before the first `|`, an empty name, a byte that is
//!   not printable ASCII outside comments). Blank lines, comment-only lines and lines holding
//!   only well-formed unconfigured inputs belong to no sequence.

use memchr::memchr2;

use crate::config::InputConfig;
use crate::index::search::SpecialSearch;
use crate::parser::line::{NameGuess, PackedAlias};
use crate::parser::stream::{byte_order_mark_len, empty_file_error};
use crate::parser::word::{leading_digits, load_word, low_bytes};
use crate::parser::{FatalDataError, KeyMode};

/// A span of a file the parser will read as one sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ScannedSequence {
    /// Its key (id, line-mode key, or `u64::MAX` for an id beyond 64 bits).
    pub key: u64,
    /// Whether `key` is an id (line mode and overflowing ids are not, and never repeat).
    pub is_id: bool,
    /// Byte offset of its first line in the file.
    pub start: u64,
    /// Byte offset just past its last line (its line feed, or the end of the file).
    pub end: u64,
    /// 1-based line number of its first line.
    pub line: u64,
    /// Sample count E (lines holding a configured input, or the `definesMBSize` input).
    pub samples: u64,
}

/// What the scan learned about a whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FileSummary {
    /// Id or line mode.
    pub mode: KeyMode,
    /// Physical lines (a last line without a line feed counts).
    pub lines: u64,
    /// Lines holding each configured input.
    pub input_lines: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing of the current line consumed yet.
    LineStart,
    /// Before the mode is known: leading whitespace of a line (blank so far).
    Blank,
    /// In the digits at the start of a line.
    Id,
    /// After the id, before the first `|`.
    Lead,
    /// Just after a `|` outside a comment: a name or `#` follows.
    Pipe,
    /// Inside a name.
    Name,
    /// Between samples: values, or bytes after an error, up to the next `|` or line feed.
    Values,
    /// Inside a comment.
    Comment,
    /// Just after a `|` inside a comment: `#` escapes it, anything else ends the comment.
    CommentPipe,
}

/// An id-mode run of lines whose end is not known yet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OpenRun {
    /// Its key (as in [`ScannedSequence::key`]).
    pub(crate) key: u64,
    /// Its id, unless the id overflows 64 bits (then it continues nothing).
    pub(crate) id: Option<u64>,
    /// The bytes of the id as written on the run's first line, when shorter than 8 bytes
    /// and found by the fast path (else `u64::MAX`, which no id's bytes equal).
    id_bytes: u64,
    /// Whether this run stands for the lines at the start of a segment before its first id
    /// (they continue the run open before the segment, see [`Scanner::scan_segment`]).
    lead: bool,
    pub(crate) start: u64,
    pub(crate) end: u64,
    pub(crate) line: u64,
    pub(crate) samples: u64,
}

impl OpenRun {
    /// The run a scanned id-mode sequence stands for.
    pub(crate) fn of(seq: &ScannedSequence) -> Self {
        OpenRun {
            key: seq.key,
            id: seq.is_id.then_some(seq.key),
            id_bytes: u64::MAX,
            lead: false,
            start: seq.start,
            end: seq.end,
            line: seq.line,
            samples: seq.samples,
        }
    }

    /// The sequence this run forms.
    pub(crate) fn sequence(&self) -> ScannedSequence {
        ScannedSequence {
            key: self.key,
            is_id: self.id.is_some(),
            start: self.start,
            end: self.end,
            line: self.line,
            samples: self.samples,
        }
    }
}

/// The lines of a segment before its first id: they belong to the run open before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SegmentLead {
    /// Offset just past the last of these lines.
    pub(crate) end: u64,
    /// Their sample count.
    pub(crate) samples: u64,
}

/// What [`Scanner::scan_segment`] found besides the sequences it completed.
#[derive(Clone, Debug)]
pub(crate) struct SegmentScan {
    /// Lines before the segment's first id (id mode), if any.
    pub(crate) lead: Option<SegmentLead>,
    /// The run still open at the segment's end (id mode), if any.
    pub(crate) tail: Option<OpenRun>,
    /// Lines in the segment.
    pub(crate) lines: u64,
    /// Offset just past the segment.
    pub(crate) end: u64,
}

/// Bytes that end a name: space, TAB, CR, `|` and the line feed (as in the parser).
fn ends_name(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'|' | b'\n')
}

/// Space, TAB and CR: whitespace within a line (as in the parser), also the whitespace
/// that may precede a file's first id.
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r')
}

fn is_printable(b: u8) -> bool {
    (0x21..0x7f).contains(&b)
}

/// Lines shorter than this, on average, are searched a block at a time ([`SpecialSearch`]);
/// longer ones with memchr, whose setup per hit pays off over the long runs of values
/// between them. (On gen_ctf.py's shapes: seq's 30-byte and sparse's 400-byte lines are
/// scanned faster by blocks, dense's 2,400-byte lines by memchr.)
const SHORT_LINE: usize = 1024;

/// The mean length of the first lines of `text` (from a sample of a few short lines' worth),
/// to pick the fast path's search before it has measured any line. Never 0.
fn estimate_line_len(text: &[u8]) -> usize {
    let sample = &text[..text.len().min(8 * SHORT_LINE)];
    match memchr::memchr_iter(b'\n', sample).count() {
        0 => 8 * SHORT_LINE,
        lines => (sample.len() / lines).max(1),
    }
}

/// Lines of the fast path that continue the open run, not yet added to it: how many, their
/// samples, the end of the last, and the counts per input of the last run of lines holding the
/// same inputs (lines of a file mostly hold the same inputs, so counting them per run of
/// equal sets saves a count per input per line).
#[derive(Clone, Copy, Debug, Default)]
struct Continued {
    lines: u64,
    samples: u64,
    end: u64,
    /// The inputs of the lines counted in `seen_lines`.
    seen: u64,
    seen_lines: u64,
}

impl Continued {
    /// Counts a line ending at `end` that holds the inputs in `seen` (a sample if `sample`).
    /// Returns the inputs and the count of the lines before it that held other inputs, for
    /// the caller to count.
    #[inline(always)]
    fn line(&mut self, seen: u64, sample: bool, end: u64) -> Option<(u64, u64)> {
        self.lines += 1;
        self.samples += u64::from(sample);
        self.end = end;
        if seen == self.seen {
            self.seen_lines += 1;
            return None;
        }
        let before = (self.seen, self.seen_lines);
        self.seen = seen;
        self.seen_lines = 1;
        (before.1 > 0).then_some(before)
    }
}

/// The incremental boundary scanner for one configuration.
pub struct Scanner {
    aliases: Vec<Box<[u8]>>,
    /// Per alias, its packed form when it has at most 8 bytes.
    packed: Vec<Option<PackedAlias>>,
    longest_alias: usize,
    defining: Option<usize>,
    /// The inputs (a bit each, as in the fast path's `seen`) whose lines are samples: the
    /// `definesMBSize` input, else all.
    sample_inputs: u64,
    skip_sequence_ids: bool,
    // Per file.
    head: Vec<u8>,
    head_pending: bool,
    /// Absolute offset of the next byte to be fed.
    offset: u64,
    key_base: u64,
    mode: Option<KeyMode>,
    saw_content: bool,
    state: State,
    /// 1-based number of the current line.
    line: u64,
    line_start: u64,
    input_lines: Vec<u64>,
    /// Per input, the last line it was seen on (so a repeat on a line counts once).
    seen_on: Vec<u64>,
    // Per line.
    line_counted: bool,
    line_defining: bool,
    line_faulty: bool,
    id_value: u64,
    id_digits: u64,
    id_overflow: bool,
    name: Vec<u8>,
    name_printable: bool,
    /// Whether the bytes of the current values must be checked (line mode, a line that is
    /// neither counted nor faulty yet, after an unconfigured name).
    check_values: bool,
    /// Mean length of the lines the fast path saw last, or 0 before it saw any (picks its
    /// search).
    mean_line_len: usize,
    /// The input the fast path tries first for each name.
    guess: NameGuess,
    open: Option<OpenRun>,
    /// The lines of a segment before its first id, once an id has ended them.
    lead: Option<SegmentLead>,
    ready: Vec<ScannedSequence>,
}

impl Scanner {
    /// A scanner for the given inputs.
    pub fn new(inputs: &[InputConfig], skip_sequence_ids: bool) -> Self {
        let aliases: Vec<Box<[u8]>> = inputs
            .iter()
            .map(|i| i.alias.as_bytes().to_vec().into_boxed_slice())
            .collect();
        let packed = aliases.iter().map(|a| PackedAlias::new(a)).collect();
        Scanner {
            packed,
            longest_alias: aliases.iter().map(|a| a.len()).max().unwrap_or(0),
            defining: inputs.iter().position(|i| i.defines_mb_size),
            sample_inputs: match inputs.iter().position(|i| i.defines_mb_size) {
                Some(d) => 1u64.checked_shl(d as u32).unwrap_or(0),
                None => u64::MAX,
            },
            skip_sequence_ids,
            head: Vec::with_capacity(3),
            head_pending: true,
            offset: 0,
            key_base: 0,
            mode: None,
            saw_content: false,
            state: State::LineStart,
            line: 1,
            line_start: 0,
            input_lines: vec![0; aliases.len()],
            seen_on: vec![0; aliases.len()],
            line_counted: false,
            line_defining: false,
            line_faulty: false,
            id_value: 0,
            id_digits: 0,
            id_overflow: false,
            name: Vec::new(),
            name_printable: true,
            check_values: false,
            mean_line_len: 0,
            guess: NameGuess::new(inputs.len()),
            open: None,
            lead: None,
            ready: Vec::new(),
            aliases,
        }
    }

    /// Prepares for a new file whose line-mode keys start at `key_base`.
    pub fn start_file(&mut self, key_base: u64) {
        self.head.clear();
        self.head_pending = true;
        self.offset = 0;
        self.key_base = key_base;
        self.mode = None;
        self.saw_content = false;
        self.state = State::LineStart;
        self.line = 1;
        self.line_start = 0;
        self.input_lines.iter_mut().for_each(|n| *n = 0);
        self.seen_on.iter_mut().for_each(|n| *n = 0);
        self.open = None;
        self.lead = None;
        self.ready.clear();
    }

    /// Scans a segment of a file on its own, so that segments can be scanned in parallel:
    /// `data` holds complete lines (it ends with a line feed) starting at byte `offset` of a
    /// file whose mode is known. Sequences complete within the segment go to
    /// [`ready`](Self::ready), with line numbers (and line-mode keys) counted from the
    /// segment's first line as line 1; the caller shifts them by the lines before the
    /// segment. In id mode the lines before the segment's first id, and the run still open
    /// at its end, are returned for the caller to join with the neighbouring segments.
    pub(crate) fn scan_segment(
        &mut self,
        mode: KeyMode,
        key_base: u64,
        offset: u64,
        data: &[u8],
    ) -> SegmentScan {
        self.start_file(key_base);
        self.head_pending = false;
        self.mode = Some(mode);
        self.saw_content = true;
        self.offset = offset;
        self.line_start = offset;
        if mode == KeyMode::Ids {
            self.open = Some(OpenRun {
                key: 0,
                id: None,
                id_bytes: u64::MAX,
                lead: true,
                start: offset,
                end: offset,
                line: 1,
                samples: 0,
            });
        }
        self.run(data);
        debug_assert_eq!(
            self.state,
            State::LineStart,
            "a segment ends with a line feed"
        );
        let tail = match self.open.take() {
            Some(run) if run.lead => {
                self.open = Some(run);
                self.close_run();
                None
            }
            other => other,
        };
        SegmentScan {
            lead: self.lead.take(),
            tail,
            lines: self.line - 1,
            end: self.offset,
        }
    }

    /// The file's mode once it is known (the byte order mark checked and the first line
    /// with content seen): from then on the rest of the file may be scanned in segments.
    pub(crate) fn known_mode(&self) -> Option<KeyMode> {
        if self.head_pending {
            return None;
        }
        self.mode
    }

    /// Per configured input, the lines holding it so far.
    pub(crate) fn input_lines(&self) -> &[u64] {
        &self.input_lines
    }

    /// The next line's number (1-based).
    pub(crate) fn next_line(&self) -> u64 {
        self.line
    }

    /// Takes the run open at this point (id mode).
    pub(crate) fn take_open(&mut self) -> Option<OpenRun> {
        self.open.take()
    }

    /// Continues after segments scanned elsewhere: the next byte is at `offset` and starts
    /// line `line`, `open` is the run still open, and the segments' lines held each input
    /// `input_lines[i]` more times.
    pub(crate) fn resume(
        &mut self,
        offset: u64,
        line: u64,
        open: Option<OpenRun>,
        input_lines: &[u64],
    ) {
        debug_assert_eq!(self.state, State::LineStart);
        self.offset = offset;
        self.line = line;
        self.line_start = offset;
        self.open = open;
        for (total, more) in self.input_lines.iter_mut().zip(input_lines) {
            *total += more;
        }
    }

    /// Sequences completed so far; the caller drains them after each [`feed`](Self::feed).
    pub fn ready(&mut self) -> &mut Vec<ScannedSequence> {
        &mut self.ready
    }

    /// Scans the next piece of the file.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), FatalDataError> {
        if self.head_pending {
            let take = (3 - self.head.len()).min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
            if self.head.len() < 3 {
                return Ok(());
            }
            self.scan_head()?;
        }
        self.run(data);
        Ok(())
    }

    /// Ends the file: a last line without a line feed is scanned as if it had one.
    pub fn finish(&mut self) -> Result<FileSummary, FatalDataError> {
        if self.head_pending {
            self.scan_head()?;
        }
        if self.state != State::LineStart {
            // A virtual line feed just past the last byte: the line ends at the end of the
            // file, so the feed is placed one byte back.
            let end = self.offset;
            self.offset -= 1;
            self.run(b"\n");
            self.offset = end;
        }
        self.close_run();
        if !self.saw_content {
            return Err(empty_file_error());
        }
        Ok(FileSummary {
            mode: self.mode.unwrap_or(KeyMode::Lines),
            lines: self.line - 1,
            input_lines: self.input_lines.clone(),
        })
    }

    fn scan_head(&mut self) -> Result<(), FatalDataError> {
        self.head_pending = false;
        let head = std::mem::take(&mut self.head);
        let bom = byte_order_mark_len(&head)?;
        self.offset = bom as u64;
        self.line_start = self.offset;
        self.run(&head[bom..]);
        self.head = head;
        Ok(())
    }

    /// Runs the state machine over `buf`, which follows the bytes fed before.
    fn run(&mut self, buf: &[u8]) {
        let base = self.offset;
        let mut pos = 0;
        while pos < buf.len() {
            match self.state {
                State::LineStart => {
                    if self.mode.is_some() {
                        pos = self.run_lines(buf, pos, base);
                        if pos == buf.len() {
                            break;
                        }
                    }
                    self.line_start = base + pos as u64;
                    self.line_counted = false;
                    self.line_defining = false;
                    self.line_faulty = false;
                    self.id_value = 0;
                    self.id_digits = 0;
                    self.id_overflow = false;
                    self.check_values = false;
                    let b = buf[pos];
                    self.state = State::Id;
                    if self.mode.is_none() {
                        if b.is_ascii_digit() && !self.skip_sequence_ids {
                            self.decide(KeyMode::Ids);
                        } else if is_space(b) || b == b'\n' {
                            self.state = State::Blank;
                        } else {
                            self.decide(KeyMode::Lines);
                        }
                    }
                }
                State::Blank => {
                    while pos < buf.len() && is_space(buf[pos]) {
                        pos += 1;
                    }
                    match buf.get(pos) {
                        None => {}
                        Some(b'\n') => {
                            pos += 1;
                            self.end_line(base + pos as u64);
                        }
                        Some(&b) => {
                            // As CNTK, the whitespace before the first content is skipped: a
                            // digit after it starts an id (the parser's `open_line` skips it
                            // too), or with `skipSequenceIds` digits skipped as at the start
                            // of any line; anything else means line mode. The line still
                            // starts at its first byte.
                            if b.is_ascii_digit() {
                                self.decide(if self.skip_sequence_ids {
                                    KeyMode::Lines
                                } else {
                                    KeyMode::Ids
                                });
                                self.state = State::Id;
                            } else {
                                self.decide(KeyMode::Lines);
                                self.state = State::Lead;
                            }
                        }
                    }
                }
                State::Id => {
                    while let Some(&b) = buf.get(pos) {
                        if !b.is_ascii_digit() {
                            break;
                        }
                        self.push_digit(b);
                        pos += 1;
                    }
                    if pos < buf.len() {
                        self.end_id();
                        self.state = State::Lead;
                    }
                }
                State::Lead => {
                    while pos < buf.len() && is_space(buf[pos]) {
                        pos += 1;
                    }
                    match buf.get(pos) {
                        None => {}
                        Some(b'|') => {
                            pos += 1;
                            self.state = State::Pipe;
                        }
                        Some(b'\n') => {
                            pos += 1;
                            self.end_line(base + pos as u64);
                        }
                        Some(_) => {
                            // The parser reports junk where a sample should start.
                            self.line_faulty = true;
                            self.state = State::Values;
                        }
                    }
                }
                State::Pipe => {
                    let b = buf[pos];
                    if b == b'#' {
                        pos += 1;
                        self.state = State::Comment;
                    } else if ends_name(b) {
                        // An empty name is an error.
                        self.line_faulty = true;
                        self.state = State::Values;
                    } else {
                        self.name.clear();
                        self.name_printable = true;
                        self.state = State::Name;
                    }
                }
                State::Name => {
                    while let Some(&b) = buf.get(pos) {
                        if ends_name(b) {
                            break;
                        }
                        if self.name.len() <= self.longest_alias {
                            self.name.push(b);
                        }
                        self.name_printable &= is_printable(b);
                        pos += 1;
                    }
                    if pos < buf.len() {
                        self.end_name();
                        self.state = State::Values;
                    }
                }
                State::Values => {
                    if self.check_values {
                        while let Some(&b) = buf.get(pos) {
                            if b == b'|' || b == b'\n' {
                                break;
                            }
                            if !is_printable(b) && !is_space(b) {
                                self.line_faulty = true;
                                self.check_values = false;
                                break;
                            }
                            pos += 1;
                        }
                    }
                    match memchr2(b'|', b'\n', &buf[pos..]) {
                        None => pos = buf.len(),
                        Some(n) => {
                            pos += n + 1;
                            if buf[pos - 1] == b'|' {
                                self.check_values = false;
                                self.state = State::Pipe;
                            } else {
                                self.end_line(base + pos as u64);
                            }
                        }
                    }
                }
                State::Comment => match memchr2(b'|', b'\n', &buf[pos..]) {
                    None => pos = buf.len(),
                    Some(n) => {
                        pos += n + 1;
                        if buf[pos - 1] == b'|' {
                            self.state = State::CommentPipe;
                        } else {
                            self.end_line(base + pos as u64);
                        }
                    }
                },
                State::CommentPipe => {
                    if buf[pos] == b'#' {
                        pos += 1;
                        self.state = State::Comment;
                    } else {
                        // The `|` ends the comment and starts a sample.
                        self.state = State::Pipe;
                    }
                }
            }
        }
        self.offset = base + buf.len() as u64;
    }

    /// The fast path: scans the complete lines of `buf` from `pos` (a line start, mode
    /// decided) with one pass over its `|` and line feeds, and commits each line as the
    /// state machine would. Returns the start of the first line it leaves to the state
    /// machine: the incomplete last line, or a line it does not handle (an id beyond 19
    /// digits, a line-mode line holding no configured input, more than 64 inputs).
    fn run_lines(&mut self, buf: &[u8], pos: usize, base: u64) -> usize {
        let Some(mode) = self.mode else { return pos };
        if self.aliases.len() > 64 {
            return pos;
        }
        if self.mean_line_len == 0 {
            self.mean_line_len = estimate_line_len(&buf[pos..]);
        }
        if self.mean_line_len < SHORT_LINE {
            let hits = SpecialSearch::new(buf, pos);
            self.lines_from_hits(buf, pos, base, mode, hits)
        } else {
            let hits = memchr::memchr2_iter(b'|', b'\n', &buf[pos..]).map(|h| h + pos);
            self.lines_from_hits(buf, pos, base, mode, hits)
        }
    }

    /// The loop of [`run_lines`](Self::run_lines), over the positions of the specials.
    ///
    /// A line with the same id bytes as the line that opened the run still open (most lines
    /// of a file of sequences) only extends it: such lines are counted in locals
    /// ([`Continued`]) and added to the run and the counts before anything else reads them.
    #[inline]
    fn lines_from_hits(
        &mut self,
        buf: &[u8],
        pos: usize,
        base: u64,
        mode: KeyMode,
        mut hits: impl Iterator<Item = usize>,
    ) -> usize {
        let mut start = pos;
        let mut lines = 0;
        let mut continued = Continued::default();
        let mut open_id = self.open_id_bytes();
        let result = loop {
            let mut seen = 0u64;
            // The input named last on the line, for the guess at the next name.
            let mut before = self.guess.line_start();
            let end = loop {
                let Some(q) = hits.next() else {
                    break None; // the line continues in the next piece
                };
                if buf[q] == b'\n' {
                    break Some(q + 1);
                }
                // With `#` after it, a `|` starts a comment or escapes a pipe inside one;
                // otherwise it starts a sample (ending any comment).
                if buf.get(q + 1) == Some(&b'#') {
                    continue;
                }
                if let Some(input) = self.alias_at(buf, q + 1, before) {
                    seen |= 1 << input;
                    before = input;
                }
            };
            let Some(end) = end else { break start };
            if let Some(id_bytes) = open_id {
                let word = load_word(buf, start);
                let digits = leading_digits(word);
                if digits > 0 && digits < 8 && low_bytes(word, digits) == id_bytes {
                    let sample = seen & self.sample_inputs != 0;
                    if let Some((inputs, count)) = continued.line(seen, sample, base + end as u64) {
                        self.count_inputs(inputs, count);
                    }
                    lines += 1;
                    start = end;
                    if start == buf.len() {
                        break start;
                    }
                    continue;
                }
            }
            self.add_continued(&mut continued);
            if seen == 0 && mode == KeyMode::Lines {
                break start; // the state machine checks the line for errors
            }
            if !self.commit_line(buf, start, end, seen, base) {
                break start;
            }
            open_id = self.open_id_bytes();
            lines += 1;
            start = end;
            if start == buf.len() {
                break start;
            }
        };
        self.add_continued(&mut continued);
        if let Some(mean) = (result - pos).checked_div(lines) {
            self.mean_line_len = mean;
        }
        result
    }

    /// The id bytes of the line that opened the run still open, if it has an id of fewer
    /// than 8 digits (id mode).
    fn open_id_bytes(&self) -> Option<u64> {
        match &self.open {
            Some(run) if run.id.is_some() && run.id_bytes != u64::MAX => Some(run.id_bytes),
            _ => None,
        }
    }

    /// Adds the lines counted in `continued` to the open run, the line number and the
    /// counts per input, and empties it.
    fn add_continued(&mut self, continued: &mut Continued) {
        if continued.lines == 0 {
            return;
        }
        if let Some(run) = &mut self.open {
            run.end = continued.end;
            run.samples += continued.samples;
        }
        self.line += continued.lines;
        self.count_inputs(continued.seen, continued.seen_lines);
        *continued = Continued::default();
    }

    /// Commits the line `buf[start..end]` found by the fast path, holding the inputs in
    /// `seen`, as the state machine would. Returns false, committing nothing, for an id that
    /// may not fit in 64 bits.
    #[inline(always)]
    fn commit_line(&mut self, buf: &[u8], start: usize, end: usize, seen: u64, base: u64) -> bool {
        let word = load_word(buf, start);
        let mut p = start;
        let mut id = 0u64;
        while let Some(&b) = buf.get(p) {
            if !b.is_ascii_digit() {
                break;
            }
            id = id.wrapping_mul(10).wrapping_add(u64::from(b - b'0'));
            p += 1;
        }
        let digits = (p - start) as u64;
        if digits > 19 {
            return false;
        }
        self.count_inputs(seen, 1);
        self.line_start = base + start as u64;
        self.line_counted = seen != 0;
        self.line_defining = self.defining.is_some_and(|d| seen & (1 << d) != 0);
        self.line_faulty = false;
        self.id_value = id;
        self.id_digits = digits;
        self.id_overflow = false;
        self.end_id();
        if let Some(run) = &mut self.open {
            if run.line == self.line && digits < 8 {
                // The run this line opened: remember its id bytes for the lines after it.
                run.id_bytes = low_bytes(word, digits as u32);
            }
        }
        self.end_line(base + end as u64);
        true
    }

    /// Counts `lines` lines holding the inputs in `seen` (a bit per input).
    #[inline(always)]
    fn count_inputs(&mut self, seen: u64, lines: u64) {
        let mut bits = seen;
        while bits != 0 {
            self.input_lines[bits.trailing_zeros() as usize] += lines;
            bits &= bits - 1;
        }
    }

    /// The configured input whose alias is the name starting at `at`, if any. The input
    /// that followed `before` (the input named before on the line, or the line's start) last
    /// time is tried first ([`NameGuess`], as in the parser).
    #[inline(always)]
    fn alias_at(&mut self, buf: &[u8], at: usize, before: usize) -> Option<usize> {
        let word = load_word(buf, at);
        let guess = self.guess.after(before);
        if guess < self.packed.len() && self.alias_matches(guess, buf, at, word) {
            return Some(guess);
        }
        let found = (0..self.packed.len()).find(|&i| self.alias_matches(i, buf, at, word));
        if let Some(input) = found {
            self.guess.learn(before, input);
        }
        found
    }

    /// Whether the name starting at `at` (whose first 8 bytes are `word`) is the alias of
    /// `input`.
    #[inline(always)]
    fn alias_matches(&self, input: usize, buf: &[u8], at: usize, word: u64) -> bool {
        match &self.packed[input] {
            // The alias and the byte after it are in the word.
            Some(p) if p.len < 8 => p.starts(word) && ends_name((word >> (8 * p.len)) as u8),
            _ => {
                let alias = &self.aliases[input];
                buf.get(at..at + alias.len()) == Some(&alias[..])
                    && buf.get(at + alias.len()).is_some_and(|&b| ends_name(b))
            }
        }
    }

    fn decide(&mut self, mode: KeyMode) {
        self.mode = Some(mode);
        self.saw_content = true;
    }

    fn push_digit(&mut self, b: u8) {
        self.id_digits += 1;
        match self
            .id_value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(b - b'0')))
        {
            Some(v) => self.id_value = v,
            None => self.id_overflow = true,
        }
    }

    /// The digits at the start of the line have ended: in id mode they may open a sequence.
    #[inline]
    fn end_id(&mut self) {
        if self.mode != Some(KeyMode::Ids) || self.id_digits == 0 {
            return;
        }
        let id = (!self.id_overflow).then_some(self.id_value);
        let continues = matches!(&self.open, Some(run) if run.id.is_some() && run.id == id);
        if !continues {
            self.close_run();
            self.open = Some(OpenRun {
                key: id.unwrap_or(u64::MAX),
                id,
                id_bytes: u64::MAX,
                lead: false,
                start: self.line_start,
                end: self.line_start,
                line: self.line,
                samples: 0,
            });
        }
    }

    fn end_name(&mut self) {
        let found = if self.name.len() <= self.longest_alias {
            self.aliases.iter().position(|a| **a == *self.name)
        } else {
            None
        };
        match found {
            Some(input) => {
                if self.seen_on[input] != self.line {
                    self.seen_on[input] = self.line;
                    self.input_lines[input] += 1;
                }
                self.line_counted = true;
                self.line_defining |= self.defining == Some(input);
                self.check_values = false;
            }
            None => {
                self.line_faulty |= !self.name_printable;
                self.check_values =
                    self.mode == Some(KeyMode::Lines) && !self.line_counted && !self.line_faulty;
            }
        }
    }

    /// The current line ends at `end` (just past its line feed).
    #[inline]
    fn end_line(&mut self, end: u64) {
        let samples = u64::from(if self.defining.is_some() {
            self.line_defining
        } else {
            self.line_counted
        });
        match self.mode {
            None => {} // a blank line before the first content
            Some(KeyMode::Ids) => {
                if let Some(run) = &mut self.open {
                    run.end = end;
                    run.samples += samples;
                }
            }
            Some(KeyMode::Lines) if self.line_counted || self.line_faulty => {
                self.ready.push(ScannedSequence {
                    key: self.key_base + self.line - 1,
                    is_id: false,
                    start: self.line_start,
                    end,
                    line: self.line,
                    samples,
                });
            }
            Some(KeyMode::Lines) => {} // belongs to no sequence
        }
        self.line += 1;
        self.state = State::LineStart;
    }

    fn close_run(&mut self) {
        match self.open.take() {
            Some(run) if run.lead => {
                self.lead = (run.end > run.start).then_some(SegmentLead {
                    end: run.end,
                    samples: run.samples,
                });
            }
            Some(run) => self.ready.push(run.sequence()),
            None => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_pieces(
        text: &[u8],
        piece: usize,
        inputs: &[InputConfig],
        skip_ids: bool,
    ) -> Result<(Vec<ScannedSequence>, FileSummary), FatalDataError> {
        let mut s = Scanner::new(inputs, skip_ids);
        s.start_file(0);
        let mut out = Vec::new();
        for p in text.chunks(piece.max(1)) {
            s.feed(p)?;
            out.append(s.ready());
        }
        let summary = s.finish()?;
        out.append(s.ready());
        Ok((out, summary))
    }

    fn inputs() -> Vec<InputConfig> {
        vec![InputConfig::dense("a", 2), InputConfig::sparse("b", 5)]
    }

    fn spans(text: &str) -> Vec<(u64, u64, u64, u64, u64)> {
        let whole = scan_pieces(text.as_bytes(), usize::MAX, &inputs(), false).unwrap();
        for piece in 1..8 {
            let split = scan_pieces(text.as_bytes(), piece, &inputs(), false).unwrap();
            assert_eq!(split, whole, "piece size {piece}");
        }
        whole
            .0
            .iter()
            .map(|s| (s.key, s.start, s.end, s.line, s.samples))
            .collect()
    }

    #[test]
    fn id_mode_runs_include_idless_lines_and_count_sample_lines() {
        let text = "7 |a 1 2\n|b 1:1\n\n|# note\n8 |a 3 4 |b\n8 |a 5 6\n";
        assert_eq!(spans(text), [(7, 0, 25, 1, 2), (8, 25, 46, 5, 2)]);
    }

    #[test]
    fn whitespace_before_the_first_id_keeps_id_mode() {
        // CNTK skips the whitespace before a file's first id; the run still starts at the
        // line's first byte (where the parser starts it too).
        assert_eq!(
            spans("  5 |a 1 2\n5 |a 3 4\n6 |a 5 6\n"),
            [(5, 0, 20, 1, 2), (6, 20, 29, 3, 1)]
        );
        assert_eq!(
            spans("\n \r\n\t5 |a 1 2\n6 |a 5 6\n"),
            [(5, 4, 14, 3, 1), (6, 14, 23, 4, 1)]
        );
        let (_, summary) = scan_pieces(b"\t7 |a 1 2\n", 1, &inputs(), false).unwrap();
        assert_eq!(summary.mode, KeyMode::Ids);
        // Only the first id: a later line with whitespace before digits continues the run.
        assert_eq!(spans("  5 |a 1 2\n  6 |a 3 4\n"), [(5, 0, 22, 1, 2)]);
        // Whitespace then anything but a digit, or ids skipped: line mode.
        let (_, summary) = scan_pieces(b"  |a 1 2\n5 |a 1 2\n", 1, &inputs(), false).unwrap();
        assert_eq!(summary.mode, KeyMode::Lines);
        let (seqs, summary) = scan_pieces(b"  5 |a 1 2\n", 1, &inputs(), true).unwrap();
        assert_eq!(summary.mode, KeyMode::Lines);
        assert_eq!(seqs.len(), 1);
    }

    #[test]
    fn line_mode_skips_blank_comment_and_unconfigured_lines() {
        let text = "\n|a 1 2\n  \n|# c |# still |a 1\n|zz 3\n|a 1 |# x\n";
        // Keys are 0-based line numbers; lines 1, 3 and 5 belong to no sequence. Line 4's
        // comment ends at `|a`.
        assert_eq!(
            spans(text),
            [(1, 1, 8, 2, 1), (3, 11, 30, 4, 1), (5, 36, 46, 6, 1)]
        );
    }

    #[test]
    fn line_mode_keeps_lines_the_parser_reports() {
        // Junk before a sample, an empty name, and a non-ASCII byte in an unconfigured input.
        let text = "x |zz 1\n| 1\n|zz é\n|zz 1 |# é\n";
        let keys: Vec<u64> = spans(text).iter().map(|s| s.0).collect();
        assert_eq!(keys, [0, 1, 2]);
    }

    #[test]
    fn a_comment_ends_at_an_unescaped_pipe() {
        let text = "|# a |# b |a 1 2\n|# a |#|#b\n";
        let got = spans(text);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0, 0);
    }

    #[test]
    fn defines_mb_size_counts_only_its_input() {
        let inputs = vec![
            InputConfig::dense("a", 1),
            InputConfig::dense("b", 1).defining_mb_size(),
        ];
        let text = b"1 |a 1 |b 1\n1 |a 2\n1 |a 3 |b 3\n";
        let (seqs, summary) = scan_pieces(text, 3, &inputs, false).unwrap();
        assert_eq!(seqs.len(), 1);
        assert_eq!(seqs[0].samples, 2);
        assert_eq!(summary.input_lines, [3, 2]);
    }

    #[test]
    fn lines_continuing_a_run_count_their_inputs_and_samples() {
        // Runs whose lines change the inputs they hold, and an id written differently (`01`)
        // that still continues its run: the fast path counts them in runs of equal inputs.
        let inputs = vec![
            InputConfig::dense("a", 1),
            InputConfig::dense("b", 1).defining_mb_size(),
        ];
        let lines = [
            "1 |a 1 |b 1",
            "1 |a 2",
            "1 |a 3",
            "1 |b 4",
            "1 |a 5 |b 5",
            "01 |b 6",
            "2 |a 7",
            "2 |a 8 |b 8",
        ];
        let text = lines.map(|l| format!("{l}\n")).concat();
        let second = lines[..6].iter().map(|l| l.len() as u64 + 1).sum::<u64>();
        for piece in [usize::MAX, 64, 5] {
            let (seqs, summary) = scan_pieces(text.as_bytes(), piece, &inputs, false).unwrap();
            let found: Vec<_> = seqs
                .iter()
                .map(|s| (s.key, s.start, s.end, s.line, s.samples))
                .collect();
            assert_eq!(
                found,
                [(1, 0, second, 1, 4), (2, second, text.len() as u64, 7, 1)],
                "pieces of {piece}"
            );
            assert_eq!(summary.input_lines, [6, 5], "pieces of {piece}");
            assert_eq!(summary.lines, 8);
        }
    }

    #[test]
    fn bom_final_line_without_feed_and_line_count() {
        let text = "\u{feff}3 |a 1 2\n3 |a 3 4";
        assert_eq!(spans(text), [(3, 3, 20, 1, 2)]);
        let (_, summary) = scan_pieces(text.as_bytes(), 2, &inputs(), false).unwrap();
        assert_eq!(summary.lines, 2);
        assert_eq!(summary.mode, KeyMode::Ids);
    }

    #[test]
    fn overflowing_ids_never_continue() {
        let text = "99999999999999999999 |a 1\n99999999999999999999 |a 1\n";
        let got = spans(text);
        assert_eq!(got.len(), 2);
        assert!(got.iter().all(|s| s.0 == u64::MAX));
    }

    #[test]
    fn empty_and_utf16_files_are_fatal() {
        for text in [&b""[..], b"\xEF\xBB\xBF", b" \n\t\n", b"\xFF\xFE|\0a"] {
            for piece in [1, 2, 100] {
                assert!(scan_pieces(text, piece, &inputs(), false).is_err());
            }
        }
    }

    #[test]
    fn long_aliases_of_the_same_length_are_told_apart() {
        // Regression: an alias over 8 bytes matched any alias of its length.
        let inputs = vec![
            InputConfig::dense("features1", 1),
            InputConfig::dense("features2", 1).defining_mb_size(),
        ];
        let text = b"1 |features2 2\n1 |features1 1\n1 |features1 3\n1 |features1 4\n";
        let (seqs, summary) = scan_pieces(text, usize::MAX, &inputs, false).unwrap();
        assert_eq!(summary.input_lines, [3, 1]);
        assert_eq!(seqs[0].samples, 1);
    }

    #[test]
    fn skip_sequence_ids_gives_line_mode() {
        let (seqs, summary) = scan_pieces(b"5 |a 1\n5 |a 2\n", 4, &inputs(), true).unwrap();
        assert_eq!(summary.mode, KeyMode::Lines);
        assert_eq!(seqs.iter().map(|s| s.key).collect::<Vec<_>>(), [0, 1]);
    }

    #[test]
    fn skip_sequence_ids_skips_digits_after_the_whitespace_that_starts_a_file() {
        // As the parser (and CNTK, whose parser skips the digits where its index starts the
        // first sequence, past the whitespace): the digits are no junk, so a first line of
        // only an id, or of an id and a comment, belongs to no sequence. On a later line
        // digits after whitespace are junk: the line is a sequence the parser reports.
        let spans_skipping = |text: &[u8]| {
            let whole = scan_pieces(text, usize::MAX, &inputs(), true).unwrap();
            for piece in 1..8 {
                let split = scan_pieces(text, piece, &inputs(), true).unwrap();
                assert_eq!(split, whole, "piece size {piece}");
            }
            assert_eq!(whole.1.mode, KeyMode::Lines);
            let spans: Vec<_> = whole.0.iter().map(|s| (s.key, s.start, s.line)).collect();
            spans
        };
        assert_eq!(spans_skipping(b"  5 |# c\n|a 1 2\n"), [(1, 9, 2)]);
        assert_eq!(spans_skipping(b"\n \t5\n7 |a 1 2\n"), [(2, 5, 3)]);
        assert_eq!(
            spans_skipping(b"\t5 |a 1 2\n  6 |# c\n"),
            [(0, 0, 1), (1, 10, 2)]
        );
    }
}
