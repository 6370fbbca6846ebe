//! Progress bars on standard error for the commands that read a whole corpus (`index`,
//! `stats`: bytes) or a stretch of its timeline (`read` without `--jsonl`: samples).
//!
//! A bar (done / total, with a rate) appears only when standard error is a terminal, and for
//! bytes only when the corpus is larger than [`MIN_CORPUS_BYTES`]; otherwise a [`Progress`]
//! does nothing, so scripts and pipes never see one. Messages printed while a bar is shown go
//! through [`Progress::eprintln`], which hides the bar for the time of the write.

use std::fmt::Display;
use std::io::IsTerminal;
use std::sync::Arc;

use ctf_reader::diag::write_stderr_line;
use ctf_reader::index::build::ProgressSink;
use ctf_reader::index::{expand_file_patterns, IndexWarning, WarningSink};
use ctf_reader::ReaderConfig;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// What a bar counts, which decides how its figures are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Bytes of data files: `12.00 MiB/95.37 MiB`.
    Bytes,
    /// Samples of the timeline: `1,200/40,000 samples`.
    Samples,
}

impl Unit {
    fn template(self) -> &'static str {
        match self {
            Unit::Bytes => {
                "{msg} [{wide_bar}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})"
            }
            Unit::Samples => "{msg} [{wide_bar}] {human_pos}/{human_len} samples ({per_sec}, {eta})",
        }
    }
}

/// Corpora of at most this many bytes (100 MB) get no bar.
pub const MIN_CORPUS_BYTES: u64 = 100_000_000;

/// The size of the corpus of `config` when progress bars are wanted, else `None`.
///
/// Bars are wanted when standard error is a terminal and the data files (glob patterns
/// expanded) add up to more than [`MIN_CORPUS_BYTES`]. When a file cannot be found or
/// examined there is no bar; the command itself reports the problem.
pub fn bar_total(config: &ReaderConfig) -> Option<u64> {
    if !std::io::stderr().is_terminal() {
        return None;
    }
    let mut total = 0u64;
    let joined = config.joined.iter().map(|j| &j.files);
    for patterns in std::iter::once(&config.files).chain(joined) {
        for file in &expand_file_patterns(patterns).ok()? {
            let meta = std::fs::metadata(&file.path).ok()?;
            total = total.saturating_add(meta.len());
        }
    }
    (total > MIN_CORPUS_BYTES).then_some(total)
}

/// One phase's progress bar, or nothing when bars are not wanted. The bar is cleared when
/// the phase [finishes](Self::finish) or the value is dropped.
pub struct Progress {
    bar: Option<ProgressBar>,
}

impl Progress {
    /// A bar labelled `phase` counting up to `total` bytes, or a silent one when `total` is
    /// `None`.
    pub fn new(phase: &'static str, total: Option<u64>) -> Self {
        Progress::drawn_on(phase, total, Unit::Bytes, ProgressDrawTarget::stderr())
    }

    /// A bar labelled `phase` counting up to `total` samples, or a silent one when `total`
    /// is `None`. It is drawn only when standard error is a terminal.
    pub fn of_samples(phase: &'static str, total: Option<u64>) -> Self {
        Progress::drawn_on(phase, total, Unit::Samples, ProgressDrawTarget::stderr())
    }

    fn drawn_on(
        phase: &'static str,
        total: Option<u64>,
        unit: Unit,
        target: ProgressDrawTarget,
    ) -> Self {
        let Some(total) = total else {
            return Progress { bar: None };
        };
        let style = ProgressStyle::with_template(unit.template())
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total), target)
            .with_style(style)
            .with_message(phase);
        Progress { bar: Some(bar) }
    }

    /// Adds `done` bytes or samples to those done.
    pub fn inc(&self, done: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(done);
        }
    }

    /// A sink for [`IndexingOptions::progress`](ctf_reader::index::IndexingOptions), which
    /// reports the total bytes scanned so far; `None` when there is no bar.
    pub fn sink(&self) -> Option<ProgressSink> {
        let bar = self.bar.clone()?;
        Some(Arc::new(move |bytes| bar.set_position(bytes)))
    }

    /// A warning sink printing `FILE: warning: MESSAGE` to standard error without garbling
    /// the bar.
    pub fn warning_sink(&self) -> WarningSink {
        let bar = self.bar.clone();
        Arc::new(move |w: &IndexWarning| print_above(bar.as_ref(), w))
    }

    /// Prints one line to standard error, hiding the bar while it is written.
    pub fn eprintln(&self, line: impl Display) {
        print_above(self.bar.as_ref(), line);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.finish();
    }
}

fn print_above(bar: Option<&ProgressBar>, line: impl Display) {
    match bar {
        Some(bar) => bar.suspend(|| write_stderr_line(line)),
        None => write_stderr_line(line),
    }
}

#[cfg(test)]
mod tests {
    use super::{Progress, Unit};
    use indicatif::{ProgressDrawTarget, TermLike};
    use std::io;
    use std::sync::{Arc, Mutex};

    /// A terminal that keeps what is written to it.
    #[derive(Debug, Default, Clone)]
    struct Screen(Arc<Mutex<String>>);

    impl TermLike for Screen {
        fn width(&self) -> u16 {
            100
        }
        fn move_cursor_up(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_down(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_right(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn move_cursor_left(&self, _: usize) -> io::Result<()> {
            Ok(())
        }
        fn write_line(&self, s: &str) -> io::Result<()> {
            self.write_str(&format!("{s}\n"))
        }
        fn write_str(&self, s: &str) -> io::Result<()> {
            self.0.lock().unwrap().push_str(s);
            Ok(())
        }
        fn clear_line(&self) -> io::Result<()> {
            Ok(())
        }
        fn flush(&self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The last drawing of a bar of `unit` at 1,200 of 40,000.
    fn drawn(unit: Unit) -> String {
        let screen = Screen::default();
        let target = ProgressDrawTarget::term_like(Box::new(screen.clone()));
        let progress = Progress::drawn_on("reading", Some(40_000), unit, target);
        progress.inc(1_200);
        progress.bar.as_ref().unwrap().tick();
        let text = screen.0.lock().unwrap().clone();
        text
    }

    /// `ctf read`'s bar counts samples: it used to show them as bytes (`1.17 KiB/39.06
    /// KiB` for 1,200 of 40,000 samples).
    #[test]
    fn a_bar_of_samples_shows_them_as_samples_and_one_of_bytes_as_bytes() {
        let samples = drawn(Unit::Samples);
        assert!(samples.contains("1,200/40,000 samples"), "{samples:?}");
        assert!(!samples.contains("KiB"), "{samples:?}");
        let bytes = drawn(Unit::Bytes);
        assert!(bytes.contains("1.17 KiB/39.06 KiB"), "{bytes:?}");
    }
}
