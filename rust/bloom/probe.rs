//! Membership kernels shared by both filter kinds.
//!
//! A filter is a list of rows with one set of hash parameters (SIMPLE has one row). A key is in
//! the filter when all its positions are set in at least one row. Positions form a dependent chain
//! (each hash seeds the next, ~45 cycles of multiply latency per hash), so one key's probe cannot
//! be parallelised. The batch kernel instead runs `LANES` keys in lock-step, structure-of-arrays,
//! so that each murmur step is one vector instruction over all lanes; a lane that finishes (first
//! position unset in every row, or all positions set) is refilled with the next key at once.

use super::murmur::{mix_chunk, position, tail_xor, KeyMix};
use super::simple::{BitVector, HashParams};

/// Murmur multiplication constant (repeated here so the lane loop inlines fully).
const M: u32 = 0x5bd1_e995;

/// Single-key membership: positions are computed lazily and at most once, shared by all rows.
pub(crate) fn contains(
    params: &HashParams,
    rows: &[BitVector],
    key: &KeyMix<'_>,
    positions: &mut Vec<u32>,
) -> bool {
    positions.clear();
    let mut seed = 0u32;
    for row in rows {
        let mut j = 0usize;
        loop {
            if j == params.nb_hash as usize {
                return true;
            }
            if j == positions.len() {
                seed = key.hash(seed);
                positions.push(position(seed, &params.modulus));
            }
            if !row.get(positions[j]) {
                break;
            }
            j += 1;
        }
    }
    false
}

/// Keys probed in lock-step: four AVX-512 (eight AVX2) registers of u32 per murmur step, enough
/// independent work to hide the multiply latency and to keep many bit reads in flight.
const LANES: usize = 64;
/// Longest key (in 4-byte chunks) the lane kernel takes; longer keys use the single-key path.
const MAX_CHUNKS: usize = 32;
/// Lane state marking "no key" (input exhausted).
const IDLE: usize = usize::MAX;

/// Structure-of-arrays state of the lanes; every `[_; LANES]` loop below auto-vectorizes.
struct Lanes {
    idx: [usize; LANES],
    seed: [u32; LANES],
    len: [u32; LANES],
    tail: [u32; LANES],
    /// `u32::MAX` when the key has 1..3 tail bytes, else 0.
    tail_mask: [u32; LANES],
    n_chunks: [u32; LANES],
    /// `chunks[c][l]`: mixed chunk `c` of lane `l`'s key.
    chunks: [[u32; LANES]; MAX_CHUNKS],
    /// Position hashed last round, tested this round.
    pos: [u32; LANES],
    /// Hashes still to test before the key counts as present.
    left: [u32; LANES],
    /// Bit r set while row r may still contain the key.
    alive: [u32; LANES],
}

/// Probes `n` keys (`key(i)` is `None` for a null) and returns the result bits, LSB-first in u64
/// words (null keys give 0; the caller carries the input's validity).
pub(crate) fn contains_batch<'k>(
    params: &HashParams,
    rows: &[BitVector],
    n: usize,
    key: impl Fn(usize) -> Option<&'k [u8]>,
) -> Vec<u64> {
    if rows.len() > 32 {
        // Lane masks are u32; matrices this large are not written by Hudi (they would need
        // maxEntries > 32 * numEntries), so they take the one-key-at-a-time path.
        let mut out = vec![0u64; n.div_ceil(64)];
        let mut positions = Vec::with_capacity(params.nb_hash as usize);
        let mut scratch = Vec::new();
        for i in 0..n {
            if let Some(k) = key(i) {
                if contains(
                    params,
                    rows,
                    &KeyMix::with_scratch(k, &mut scratch),
                    &mut positions,
                ) {
                    out[i >> 6] |= 1u64 << (i & 63);
                }
            }
        }
        return out;
    }
    #[cfg(target_arch = "x86_64")]
    {
        // AVX-512 gains under 10% over AVX2 here and its target features need Rust 1.89, above
        // the crate's MSRV.
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports the feature the function is compiled for (checked above).
            return unsafe { lanes_avx2(params, rows, n, &key) };
        }
    }
    lanes_kernel(params, rows, n, &key)
}

