//! Hadoop's MurmurHash (a 32-bit MurmurHash2 variant) and the key -> bit positions mapping of
//! Hadoop's `HashFunction`, which Hudi bloom filters use (HUDI_FORMAT §6.3).
//!
//! Two Hadoop quirks matter for byte compatibility: the 1..3 tail bytes are mixed in as
//! sign-extended Java bytes, and the i-th position seeds the hash with the (i-1)-th hash value.

/// MurmurHash2 multiplication constant.
const M: u32 = 0x5bd1_e995;
/// MurmurHash2 shift.
const R: u32 = 24;

/// Hadoop `MurmurHash.hash(data, 0, len, seed)`, as a Java `int`.
pub fn murmur_hadoop(data: &[u8], seed: i32) -> i32 {
    KeyMix::new(data).hash(seed as u32) as i32
}

/// Mixes one little-endian 4-byte chunk; independent of the seed, so it is done once per key.
#[inline(always)]
pub(crate) fn mix_chunk(chunk: [u8; 4]) -> u32 {
    let mut k = u32::from_le_bytes(chunk).wrapping_mul(M);
    k ^= k >> R;
    k.wrapping_mul(M)
}

/// Java widens a `byte` to `int` with sign extension; canonical murmur2 uses unsigned bytes.
#[inline(always)]
fn java_byte(b: u8) -> u32 {
    b as i8 as i32 as u32
}

/// XOR contribution of the 1..3 tail bytes (0 when there is no tail).
#[inline(always)]
pub(crate) fn tail_xor(tail: &[u8]) -> u32 {
    let n = tail.len();
    let mut x = 0u32;
    if n >= 3 {
        x ^= java_byte(tail[n - 3]) << 16;
    }
    if n >= 2 {
        x ^= java_byte(tail[n - 2]) << 8;
    }
    if n >= 1 {
        x ^= java_byte(tail[n - 1]);
    }
    x
}

/// Final avalanche of MurmurHash2.
#[inline(always)]
pub(crate) fn finalize(mut h: u32) -> u32 {
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^ (h >> 15)
}

/// A key with its seed-independent work done: the k bloom positions hash the same bytes k times
/// with different seeds, so mixing the chunks once saves about half of the multiplications.
pub(crate) struct KeyMix<'a> {
    /// The key bytes whose whole 4-byte chunks are mixed lazily in `hash` when not cached.
    chunks: Chunks<'a>,
    len: u32,
    has_tail: bool,
    tail: u32,
}

/// Mixed chunks: borrowed from a caller's scratch buffer, or computed on the fly.
enum Chunks<'a> {
    Mixed(&'a [u32]),
    Raw(&'a [u8]),
}

impl<'a> KeyMix<'a> {
    /// A key hashed without a scratch buffer (each `hash` call re-mixes the chunks).
    pub(crate) fn new(data: &'a [u8]) -> Self {
        let whole = data.len() & !3;
        KeyMix {
            chunks: Chunks::Raw(&data[..whole]),
            len: data.len() as u32,
            has_tail: whole != data.len(),
            tail: tail_xor(&data[whole..]),
        }
    }

    /// A key whose chunks are mixed once into `scratch` (cleared first).
    pub(crate) fn with_scratch(data: &[u8], scratch: &'a mut Vec<u32>) -> Self {
        let whole = data.len() & !3;
        scratch.clear();
        scratch.extend(
            data[..whole]
                .chunks_exact(4)
                .map(|c| mix_chunk([c[0], c[1], c[2], c[3]])),
        );
        KeyMix {
            chunks: Chunks::Mixed(scratch.as_slice()),
            len: data.len() as u32,
            has_tail: whole != data.len(),
            tail: tail_xor(&data[whole..]),
        }
    }

    /// The Hadoop murmur hash of this key with `seed`, as the unsigned bits of a Java `int`.
    #[inline(always)]
    pub(crate) fn hash(&self, seed: u32) -> u32 {
        // Key length is a Java int; keys longer than 2 GiB cannot come from a Java String anyway.
        let mut h = seed ^ self.len;
        match self.chunks {
            Chunks::Mixed(ks) => {
                for &k in ks {
                    h = h.wrapping_mul(M) ^ k;
                }
            }
            Chunks::Raw(bytes) => {
                for c in bytes.chunks_exact(4) {
                    h = h.wrapping_mul(M) ^ mix_chunk([c[0], c[1], c[2], c[3]]);
                }
            }
        }
        if self.has_tail {
            h = (h ^ self.tail).wrapping_mul(M);
        }
        finalize(h)
    }
}

/// `x mod d` for a fixed divisor without a hardware divide (Lemire, Kaser & Kurz 2019, exact for
/// all 32-bit `x` and `d`): the probe loop takes one remainder per hash, and `div` costs ~10x a
/// multiply.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FastMod {
    d: u32,
    m: u64,
}

