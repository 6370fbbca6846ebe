//! The checkpoint decoder on arbitrary bytes and tokens: `Checkpoint::from_bytes` and
//! `from_token` either refuse or give a checkpoint that encodes back to the same bytes (and
//! token); never a panic. A token is accepted only as its hex digits (either case, with
//! surrounding whitespace): it reads back to the same lowercase token.

#![no_main]

use ctf_reader::timeline::checkpoint::Checkpoint;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(c) = Checkpoint::from_bytes(data) {
        assert_eq!(&c.to_bytes()[..], data);
        assert_eq!(Checkpoint::from_token(&c.to_token()).unwrap(), c);
    }
    let text = String::from_utf8_lossy(data);
    if let Ok(c) = Checkpoint::from_token(&text) {
        assert_eq!(Checkpoint::from_bytes(&c.to_bytes()).unwrap(), c);
        assert!(!c.to_token().starts_with('-'));
        assert_eq!(c.to_token(), text.trim().to_ascii_lowercase());
    }
});