/// The lane kernel compiled for AVX2 (x86-64-v3).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn lanes_avx2<'k>(
    params: &HashParams,
    rows: &[BitVector],
    n: usize,
    key: &impl Fn(usize) -> Option<&'k [u8]>,
) -> Vec<u64> {
    lanes_kernel(params, rows, n, key)
}

/// The lane kernel; `#[inline(always)]` so each `target_feature` wrapper gets its own
/// vectorization of it.
// Lane loops index several SoA arrays by the same lane; that form is what LLVM vectorizes.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn lanes_kernel<'k>(
    params: &HashParams,
    rows: &[BitVector],
    n: usize,
    key: &impl Fn(usize) -> Option<&'k [u8]>,
) -> Vec<u64> {
    let mut out = vec![0u64; n.div_ceil(64)];
    let mut positions = Vec::with_capacity(params.nb_hash as usize);
    let mut scratch = Vec::new();
    let words: Vec<&[u64]> = rows.iter().map(|r| r.words()).collect();
    let all_rows: u32 = if rows.len() == 32 {
        u32::MAX
    } else {
        (1u32 << rows.len()) - 1
    };
    let d = params.vector_size;
    let m = barrett_factor(d);

    let mut st = Box::new(Lanes {
        idx: [IDLE; LANES],
        seed: [0; LANES],
        len: [0; LANES],
        tail: [0; LANES],
        tail_mask: [0; LANES],
        n_chunks: [0; LANES],
        chunks: [[0; LANES]; MAX_CHUNKS],
        pos: [0; LANES],
        left: [u32::MAX; LANES],
        alive: [0; LANES],
    });
    let mut next = 0usize;
    let mut active = LANES;

    // Loads the next probe-able key into lane `l` (nulls skipped, over-long keys resolved by the
    // single-key path); an exhausted input leaves the lane idle.
    let mut refill = |st: &mut Lanes, l: usize, out: &mut [u64]| -> bool {
        while next < n {
            let i = next;
            next += 1;
            let Some(k) = key(i) else { continue };
            let whole = k.len() & !3;
            if whole / 4 > MAX_CHUNKS {
                if contains(
                    params,
                    rows,
                    &KeyMix::with_scratch(k, &mut scratch),
                    &mut positions,
                ) {
                    out[i >> 6] |= 1u64 << (i & 63);
                }
                continue;
            }
            // Mixed straight into the lane's column: no per-key scratch copy.
            for (c, b) in k[..whole].chunks_exact(4).enumerate() {
                st.chunks[c][l] = mix_chunk([b[0], b[1], b[2], b[3]]);
            }
            st.idx[l] = i;
            st.seed[l] = 0;
            st.len[l] = k.len() as u32;
            st.tail[l] = tail_xor(&k[whole..]);
            st.tail_mask[l] = if whole != k.len() { u32::MAX } else { 0 };
            st.n_chunks[l] = (whole / 4) as u32;
            st.left[l] = params.nb_hash;
            st.alive[l] = all_rows;
            return true;
        }
        st.idx[l] = IDLE;
        st.n_chunks[l] = 0;
        st.alive[l] = 0;
        st.left[l] = u32::MAX;
        false
    };
    for l in 0..LANES {
        if !refill(&mut st, l, &mut out) {
            active -= 1;
        }
    }

    hash_round(&mut st, d, m);

    while active > 0 {
        // 1. Test last round's positions: clear the rows whose bit is unset. Row by row over all
        //    lanes, so that the reads become vector gathers.
        let mut hit = [0u32; LANES];
        for (r, row) in words.iter().enumerate() {
            let last = row.len() - 1;
            for l in 0..LANES {
                let p = st.pos[l];
                // pos < vectorSize, so the clamp never changes the index; it lets the compiler
                // drop the bounds check, which would block the gather.
                let v = row[((p >> 6) as usize).min(last)];
                hit[l] |= (((v >> (p & 63)) & 1) as u32) << r;
            }
        }
        for l in 0..LANES {
            st.alive[l] &= hit[l];
            st.left[l] = st.left[l].wrapping_sub(1);
        }
        // 2. Retire finished lanes (no row left, or every position set) and refill them.
        let mut finished = 0u64;
        for l in 0..LANES {
            finished |= ((st.alive[l] == 0 || st.left[l] == 0) as u64) << l;
        }
        while finished != 0 {
            let l = finished.trailing_zeros() as usize;
            finished &= finished - 1;
            let i = st.idx[l];
            if i == IDLE {
                continue;
            }
            if st.alive[l] != 0 {
                out[i >> 6] |= 1u64 << (i & 63);
            }
            if !refill(&mut st, l, &mut out) {
                active -= 1;
            }
        }
        // 3. Next positions, for every lane including the refilled ones.
        hash_round(&mut st, d, m);
    }
    out
}

