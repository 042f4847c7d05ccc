//! DYNAMIC_V0: Hudi's `HoodieDynamicBoundedBloomFilter`, i.e. `InternalDynamicBloomFilter`, a
//! matrix of equally sized Hadoop bloom filters that grows one row per `nr` keys up to a bound
//! (HUDI_FORMAT §6.4).

use super::codec::{Header, Reader};
use super::murmur::KeyMix;
use super::simple::{BitVector, HashParams, SimpleBloomFilter};
use crate::error::{Error, Result};

/// Hudi's `InternalDynamicBloomFilter`.
#[derive(Clone, Debug)]
pub struct DynamicBloomFilter {
    pub(crate) params: HashParams,
    /// Keys per row before a new row is added (`nr`, Hudi's `numEntries`).
    nr: i32,
    /// Bound on `rows * nr`; 0 when deserialized, because Java does not serialize it either.
    max_nr: i32,
    /// Keys added to the active row; keeps counting in round-robin mode, as Java's does.
    current_nb_record: i32,
    pub(crate) rows: Vec<BitVector>,
    /// Round-robin state after the bound is reached; not serialized (Java's isn't either).
    reached_max: bool,
    cur_matrix_index: usize,
}

impl DynamicBloomFilter {
    /// An empty filter with one row.
    pub(crate) fn with_params(nb_hash: u32, vector_size: u32, nr: i32, max_nr: i32) -> Self {
        DynamicBloomFilter {
            params: HashParams::new(nb_hash, vector_size),
            nr,
            max_nr,
            current_nb_record: 0,
            rows: vec![BitVector::new(vector_size)],
            reached_max: false,
            cur_matrix_index: 0,
        }
    }

    /// Number of rows (Hadoop filters) in the matrix.
    pub fn num_rows(&self) -> usize {
        self.rows.len()
    }

    /// Keys added to the active row (Java's `currentNbRecord`).
    pub fn current_nb_record(&self) -> i32 {
        self.current_nb_record
    }

    /// Sets the key's bits in the active row.
    pub fn add(&mut self, key: &[u8]) {
        self.add_mixed(&KeyMix::new(key));
    }

    /// Reserves the row the next key goes to and counts it, as Java's `add` does before setting
    /// bits; lets a batch add set the bits of many keys afterwards, in lanes.
    pub(crate) fn claim_row(&mut self) -> usize {
        let row = self.active_row();
        self.current_nb_record = self.current_nb_record.wrapping_add(1);
        row
    }

    /// Java's `add`: pick the active row (maybe growing the matrix), set the bits, count.
    pub(crate) fn add_mixed(&mut self, key: &KeyMix<'_>) {
        let row = self.active_row();
        let bits = &mut self.rows[row];
        self.params.for_each_position(key, |p| bits.set(p));
        self.current_nb_record = self.current_nb_record.wrapping_add(1);
    }

    /// Java's `getActiveStandardBF` plus the `addRow` its caller does on `null`. The switch to
    /// round-robin returns row 0 without advancing the index, so row 0 receives the first two keys
    /// after the bound; that quirk is Java's and is kept for identical bits.
    fn active_row(&mut self) -> usize {
        if self.reached_max {
            let row = self.cur_matrix_index % self.rows.len();
            self.cur_matrix_index = self.cur_matrix_index.wrapping_add(1);
            return row;
        }
        if self.current_nb_record >= self.nr {
            let capacity = self.rows.len() as i64 * self.nr as i64;
            if capacity < self.max_nr as i64 {
                self.rows.push(BitVector::new(self.params.vector_size));
                self.current_nb_record = 0;
                return self.rows.len() - 1;
            }
            self.reached_max = true;
            return 0;
        }
        self.rows.len() - 1
    }

    /// `InternalDynamicBloomFilter.write`: own header, `nr`, `currentNbRecord`, row count, rows.
    pub(crate) fn write(&self, out: &mut Vec<u8>) {
        self.params.header().write(out);
        out.extend_from_slice(&self.nr.to_be_bytes());
        out.extend_from_slice(&self.current_nb_record.to_be_bytes());
        out.extend_from_slice(&(self.rows.len() as i32).to_be_bytes());
        for row in &self.rows {
            self.params.header().write(out);
            row.write(self.params.vector_size, out);
        }
    }

    /// `InternalDynamicBloomFilter.readFields`, validated: rows must exist and share the matrix
    /// header (Hudi creates every row from it), since probing hashes a key once for all rows.
    pub(crate) fn read(r: &mut Reader<'_>) -> Result<Self> {
        let header = Header::read(r)?;
        let nr = r.i32()?;
        let current_nb_record = r.i32()?;
        let num_rows = r.i32()?;
        if nr <= 0 {
            return Err(Error::Corrupt(format!(
                "dynamic bloom filter row capacity is {nr}"
            )));
        }
        if current_nb_record < 0 {
            return Err(Error::Corrupt(format!(
                "dynamic bloom filter record count is {current_nb_record}"
            )));
        }
        if num_rows <= 0 {
            return Err(Error::Corrupt(format!(
                "dynamic bloom filter has {num_rows} rows"
            )));
        }
        // Each row takes at least its header and bit vector, so a huge count in a short input is
        // caught before anything is allocated for it.
        let row_bytes = 13 + (header.vector_size as usize).div_ceil(8);
        if (num_rows as usize).saturating_mul(row_bytes) > r.remaining() {
            return Err(Error::Corrupt(format!(
                "dynamic bloom filter truncated: {num_rows} rows of {row_bytes} bytes, {} left",
                r.remaining()
            )));
        }
        let mut rows = Vec::with_capacity(num_rows as usize);
        for i in 0..num_rows {
            let (row_header, bits) = SimpleBloomFilter::read_raw(r)?;
            if row_header != header {
                return Err(Error::Corrupt(format!(
                    "dynamic bloom filter row {i} header {row_header:?} differs from {header:?}"
                )));
            }
            rows.push(bits);
        }
        Ok(DynamicBloomFilter {
            params: HashParams::from_header(&header)?,
            nr,
            max_nr: 0,
            current_nb_record,
            rows,
            reached_max: false,
            cur_matrix_index: 0,
        })
    }
}
