//! Scanning a file on several threads at once.
//!
//! The scan is the indexer's only real work, and one thread of it runs below the speed of
//! the page cache: on short lines because of the work per line, on long ones because of the
//! copy out of the page cache (a sparse file of 400-byte lines scans in about 60% of the time
//! on two threads). The file is therefore cut into parts of a fixed size, read in rounds of
//! one part per helper thread. A helper reads its part itself (a positional read, so the
//! copying out of the page cache is shared too) and scans the lines that start and end in
//! it ([`Scanner::scan_segment`]). The file's own [`Scanner`], on the caller's thread, then
//! joins the parts in file order: the line cut at each seam between parts is fed to it, the
//! helper's sequences follow with line numbers (and line-mode keys) shifted by the lines
//! before them, the lines before a part's first id join the run open before it, and a run
//! that continues across a seam (the same id on both sides) becomes one. The index is the
//! same whatever the number of threads or the part size; the tests compare them.
//!
//! The helpers take parts from one queue, whichever is free, up to four parts per thread
//! ahead of the join, so that the joining, and what the caller does with the sequences,
//! overlap the scanning, and a helper that goes faster than another never waits for it;
//! results that arrive before their turn wait in a small reorder buffer.
//!
//! When the engine asks for it (module `stash`), a helper parses its part instead of
//! scanning it, while the stash has room: a clean part gives exactly what its scan would
//! (the tests compare them), and the sequences the engine's loaders would parse again are
//! kept, in file order, for [`SplitScan::take_pieces`]. A part with any error is scanned.

use crate::sync::channel::{bounded, Receiver, Sender};
use crate::sync::thread::{self, JoinHandle};
use crate::sync::Arc;
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use memchr::{memchr, memrchr};

use crate::config::InputConfig;
use crate::index::scan::{FileSummary, OpenRun, ScannedSequence, Scanner, SegmentScan};
use crate::index::stash::{SegmentParser, StashBudget, StashPiece, StashRequest};
use crate::index::IndexError;
use crate::parser::{FatalDataError, KeyMode};

/// Bytes read at the start of a file until its mode is known (the first lines decide it).
const FIRST_READ: usize = 64 << 10;

/// A part of the file for a helper to read and scan.
struct Job {
    file: Arc<File>,
    offset: u64,
    len: usize,
    mode: KeyMode,
    key_base: u64,
    /// An emptied list of sequences to fill (its memory reused).
    sequences: Vec<ScannedSequence>,
}

/// Parts handed out ahead per thread: enough that a helper finding its part done takes
/// the next at once, whatever order the parts finish in. New parts are handed out only as
/// the join takes the one whose turn it is, so a helper that gets more of a core than
/// another (the file's own thread shares one with a helper) runs ahead of the join by
/// several parts. With two per thread the faster helper waited for work, idle, about a
/// tenth of the scan; four let it go on (time to the first minibatch of the 100 MB seq
/// file: 72.7 to 67.4 ms). Eight were no faster, and the results waiting for their turn
/// cost memory: a part of 11-byte lines, each a sequence, lists 190,000 sequences
/// (`ctf index` of a 100 MB such file peaked at 305 MB with two, 342 MB with four, 423 MB
/// with eight).
const PARTS_AHEAD_PER_THREAD: usize = 4;

/// What every part of a file's split rounds shares.
struct SplitPart<'a> {
    file: &'a Arc<File>,
    /// The file's size as stat said (no round is handed out ahead past it).
    size: u64,
    mode: KeyMode,
    key_base: u64,
}

/// The lines a helper scanned: those starting and ending within its part.
struct Lines {
    scan: SegmentScan,
    /// The sequences completed within them (line numbers from their first line).
    sequences: Vec<ScannedSequence>,
    /// Per input, the lines holding it.
    input_lines: Vec<u64>,
}

/// What a helper did with its part.
struct Done {
    /// The part's offset in the file (results arrive in any order).
    offset: u64,
    /// Bytes read (fewer than asked at the end of the file), or the read's error.
    read: io::Result<usize>,
    /// The part's bytes up to its first line feed (all of them without one): the end of the
    /// line cut at the seam before the part.
    head: Vec<u8>,
    /// The lines between its first and its last line feed, if any.
    lines: Option<Lines>,
    /// The bytes after its last line feed: the start of the line cut at the next seam.
    tail: Vec<u8>,
    /// An emptied list of sequences, when `lines` is `None`.
    spare: Vec<ScannedSequence>,
    /// The part's sequences kept parsed, when it was parsed rather than scanned (module
    /// `stash`).
    piece: Option<StashPiece>,
}