/// Hashes the next position of every lane in lock-step. A function rather than a closure: it must
/// inline into the `target_feature` callers to be compiled (and vectorized) with them.
#[allow(clippy::needless_range_loop)] // see `lanes_kernel`
#[inline(always)]
fn hash_round(st: &mut Lanes, d: u32, m: u32) {
    let max_chunks = st.n_chunks.iter().copied().max().unwrap_or(0) as usize;
    let mut h = [0u32; LANES];
    for l in 0..LANES {
        h[l] = st.seed[l] ^ st.len[l];
    }
    for c in 0..max_chunks {
        let ks = &st.chunks[c];
        for l in 0..LANES {
            let stepped = h[l].wrapping_mul(M) ^ ks[l];
            h[l] = if (c as u32) < st.n_chunks[l] {
                stepped
            } else {
                h[l]
            };
        }
    }
    for l in 0..LANES {
        let tailed = (h[l] ^ st.tail[l]).wrapping_mul(M);
        let mut x = (tailed & st.tail_mask[l]) | (h[l] & !st.tail_mask[l]);
        x ^= x >> 13;
        x = x.wrapping_mul(M);
        x ^= x >> 15;
        st.seed[l] = x;
        st.pos[l] = barrett_rem(x, d, m);
    }
}

/// `floor(2^32 / d)`, capped to u32 (only `d == 1` hits the cap, and stays exact below).
fn barrett_factor(d: u32) -> u32 {
    ((1u64 << 32) / d as u64).min(u32::MAX as u64) as u32
}

/// Java's `Math.abs(h % d)` for the Hadoop position, as `|h| mod d` by Barrett reduction with
/// only u32 x u32 -> u64 multiplies, which vectorize (`FastMod` needs a 128-bit product).
/// With `m = floor(2^32/d)` the quotient estimate is `q` or `q - 1`, so one correction suffices.
#[inline(always)]
fn barrett_rem(h: u32, d: u32, m: u32) -> u32 {
    let a = (h as i32).unsigned_abs();
    let q = ((a as u64 * m as u64) >> 32) as u32;
    let r = a.wrapping_sub(q.wrapping_mul(d));
    if r >= d {
        r - d
    } else {
        r
    }
}

/// Keys hashed in lock-step by the batch add: eight AVX2 registers of u32 per murmur step, so the
/// multiply latency of one key's dependent chain is hidden behind the other lanes.
const ADD_LANES: usize = 64;

/// Sets the bits of `keys[i]` in `rows[row_of[i]]` for every key (same bits as adding them one by
/// one: bits only ever get set, so the order does not matter).
pub(crate) fn add_batch(
    params: &HashParams,
    rows: &mut [BitVector],
    keys: &[&[u8]],
    row_of: &[usize],
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports the feature the function is compiled for (checked above).
            return unsafe { add_avx2(params, rows, keys, row_of) };
        }
    }
    add_kernel(params, rows, keys, row_of)
}

