//! Checkpoints: where a reader stands on the global timeline, and for which corpus and order.
//!
//! A checkpoint is taken after the last minibatch handed to the caller (never counting work
//! done ahead) and is the same on every worker. It holds the global position and a
//! fingerprint of everything that shapes the order of sequences: the data files' sizes and
//! content hashes, the index's shape (sequences, chunks, samples per sweep), the inputs that
//! count samples, and the randomization settings. The minibatch size and the number of
//! workers are not in it: a run may resume with other ones.
//!
//! Bytes (20, little-endian): `CTF` and a format version byte (1), the position (u64), the
//! fingerprint (u64). The printable token is the same bytes in lowercase hex (40 characters,
//! starting with `435446`, so never with `-`); reading one also accepts uppercase digits and
//! surrounding whitespace, and nothing else.

use std::fmt;

use xxhash_rust::xxh3::Xxh3;

use crate::config::{RandomizerKind, ReaderConfig, WindowSize};
use crate::index::CorpusIndex;

/// The checkpoint format version.
pub const CHECKPOINT_VERSION: u8 = 1;

const MAGIC: [u8; 3] = *b"CTF";

/// Length of an encoded checkpoint.
pub const CHECKPOINT_LEN: usize = 20;

/// A position on the global timeline of one corpus and order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Checkpoint {
    /// Global position, in samples (a sequence start).
    pub position: u64,
    /// Fingerprint of the corpus and the order-shaping configuration.
    pub fingerprint: u64,
}

/// Why bytes or a token are not a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckpointError {
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for CheckpointError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid checkpoint: {}", self.message)
    }
}

impl std::error::Error for CheckpointError {}

fn error(message: impl Into<String>) -> CheckpointError {
    CheckpointError {
        message: message.into(),
    }
}

impl Checkpoint {
    /// The checkpoint as bytes.
    pub fn to_bytes(&self) -> [u8; CHECKPOINT_LEN] {
        let mut bytes = [0u8; CHECKPOINT_LEN];
        bytes[..3].copy_from_slice(&MAGIC);
        bytes[3] = CHECKPOINT_VERSION;
        bytes[4..12].copy_from_slice(&self.position.to_le_bytes());
        bytes[12..20].copy_from_slice(&self.fingerprint.to_le_bytes());
        bytes
    }

