//! Sequential reading of a corpus: streams every file of a configuration through the parser
//! in bounded blocks and applies the error policy (SPEC §1).
//!
//! This is the streaming path used by `ctf dump` and `ctf validate`: memory stays bounded by
//! the block size and the longest sequence, never by the file. Invalid sequences are skipped
//! and reported once each (`traceLevel >= 1`) until more than `maxErrors` have occurred; in
//! [`ErrorPolicy::ReportAll`] every error is reported and none stops the read. The
//! `maxErrors` policy itself is an [`ErrorBudget`], so readers that go chunk by chunk through
//! the index apply exactly the same rule. A composite reader's sequences, joined by key, are
//! read that way: through the index, chunk by chunk of the first deserializer (module `indexed`).

mod indexed;

use std::fmt;
use std::fs::File;
use std::io::{self, Read};

use crate::config::ReaderConfig;
use crate::diag::{write_stderr_line, Diagnostic, Severity};
use crate::index::chunking::MAX_SEQUENCE_BYTES;
use crate::index::files::{expand_file_patterns, DataFile};
use crate::index::{IndexWarning, WarningSink};
use crate::parser::{
    Element, FatalDataError, InvalidSequence, ParseCounts, ParsedSequences, StreamOptions,
    StreamParser, MAX_COLUMN_ENTRIES,
};
use crate::sync::{Arc, Mutex, PoisonError};

/// Size of one read from a data file.
pub const READ_BLOCK_SIZE: usize = 4 << 20;

/// The longest line a [`SequenceReader`] takes by default: the longest sequence the index
/// takes ([`MAX_SEQUENCE_BYTES`]), so a line it refuses belongs to a sequence a read through
/// the index refuses too. A file without line feeds so fails once this many of its bytes
/// are read, rather than being held whole.
pub const MAX_LINE_BYTES: usize = MAX_SEQUENCE_BYTES as usize;

/// What to do with invalid sequences.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorPolicy {
    /// Skip up to `maxErrors` invalid sequences, reporting each one's first error (at
    /// `traceLevel >= 1`); fail on the next one.
    Budget,
    /// Report every error and warning and never fail on data errors (`ctf validate`). A
    /// file that cannot be opened or read on, or that a file-level error stops (empty,
    /// UTF-16, a line too long, changed while read), is reported as one error and the read
    /// goes on with the next file.
    ReportAll,
}

/// Why a read failed.
#[derive(Debug)]
pub enum ReadError {
    /// A data file could not be opened or read.
    Io {
        /// The file, as written in the configuration.
        file: String,
        /// The underlying error.
        error: io::Error,
    },
    /// A file-level problem: empty file, UTF-16 text.
    Fatal {
        /// The file, as written in the configuration.
        file: String,
        /// Where and what.
        error: FatalDataError,
    },
    /// More invalid sequences than `maxErrors` allows.
    TooManyErrors {
        /// The file holding the invalid sequence that exceeded the budget.
        file: String,
        /// Its first error.
        last: Diagnostic,
        /// The configured budget.
        max_errors: u64,
    },
}

impl fmt::Display for ReadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (file, diagnostic) = self.as_diagnostic();
        let shown = write!(f, "{}", diagnostic.display_in(file));
        shown
    }
}

impl std::error::Error for ReadError {}

impl ReadError {
    /// The file the error is about, and the error as an error diagnostic of that file (at
    /// its line and column when it has them): how it is shown, and how a read that goes on
    /// past it reports it among the data's errors.
    fn as_diagnostic(&self) -> (&str, Diagnostic) {
        let (file, line, col, message) = match self {
            ReadError::Io { file, error } => (file, 0, 0, format!("cannot read: {error}")),
            ReadError::Fatal { file, error } => {
                (file, error.line, error.col, error.message.clone())
            }
            ReadError::TooManyErrors {
                file,
                last,
                max_errors,
            } => (
                file,
                last.line,
                last.col,
                format!(
                    "too many invalid sequences: more than maxErrors = {max_errors} (the last \
                     one: {})",
                    last.message
                ),
            ),
        };
        (file, Diagnostic::new(Severity::Error, line, col, message))
    }
}

