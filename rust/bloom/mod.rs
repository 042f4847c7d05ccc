//! Hudi/Hadoop-compatible bloom filters: the `org.apache.hudi.bloomfilter` value in the footer of
//! every base file (HUDI_FORMAT §6).
//!
//! Bits, sizes and serialized bytes match what Hudi's Java writer produces for the same keys, so a
//! filter built here can be written into a footer read by Hudi, and a Hudi footer can be probed
//! here with the same answers (false positives included).

mod arrow;
mod codec;
mod dynamic;
mod murmur;
mod probe;
mod simple;

use base64::alphabet;
use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
use base64::Engine;

pub use arrow::footer_for_keys;
pub use dynamic::DynamicBloomFilter;
pub use murmur::{murmur_hadoop, positions};
pub use simple::SimpleBloomFilter;

use crate::error::{Error, Result};
use codec::Reader;
use murmur::KeyMix;
use simple::{BitVector, HashParams};

/// Footer key holding the base64 filter.
pub const FOOTER_KEY: &str = "org.apache.hudi.bloomfilter";
/// Footer key of the type code; absent for SIMPLE filters.
pub const FOOTER_TYPE_CODE_KEY: &str = "hoodie_bloom_filter_type_code";
/// Hudi's default `hoodie.index.bloom.num_entries`.
pub const DEFAULT_NUM_ENTRIES: i32 = 60_000;
/// Hudi's default `hoodie.index.bloom.fpp`.
pub const DEFAULT_FPP: f64 = 0.000_000_001;
/// Hudi's default `hoodie.bloom.index.filter.dynamic.max.entries`.
pub const DEFAULT_MAX_ENTRIES: i32 = 100_000;

/// Hudi's `BloomFilterTypeCode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BloomFilterType {
    /// One Hadoop bloom filter.
    Simple,
    /// A bounded dynamic filter (`HoodieDynamicBoundedBloomFilter`), Hudi's default.
    DynamicV0,
}

impl BloomFilterType {
    /// The code written under `hoodie_bloom_filter_type_code`.
    pub fn code(self) -> &'static str {
        match self {
            BloomFilterType::Simple => "SIMPLE",
            BloomFilterType::DynamicV0 => "DYNAMIC_V0",
        }
    }

    /// Parses a footer type code; a missing code means SIMPLE (Hudi writes none for it).
    pub fn from_code(code: Option<&str>) -> Result<Self> {
        match code {
            None | Some("SIMPLE") => Ok(BloomFilterType::Simple),
            Some("DYNAMIC_V0") => Ok(BloomFilterType::DynamicV0),
            Some(other) => Err(Error::Unsupported(format!(
                "bloom filter type code {other:?}"
            ))),
        }
    }
}

/// Bit-vector size and hash count derived from (numEntries, fpp) (HUDI_FORMAT §6.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BloomSizing {
    /// Bits per row (`vectorSize`).
    pub bit_size: u32,
    /// Hash functions (`nbHash`).
    pub num_hashes: u32,
}

/// Hudi's `BloomFilterUtils.getBitSize` / `getNumHashes`, evaluated in the same order of double
/// operations as Java so that `Math.ceil` lands on the same integer.
pub fn sizing(num_entries: i32, fpp: f64) -> Result<BloomSizing> {
    if num_entries <= 0 {
        return Err(Error::InvalidArgument(format!(
            "bloom filter num_entries must be positive, got {num_entries}"
        )));
    }
    if !(fpp > 0.0 && fpp < 1.0) {
        return Err(Error::InvalidArgument(format!(
            "bloom filter fpp must be in (0, 1), got {fpp}"
        )));
    }
    let ln2 = 2f64.ln();
    let bits = (num_entries as f64 * (-fpp.ln() / (ln2 * ln2))).ceil();
    if bits > i32::MAX as f64 {
        return Err(Error::InvalidArgument(format!(
            "bloom filter of {num_entries} entries at fpp {fpp} needs {bits} bits, over 2^31"
        )));
    }
    let bit_size = bits as u32;
    let num_hashes = (ln2 * bit_size as f64 / num_entries as f64).ceil() as u32;
    Ok(BloomSizing {
        bit_size,
        num_hashes: num_hashes.max(1),
    })
}

/// Java's `Base64.getDecoder()` accepts a value with or without `=` padding; Hudi writes it padded.
const FOOTER_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A Hudi bloom filter of either kind.
#[derive(Clone, Debug)]
pub enum BloomFilter {
    /// `SIMPLE`.
    Simple(SimpleBloomFilter),
    /// `DYNAMIC_V0`.
    DynamicV0(DynamicBloomFilter),
}

impl BloomFilter {
    /// An empty SIMPLE filter sized for `num_entries` keys at false-positive rate `fpp`.
    pub fn simple(num_entries: i32, fpp: f64) -> Result<Self> {
        let s = sizing(num_entries, fpp)?;
        Ok(BloomFilter::Simple(SimpleBloomFilter::with_params(
            s.num_hashes,
            s.bit_size,
        )))
    }

