//! The SIMPLE filter: one Hadoop `BloomFilter` bit vector (HUDI_FORMAT §6.4).

use super::codec::{Header, Reader, JENKINS_HASH, MURMUR_HASH};
use super::murmur::{position, FastMod, KeyMix};
use crate::error::{Error, Result};

/// Hash parameters shared by every row of a filter.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HashParams {
    pub nb_hash: u32,
    pub vector_size: u32,
    pub modulus: FastMod,
}

impl HashParams {
    pub(crate) fn new(nb_hash: u32, vector_size: u32) -> Self {
        HashParams {
            nb_hash,
            vector_size,
            modulus: FastMod::new(vector_size),
        }
    }

    pub(crate) fn header(&self) -> Header {
        Header {
            nb_hash: self.nb_hash,
            hash_type: MURMUR_HASH,
            vector_size: self.vector_size,
        }
    }

    /// Parameters of a parsed header; Jenkins-hashed filters are valid Hadoop filters that shoal
    /// cannot probe (Hudi never wrote them).
    pub(crate) fn from_header(h: &Header) -> Result<Self> {
        if h.hash_type == JENKINS_HASH {
            return Err(Error::Unsupported(
                "bloom filter uses the Jenkins hash; only Murmur filters are supported".into(),
            ));
        }
        Ok(HashParams::new(h.nb_hash, h.vector_size))
    }

    /// Calls `f` with each of the key's `nb_hash` positions in order.
    #[inline]
    pub(crate) fn for_each_position(&self, key: &KeyMix<'_>, mut f: impl FnMut(u32)) {
        let mut seed = 0u32;
        for _ in 0..self.nb_hash {
            seed = key.hash(seed);
            f(position(seed, &self.modulus));
        }
    }
}

/// A fixed-size bit vector stored as little-endian u64 words, so that its little-endian byte image
/// is exactly Hadoop's serialized layout (bit i in byte i/8 under mask 1 << (i%8)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BitVector {
    words: Vec<u64>,
}

impl BitVector {
    pub(crate) fn new(bits: u32) -> Self {
        BitVector {
            words: vec![0; (bits as usize).div_ceil(64)],
        }
    }

    #[inline(always)]
    pub(crate) fn set(&mut self, pos: u32) {
        self.words[(pos >> 6) as usize] |= 1u64 << (pos & 63);
    }

    #[inline(always)]
    pub(crate) fn get(&self, pos: u32) -> bool {
        (self.words[(pos >> 6) as usize] >> (pos & 63)) & 1 != 0
    }

    /// Appends Hadoop's `ceil(bits/8)`-byte image.
    pub(crate) fn write(&self, bits: u32, out: &mut Vec<u8>) {
        let n = (bits as usize).div_ceil(8);
        let start = out.len();
        for w in &self.words {
            out.extend_from_slice(&w.to_le_bytes());
        }
        out.truncate(start + n);
    }

    /// Reads a `ceil(bits/8)`-byte image. Bits at or beyond `bits` are dropped, as Hadoop's
    /// `readFields` ignores them, so a re-serialized filter matches what Java would write.
    pub(crate) fn read(r: &mut Reader<'_>, bits: u32) -> Result<Self> {
        let bytes = r.take((bits as usize).div_ceil(8))?;
        let mut v = BitVector::new(bits);
        for (w, chunk) in v.words.iter_mut().zip(bytes.chunks(8)) {
            let mut le = [0u8; 8];
            le[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(le);
        }
        let tail = bits % 64;
        if tail != 0 {
            if let Some(last) = v.words.last_mut() {
                *last &= (1u64 << tail) - 1;
            }
        }
        Ok(v)
    }

    pub(crate) fn words(&self) -> &[u64] {
        &self.words
    }
}

/// Hudi's `SimpleBloomFilter`: a single Hadoop `BloomFilter`.
#[derive(Clone, Debug)]
pub struct SimpleBloomFilter {
    pub(crate) params: HashParams,
    pub(crate) bits: BitVector,
}

impl SimpleBloomFilter {
    /// An empty filter with `nb_hash` hash functions over `vector_size` bits.
    pub(crate) fn with_params(nb_hash: u32, vector_size: u32) -> Self {
        SimpleBloomFilter {
            params: HashParams::new(nb_hash, vector_size),
            bits: BitVector::new(vector_size),
        }
    }

    /// Sets the key's bits.
    pub fn add(&mut self, key: &[u8]) {
        self.add_mixed(&KeyMix::new(key));
    }

    pub(crate) fn add_mixed(&mut self, key: &KeyMix<'_>) {
        let bits = &mut self.bits;
        self.params.for_each_position(key, |p| bits.set(p));
    }

    /// Hadoop `BloomFilter.write`: header + bit vector.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        self.params.header().write(out);
        self.bits.write(self.params.vector_size, out);
    }

    /// Reads one serialized `BloomFilter`; the hash type is returned unchecked in the header.
    pub(crate) fn read_raw(r: &mut Reader<'_>) -> Result<(Header, BitVector)> {
        let header = Header::read(r)?;
        let bits = BitVector::read(r, header.vector_size)?;
        Ok((header, bits))
    }
}
