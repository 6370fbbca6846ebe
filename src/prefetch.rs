//! Software prefetch hints, for the loops whose next memory reads are known ahead but would
//! otherwise wait on each other: the packers' gathers of sequences drawn at random
//! (module `minibatch`) and the sweep order's swaps with positions drawn at random
//! (module `randomize`).

/// Starts bringing the cache line of `item` in on x86-64, without waiting for it; nothing
/// elsewhere. A hint ahead of reads to come: several in flight at once overlap their cache
/// misses.
#[inline(always)]
pub(crate) fn prefetch_hint<E>(item: &E) {
    #[cfg(all(target_arch = "x86_64", target_feature = "sse"))]
    safe_arch::prefetch_t0(item);
    #[cfg(not(all(target_arch = "x86_64", target_feature = "sse")))]
    let _ = item;
}
