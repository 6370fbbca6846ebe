//! `ctf`: validate, dump, index and benchmark CNTK Text Format datasets from the shell.
//!
//! Exit codes (SPEC §7.5): 0 ok; 1 data error (beyond maxErrors for readers, any error for
//! `validate`); 2 usage or configuration error. Data goes to stdout, everything else to
//! stderr (the `validate` summary goes to stdout).

mod cli;
mod dump;
mod json;
mod validate;

use std::process::ExitCode;

use clap::Parser;

/// Why a command failed, mapped to the exit code contract.
pub enum Failure {
    /// Exit 1: a data error (already described by the message).
    Data(String),
    /// Exit 2: a usage or configuration error.
    Usage(String),
    /// Exit 1 with nothing more to print (the command reported the details itself).
    DataReported,
}

fn main() -> ExitCode {
    let args = cli::Cli::parse();
    let result = match args.command {
        cli::Command::Dump(a) => dump::run(&a),
        cli::Command::Validate(a) => validate::run(&a),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Data(message)) => {
            eprintln!("{message}");
            ExitCode::from(1)
        }
        Err(Failure::DataReported) => ExitCode::from(1),
        Err(Failure::Usage(message)) => {
            eprintln!("{message}");
            ExitCode::from(2)
        }
    }
}
