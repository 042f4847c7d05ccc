//! A stable 64-bit hash of record keys: Spark tasks of one write agree on where a new key goes
//! (its insert slot and position) by this hash of the key's bytes alone.
//!
//! The hash (`shoal.spark.keys.key_hash`): splitmix64's finalizer over the key's byte length,
//! then over each 8-byte little-endian word of the key, the last one zero-padded; a key longer
//! than 64 bytes is hashed as its length and the words of its first and then its last 64 bytes.

use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_schema::DataType;

use crate::error::{Error, Result};
use crate::keysort::with_values;

/// Bytes of a key hashed from each end.
const WIDTH: usize = 64;
const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;
const MIX_1: u64 = 0xBF58_476D_1CE4_E5B9;
const MIX_2: u64 = 0x94D0_49BB_1331_11EB;

/// splitmix64's finalizer.
#[inline]
pub(crate) fn mix(mut h: u64) -> u64 {
    h = (h ^ (h >> 30)).wrapping_mul(MIX_1);
    h = (h ^ (h >> 27)).wrapping_mul(MIX_2);
    h ^ (h >> 31)
}

#[inline]
fn with_words(mut h: u64, bytes: &[u8]) -> u64 {
    let mut words = bytes.chunks_exact(8);
    for word in &mut words {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        let mut w = [0u8; 8];
        w[..tail.len()].copy_from_slice(tail);
        h = mix(h ^ u64::from_le_bytes(w));
    }
    h
}

/// The hash of one key's bytes.
pub fn key_hash(key: &[u8]) -> u64 {
    let h = mix((key.len() as u64).wrapping_mul(GOLDEN));
    if key.len() <= WIDTH {
        with_words(h, key)
    } else {
        with_words(with_words(h, &key[..WIDTH]), &key[key.len() - WIDTH..])
    }
}

/// The hash of every key of a string or binary array (any offset width, or a view); a null key
/// hashes as the empty key (record keys are never null).
pub fn key_hashes(keys: &dyn Array) -> Result<Vec<u64>> {
    with_values!(keys, "key hash", |value| (0..keys.len())
        .map(|i| if keys.is_valid(i) {
            key_hash(value(i))
        } else {
            key_hash(b"")
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::{BinaryArray, Int32Array, LargeStringArray, StringArray, StringViewArray};

    /// The hash as the specification states it, word by word over a zero-padded copy.
    fn model(key: &[u8]) -> u64 {
        let words = |h: u64, bytes: &[u8]| {
            let mut padded = bytes.to_vec();
            padded.resize(bytes.len().div_ceil(8) * 8, 0);
            padded
                .chunks(8)
                .fold(h, |h, w| mix(h ^ u64::from_le_bytes(w.try_into().unwrap())))
        };
        let h = mix((key.len() as u64).wrapping_mul(GOLDEN));
        if key.len() <= 64 {
            words(h, key)
        } else {
            words(words(h, &key[..64]), &key[key.len() - 64..])
        }
    }

    #[test]
    fn hashes_every_length_as_the_model_does() {
        let long: String = (0..200u8).map(|b| char::from(b'a' + b % 26)).collect();
        for n in 0..long.len() {
            let key = &long.as_bytes()[..n];
            assert_eq!(key_hash(key), model(key), "length {n}");
        }
        // splitmix64 of zero is zero: the empty key.
        assert_eq!(key_hash(b""), 0);
    }

    #[test]
    fn every_array_type_hashes_the_same_bytes() {
        let values = [
            "a",
            "",
            "ünïcödé",
            "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdefX",
        ];
        let expected: Vec<u64> = values.iter().map(|v| model(v.as_bytes())).collect();
        let bytes: Vec<&[u8]> = values.iter().map(|v| v.as_bytes()).collect();
        for array in [
            &StringArray::from(values.to_vec()) as &dyn Array,
            &LargeStringArray::from(values.to_vec()),
            &StringViewArray::from(values.to_vec()),
            &BinaryArray::from(bytes),
        ] {
            assert_eq!(key_hashes(array).unwrap(), expected);
        }
        let sliced = StringArray::from(values.to_vec()).slice(1, 2);
        assert_eq!(key_hashes(&sliced).unwrap(), expected[1..3]);
        assert!(key_hashes(&Int32Array::from(vec![1])).is_err());
    }
}
