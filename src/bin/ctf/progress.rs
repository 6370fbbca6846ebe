//! Progress bars on standard error for the commands that read a whole corpus (`index`,
//! `stats`).
//!
//! A bar (bytes done / total, with a rate) appears only when standard error is a terminal and
//! the corpus is larger than [`MIN_CORPUS_BYTES`]; otherwise a [`Progress`] does nothing, so
//! scripts and pipes never see one. Messages printed while a bar is shown go through
//! [`Progress::eprintln`], which hides the bar for the time of the write.

use std::fmt::Display;
use std::io::IsTerminal;
use std::sync::Arc;

use ctf_reader::diag::write_stderr_line;
use ctf_reader::index::build::ProgressSink;
use ctf_reader::index::{expand_file_patterns, IndexWarning, WarningSink};
use ctf_reader::ReaderConfig;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

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
        let Some(total) = total else {
            return Progress { bar: None };
        };
        let style = ProgressStyle::with_template(
            "{msg} [{wide_bar}] {binary_bytes}/{binary_total_bytes} ({binary_bytes_per_sec}, {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr())
            .with_style(style)
            .with_message(phase);
        Progress { bar: Some(bar) }
    }

    /// Adds `bytes` to the bytes done.
    pub fn inc(&self, bytes: u64) {
        if let Some(bar) = &self.bar {
            bar.inc(bytes);
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