/// Receives the diagnostics a read reports, with the file they refer to: those of the data,
/// and for the readers that index (the sources, a composite reader) the warnings of
/// indexing, at no line ([`Diagnostic::of_whole_file`]).
pub type DiagnosticSink = Box<dyn FnMut(&str, &Diagnostic) + Send>;

/// A sink printing diagnostics to standard error as `FILE:LINE:COL: error: MESSAGE`.
pub fn stderr_sink() -> DiagnosticSink {
    Box::new(|file, d| write_stderr_line(d.display_in(file)))
}

/// Shares `sink` between a reader and the indexing of its corpus: returns the sink for the
/// reader's own diagnostics, and the warning sink of its indexing, which hands each warning
/// (an index cache that cannot be used or written, keys a joined deserializer does not
/// share) to `sink` as a [`Diagnostic::of_whole_file`], one call at a time whatever thread
/// it comes from (the cache writer's), or drops it at `traceLevel = 0`, as every warning.
pub(crate) fn share_with_indexing(
    sink: DiagnosticSink,
    config: &ReaderConfig,
) -> (DiagnosticSink, WarningSink) {
    let shared = Arc::new(Mutex::new(sink));
    let for_indexing = Arc::clone(&shared);
    let report = config.trace_level >= 1;
    // (A `WarningSink` is `std`'s `Arc`; the lock it shares is the shim's.)
    let on_warning: WarningSink = std::sync::Arc::new(move |w: &IndexWarning| {
        if !report {
            return;
        }
        let warning = Diagnostic::of_whole_file(Severity::Warning, w.message.clone());
        // A sink that panicked once is still called: it is the caller's.
        let mut sink = for_indexing.lock().unwrap_or_else(PoisonError::into_inner);
        sink(&w.file, &warning);
    });
    let own: DiagnosticSink = Box::new(move |file, d| {
        let mut sink = shared.lock().unwrap_or_else(PoisonError::into_inner);
        sink(file, d);
    });
    (own, on_warning)
}

/// The `maxErrors` policy of [`ErrorPolicy::Budget`], shared by every reading path (the
/// streaming [`SequenceReader`] and the chunk-by-chunk readers such as `ctf stats`).
///
/// Each invalid sequence is charged once; up to `max_errors` of them are skipped, each one's
/// first error reported at `traceLevel >= 1`, and the next one fails the read with
/// [`ReadError::TooManyErrors`]. Warnings are reported at `traceLevel >= 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrorBudget {
    /// Invalid sequences that may be skipped (`maxErrors`).
    pub max_errors: u64,
    /// `traceLevel`: warnings and skipped sequences are reported from 1 on.
    pub trace_level: u32,
    /// Invalid sequences charged so far.
    pub invalid_so_far: u64,
}

/// The budget ran out: the invalid sequence that exceeded it, and where to cut.
#[derive(Debug)]
pub struct BudgetExceeded {
    /// Valid sequences of the step that precede the failing invalid sequence (the ones to
    /// keep).
    pub keep: usize,
    /// The [`ReadError::TooManyErrors`] to fail with.
    pub error: ReadError,
}

impl ErrorBudget {
    /// A fresh budget: `max_errors` skips, reports at `trace_level >= 1`.
    pub fn new(max_errors: u64, trace_level: u32) -> Self {
        ErrorBudget {
            max_errors,
            trace_level,
            invalid_so_far: 0,
        }
    }

    /// The budget a configuration sets (`maxErrors`, `traceLevel`).
    pub fn for_config(config: &ReaderConfig) -> Self {
        Self::new(config.max_errors, config.trace_level)
    }

