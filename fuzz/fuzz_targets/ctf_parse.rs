//! The CTF byte-level parser on arbitrary bytes: never a panic, and "any split parses the
//! same": the bytes fed in one piece, in two pieces at a fuzzed point, and byte by byte (for
//! short inputs) give the same sequences, invalid sequences, diagnostics and fatal error.
//! The first byte picks the options (`skipSequenceIds`, `frameMode`) and the split point.
//! Each input is parsed twice so: without limits, and with lines and sequences limited to a
//! third and a quarter of the text (`limit_line_bytes`, `limit_sequence_bytes`).

#![no_main]

use ctf_reader::parser::{StreamOptions, StreamParser};
use ctf_reader::InputConfig;
use libfuzzer_sys::fuzz_target;

type Outcome = (
    ctf_reader::ParsedSequences<f32>,
    Vec<ctf_reader::parser::InvalidSequence>,
    Vec<ctf_reader::Diagnostic>,
    Option<ctf_reader::parser::FatalDataError>,
);

fn inputs() -> Vec<InputConfig> {
    vec![
        InputConfig::dense("a", 3),
        InputConfig::sparse("s", 10),
        InputConfig::dense("features", 2).with_alias("F"),
        // Wide enough for the dense runs over 64-byte windows (`parser::dense_digits`).
        InputConfig::dense("d", 12),
    ]
}

/// The longest line and sequence a parse takes.
#[derive(Clone, Copy, Debug)]
struct Limits {
    line: usize,
    sequence: usize,
}

fn parse<'a>(
    options: StreamOptions,
    limits: Limits,
    pieces: impl IntoIterator<Item = &'a [u8]>,
) -> Outcome {
    let mut p = StreamParser::<f32>::new(&inputs(), options);
    p.limit_line_bytes(limits.line);
    p.limit_sequence_bytes(limits.sequence);
    p.start_file(0);
    let mut fatal = None;
    for piece in pieces {
        if let Err(e) = p.feed(piece) {
            fatal = Some(e);
            break;
        }
    }
    if fatal.is_none() {
        fatal = p.finish_file().err();
    }
    (
        p.sequences().clone(),
        p.invalid_sequences().to_vec(),
        p.diagnostics().to_vec(),
        fatal,
    )
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, text)) = data.split_first() else {
        return;
    };
    let options = StreamOptions {
        skip_sequence_ids: head & 1 != 0,
        frame_mode: head & 2 != 0,
    };
    let cut = if text.is_empty() {
        0
    } else {
        usize::from(head >> 2) * text.len() / 63
    };
    let (left, right) = text.split_at(cut.min(text.len()));
    let unlimited = Limits {
        line: usize::MAX,
        sequence: usize::MAX,
    };
    let limited = Limits {
        line: text.len() / 3,
        sequence: text.len() / 4,
    };
    for limits in [unlimited, limited] {
        let whole = parse(options, limits, [text]);
        assert_eq!(
            parse(options, limits, [left, right]),
            whole,
            "split at {cut}, {limits:?}"
        );
        if text.len() <= 256 {
            assert_eq!(
                parse(options, limits, text.chunks(1)),
                whole,
                "byte by byte, {limits:?}"
            );
        }
    }
});