    /// An empty DYNAMIC_V0 filter: rows sized for `num_entries` keys each, grown until
    /// `rows * num_entries >= max_entries`, then filled round-robin.
    pub fn dynamic_v0(num_entries: i32, fpp: f64, max_entries: i32) -> Result<Self> {
        let s = sizing(num_entries, fpp)?;
        if max_entries < 0 {
            return Err(Error::InvalidArgument(format!(
                "bloom filter max_entries must not be negative, got {max_entries}"
            )));
        }
        Ok(BloomFilter::DynamicV0(DynamicBloomFilter::with_params(
            s.num_hashes,
            s.bit_size,
            num_entries,
            max_entries,
        )))
    }

    /// An empty filter of `ty` with Hudi's default sizing parameters.
    pub fn with_defaults(ty: BloomFilterType) -> Self {
        let made = match ty {
            BloomFilterType::Simple => Self::simple(DEFAULT_NUM_ENTRIES, DEFAULT_FPP),
            BloomFilterType::DynamicV0 => {
                Self::dynamic_v0(DEFAULT_NUM_ENTRIES, DEFAULT_FPP, DEFAULT_MAX_ENTRIES)
            }
        };
        made.expect("Hudi's default bloom parameters are valid")
    }

    /// The filter's type code.
    pub fn filter_type(&self) -> BloomFilterType {
        match self {
            BloomFilter::Simple(_) => BloomFilterType::Simple,
            BloomFilter::DynamicV0(_) => BloomFilterType::DynamicV0,
        }
    }

    /// Hash parameters and rows, the shape every probe works on.
    pub(crate) fn parts(&self) -> (&HashParams, &[BitVector]) {
        match self {
            BloomFilter::Simple(f) => (&f.params, std::slice::from_ref(&f.bits)),
            BloomFilter::DynamicV0(f) => (&f.params, &f.rows),
        }
    }

    /// Number of hash functions (`nbHash`).
    pub fn num_hashes(&self) -> u32 {
        self.parts().0.nb_hash
    }

    /// Bits per row (`vectorSize`).
    pub fn vector_size(&self) -> u32 {
        self.parts().0.vector_size
    }

    /// Adds a key (its UTF-8 bytes for a string key).
    pub fn add(&mut self, key: &[u8]) {
        self.add_mixed(&KeyMix::new(key));
    }

    fn add_mixed(&mut self, key: &KeyMix<'_>) {
        match self {
            BloomFilter::Simple(f) => f.add_mixed(key),
            BloomFilter::DynamicV0(f) => f.add_mixed(key),
        }
    }

    /// Whether the key may have been added (false positives at about the configured rate).
    pub fn might_contain(&self, key: &[u8]) -> bool {
        let (params, rows) = self.parts();
        let mut positions = Vec::with_capacity(params.nb_hash as usize);
        probe::contains(params, rows, &KeyMix::new(key), &mut positions)
    }

    /// The serialized filter (Hadoop `Writable` bytes, big-endian).
    pub fn serialize(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            BloomFilter::Simple(f) => f.write(&mut out),
            BloomFilter::DynamicV0(f) => f.write(&mut out),
        }
        out
    }

    /// Parses serialized bytes of a filter of type `ty`. Malformed bytes are `Error::Corrupt`;
    /// a well-formed Jenkins-hashed (pre-Hudi Hadoop) filter is `Error::Unsupported`.
    pub fn deserialize(bytes: &[u8], ty: BloomFilterType) -> Result<Self> {
        let mut r = Reader::new(bytes);
        let filter = match ty {
            BloomFilterType::Simple => {
                let (header, bits) = SimpleBloomFilter::read_raw(&mut r)?;
                r.finish()?;
                BloomFilter::Simple(SimpleBloomFilter {
                    params: HashParams::from_header(&header)?,
                    bits,
                })
            }
            BloomFilterType::DynamicV0 => {
                let f = DynamicBloomFilter::read(&mut r);
                // The hash type is judged last: a Jenkins header followed by trailing garbage is
                // corrupt, not unsupported.
                if matches!(f, Err(Error::Unsupported(_))) {
                    r.finish()?;
                }
                let f = f?;
                r.finish()?;
                BloomFilter::DynamicV0(f)
            }
        };
        Ok(filter)
    }

    /// The footer value: standard base64 with padding of `serialize()`.
    pub fn to_footer(&self) -> String {
        base64::engine::general_purpose::STANDARD.encode(self.serialize())
    }

    /// Parses a footer value; `type_code` is the `hoodie_bloom_filter_type_code` value, if any.
    pub fn from_footer(value: &str, type_code: Option<&str>) -> Result<Self> {
        let ty = BloomFilterType::from_code(type_code)?;
        let bytes = FOOTER_BASE64
            .decode(value.as_bytes())
            .map_err(|e| Error::Corrupt(format!("bloom filter footer is not base64: {e}")))?;
        Self::deserialize(&bytes, ty)
    }
}

#[cfg(test)]
mod tests;