    /// Handles one step of a read of file `file`: charges its invalid sequences in order,
    /// reporting each skipped one's first error, and reports its warnings in file order
    /// among them (errors among `diagnostics` are not reported: each invalid sequence
    /// reports its first error).
    ///
    /// Returns the cut when a sequence exceeds the budget; the sequences after it are neither
    /// charged nor reported, nor are the warnings after its first error.
    pub fn charge(
        &mut self,
        file: &str,
        diagnostics: &[Diagnostic],
        invalid: &[InvalidSequence],
        sink: &mut dyn FnMut(&str, &Diagnostic),
    ) -> Result<(), BudgetExceeded> {
        let mut warnings = diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Warning)
            .peekable();
        let trace_level = self.trace_level;
        let mut report_warnings =
            |before: Option<(u64, u64)>, sink: &mut dyn FnMut(&str, &Diagnostic)| {
                while let Some(w) =
                    warnings.next_if(|w| before.is_none_or(|at| (w.line, w.col) < at))
                {
                    if trace_level >= 1 {
                        let (file, w) = w.resolved(file);
                        sink(file, &w);
                    }
                }
            };
        for seq in invalid {
            report_warnings(Some((seq.first_error.line, seq.first_error.col)), sink);
            self.invalid_so_far += 1;
            let (file, first_error) = seq.first_error.resolved(file);
            if self.invalid_so_far > self.max_errors {
                return Err(BudgetExceeded {
                    keep: seq.valid_before,
                    error: ReadError::TooManyErrors {
                        file: file.to_string(),
                        last: first_error.into_owned(),
                        max_errors: self.max_errors,
                    },
                });
            }
            if self.trace_level >= 1 {
                sink(file, &first_error);
            }
        }
        report_warnings(None, sink);
        Ok(())
    }
}

/// A data file being streamed, with its size and modification time when opened and the
/// bytes read so far: a file that changes while it is read (truncated, appended to,
/// rewritten) is an error, not a read that ends early or with invented bytes. Only a
/// regular file with a size is checked: a pipe, a device or a file of `/proc` (size 0) is
/// read to its end.
struct OpenFile {
    file: File,
    /// Size and modification time when opened, `None` when not checked.
    opened: Option<(u64, Option<std::time::SystemTime>)>,
    read: u64,
}

impl OpenFile {
    fn open(path: &std::path::Path) -> io::Result<Self> {
        let file = File::open(path)?;
        let metadata = file.metadata()?;
        let opened = (metadata.is_file() && metadata.len() > 0)
            .then(|| (metadata.len(), metadata.modified().ok()));
        Ok(OpenFile {
            file,
            opened,
            read: 0,
        })
    }
}

/// Streams the sequences of a corpus, file by file (glob patterns in `file` expanded), in
/// batches. A file that changes while it is read fails the read.
pub struct SequenceReader<T> {
    /// The data files, glob patterns expanded.
    files: Vec<DataFile>,
    next_file: usize,
    current: Option<OpenFile>,
    /// Name of the file whose bytes were fed last (diagnostics refer to it).
    current_name: String,
    /// An error to return once the sequences before it have been delivered.
    pending_error: Option<ReadError>,
    parser: StreamParser<T>,
    buffer: Vec<u8>,
    policy: ErrorPolicy,
    budget: ErrorBudget,
    sink: DiagnosticSink,
    /// Line-mode key of the next file's first line.
    next_key_base: u64,
    /// The file-level errors read past ([`ErrorPolicy::ReportAll`]), one per file given up.
    file_errors: Vec<ReadError>,
    done: bool,
    /// For a composite reader: the chunks of the first deserializer, joined.
    indexed: Option<indexed::IndexedWalk<T>>,
}