/// A helper's parser, when the scan parses parts while the stash has room.
struct HelperParse {
    parser: Box<dyn SegmentParser>,
    budget: Arc<StashBudget>,
}

/// The helper threads, each with its own scanner and read buffer, taking parts from one
/// queue (whichever is free takes the next) and returning them on another.
struct Helpers {
    jobs: Option<Sender<Job>>,
    done: Receiver<Done>,
    threads: Vec<JoinHandle<()>>,
}

impl Helpers {
    /// Starts up to `count` helpers (fewer if threads cannot be started; the index is the
    /// same), whose queues hold `capacity` parts.
    fn start(
        inputs: &[InputConfig],
        skip_sequence_ids: bool,
        count: usize,
        capacity: usize,
        stash: Option<&(StashRequest, Arc<StashBudget>)>,
    ) -> Self {
        let (jobs, job_queue) = bounded::<Job>(capacity);
        let (done_queue, done) = bounded::<Done>(capacity);
        let mut threads = Vec::with_capacity(count);
        for _ in 0..count {
            let mut scanner = Scanner::new(inputs, skip_sequence_ids);
            let mut parse = stash.map(|(request, budget)| HelperParse {
                parser: (request.parsers)(),
                budget: Arc::clone(budget),
            });
            let (job_queue, done_queue) = (job_queue.clone(), done_queue.clone());
            let spawned = thread::Builder::new()
                .name("ctf-index-scan".to_string())
                .spawn(move || {
                    let mut buffer = Vec::new();
                    for job in job_queue.iter() {
                        let done = run_job(&mut scanner, &mut buffer, parse.as_mut(), job);
                        if done_queue.send(done).is_err() {
                            break;
                        }
                    }
                });
            match spawned {
                Ok(thread) => threads.push(thread),
                Err(_) => break,
            }
        }
        Helpers {
            jobs: Some(jobs),
            done,
            threads,
        }
    }
}

impl Drop for Helpers {
    fn drop(&mut self) {
        // Closing the job queue ends the threads' loops.
        self.jobs = None;
        for thread in self.threads.drain(..) {
            let _ = thread.join();
        }
    }
}

/// Reads a part and scans its complete lines (or parses them, with `parse`, while the stash
/// has room and the part is clean).
fn run_job(
    scanner: &mut Scanner,
    buffer: &mut Vec<u8>,
    parse: Option<&mut HelperParse>,
    job: Job,
) -> Done {
    buffer.resize(job.len, 0);
    let read = read_at_most(&job.file, buffer, job.offset);
    let data = &buffer[..*read.as_ref().unwrap_or(&0)];
    let mut sequences = job.sequences;
    let (first, last) = match (memchr(b'\n', data), memrchr(b'\n', data)) {
        (Some(first), Some(last)) => (first + 1, last + 1),
        _ => (data.len(), data.len()),
    };
    let mut piece = None;
    let parsed = parse
        .filter(|p| first < last && p.budget.has_room())
        .and_then(|p| {
            let offset = job.offset + first as u64;
            let (derived, kept) = p.parser.parse(
                job.mode,
                job.key_base,
                offset,
                &data[first..last],
                &mut sequences,
            )?;
            piece = kept.filter(|k| p.budget.take(k.heap_bytes));
            Some(Lines {
                scan: derived.scan,
                sequences: std::mem::take(&mut sequences),
                input_lines: derived.input_lines,
            })
        });
    let lines = parsed.or_else(|| {
        (first < last).then(|| {
            let scan = scanner.scan_segment(
                job.mode,
                job.key_base,
                job.offset + first as u64,
                &data[first..last],
            );
            std::mem::swap(&mut sequences, scanner.ready());
            Lines {
                scan,
                sequences: std::mem::take(&mut sequences),
                input_lines: scanner.input_lines().to_vec(),
            }
        })
    });
    Done {
        offset: job.offset,
        head: data[..first].to_vec(),
        tail: data[last..].to_vec(),
        lines,
        spare: sequences,
        read,
        piece,
    }
}

