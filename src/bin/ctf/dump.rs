//! `ctf dump`: every valid sequence as one JSON object per line, streamed in file order.

use std::io::{self, Write};

use ctf_reader::reader::{stderr_sink, ErrorPolicy, SequenceReader};
use ctf_reader::{Element, Precision, ReaderConfig};

use crate::cli::DataArgs;
use crate::{json, Failure};

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
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let mut text = String::new();
    loop {
        let batch = match reader.next_batch() {
            Ok(Some(batch)) => batch,
            Ok(None) => break,
            Err(e) => {
                flush(&mut out)?;
                return Err(Failure::Data(e.to_string()));
            }
        };
        for seq in 0..batch.len() {
            text.clear();
            json::push_sequence(&mut text, batch, seq, &config.inputs);
            write_all(&mut out, text.as_bytes())?;
        }
    }
    flush(&mut out)
}

/// Writes to stdout; a closed pipe (`ctf dump | head`) ends the command quietly.
fn write_all(out: &mut impl Write, bytes: &[u8]) -> Result<(), Failure> {
    out.write_all(bytes).map_err(output_failure)
}

fn flush(out: &mut impl Write) -> Result<(), Failure> {
    out.flush().map_err(output_failure)
}

fn output_failure(e: io::Error) -> Failure {
    if e.kind() == io::ErrorKind::BrokenPipe {
        std::process::exit(0);
    }
    Failure::Data(format!("error: cannot write the output: {e}"))
}
