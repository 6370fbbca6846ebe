//! How a column stores its values, and the read-only view of them that samples lend.
//!
//! Most values in CTF files are small integers: one-hot data holds only ones; counts,
//! bag-of-words data, labels and 8-bit pixels hold integers below 256. A sparse column
//! therefore starts by storing no values at all (all ones) and moves to one byte per value at
//! the first value other than one; a dense column starts with one byte per value. Either moves
//! to the element type at the first value that is not an integer from 0 to 255 (see
//! `ValueTier`). Each move writes out what was stored so far in the wider form, once. The
//! values a column holds are the same in every tier; [`SampleValues`] reads them back as `T`.

use std::fmt;

use crate::parser::number::Element;

/// How the values of a column are stored, from the narrowest to the widest (a dense column
/// starts at `Bytes`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum ValueTier {
    /// Every value is one, and none is stored.
    Ones,
    /// Every value is an integer from 0 to 255, stored as a byte.
    Bytes,
    /// Values are stored as `T`.
    Stored,
}

/// A parsed value, as narrow as it is: a byte when it is an integer from 0 to 255.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum EntryValue<T> {
    /// An integer from 0 to 255.
    Byte(u8),
    /// Any other value.
    Wide(T),
}

impl<T: Element> EntryValue<T> {
    /// `value`, as narrow as it is.
    #[inline]
    pub(crate) fn of(value: T) -> Self {
        match value.to_byte() {
            Some(byte) => EntryValue::Byte(byte),
            None => EntryValue::Wide(value),
        }
    }

    /// The integer `value`, as narrow as it is (rounded correctly to `T` when wider than a
    /// byte).
    #[inline(always)]
    pub(crate) fn of_integer(value: u64) -> Self {
        match u8::try_from(value) {
            Ok(byte) => EntryValue::Byte(byte),
            Err(_) => EntryValue::Wide(T::from_u64(value)),
        }
    }

    /// The narrowest tier that can hold it.
    pub(crate) fn tier(self) -> ValueTier {
        match self {
            EntryValue::Byte(1) => ValueTier::Ones,
            EntryValue::Byte(_) => ValueTier::Bytes,
            EntryValue::Wide(_) => ValueTier::Stored,
        }
    }

    /// Its value.
    pub(crate) fn value(self) -> T {
        match self {
            EntryValue::Byte(byte) => T::from_byte(byte),
            EntryValue::Wide(value) => value,
        }
    }
}

/// Consecutive values of a column (one sample's, or all of them), whatever their storage:
/// read them with [`get`](Self::get), [`iter`](Self::iter) or [`to_vec`](Self::to_vec).
/// Equality and `Debug` are those of the values, as a list.
#[derive(Clone, Copy)]
pub struct SampleValues<'a, T> {
    repr: Repr<'a, T>,
}

#[derive(Clone, Copy)]
enum Repr<'a, T> {
    Ones(usize),
    Bytes(&'a [u8]),
    Stored(&'a [T]),
}

impl<'a, T> From<&'a [T]> for SampleValues<'a, T> {
    /// Values stored as `T`.
    fn from(values: &'a [T]) -> Self {
        SampleValues {
            repr: Repr::Stored(values),
        }
    }
}

impl<'a, T: Element> SampleValues<'a, T> {
    /// `len` ones.
    pub(crate) fn ones(len: usize) -> Self {
        SampleValues {
            repr: Repr::Ones(len),
        }
    }

    /// Values stored as bytes.
    pub(crate) fn bytes(bytes: &'a [u8]) -> Self {
        SampleValues {
            repr: Repr::Bytes(bytes),
        }
    }

    /// How many values there are.
    pub fn len(&self) -> usize {
        match self.repr {
            Repr::Ones(n) => n,
            Repr::Bytes(b) => b.len(),
            Repr::Stored(v) => v.len(),
        }
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Value `i`, or `None` past the end.
    pub fn get(&self, i: usize) -> Option<T> {
        match self.repr {
            Repr::Ones(n) => (i < n).then_some(T::ONE),
            Repr::Bytes(b) => b.get(i).map(|&b| T::from_byte(b)),
            Repr::Stored(v) => v.get(i).copied(),
        }
    }

    /// The values in order.
    pub fn iter(&self) -> Iter<'a, T> {
        Iter {
            values: *self,
            next: 0,
        }
    }