    /// Reads a checkpoint from bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, CheckpointError> {
        if bytes.len() != CHECKPOINT_LEN {
            return Err(error(format!(
                "expected {CHECKPOINT_LEN} bytes, got {}",
                bytes.len()
            )));
        }
        if bytes[..3] != MAGIC {
            return Err(error("not a ctf-reader checkpoint"));
        }
        if bytes[3] != CHECKPOINT_VERSION {
            return Err(error(format!(
                "unsupported checkpoint version {} (this reader writes {CHECKPOINT_VERSION})",
                bytes[3]
            )));
        }
        let word = |at: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&bytes[at..at + 8]);
            u64::from_le_bytes(w)
        };
        Ok(Checkpoint {
            position: word(4),
            fingerprint: word(12),
        })
    }

    /// The checkpoint as a printable token.
    pub fn to_token(&self) -> String {
        self.to_bytes().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Reads a checkpoint from its token: exactly 40 hexadecimal digits (`0-9`, `a-f` or
    /// `A-F`; no sign, no `0x`), with surrounding whitespace ignored.
    pub fn from_token(token: &str) -> Result<Self, CheckpointError> {
        let token = token.trim().as_bytes();
        if token.len() != 2 * CHECKPOINT_LEN {
            return Err(error(format!(
                "a checkpoint token is {} hexadecimal digits",
                2 * CHECKPOINT_LEN
            )));
        }
        let mut bytes = [0u8; CHECKPOINT_LEN];
        for (byte, pair) in bytes.iter_mut().zip(token.chunks_exact(2)) {
            match (hex_digit(pair[0]), hex_digit(pair[1])) {
                (Some(high), Some(low)) => *byte = high << 4 | low,
                _ => return Err(error("a checkpoint token holds only hexadecimal digits")),
            }
        }
        Self::from_bytes(&bytes)
    }
}

/// The value of one hexadecimal digit (either case), or `None` for any other byte. Unlike
/// `u8::from_str_radix`, which takes a leading `+`, nothing but the 22 digits passes.
fn hex_digit(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// The fingerprint of `index` read with `config`: equal for two readers exactly when their
/// timelines are the same.
pub fn fingerprint(index: &CorpusIndex, config: &ReaderConfig) -> u64 {
    let mut h = Xxh3::new();
    let mut put = |v: u64| h.update(&v.to_le_bytes());
    put(u64::from(CHECKPOINT_VERSION));
    put(index.files.len() as u64);
    for file in &index.files {
        put(file.stamp.size);
        put(file.content_hash);
        put(file.mode as u64);
    }
    put(index.sequences.len() as u64);
    put(index.chunks.len() as u64);
    put(index.total_samples());
    put(config.chunk_size_in_bytes);
    put(u64::from(config.skip_sequence_ids));
    put(config.inputs.len() as u64);
    for input in &config.inputs {
        put(input.alias.len() as u64);
        for b in input.alias.bytes() {
            put(u64::from(b));
        }
        put(u64::from(input.defines_mb_size));
    }
    put(u64::from(config.shuffles()));
    put(match config.randomizer {
        RandomizerKind::Block => 1,
        RandomizerKind::Cntk => 2,
    });
    match config.window() {
        WindowSize::Chunks(n) => {
            put(1);
            put(n);
        }
        WindowSize::Samples(n) => {
            put(2);
            put(n);
        }
    }
    put(config.randomization_seed);
    // A composite reader's joined deserializers (nothing for a single one, so its tokens do
    // not change): their files, and what shapes their sequences.
    for (joined, own) in index.joined.iter().zip(&config.joined) {
        put(joined.index.files.len() as u64);
        for file in &joined.index.files {
            put(file.stamp.size);
            put(file.content_hash);
            put(file.mode as u64);
        }
        put(own.inputs.start as u64);
        put(own.inputs.end as u64);
        put(u64::from(own.skip_sequence_ids));
    }
    h.digest()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_and_tokens_round_trip_and_reject_garbage() {
        let c = Checkpoint {
            position: 123_456_789_012,
            fingerprint: 0xdead_beef_0bad_f00d,
        };
        assert_eq!(Checkpoint::from_bytes(&c.to_bytes()), Ok(c));
        let token = c.to_token();
        assert_eq!(token.len(), 40);
        assert!(token.starts_with("435446"), "{token}");
        assert_eq!(Checkpoint::from_token(&token), Ok(c));
        assert!(Checkpoint::from_bytes(&c.to_bytes()[..19]).is_err());
        let mut other = c.to_bytes();
        other[3] = 2;
        let e = Checkpoint::from_bytes(&other).unwrap_err();
        assert!(e.to_string().contains("version 2"), "{e}");
        other = c.to_bytes();
        other[0] = b'X';
        assert!(Checkpoint::from_bytes(&other).is_err());
        assert!(Checkpoint::from_token("zz").is_err());
        let bad_digit = format!("{}g", &token[..39]);
        assert!(Checkpoint::from_token(&bad_digit).is_err());
        assert!(Checkpoint::from_token(&format!("{}é", &token[..38])).is_err());
    }

    #[test]
    fn tokens_take_hex_digits_of_either_case_and_nothing_else() {
        let c = Checkpoint {
            position: 0x0123_4567_89ab_cdef,
            fingerprint: 0xfedc_ba98_7654_3210,
        };
        let token = c.to_token();
        assert_eq!(token, token.to_ascii_lowercase());
        assert_eq!(Checkpoint::from_token(&token.to_ascii_uppercase()), Ok(c));
        assert_eq!(Checkpoint::from_token(&format!(" {token}\n")), Ok(c));
        // A pair `+1` would read as 0x01 through `u8::from_str_radix`; `-1`, `0x` and
        // spaces inside are refused as well, at every pair.
        for pair in 0..CHECKPOINT_LEN {
            let at = 2 * pair;
            let digit = &token[at + 1..at + 2];
            for bad in [
                format!("+{digit}"),
                format!("-{digit}"),
                format!(" {digit}"),
            ] {
                let forged = format!("{}{bad}{}", &token[..at], &token[at + 2..]);
                let e = Checkpoint::from_token(&forged).unwrap_err();
                assert!(e.to_string().contains("hexadecimal"), "{forged}: {e}");
            }
            let forged = format!("{}0x{}", &token[..at], &token[at + 2..]);
            assert!(Checkpoint::from_token(&forged).is_err(), "{forged}");
        }
    }
}