/// The add kernel compiled for AVX2 (x86-64-v3).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn add_avx2(params: &HashParams, rows: &mut [BitVector], keys: &[&[u8]], row_of: &[usize]) {
    add_kernel(params, rows, keys, row_of)
}

/// Structure-of-arrays state of the add lanes.
struct AddLanes {
    /// `chunks[c][l]`: mixed chunk `c` of lane `l`'s key.
    chunks: [[u32; ADD_LANES]; MAX_CHUNKS],
    n_chunks: [u32; ADD_LANES],
    len: [u32; ADD_LANES],
    tail: [u32; ADD_LANES],
    /// `u32::MAX` when the key has 1..3 tail bytes, else 0.
    tail_mask: [u32; ADD_LANES],
    row: [usize; ADD_LANES],
}

// Lane loops index several SoA arrays by the same lane; that form is what LLVM vectorizes.
#[allow(clippy::needless_range_loop)]
#[inline(always)]
fn add_kernel(params: &HashParams, rows: &mut [BitVector], keys: &[&[u8]], row_of: &[usize]) {
    let d = params.vector_size;
    let m = barrett_factor(d);
    let mut st = Box::new(AddLanes {
        chunks: [[0; ADD_LANES]; MAX_CHUNKS],
        n_chunks: [0; ADD_LANES],
        len: [0; ADD_LANES],
        tail: [0; ADD_LANES],
        tail_mask: [0; ADD_LANES],
        row: [0; ADD_LANES],
    });
    let mut i = 0usize;
    while i < keys.len() {
        // Fill the lanes; keys too long for them take the one-key path at once.
        let mut lanes = 0usize;
        while lanes < ADD_LANES && i < keys.len() {
            let (k, row) = (keys[i], row_of[i]);
            i += 1;
            let whole = k.len() & !3;
            if whole / 4 > MAX_CHUNKS {
                let bits = &mut rows[row];
                params.for_each_position(&KeyMix::new(k), |p| bits.set(p));
                continue;
            }
            for (c, b) in k[..whole].chunks_exact(4).enumerate() {
                st.chunks[c][lanes] = mix_chunk([b[0], b[1], b[2], b[3]]);
            }
            st.n_chunks[lanes] = (whole / 4) as u32;
            st.len[lanes] = k.len() as u32;
            st.tail[lanes] = tail_xor(&k[whole..]);
            st.tail_mask[lanes] = if whole != k.len() { u32::MAX } else { 0 };
            st.row[lanes] = row;
            lanes += 1;
        }
        if lanes == 0 {
            continue;
        }
        let max_chunks = st.n_chunks[..lanes].iter().copied().max().unwrap_or(0);
        // Unused lanes hash garbage that is never stored; giving them the longest length keeps
        // the rounds short and, for keys of one length (UUIDs), free of per-chunk lane masks.
        for l in lanes..ADD_LANES {
            st.n_chunks[l] = max_chunks;
        }
        let uniform = st.n_chunks.iter().all(|&n| n == max_chunks);
        let max_chunks = max_chunks as usize;
        // A dynamic filter fills one row at a time, so a block's keys nearly always share it.
        let one_row = st.row[..lanes]
            .iter()
            .all(|&r| r == st.row[0])
            .then_some(st.row[0]);
        let mut seed = [0u32; ADD_LANES];
        let mut pos = [0u32; ADD_LANES];
        for _ in 0..params.nb_hash {
            if uniform {
                add_round::<true>(&st, &mut seed, &mut pos, max_chunks, d, m);
            } else {
                add_round::<false>(&st, &mut seed, &mut pos, max_chunks, d, m);
            }
            match one_row {
                Some(r) => {
                    let bits = &mut rows[r];
                    for &p in &pos[..lanes] {
                        bits.set(p);
                    }
                }
                None => {
                    for l in 0..lanes {
                        rows[st.row[l]].set(pos[l]);
                    }
                }
            }
        }
    }
}

