//! Hadoop `Writable` framing shared by both filter kinds: big-endian integers and the versioned
//! `Filter` header (HUDI_FORMAT §6.4).

use crate::error::{Error, Result};

/// `Filter.VERSION`: the first int of every filter Hadoop has written since 0.20.
pub(crate) const VERSION: i32 = -1;
/// `Hash.MURMUR_HASH`, the only hash Hudi has ever configured.
pub(crate) const MURMUR_HASH: u8 = 1;
/// `Hash.JENKINS_HASH`, implied by the legacy (unversioned) header.
pub(crate) const JENKINS_HASH: u8 = 0;
/// More hash functions than any Hudi sizing gives: `ceil(ln 2 * bits / entries)` is at most
/// 1075 even for the smallest positive double as the false positive rate.
pub(crate) const MAX_HASH_FUNCTIONS: i32 = 2048;

/// The fields of a Hadoop `Filter` header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Header {
    pub nb_hash: u32,
    pub hash_type: u8,
    pub vector_size: u32,
}

impl Header {
    /// Appends the versioned header: `int -1, int nbHash, byte hashType, int vectorSize`.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&VERSION.to_be_bytes());
        out.extend_from_slice(&(self.nb_hash as i32).to_be_bytes());
        out.push(self.hash_type);
        out.extend_from_slice(&(self.vector_size as i32).to_be_bytes());
    }

    /// Reads a header in either the versioned or the legacy layout (a positive first int is
    /// `nbHash` and the hash is Jenkins). Only the structure is checked here; callers decide
    /// whether the hash type is usable once the whole filter parsed, so that garbage is reported
    /// as corrupt rather than as an unsupported hash.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        let first = r.i32()?;
        let (nb_hash, hash_type) = if first > 0 {
            (first, JENKINS_HASH)
        } else if first == VERSION {
            let nb_hash = r.i32()?;
            let hash_type = r.u8()?;
            if hash_type != MURMUR_HASH && hash_type != JENKINS_HASH {
                return Err(Error::Corrupt(format!(
                    "bloom filter hash type {hash_type} is unknown"
                )));
            }
            (nb_hash, hash_type)
        } else {
            return Err(Error::Corrupt(format!(
                "bloom filter version {first} is unknown"
            )));
        };
        let vector_size = r.i32()?;
        // Hadoop's HashFunction rejects both of these at construction.
        if nb_hash <= 0 {
            return Err(Error::Corrupt(format!(
                "bloom filter has {nb_hash} hash functions"
            )));
        }
        if vector_size <= 0 {
            return Err(Error::Corrupt(format!(
                "bloom filter vector size is {vector_size}"
            )));
        }
        // Every probe hashes the key this many times (and sizes a buffer by it), so an absurd
        // count from damaged bytes would stall or exhaust memory on the first lookup.
        if nb_hash > MAX_HASH_FUNCTIONS {
            return Err(Error::Corrupt(format!(
                "bloom filter has {nb_hash} hash functions (at most {MAX_HASH_FUNCTIONS})"
            )));
        }
        Ok(Header {
            nb_hash: nb_hash as u32,
            hash_type,
            vector_size: vector_size as u32,
        })
    }
}

/// A bounds-checked cursor: every read past the end is `Error::Corrupt`, never a panic.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Reader { bytes, pos: 0 }
    }

    /// Bytes not read yet.
    pub(crate) fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// The next `n` bytes.
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(Error::Corrupt(format!(
                "bloom filter truncated: needs {n} more bytes at offset {}, has {}",
                self.pos,
                self.remaining()
            )));
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8> {
        Ok(self.take(1)?[0])
    }

    pub(crate) fn i32(&mut self) -> Result<i32> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Fails unless every byte was consumed: a footer value is exactly one filter.
    pub(crate) fn finish(&self) -> Result<()> {
        if self.remaining() != 0 {
            return Err(Error::Corrupt(format!(
                "{} trailing bytes after the bloom filter",
                self.remaining()
            )));
        }
        Ok(())
    }
}
