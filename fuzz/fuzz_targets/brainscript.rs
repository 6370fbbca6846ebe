//! The BrainScript configuration parser and its lazy evaluator on arbitrary text: reading a
//! reader section (the default one, and the sections `reader` and `train`) either succeeds
//! or returns a configuration error with a location; never a panic, a stack overflow or a
//! hang (libFuzzer's timeout catches loops).

#![no_main]

use ctf_reader::ReaderConfig;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for section in [None, Some("reader"), Some("train")] {
        match ReaderConfig::from_brainscript(&text, "fuzz.cntk", section) {
            Ok((config, _warnings)) => {
                // A configuration read is one the builder's checks accept.
                assert!(!config.inputs.is_empty());
            }
            Err(e) => {
                let message = e.to_string();
                assert!(!message.is_empty());
            }
        }
    }
});
