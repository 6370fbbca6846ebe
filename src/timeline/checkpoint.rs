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
//! starting with `435446`, so never with `-`).

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

    /// Reads a checkpoint from its token.
    pub fn from_token(token: &str) -> Result<Self, CheckpointError> {
        let token = token.trim();
        if token.len() != 2 * CHECKPOINT_LEN || !token.is_ascii() {
            return Err(error(format!(
                "a checkpoint token is {} hexadecimal digits",
                2 * CHECKPOINT_LEN
            )));
        }
        let mut bytes = [0u8; CHECKPOINT_LEN];
        for (i, byte) in bytes.iter_mut().enumerate() {
            *byte = u8::from_str_radix(&token[2 * i..2 * i + 2], 16)
                .map_err(|_| error("a checkpoint token holds only hexadecimal digits"))?;
        }
        Self::from_bytes(&bytes)
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
    put(u64::from(config.randomize));
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
}