/// Reads from `offset` until `buffer` is full or the file ends; returns the bytes read.
pub(crate) fn read_at_most(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buffer.len() {
        match file.read_at(&mut buffer[filled..], offset + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

/// The smallest part a file is cut into for its size (unless the part size asked for is
/// smaller still, as in tests).
const SMALLEST_PART: usize = 256 << 10;

/// The fewest rounds of parts a file is cut into (of at least [`SMALLEST_PART`]): a file
/// smaller than this many rounds of the largest parts gets parts that make them.
///
/// A thread that finishes its last part early waits for the others, and a helper's first
/// part is read whole before its scan starts: both cost up to a part's time, which smaller
/// parts cut where a file has few. With two threads and 2 MiB parts at most, 16 rounds
/// (parts of 650 KB on seed 004's 20.7 MB file) against 4 gave `ctf bench` an `index_s` of
/// 0.92 on seed 004 and 0.89–0.97 on 20 MB gen_ctf.py files of seq, ragged and sparse, and
/// 0.93–0.99 on 5 to 30 MB ones, within the noise on 50 MB ones (medians of 15–30
/// alternating runs), with the same output; 32 rounds were no faster than 16. A file of
/// 64 MiB or more keeps the largest parts, which on 100 MB files were 2–5% faster than
/// 512 KiB ones.
const MIN_ROUNDS: u64 = 16;

/// The most sequences a part is cut to hold, at the density of the file's first read: a
/// helper lists a part's sequences at 48 bytes each, and up to [`PARTS_AHEAD_PER_THREAD`]
/// parts a thread are out at once, each list keeping its capacity for the next part. A file
/// of 5-byte lines, each a sequence, listed about 420,000 in a 2 MiB part (20 MB), and `ctf
/// index` of 10^7 such lines on 2 threads peaked at 441 MiB; at most 65,536 a part, 284 MiB.
/// The gen_ctf.py shapes hold 1,100 to 5,000 sequences in a 2 MiB part and keep it.
const MOST_SEQUENCES_PER_PART: u64 = 1 << 16;

/// The part size for a file of `size` bytes scanned on `threads` threads: `largest`, or on
/// a file of fewer than [`MIN_ROUNDS`] rounds of those, parts that make that many rounds
/// (at least [`SMALLEST_PART`]), so that the threads share a small file evenly. (A 4.7 MB
/// file in 2 MiB parts on two threads was two parts at once, then the rest on one thread;
/// a file of less than a round was not split at all.)
fn part_size(size: u64, threads: usize, largest: usize) -> usize {
    let rounds = size.div_ceil(MIN_ROUNDS * threads.max(1) as u64);
    usize::try_from(rounds)
        .unwrap_or(usize::MAX)
        .clamp(SMALLEST_PART.min(largest), largest)
}

/// `part` cut, where the file's first `bytes` held `sequences` (completed ones), to hold
/// about [`MOST_SEQUENCES_PER_PART`] at that density (rounded down to whole 4 KiB pages),
/// but not below [`SMALLEST_PART`] (or `part`, when it is smaller still).
fn part_for_density(part: usize, bytes: u64, sequences: u64) -> usize {
    if sequences == 0 {
        return part;
    }
    let at_density = MOST_SEQUENCES_PER_PART.saturating_mul(bytes) / sequences / 4096 * 4096;
    let at_density = usize::try_from(at_density).unwrap_or(usize::MAX);
    part.min(at_density.max(SMALLEST_PART))
}

/// Takes the sequences a round of the scan completed, in file order, and the bytes it read.
pub(crate) type AfterRound<'a> =
    dyn FnMut(&mut Vec<ScannedSequence>, u64) -> Result<(), IndexError> + 'a;

/// The scan of a corpus's files: the files' own scanner, and helper threads started on
/// first use and kept for every file of a build.
pub(crate) struct SplitScan {
    main: Scanner,
    inputs: Vec<InputConfig>,
    skip_sequence_ids: bool,
    threads: usize,
    /// The part size asked for: the largest a file's parts get.
    largest_part: usize,
    /// The part size of the file being scanned ([`part_size`]).
    part_size: usize,
    buffer: Vec<u8>,
    helpers: Option<Helpers>,
    /// Parts handed out and not yet received.
    in_flight: usize,
    /// The offset of the next part to hand out (of the file being scanned).
    next_part: u64,
    /// The offset of the next part to join, after the last one joined.
    next_join: u64,
    /// Parts received before their turn to be joined.
    early: Vec<Done>,
    /// Emptied sequence lists to hand to the helpers.
    spare: Vec<Vec<ScannedSequence>>,
    /// Whether (and how much) the helpers parse parts while scanning.
    stash: Option<(StashRequest, Arc<StashBudget>)>,
    /// The sequences the helpers kept parsed, of the files scanned since the last
    /// [`take_pieces`](Self::take_pieces), in file order.
    pieces: Vec<StashPiece>,
}

/// Where a scan failed.
fn io_error(name: &str, error: io::Error) -> IndexError {
    IndexError::Io {
        file: name.to_string(),
        error,
    }
}

fn data_error(name: &str, e: FatalDataError) -> IndexError {
    IndexError::Data {
        file: name.to_string(),
        line: e.line,
        col: e.col,
        message: e.message,
    }
}

impl SplitScan {
    /// A scan on `threads` helper threads (files of at most one round are scanned on the
    /// caller's thread), each reading `part_size` bytes per part.
    pub(crate) fn new(
        inputs: &[InputConfig],
        skip_sequence_ids: bool,
        threads: usize,
        part_size: usize,
        stash: Option<StashRequest>,
    ) -> Self {
        SplitScan {
            stash: stash.map(|request| {
                let budget = Arc::new(StashBudget::new(request.max_bytes));
                (request, budget)
            }),
            pieces: Vec::new(),
            main: Scanner::new(inputs, skip_sequence_ids),
            inputs: inputs.to_vec(),
            skip_sequence_ids,
            threads: threads.max(1),
            largest_part: part_size.max(1),
            part_size: part_size.max(1),
            buffer: Vec::new(),
            helpers: None,
            in_flight: 0,
            next_part: 0,
            next_join: 0,
            early: Vec::new(),
            spare: Vec::new(),
        }
    }

    /// Scans the file `file` of `size` bytes (as stat said; the scan reads to the end
    /// whatever it is now), named `name` in errors, whose line-mode keys start at
    /// `key_base`. After each round `after_round` is given the sequences completed so far,
    /// in file order, to take, and the bytes the round read.
    pub(crate) fn scan_file(
        &mut self,
        file: &File,
        size: u64,
        key_base: u64,
        name: &str,
        after_round: &mut AfterRound<'_>,
    ) -> Result<FileSummary, IndexError> {
        // Parts still out from the previous file (handed out ahead of its error or its end)
        // are received first, so that none is taken for this file's.
        self.drop_ahead();
        self.main.start_file(key_base);
        self.part_size = part_size(size, self.threads, self.largest_part);
        let round = self.part_size.saturating_mul(self.threads);
        // Split only a file larger than a round.
        let may_split = self.threads > 1 && size > round as u64;
        let mut shared: Option<Arc<File>> = None;
        let mut offset = 0u64;
        // Sequences completed by the reads before the split, for `part_for_density`.
        let mut sequences_before_split = 0u64;
        loop {
            let mut split = None;
            if let Some(mode) = self.main.known_mode() {
                if may_split {
                    if shared.is_none() {
                        self.part_size =
                            part_for_density(self.part_size, offset, sequences_before_split);
                        let clone = file.try_clone().map_err(|e| io_error(name, e))?;
                        shared = Some(Arc::new(clone));
                        self.start_helpers();
                    }
                    if self.helper_count() > 0 {
                        split = shared.clone().map(|f| (f, mode));
                    }
                }
            }
            let read = match split {
                Some((shared, mode)) => {
                    let part = SplitPart {
                        file: &shared,
                        size,
                        mode,
                        key_base,
                    };
                    self.split_round(&part, offset, name)?
                }
                None => {
                    let len = if self.main.known_mode().is_none() {
                        FIRST_READ.min(round)
                    } else {
                        round
                    };
                    self.buffer.resize(len, 0);
                    let n = read_at_most(file, &mut self.buffer, offset)
                        .map_err(|e| io_error(name, e))?;
                    self.main
                        .feed(&self.buffer[..n])
                        .map_err(|e| data_error(name, e))?;
                    sequences_before_split += self.main.ready().len() as u64;
                    n as u64
                }
            };
            if read == 0 {
                break;
            }
            offset += read;
            after_round(self.main.ready(), read)?;
        }
        let summary = self.main.finish().map_err(|e| data_error(name, e))?;
        after_round(self.main.ready(), 0)?;
        Ok(summary)
    }

    /// Starts the helper threads, once per build (they are kept for the next files).
    fn start_helpers(&mut self) {
        if self.helpers.is_none() {
            let capacity = PARTS_AHEAD_PER_THREAD * self.threads;
            let helpers = Helpers::start(
                &self.inputs,
                self.skip_sequence_ids,
                self.threads,
                capacity,
                self.stash.as_ref(),
            );
            self.helpers = Some(helpers);
        }
    }

    /// How many helper threads run.
    fn helper_count(&self) -> usize {
        self.helpers.as_ref().map_or(0, |h| h.threads.len())
    }

    /// Hands out parts from `next_part` on while fewer than the queues hold are out and
    /// the file (as stat said) goes on, and at least up to the part at `wanted`.
    fn hand_out(&mut self, split: &SplitPart<'_>, wanted: u64) {
        let Some(helpers) = &self.helpers else { return };
        let Some(jobs) = &helpers.jobs else { return };
        let limit = PARTS_AHEAD_PER_THREAD * self.threads;
        while self.in_flight < limit && (self.next_part < split.size || self.next_part <= wanted) {
            let job = Job {
                file: Arc::clone(split.file),
                offset: self.next_part,
                len: self.part_size,
                mode: split.mode,
                key_base: split.key_base,
                sequences: self.spare.pop().unwrap_or_default(),
            };
            if jobs.send(job).is_err() {
                return; // every helper stopped: the part shows as missing when received
            }
            self.in_flight += 1;
            self.next_part += self.part_size as u64;
        }
    }

    /// The result of the part at `offset`, which was handed out: from those received early,
    /// or waiting for it. None if the helpers stopped.
    fn receive(&mut self, offset: u64) -> Option<Done> {
        loop {
            if let Some(k) = self.early.iter().position(|d| d.offset == offset) {
                return Some(self.early.swap_remove(k));
            }
            let done = self.helpers.as_ref()?.done.recv().ok()?;
            self.in_flight -= 1;
            self.early.push(done);
        }
    }

    /// Receives and discards the results of every part handed out, so that none is taken
    /// for a later file's.
    fn drop_ahead(&mut self) {
        while self.in_flight > 0 {
            let Some(done) = self.helpers.as_ref().and_then(|h| h.done.recv().ok()) else {
                break;
            };
            self.in_flight -= 1;
            self.early.push(done);
        }
        self.in_flight = 0;
        for done in std::mem::take(&mut self.early) {
            self.recycle(done.lines, done.spare);
        }
    }

    /// One round of reading and scanning on the helpers (a part per helper), from `offset`,
    /// joined by the file's scanner; returns the bytes read (fewer than a round's at the end
    /// of the file). Parts are handed out ahead of their turn, up to the queues' capacity.
    fn split_round(
        &mut self,
        split: &SplitPart<'_>,
        offset: u64,
        name: &str,
    ) -> Result<u64, IndexError> {
        let part = self.part_size;
        if offset != self.next_join || (self.in_flight == 0 && self.early.is_empty()) {
            // A new file, or a round after the file's end: nothing handed out fits.
            self.drop_ahead();
            self.next_part = offset;
        }
        let mut read = 0;
        for k in 0..self.helper_count() {
            let at = offset + (k * part) as u64;
            self.hand_out(split, at);
            let Some(part_done) = self.receive(at) else {
                return Err(io_error(
                    name,
                    io::Error::other("an index scan thread stopped"),
                ));
            };
            self.next_join = at + part as u64;
            let n = part_done.read.map_err(|e| io_error(name, e))?;
            read += n as u64;
            self.main
                .feed(&part_done.head)
                .map_err(|e| data_error(name, e))?;
            let spare = match part_done.lines {
                Some(lines) => {
                    self.join(split.mode, lines.scan, lines.sequences, &lines.input_lines)
                }
                None => part_done.spare,
            };
            self.spare.push(spare);
            self.pieces.extend(part_done.piece);
            self.main
                .feed(&part_done.tail)
                .map_err(|e| data_error(name, e))?;
            if n < part {
                // The file ends here. Anything read past it was appended while the file was
                // being scanned, which the final check of its size reports.
                break;
            }
        }
        Ok(read)
    }

    /// Takes the parsed sequences kept so far (see module `stash`).
    pub(crate) fn take_pieces(&mut self) -> Vec<StashPiece> {
        std::mem::take(&mut self.pieces)
    }

    fn recycle(&mut self, lines: Option<Lines>, spare: Vec<ScannedSequence>) {
        let mut list = lines.map_or(spare, |l| l.sequences);
        list.clear();
        self.spare.push(list);
    }

    /// Joins a helper's lines to what the file's scanner found before them, and moves the
    /// scanner past them. Returns the helper's emptied sequence list.
    fn join(
        &mut self,
        mode: KeyMode,
        scan: SegmentScan,
        mut sequences: Vec<ScannedSequence>,
        input_lines: &[u64],
    ) -> Vec<ScannedSequence> {
        let main = &mut self.main;
        let mut open = main.take_open();
        let shift = main.next_line() - 1;
        if let Some(lead) = scan.lead {
            debug_assert!(
                open.is_some(),
                "an id-mode file has a run open after its first id"
            );
            if let Some(run) = &mut open {
                run.end = lead.end;
                run.samples += lead.samples;
            }
        }
        let completed = main.ready();
        for seq in sequences.drain(..) {
            let seq = ScannedSequence {
                line: seq.line + shift,
                key: if mode == KeyMode::Lines {
                    seq.key + shift
                } else {
                    seq.key
                },
                ..seq
            };
            match mode {
                KeyMode::Lines => completed.push(seq),
                KeyMode::Ids => continue_or_close(&mut open, OpenRun::of(&seq), completed),
            }
        }
        if let Some(mut tail) = scan.tail {
            tail.line += shift;
            continue_or_close(&mut open, tail, completed);
        }
        main.resume(scan.end, shift + scan.lines + 1, open, input_lines);
        sequences
    }
}

/// Adds `run` to the run open before it when it continues it (the same id), else closes
/// the open run into `done` and opens `run`.
fn continue_or_close(open: &mut Option<OpenRun>, run: OpenRun, done: &mut Vec<ScannedSequence>) {
    match open {
        Some(current) if current.id.is_some() && current.id == run.id => {
            current.end = run.end;
            current.samples += run.samples;
        }
        _ => {
            if let Some(closed) = open.replace(run) {
                done.push(closed.sequence());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn scan_with(
        text: &[u8],
        threads: usize,
        part_size: usize,
    ) -> (Vec<ScannedSequence>, FileSummary) {
        scanned_with(text, threads, part_size).1
    }

    /// The scan after scanning `text`, and what it found.
    fn scanned_with(
        text: &[u8],
        threads: usize,
        part_size: usize,
    ) -> (SplitScan, (Vec<ScannedSequence>, FileSummary)) {
        scan_text(text, threads, part_size, false, None)
    }

    /// The scan after scanning `text` (parsing its parts as `stash` asks), and what it found.
    fn scan_text(
        text: &[u8],
        threads: usize,
        part_size: usize,
        skip_sequence_ids: bool,
        stash: Option<StashRequest>,
    ) -> (SplitScan, (Vec<ScannedSequence>, FileSummary)) {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text).unwrap();
        let inputs = [InputConfig::dense("a", 1), InputConfig::sparse("b", 9)];
        let mut scan = SplitScan::new(&inputs, skip_sequence_ids, threads, part_size, stash);
        let mut out = Vec::new();
        let summary = scan
            .scan_file(&file, text.len() as u64, 10, "t.ctf", &mut |ready, _| {
                out.append(ready);
                Ok(())
            })
            .unwrap();
        (scan, (out, summary))
    }

    /// The scan of `text` parsing its parts: what it found, and the sequences it kept.
    fn stashed_with(
        text: &[u8],
        threads: usize,
        part_size: usize,
        skip_sequence_ids: bool,
    ) -> ((Vec<ScannedSequence>, FileSummary), Vec<StashPiece>) {
        let inputs = [InputConfig::dense("a", 1), InputConfig::sparse("b", 9)];
        let options = crate::parser::StreamOptions {
            skip_sequence_ids,
            frame_mode: false,
        };
        let request = StashRequest::for_inputs::<f32>(&inputs, options, u64::MAX);
        let (mut scan, found) =
            scan_text(text, threads, part_size, skip_sequence_ids, Some(request));
        (found, scan.take_pieces())
    }

    /// Checks that parsing parts gives the one-thread scan of `text`, and that every piece
    /// kept holds what parsing its text on its own gives; returns the pieces kept.
    fn check_stashed(text: &[u8], threads: usize, part_size: usize, skip_ids: bool) -> usize {
        let inputs = [InputConfig::dense("a", 1), InputConfig::sparse("b", 9)];
        let (_, (expected, summary)) = scan_text(text, 1, 1 << 20, skip_ids, None);
        let (found, pieces) = stashed_with(text, threads, part_size, skip_ids);
        let context = format!("{threads} threads, part {part_size}");
        assert_eq!(found, (expected, summary.clone()), "{context}");
        let options = crate::parser::StreamOptions {
            skip_sequence_ids: skip_ids,
            frame_mode: false,
        };
        for piece in &pieces {
            let mut parser = crate::parser::StreamParser::<f32>::new(&inputs, options);
            // The piece's own line numbering: its first line is `first_line`.
            parser.start_range(summary.mode, piece.first_line, 10, Vec::new());
            parser
                .feed(&text[piece.start as usize..piece.end as usize])
                .unwrap();
            parser.finish_file().unwrap();
            let parsed = piece
                .parsed
                .downcast_ref::<crate::parser::ParsedSequences<f32>>()
                .unwrap();
            assert_eq!(
                parsed,
                parser.sequences(),
                "{context}, piece at {}",
                piece.start
            );
            assert!(parser.diagnostics().is_empty());
        }
        pieces.len()
    }

    #[test]
    fn parsed_parts_give_the_scan_and_keep_what_a_loader_parses() {
        // Id mode: runs across seams, id-less lines, comments, blank lines, a run without a
        // configured input, blank and comment lines between runs, ids written 07 and 7, CRLF
        // line ends.
        let ids =
            b"1 |a 1 |b 2:1\n1 |b 1:1 |a 2\n |a 2 |b 3:1\n2 |a 3 |b 0:1\n2 |# c\n |a 1 |b 0:1\n\
                    3 |a 4 |b 1:1\n\n3 |a 5 |b 2:2\n4 |x 1\n5 |a 6 |b 1:1\n07 |a 7 |b 1:1\n\
                    7 |a 1 |b 1:1\n\n |# between runs\n8 |a 8 |b 1:1\r\n8 |a 9 |b 2:1\r\n\
                    9 |a 1 |b 3:2\n10 |a 2 |b 1:1\n\n";
        // Line mode: blank and comment lines, lines of unconfigured inputs only.
        let lines = b"|a 1 |b 2:1\n|b 2:1 |a 2\n\n|# c\n|x 1\n|a 3 |b 1:1\n|a 4 |b 0:2\n\
                      |a 5 |b 1:1\n|a 6 |b 1:1\n|a 7 |b 1:1\n";
        for (text, skip_ids) in [(&ids[..], false), (&lines[..], false), (&ids[..], true)] {
            let mut kept = 0;
            for threads in [2, 3] {
                for part in 1..text.len() + 1 {
                    kept += check_stashed(text, threads, part, skip_ids);
                }
            }
            assert!(
                kept > 0,
                "some pieces are kept (skip {skip_ids}: {})",
                String::from_utf8_lossy(text)
            );
        }
    }

    #[test]
    fn a_part_starting_within_a_sequence_is_parsed() {
        // Input b only on the first line of each sequence of 8 lines: a part that starts
        // within a sequence has lines without b, which are no sequence of their own.
        let mut text = Vec::new();
        for k in 0..60u32 {
            text.extend_from_slice(format!("{k} |a {k} |b {}:1\n", k % 9).as_bytes());
            for line in 1..8 {
                text.extend_from_slice(format!("{k} |a {line}\n").as_bytes());
            }
        }
        for part in [300, 500, 1000] {
            let parts = text.len() / part;
            let kept = check_stashed(&text, 2, part, false);
            assert!(
                kept * 2 >= parts,
                "part {part}: {kept} pieces of {parts} parts"
            );
        }
    }

    #[test]
    fn parts_with_errors_are_scanned() {
        // Junk before the first |, a missing value, an id repeated later: the parts holding
        // them are scanned (and nothing of them kept), the others parsed.
        let mut text = Vec::new();
        for k in 0..400u32 {
            let line = match k {
                57 => format!("{} junk |a 1\n", k / 4),
                130 => format!("{} |b 1:\n", k / 4),
                300 => "3 |a 1 |b 1:1\n".to_string(),
                _ => format!("{} |a {k} |b {}:1\n", k / 4, k % 9),
            };
            text.extend_from_slice(line.as_bytes());
        }
        for part in [97, 256, 1000, 3000] {
            assert!(check_stashed(&text, 2, part, false) > 0);
        }
    }

    #[test]
    fn runs_across_seams_join_and_lines_shift() {
        // Runs of the same id, id-less lines and comments, crossing seams at every offset.
        let text =
            b"1 |a 1\n1 |b 2:1\n |a 2\n2 |a 3\n2 |# c\n |b 0:1\n3 |a 4\n3 |a 5\n4 |x 1\n5 |a 6";
        let expected = scan_with(text, 1, 1 << 20);
        assert_eq!(expected.0.len(), 5);
        for threads in [2, 3, 4] {
            for part in 1..text.len() + 1 {
                assert_eq!(
                    scan_with(text, threads, part),
                    expected,
                    "{threads} threads, part {part}"
                );
            }
        }
    }

    #[test]
    fn long_lines_split_like_short_ones() {
        // Lines far longer than the parts (and than the scanner's short-line search), so that
        // most parts hold no line feed at all, or one in the middle of a run.
        let mut text = Vec::new();
        for (k, id) in [1, 1, 1, 2, 3, 3, 4].iter().enumerate() {
            let values: String = (0..40 + 13 * k).map(|v| format!(" {}:1", v % 9)).collect();
            text.extend_from_slice(format!("{id} |a {k} |b{values}\n").as_bytes());
            if k == 4 {
                // Lines without an id continue the run before them.
                text.extend_from_slice(b" |# a comment between lines of one run\n");
                text.extend_from_slice(format!(" |a 9 |b{values}\n").as_bytes());
            }
        }
        let expected = scan_with(&text, 1, 1 << 20);
        assert_eq!(expected.0.len(), 4);
        for threads in [2, 3] {
            for part in (1..text.len() + 1).step_by(17).chain([100, 333, 1000]) {
                assert_eq!(
                    scan_with(&text, threads, part),
                    expected,
                    "{threads} threads, part {part}"
                );
            }
        }
    }

    #[test]
    fn small_files_are_cut_into_sixteen_rounds_of_parts() {
        const MIB: usize = 1 << 20;
        // Large files keep the parts asked for; smaller ones get 16 rounds, down to 256 KiB.
        assert_eq!(part_size(100 * MIB as u64, 2, 2 * MIB), 2 * MIB);
        assert_eq!(part_size(64 * MIB as u64, 2, 2 * MIB), 2 * MIB);
        assert_eq!(part_size(32 * MIB as u64, 2, 2 * MIB), MIB);
        assert_eq!(part_size(24 * MIB as u64, 2, 2 * MIB), 768 << 10);
        assert_eq!(part_size(24 * MIB as u64, 3, 2 * MIB), 512 << 10);
        assert_eq!(part_size(6 * MIB as u64, 2, 2 * MIB), SMALLEST_PART);
        assert_eq!(part_size(100 << 10, 2, 2 * MIB), SMALLEST_PART);
        // Parts asked smaller than that (tests) are kept.
        assert_eq!(part_size(6 * MIB as u64, 2, 100), 100);
        assert_eq!(part_size(0, 0, 2 * MIB), SMALLEST_PART);
    }

    #[test]
    fn parts_of_dense_sequences_are_cut_to_hold_at_most_so_many() {
        const MIB: usize = 1 << 20;
        let most = MOST_SEQUENCES_PER_PART as usize;
        // 5-byte sequences: 65,536 of them fill 320 KiB.
        assert_eq!(part_for_density(2 * MIB, 64 << 10, 13_107), 5 * most);
        // Denser still: no part below the smallest.
        assert_eq!(part_for_density(2 * MIB, 64 << 10, 65_536), SMALLEST_PART);
        // Sequences of 400 bytes (gen_ctf.py's sparse), or none completed: parts kept.
        assert_eq!(part_for_density(2 * MIB, 64 << 10, 163), 2 * MIB);
        assert_eq!(part_for_density(2 * MIB, 64 << 10, 0), 2 * MIB);
        // Parts asked smaller than the smallest (tests) are kept.
        assert_eq!(part_for_density(100, 64 << 10, 65_536), 100);
    }

    #[test]
    fn a_file_of_short_sequences_is_scanned_in_smaller_parts_with_the_same_index() {
        // 20 MB of 5-byte lines, each a sequence: parts of 625,000 bytes for its size
        // (`part_size`) would list 125,000 each.
        let lines = 4_000_000;
        let text: Vec<u8> = (0..lines)
            .flat_map(|i| [b'|', b'a', b' ', b'0' + (i % 10) as u8, b'\n'])
            .collect();
        assert_eq!(part_size(text.len() as u64, 2, 1 << 21), 625_000);
        let (_, one) = scan_text(&text, 1, 1 << 21, false, None);
        let (scan, two) = scan_text(&text, 2, 1 << 21, false, None);
        assert_eq!(scan.part_size, 5 * MOST_SEQUENCES_PER_PART as usize);
        assert_eq!(two, one);
        assert_eq!(two.0.len(), lines);
    }

    #[test]
    fn a_small_file_is_scanned_in_parts_like_on_one_thread() {
        // About 1.3 MB: below a round of 2 MiB parts on 2 threads, which used to leave it to
        // one thread; now 5 parts of 256 KiB, seams in runs and between them.
        let mut text = Vec::new();
        for k in 0..40_000u32 {
            text.extend_from_slice(format!("{} |a {k} |b {}:1\n", k / 3, k % 9).as_bytes());
        }
        let expected = scan_with(&text, 1, 2 << 20);
        assert_eq!(expected.0.len(), 13_334);
        let (scan, found) = scanned_with(&text, 2, 2 << 20);
        assert_eq!(scan.part_size, SMALLEST_PART);
        assert!(scan.helper_count() > 0, "the helpers scanned it");
        assert_eq!(found, expected);
    }

    #[test]
    fn line_mode_keys_shift_across_seams() {
        let text = b"|a 1\n\n|b 1:1\n|# only a comment\n|a 2\n|a 3\n";
        let expected = scan_with(text, 1, 1 << 20);
        assert_eq!(
            expected.0.iter().map(|s| s.key).collect::<Vec<_>>(),
            vec![10, 12, 14, 15]
        );
        for part in 1..text.len() + 1 {
            assert_eq!(scan_with(text, 3, part), expected, "part {part}");
        }
    }
}