/// The next position of every add lane: `seed` holds each lane's previous hash (0 at first).
/// `UNIFORM`: every lane's key has `max_chunks` whole chunks.
#[allow(clippy::needless_range_loop)] // see `add_kernel`
#[inline(always)]
fn add_round<const UNIFORM: bool>(
    st: &AddLanes,
    seed: &mut [u32; ADD_LANES],
    pos: &mut [u32; ADD_LANES],
    max_chunks: usize,
    d: u32,
    m: u32,
) {
    let mut h = [0u32; ADD_LANES];
    for l in 0..ADD_LANES {
        h[l] = seed[l] ^ st.len[l];
    }
    for c in 0..max_chunks {
        let ks = &st.chunks[c];
        for l in 0..ADD_LANES {
            let stepped = h[l].wrapping_mul(M) ^ ks[l];
            h[l] = if UNIFORM || (c as u32) < st.n_chunks[l] {
                stepped
            } else {
                h[l]
            };
        }
    }
    for l in 0..ADD_LANES {
        let tailed = (h[l] ^ st.tail[l]).wrapping_mul(M);
        let mut x = (tailed & st.tail_mask[l]) | (h[l] & !st.tail_mask[l]);
        x ^= x >> 13;
        x = x.wrapping_mul(M);
        x ^= x >> 15;
        seed[l] = x;
        pos[l] = barrett_rem(x, d, m);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every compiled variant of the lane kernel gives the single-key answers.
    #[test]
    fn kernel_variants_agree() {
        let mut f = super::super::BloomFilter::dynamic_v0(300, 0.02, 900).unwrap();
        let keys: Vec<String> = (0..3000)
            .map(|i| format!("key-{}-{}", i * 7919 % 1000, "x".repeat(i % 9)))
            .collect();
        for k in keys.iter().step_by(3) {
            f.add(k.as_bytes());
        }
        let (params, rows) = f.parts();
        assert_eq!(rows.len(), 3);
        let key = |i: usize| (i % 97 != 5).then(|| keys[i].as_bytes());
        let mut positions = Vec::new();
        let expected: Vec<bool> = (0..keys.len())
            .map(|i| {
                key(i).is_some_and(|k| contains(params, rows, &KeyMix::new(k), &mut positions))
            })
            .collect();
        assert!(expected.iter().filter(|&&b| b).count() > 900);
        let bits = |out: Vec<u64>| -> Vec<bool> {
            (0..keys.len())
                .map(|i| out[i >> 6] >> (i & 63) & 1 == 1)
                .collect()
        };
        assert_eq!(bits(lanes_kernel(params, rows, keys.len(), &key)), expected);
        #[cfg(target_arch = "x86_64")]
        {
            if std::arch::is_x86_feature_detected!("avx2") {
                // SAFETY: feature checked.
                assert_eq!(
                    bits(unsafe { lanes_avx2(params, rows, keys.len(), &key) }),
                    expected
                );
            }
        }
    }

    #[test]
    fn barrett_rem_is_abs_of_java_remainder() {
        let divisors = [1u32, 2, 3, 7, 20, 64, 2_587_966, 0x7fff_fffe, 0x7fff_ffff];
        let mut x = 0x2545_f491u32;
        let check = |h: u32| {
            for &d in &divisors {
                let expected = ((h as i32 as i64) % d as i64).unsigned_abs() as u32;
                assert_eq!(
                    barrett_rem(h, d, barrett_factor(d)),
                    expected,
                    "h={h} d={d}"
                );
            }
        };
        for h in [
            0u32,
            1,
            u32::MAX,
            1 << 31,
            (1 << 31) - 1,
            (1 << 31) + 1,
            2_587_966,
            2_587_965,
        ] {
            check(h);
        }
        for _ in 0..100_000 {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            check(x);
        }
    }
}
