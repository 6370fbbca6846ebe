//! `ctf validate`: reports every error and warning in the data (not stopping at maxErrors),
//! then prints a summary on stdout. Exit 0 when there is no error, 1 otherwise.
//!
//! A composite reader is validated as it is read: every sequence of the first deserializer
//! joined with the others (missing keys are errors; keys only in a joined deserializer are
//! the warning of indexing, and their sequences are not parsed).

use ctf_reader::reader::{stderr_sink, ErrorPolicy, SequenceReader};
use ctf_reader::{Element, Precision, ReaderConfig};

use crate::cli::DataArgs;
use crate::Failure;

/// Runs `ctf validate`.
pub fn run(args: &DataArgs) -> Result<(), Failure> {
    let (config, config_warnings) = args.reader_config_and_warnings()?;
    match config.precision {
        Precision::Float => validate::<f32>(&config, config_warnings),
        Precision::Double => validate::<f64>(&config, config_warnings),
    }
}

/// Reads every sequence, then prints the summary; its `warnings` count those of the
/// configuration (`config_warnings`) too.
fn validate<T: Element>(config: &ReaderConfig, config_warnings: u64) -> Result<(), Failure> {
    let mut reader = SequenceReader::<T>::new(config, ErrorPolicy::ReportAll, stderr_sink());
    let mut samples = vec![0u64; config.inputs.len()];
    let mut fatal = None;
    loop {
        match reader.next_batch() {
            Ok(Some(batch)) => {
                for (total, column) in samples.iter_mut().zip(&batch.columns) {
                    *total += column.samples_before(batch.len()).unwrap_or(0) as u64;
                }
            }
            Ok(None) => break,
            Err(e) => {
                fatal = Some(e);
                break;
            }
        }
    }
    let counts = reader.counts();
    let mut lines = vec![format!("files: {}", reader.file_count())];
    if config.is_composite() {
        // Joined sequences are read through the index, which does not count lines.
        lines.push(format!("deserializers: {}", config.deserializer_count()));
    } else {
        lines.push(format!(
            "lines: {} ({} belong to no sequence)",
            counts.lines, counts.skipped_lines
        ));
    }
    lines.extend([format!(
        "sequences: {} valid, {} invalid",
        counts.sequences, counts.invalid_sequences
    )]);
    for (input, n) in config.inputs.iter().zip(&samples) {
        lines.push(format!("samples {}: {n}", input.name));
    }
    lines.push(format!(
        "errors: {}",
        counts.errors + u64::from(fatal.is_some())
    ));
    lines.push(format!("warnings: {}", counts.warnings + config_warnings));
    crate::print_lines(&lines)?;
    if let Some(e) = fatal {
        return Err(Failure::Data(e.to_string()));
    }
    if counts.errors > 0 {
        return Err(Failure::DataReported);
    }
    Ok(())
}