    /// The values as a vector.
    pub fn to_vec(&self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len());
        self.append_to(&mut out);
        out
    }

    /// The values as a slice when they are stored as `T` (not while they are all ones or
    /// all bytes).
    pub fn as_stored(&self) -> Option<&'a [T]> {
        match self.repr {
            Repr::Stored(v) => Some(v),
            _ => None,
        }
    }

    /// Appends the values to `out`, widening them as needed.
    #[inline]
    pub(crate) fn append_to(&self, out: &mut Vec<T>) {
        match self.repr {
            Repr::Ones(n) => out.resize(out.len() + n, T::ONE),
            Repr::Bytes(b) => out.extend(b.iter().map(|&b| T::from_byte(b))),
            Repr::Stored(v) => out.extend_from_slice(v),
        }
    }

    /// Appends the values to `out` as bytes; `false`, appending nothing, when they are stored
    /// as `T` (which may not fit a byte).
    #[inline]
    pub(crate) fn append_bytes_to(&self, out: &mut Vec<u8>) -> bool {
        match self.repr {
            Repr::Ones(n) => out.resize(out.len() + n, 1),
            Repr::Bytes(b) => out.extend_from_slice(b),
            Repr::Stored(_) => return false,
        }
        true
    }
}

/// The values of a [`SampleValues`], in order.
#[derive(Clone)]
pub struct Iter<'a, T> {
    values: SampleValues<'a, T>,
    next: usize,
}

impl<T: Element> Iterator for Iter<'_, T> {
    type Item = T;

    fn next(&mut self) -> Option<T> {
        let value = self.values.get(self.next)?;
        self.next += 1;
        Some(value)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.values.len() - self.next;
        (left, Some(left))
    }
}

impl<T: Element> ExactSizeIterator for Iter<'_, T> {}

impl<'a, T: Element> IntoIterator for SampleValues<'a, T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;

    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}

impl<T: Element> PartialEq for SampleValues<'_, T> {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl<T: Element> fmt::Debug for SampleValues<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_order_from_narrowest_and_classify_values() {
        assert!(ValueTier::Ones < ValueTier::Bytes && ValueTier::Bytes < ValueTier::Stored);
        let tier = |v: f64| EntryValue::of(v).tier();
        assert_eq!(tier(1.0), ValueTier::Ones);
        assert_eq!(tier(0.0), ValueTier::Bytes);
        assert_eq!(tier(255.0), ValueTier::Bytes);
        assert_eq!(tier(-0.0), ValueTier::Stored);
        assert_eq!(tier(0.5), ValueTier::Stored);
        assert_eq!(tier(256.0), ValueTier::Stored);
        for v in [1.0f32, 0.0, 255.0, -0.0, 0.5, 1e9] {
            assert_eq!(EntryValue::of(v).value().to_bits(), v.to_bits());
        }
    }

    #[test]
    fn every_storage_reads_back_the_same_values() {
        let stored = [1.0f32, 1.0, 1.0];
        let views = [
            SampleValues::ones(3),
            SampleValues::bytes(&[1, 1, 1]),
            SampleValues::from(&stored[..]),
        ];
        for v in &views {
            assert_eq!(v.len(), 3);
            assert_eq!(v.to_vec(), stored);
            assert_eq!(v.get(2), Some(1.0));
            assert_eq!(v.get(3), None);
            assert_eq!(format!("{v:?}"), "[1.0, 1.0, 1.0]");
            for w in &views {
                assert_eq!(v, w);
            }
        }
        let bytes = SampleValues::<f64>::bytes(&[0, 7, 255]);
        assert_eq!(bytes.to_vec(), [0.0, 7.0, 255.0]);
        assert_ne!(bytes, SampleValues::from(&[0.0, 7.0, 254.0][..]));
        assert_eq!(bytes.as_stored(), None);
        let mut out = vec![9u8];
        assert!(bytes.append_bytes_to(&mut out));
        assert!(SampleValues::<f64>::ones(2).append_bytes_to(&mut out));
        assert_eq!(out, [9, 0, 7, 255, 1, 1]);
        assert!(!SampleValues::from(&[2.5f64][..]).append_bytes_to(&mut out));
        assert_eq!(out.len(), 6, "nothing appended");
    }
}
