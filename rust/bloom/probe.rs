//! Membership kernels shared by both filter kinds.
//!
//! A filter is a list of rows with one set of hash parameters (SIMPLE has one row). A key is in
//! the filter when all its positions are set in at least one row. Positions form a dependent chain
//! (each hash seeds the next), so one key's probe cannot be parallelised; the batch kernel instead
//! interleaves several keys ("lanes") so that the CPU overlaps their independent multiply chains,
//! and every lane stops at the first position that is unset in all rows.

use super::murmur::{finalize, position, KeyMix};
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

/// Keys probed concurrently by the batch kernel. Eight independent chains of ~45 cycles each are
/// enough to keep the multiplier busy without spilling lane state out of L1.
const LANES: usize = 8;
/// Longest key (in 4-byte chunks) the lane kernel caches; longer keys take the single-key path.
const MAX_CHUNKS: usize = 64;

#[derive(Clone, Copy, Default)]
struct Lane {
    /// Row of the input being probed; `usize::MAX` when the lane is idle.
    idx: usize,
    seed: u32,
    /// Position hashed in the previous round, whose words were prefetched then.
    pos: u32,
    /// Hashes still to compute before the key counts as present.
    left: u32,
    /// Bit r set while row r may still contain the key.
    alive: u64,
    n_chunks: usize,
    len: u32,
    tail: u32,
    has_tail: bool,
}

/// Probes `n` keys (`key(i)` is `None` for a null) and returns the result bits, LSB-first in u64
/// words (null keys give 0; the caller carries the input's validity).
pub(crate) fn contains_batch<'k>(
    params: &HashParams,
    rows: &[BitVector],
    n: usize,
    key: impl Fn(usize) -> Option<&'k [u8]>,
) -> Vec<u64> {
    let mut out = vec![0u64; n.div_ceil(64)];
    let mut set = |i: usize| out[i >> 6] |= 1u64 << (i & 63);
    let mut positions = Vec::with_capacity(params.nb_hash as usize);
    let mut scratch = Vec::new();

    if rows.len() > 64 || params.nb_hash == 0 {
        // The lane kernel tracks rows in a u64 mask; matrices this large are not written by Hudi
        // (it would need maxEntries > 64 * numEntries), so they take the plain path.
        for i in 0..n {
            if let Some(k) = key(i) {
                if contains(
                    params,
                    rows,
                    &KeyMix::with_scratch(k, &mut scratch),
                    &mut positions,
                ) {
                    set(i);
                }
            }
        }
        return out;
    }

    let n_rows = rows.len();
    let all_rows: u64 = if n_rows == 64 {
        u64::MAX
    } else {
        (1u64 << n_rows) - 1
    };
    let words: Vec<&[u64]> = rows.iter().map(|r| r.words()).collect();
    // An idle lane computes a throw-away hash of the empty key rather than branching around it.
    let idle = Lane {
        idx: usize::MAX,
        left: u32::MAX,
        ..Lane::default()
    };
    let mut lanes = [idle; LANES];
    let mut chunks = vec![[0u32; MAX_CHUNKS]; LANES];
    let mut next = 0usize;

    // Loads the next probe-able key into a lane and hashes its first position, resolving nulls
    // and over-long keys inline.
    let mut refill =
        |lane: &mut Lane, chunk: &mut [u32; MAX_CHUNKS], set: &mut dyn FnMut(usize)| {
            while next < n {
                let i = next;
                next += 1;
                let Some(k) = key(i) else { continue };
                let whole = k.len() & !3;
                let mix = KeyMix::with_scratch(k, &mut scratch);
                if whole / 4 > MAX_CHUNKS {
                    if contains(params, rows, &mix, &mut positions) {
                        set(i);
                    }
                    continue;
                }
                chunk[..whole / 4].copy_from_slice(mix.mixed_chunks());
                *lane = Lane {
                    idx: i,
                    seed: 0,
                    pos: 0,
                    left: params.nb_hash,
                    alive: all_rows,
                    n_chunks: whole / 4,
                    len: k.len() as u32,
                    tail: mix.tail(),
                    has_tail: whole != k.len(),
                };
                advance(lane, chunk, params, &words);
                return true;
            }
            *lane = idle;
            false
        };

    let mut active = 0;
    for (lane, chunk) in lanes.iter_mut().zip(chunks.iter_mut()) {
        active += refill(lane, chunk, &mut set) as usize;
    }
    while active > 0 {
        // Phase 1, branch-free per lane: test the position hashed (and prefetched) one round
        // ago, then hash the next one. Whether a lane finished depends on a just-loaded bit that
        // no predictor can guess; branching on it here would flush the other lanes' in-flight
        // multiply chains on every miss. Testing a round late hides the cache miss of a random
        // bit in a 300 KiB row behind the other lanes' hashing.
        for (lane, chunk) in lanes.iter_mut().zip(chunks.iter()) {
            let (w, b) = ((lane.pos >> 6) as usize, lane.pos & 63);
            let mut alive = lane.alive;
            for (r, row) in words.iter().enumerate() {
                alive &= !((((row[w] >> b) & 1) ^ 1) << r);
            }
            lane.alive = alive;
            lane.left = lane.left.wrapping_sub(1);
            advance(lane, chunk, params, &words);
        }
        // Phase 2: retire finished lanes and refill them.
        for (lane, chunk) in lanes.iter_mut().zip(chunks.iter_mut()) {
            if lane.idx != usize::MAX && (lane.alive == 0 || lane.left == 0) {
                if lane.alive != 0 {
                    set(lane.idx);
                }
                if !refill(lane, chunk, &mut set) {
                    active -= 1;
                }
            }
        }
    }
    out
}

/// Hashes the lane's next position and prefetches its word in every row.
#[inline(always)]
fn advance(lane: &mut Lane, chunk: &[u32; MAX_CHUNKS], params: &HashParams, words: &[&[u64]]) {
    let mut h = lane.seed ^ lane.len;
    for &k in &chunk[..lane.n_chunks] {
        h = h.wrapping_mul(M) ^ k;
    }
    if lane.has_tail {
        h = (h ^ lane.tail).wrapping_mul(M);
    }
    h = finalize(h);
    lane.seed = h;
    lane.pos = position(h, &params.modulus);
    let w = (lane.pos >> 6) as usize;
    for row in words {
        prefetch(&row[w]);
    }
}

/// Hints the CPU to pull `word` into L1; a no-op where no hint is wired up.
#[inline(always)]
fn prefetch(word: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults or dereferences; the pointer comes from a live reference.
    #[allow(unused_unsafe)]
    unsafe {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((word as *const u64).cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = word;
}
