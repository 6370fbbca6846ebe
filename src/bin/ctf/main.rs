//! `ctf`: validate, dump, index, summarize, read and benchmark CNTK Text Format datasets
//! from the shell.
//!
//! Exit codes (SPEC §7.5): 0 ok; 1 data error (beyond maxErrors for readers, any error for
//! `validate`); 2 usage or configuration error. Data goes to stdout, everything else to
//! stderr (the `validate`, `index`, `stats` and `bench` summaries go to stdout).

mod bench;
mod cli;
mod dump;
mod index;
mod json;
mod malloc;
mod progress;
mod read;
mod stats;
mod validate;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;
use ctf_reader::diag::write_stderr_line;
use ctf_reader::source::SourceError;

/// Why a command failed, mapped to the exit code contract.
pub enum Failure {
    /// Exit 1: a data error (already described by the message).
    Data(String),
    /// Exit 2: a usage or configuration error.
    Usage(String),
    /// Exit 1 with nothing more to print (the command reported the details itself).
    DataReported,
}

impl From<SourceError> for Failure {
    /// A reading error: a misuse (bad restore token, rank) is exit 2, the data's exit 1.
    fn from(e: SourceError) -> Self {
        match e {
            SourceError::Usage(m) => Failure::Usage(format!("error: {m}")),
            SourceError::Checkpoint(e) => Failure::Usage(format!("error: {e}")),
            SourceError::Timeline(e) => Failure::Data(format!("error: {e}")),
            other => Failure::Data(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    malloc::tune(std::env::var_os("GLIBC_TUNABLES").as_deref());
    let args = cli::Cli::parse();
    let result = match args.command {
        cli::Command::Dump(a) => dump::run(&a),
        cli::Command::Validate(a) => validate::run(&a),
        cli::Command::Index(a) => index::run(&a),
        cli::Command::Stats(a) => stats::run(&a),
        cli::Command::Read(a) => read::run(&a),
        cli::Command::Bench(a) => bench::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Data(message)) => {
            write_stderr_line(message);
            ExitCode::from(1)
        }
        Err(Failure::DataReported) => ExitCode::from(1),
        Err(Failure::Usage(message)) => {
            write_stderr_line(message);
            ExitCode::from(2)
        }
    }
}

/// Prints a summary on stdout, one line each. A closed pipe (`ctf stats | head -1`) is not an
/// error: the reader of the output chose to stop.
pub fn print_lines(lines: &[String]) -> Result<(), Failure> {
    let mut text = lines.join("\n");
    text.push('\n');
    let mut out = io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(Failure::Data(format!(
            "error: cannot write the output: {e}"
        ))),
    }
}