impl FastMod {
    /// Precomputes the reciprocal of `d` (`d` must be non-zero).
    pub(crate) fn new(d: u32) -> Self {
        debug_assert!(d != 0);
        FastMod {
            d,
            m: (u64::MAX / d as u64).wrapping_add(1),
        }
    }

    /// `x % d`.
    #[inline(always)]
    pub(crate) fn rem(&self, x: u32) -> u32 {
        let low = self.m.wrapping_mul(x as u64);
        ((low as u128 * self.d as u128) >> 64) as u32
    }
}

/// Hadoop `HashFunction` position of a hash value: `Math.abs(h % vectorSize)`. Java's `%` takes
/// the sign of the dividend, so the magnitude is `|h| mod vectorSize` (`|i32::MIN|` included).
#[inline(always)]
pub(crate) fn position(h: u32, modulus: &FastMod) -> u32 {
    modulus.rem((h as i32).unsigned_abs())
}

/// All `nb_hash` positions of `key` in a vector of `vector_size` bits (Hadoop `HashFunction.hash`).
pub fn positions(key: &[u8], nb_hash: u32, vector_size: u32) -> Vec<u32> {
    let modulus = FastMod::new(vector_size);
    let mix = KeyMix::new(key);
    let mut seed = 0u32;
    (0..nb_hash)
        .map(|_| {
            seed = mix.hash(seed);
            position(seed, &modulus)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn murmur_spec_vectors() {
        // HUDI_FORMAT §11.
        assert_eq!(murmur_hadoop(b"hello", 0), -446617141);
        assert_eq!(murmur_hadoop(b"hello", -1), -1816943331);
        assert_eq!(murmur_hadoop(b"abcd", 0), 646393889);
        assert_eq!(murmur_hadoop(&[0xff, 0xfe, 0xfd], 0), 992110096);
        assert_eq!(murmur_hadoop("é".as_bytes(), 0), -384040333);
    }

    #[test]
    fn scratch_and_raw_hash_agree() {
        let mut scratch = Vec::new();
        for key in [
            &b""[..],
            b"a",
            b"ab",
            b"abc",
            b"abcd",
            b"abcde",
            b"\x80\x81\x82\x83\x84\x85",
        ] {
            let raw = KeyMix::new(key);
            let mixed = KeyMix::with_scratch(key, &mut scratch);
            for seed in [0u32, 1, 0xdead_beef, u32::MAX] {
                assert_eq!(raw.hash(seed), mixed.hash(seed));
            }
        }
    }

    #[test]
    fn fastmod_matches_hardware_remainder() {
        let divisors = [1u32, 2, 3, 7, 20, 2_587_966, 0x7fff_ffff, u32::MAX];
        let mut x = 0x1234_5678u32;
        for _ in 0..10_000 {
            // xorshift32: a cheap deterministic spread of dividends.
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            for &d in &divisors {
                assert_eq!(FastMod::new(d).rem(x), x % d, "{x} % {d}");
            }
        }
        for &d in &divisors {
            for x in [0u32, 1, d.wrapping_sub(1), d, u32::MAX, 1 << 31] {
                assert_eq!(FastMod::new(d).rem(x), x % d);
            }
        }
    }

    #[test]
    fn position_is_abs_of_java_remainder() {
        let m = FastMod::new(20);
        // -7 % 20 == -7 in Java -> 7; i32::MIN % 20 == -8 -> 8.
        assert_eq!(position((-7i32) as u32, &m), 7);
        assert_eq!(position(i32::MIN as u32, &m), 8);
        assert_eq!(position(47, &m), 7);
    }

    #[test]
    fn positions_spec_vectors() {
        // HUDI_FORMAT §11: default DYNAMIC_V0 sizing, first five positions of a fixture key.
        let p = positions(b"3eeb61f7-c2b0-4636-99bd-5d7a5a1d2c04", 30, 2_587_966);
        assert_eq!(p.len(), 30);
        assert_eq!(&p[..5], &[304405, 2306766, 1262828, 2180497, 1795694]);
        // Small SIMPLE filter (bitSize 20, k 7).
        assert_eq!(positions(b"key1", 7, 20), vec![13, 4, 3, 16, 6, 18, 19]);
    }
}