impl<T: Element> SequenceReader<T> {
    /// Prepares to read the files of `config`; diagnostics go to `sink`.
    pub fn new(config: &ReaderConfig, policy: ErrorPolicy, sink: DiagnosticSink) -> Self {
        let (sink, on_index_warning) = share_with_indexing(sink, config);
        let options = StreamOptions {
            skip_sequence_ids: config.skip_sequence_ids,
            frame_mode: config.frame_mode,
        };
        let mut parser = StreamParser::new(&config.inputs, options);
        parser.limit_line_bytes(MAX_LINE_BYTES);
        parser.limit_sequence_bytes(MAX_SEQUENCE_BYTES as usize);
        let mut reader = SequenceReader {
            files: Vec::new(),
            next_file: 0,
            current: None,
            current_name: String::new(),
            pending_error: None,
            parser,
            buffer: Vec::new(),
            policy,
            budget: ErrorBudget::for_config(config),
            sink,
            next_key_base: 0,
            file_errors: Vec::new(),
            done: false,
            indexed: None,
        };
        if config.is_composite() {
            match indexed::IndexedWalk::open(config, on_index_warning) {
                Ok(walk) => reader.indexed = Some(walk),
                Err(error) => reader.pending_error = Some(error),
            }
            return reader;
        }
        match expand_file_patterns(&config.files) {
            Ok(files) => reader.files = files,
            Err((file, error)) => reader.pending_error = Some(ReadError::Io { file, error }),
        }
        reader
    }

    /// Makes a line longer than `max` bytes a fatal error of its file (default
    /// [`MAX_LINE_BYTES`]), which bounds the text a read holds at once: each line is held
    /// whole until its line feed. (A composite reader reads through the index, whose limit is
    /// on sequences.)
    pub fn limit_line_bytes(&mut self, max: usize) {
        self.parser.limit_line_bytes(max);
    }

    /// Makes a sequence longer than `max` bytes invalid, with the error the index gives for
    /// it (default [`MAX_SEQUENCE_BYTES`], the index's limit), so that what a read through
    /// the index refuses is an error here too. (A composite reader reads through the index.)
    pub fn limit_sequence_bytes(&mut self, max: usize) {
        self.parser.limit_sequence_bytes(max);
    }

    /// Number of data files, glob patterns expanded (0 when a pattern matched nothing); for
    /// a composite reader, those of every deserializer.
    pub fn file_count(&self) -> usize {
        match &self.indexed {
            Some(walk) => walk.file_count(),
            None => self.files.len(),
        }
    }

    /// Counts so far (lines, sequences, errors, warnings). A composite reader counts
    /// sequences, errors and warnings, not lines. The errors include the file-level errors
    /// that [`ErrorPolicy::ReportAll`] reported and read past, one per file.
    pub fn counts(&self) -> ParseCounts {
        match &self.indexed {
            Some(walk) => walk.counts(),
            None => {
                let mut counts = self.parser.counts();
                counts.errors += self.file_errors.len() as u64;
                counts
            }
        }
    }

    /// The file-level errors that [`ErrorPolicy::ReportAll`] reported and read past, in file
    /// order: a file that could not be opened or read on, or that was empty, was UTF-16 text,
    /// held a line too long or changed while read. The other policy stops at the first.
    pub fn file_errors(&self) -> &[ReadError] {
        &self.file_errors
    }

    /// The next batch of complete, valid sequences in file order, or `None` at the end.
    ///
    /// A batch holds the sequences completed by one block read; it is replaced by the next
    /// call. An empty batch is never returned. When an error stops the read, the valid
    /// sequences before the failing point are returned first and the error on the next call;
    /// the read is then over, and later calls return `None` (unlike a minibatch source,
    /// which repeats its error until a restore).
    pub fn next_batch(&mut self) -> Result<Option<&ParsedSequences<T>>, ReadError> {
        self.parser.clear();
        if let Some(error) = self.pending_error.take() {
            self.done = true;
            return Err(error);
        }
        if self.indexed.is_some() {
            let found = self.next_indexed_chunk();
            return match (found, &self.indexed) {
                (Err(error), _) => {
                    self.done = true;
                    Err(error)
                }
                (Ok(true), Some(walk)) => Ok(Some(&walk.chunk.sequences)),
                (Ok(_), _) => {
                    self.done = true;
                    Ok(None)
                }
            };
        }
        while !self.done {
            let step = match self.read_step() {
                Err(error) if self.policy == ErrorPolicy::ReportAll => {
                    self.give_up_file(error);
                    Ok(())
                }
                read => read.and_then(|()| self.apply_policy()),
            };
            if let Err(error) = step {
                if self.parser.sequences().is_empty() {
                    self.done = true;
                    return Err(error);
                }
                self.pending_error = Some(error);
                return Ok(Some(self.parser.sequences()));
            }
            if !self.parser.sequences().is_empty() {
                return Ok(Some(self.parser.sequences()));
            }
            self.parser.clear();
        }
        Ok(None)
    }

