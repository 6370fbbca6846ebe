//! `ctf dump`: every valid sequence as one JSON object per line, streamed in file order.

use std::io;

use ctf_reader::reader::{stderr_sink, ErrorPolicy, SequenceReader};
use ctf_reader::{Element, Precision, ReaderConfig};

use crate::cli::DataArgs;
use crate::json::JsonWriter;
use crate::Failure;

/// Runs `ctf dump`.
pub fn run(args: &DataArgs) -> Result<(), Failure> {
    let config = args.reader_config()?;
    match config.precision {
        Precision::Float => dump::<f32>(&config),
        Precision::Double => dump::<f64>(&config),
    }
}

fn dump<T: Element>(config: &ReaderConfig) -> Result<(), Failure> {
    let mut reader = SequenceReader::<T>::new(config, ErrorPolicy::Budget, stderr_sink());
    let stdout = io::stdout();
    let mut out = JsonWriter::new(stdout.lock());
    loop {
        let batch = match reader.next_batch() {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(e) => {
                out.flush().map_err(output_failure)?;
                return Err(Failure::Data(e.to_string()));
            }
        };
        for seq in 0..batch.len() {
            out.push_sequence(batch, seq, &config.inputs)
                .map_err(output_failure)?;
        }
    }
    out.flush().map_err(output_failure)
}

/// A failed write to stdout; a closed pipe (`ctf dump | head`) ends the command quietly.
fn output_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Failure::Data(format!("error: cannot write the output: {e}"))
}