    /// Loads chunks of a composite reader until one holds a valid sequence (`true`) or none
    /// is left, applying the error policy to each. When the budget runs out, the valid
    /// sequences before the failing one are delivered first and the error on the next call.
    fn next_indexed_chunk(&mut self) -> Result<bool, ReadError> {
        let Some(walk) = &mut self.indexed else {
            return Ok(false);
        };
        while !self.done {
            let Some(file) = walk.next_chunk()? else {
                return Ok(false);
            };
            let file = file.to_string();
            let chunk = &mut walk.chunk;
            if self.policy == ErrorPolicy::ReportAll {
                for d in &chunk.diagnostics {
                    if d.severity == Severity::Error || self.budget.trace_level >= 1 {
                        let (file, d) = d.resolved(&file);
                        (self.sink)(file, &d);
                    }
                }
            } else if let Err(exceeded) =
                self.budget
                    .charge(&file, &chunk.diagnostics, &chunk.invalid, &mut self.sink)
            {
                chunk.sequences.truncate(exceeded.keep);
                if chunk.sequences.is_empty() {
                    return Err(exceeded.error);
                }
                self.pending_error = Some(exceeded.error);
                return Ok(true);
            }
            if !chunk.sequences.is_empty() {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Reads one block, or finishes a file, or opens the next one.
    fn read_step(&mut self) -> Result<(), ReadError> {
        let Some(file) = &mut self.current else {
            if self.next_file == self.files.len() {
                self.done = true;
                return Ok(());
            }
            let DataFile { name, path } = self.files[self.next_file].clone();
            self.next_file += 1;
            let file = OpenFile::open(&path).map_err(|error| ReadError::Io {
                file: name.clone(),
                error,
            })?;
            self.parser.start_file(self.next_key_base);
            self.current = Some(file);
            self.current_name = name;
            return Ok(());
        };
        let changed = |message: String| ReadError::Fatal {
            file: self.current_name.clone(),
            error: FatalDataError {
                line: 0,
                col: 0,
                message: format!("the file changed while it was read: {message}"),
            },
        };
        if self.buffer.is_empty() {
            // Zeroed pages from the allocator: no memset of the whole block.
            self.buffer = vec![0; READ_BLOCK_SIZE];
        }
        let n = loop {
            match file.file.read(&mut self.buffer) {
                Ok(n) => break n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    return Err(ReadError::Io {
                        file: self.current_name.clone(),
                        error,
                    })
                }
            }
        };
        file.read += n as u64;
        if let Some((len, modified)) = file.opened {
            if file.read > len {
                return Err(changed(format!(
                    "it held {len} bytes when opened, and has more now"
                )));
            }
            if n == 0 {
                // Checked before the parser ends the file, so that a line cut short by a
                // truncation is not delivered as a sequence.
                if file.read < len {
                    return Err(changed(format!(
                        "it held {len} bytes when opened, and ended after {}",
                        file.read
                    )));
                }
                let now = file.file.metadata().map_err(|error| ReadError::Io {
                    file: self.current_name.clone(),
                    error,
                })?;
                if now.len() != len || now.modified().ok() != modified {
                    return Err(changed(
                        "its size or modification time is not what it was when opened".to_string(),
                    ));
                }
            }
        }
        let result = if n == 0 {
            self.current = None;
            let r = self.parser.finish_file();
            self.next_key_base += self.parser.lines_in_file();
            r
        } else {
            self.parser.feed(&self.buffer[..n])
        };
        result.map_err(|error| ReadError::Fatal {
            file: self.current_name.clone(),
            error,
        })
    }

    /// Under [`ErrorPolicy::ReportAll`], after the step that failed with `error`: reports the
    /// diagnostics of the lines the step parsed before it, then `error`, and leaves the rest
    /// of the file unread (its open sequence dropped), so that the next step opens the next
    /// file. Its completed sequences are still delivered.
    fn give_up_file(&mut self, error: ReadError) {
        // (Never fails under this policy: it only reports.)
        let _ = self.apply_policy();
        let (file, diagnostic) = error.as_diagnostic();
        (self.sink)(file, &diagnostic);
        self.file_errors.push(error);
        if self.current.take().is_some() {
            // Later files' line-mode keys continue after the lines read of this one.
            self.next_key_base += self.parser.lines_in_file();
        }
        self.parser.abandon_file();
    }

    /// Reports the diagnostics of the last step and charges the invalid sequences it
    /// completed to the budget. When the budget is exceeded, the batch is cut before the
    /// failing sequence.
    fn apply_policy(&mut self) -> Result<(), ReadError> {
        let name = self.current_name.as_str();
        if self.policy == ErrorPolicy::ReportAll {
            for d in self.parser.diagnostics() {
                if d.severity == Severity::Error || self.budget.trace_level >= 1 {
                    (self.sink)(name, d);
                }
            }
            return Ok(());
        }
        let charged = self.budget.charge(
            name,
            self.parser.diagnostics(),
            self.parser.invalid_sequences(),
            &mut self.sink,
        );
        charged.map_err(|exceeded| {
            self.parser.truncate_sequences(exceeded.keep);
            exceeded.error
        })
    }
}

/// Everything a whole-corpus read produced (see [`read_all`]).
#[derive(Debug)]
pub struct ReadOutcome<T> {
    /// The valid sequences, in file order (up to a failure, if any).
    pub sequences: ParsedSequences<T>,
    /// The diagnostics reported, with their file.
    pub diagnostics: Vec<(String, Diagnostic)>,
    /// Final counts.
    pub counts: ParseCounts,
    /// The error that stopped the read, if any.
    pub error: Option<ReadError>,
    /// The file-level errors read past under [`ErrorPolicy::ReportAll`], in file order
    /// ([`SequenceReader::file_errors`]); reported among `diagnostics` too.
    pub file_errors: Vec<ReadError>,
}

/// Reads a whole corpus into memory: for tests and small files (memory grows with the data).
pub fn read_all<T: Element>(config: &ReaderConfig, policy: ErrorPolicy) -> ReadOutcome<T> {
    use std::sync::{Arc, Mutex};
    let collected = Arc::new(Mutex::new(Vec::new()));
    let sink_target = Arc::clone(&collected);
    let sink: DiagnosticSink = Box::new(move |file, d| {
        if let Ok(mut v) = sink_target.lock() {
            v.push((file.to_string(), d.clone()));
        }
    });
    let mut reader = SequenceReader::<T>::new(config, policy, sink);
    let mut sequences = ParsedSequences::new(&config.inputs);
    let error = loop {
        match reader.next_batch() {
            Ok(Some(batch)) => {
                if let Err(overflow) = sequences.append(batch) {
                    let name = &config.inputs[overflow.input].name;
                    // A composite reader has no current file: name the corpus.
                    let file = match reader.current_name.as_str() {
                        "" => "the corpus".to_string(),
                        current => current.to_string(),
                    };
                    break Some(ReadError::Fatal {
                        file,
                        error: FatalDataError {
                            line: 0,
                            col: 0,
                            message: format!(
                                "input '{name}' would hold more than {MAX_COLUMN_ENTRIES} \
                                 samples or stored values: too large to read into memory at \
                                 once (read it batch by batch)"
                            ),
                        },
                    });
                }
            }
            Ok(None) => break None,
            Err(e) => break Some(e),
        }
    };
    let counts = reader.counts();
    let file_errors = std::mem::take(&mut reader.file_errors);
    drop(reader);
    let diagnostics = match Arc::try_unwrap(collected) {
        Ok(m) => m.into_inner().unwrap_or_default(),
        Err(shared) => shared.lock().map(|v| v.clone()).unwrap_or_default(),
    };
    ReadOutcome {
        sequences,
        diagnostics,
        counts,
        error,
        file_errors,
    }
}
