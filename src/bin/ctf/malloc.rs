//! The `ctf` process's allocator settings, made once at startup before any thread starts.
//!
//! A cold start parses the corpus on every core into buffers that live until the sweep has
//! packed them, a few hundred kilobytes to a few megabytes each. glibc's defaults serve each
//! of those over 128 KiB with its own `mmap` (the threshold only rises once such a block is
//! freed, and none is until the end), and grow its per-thread heaps 128 KiB at a time: on
//! 100 MB of gen_ctf.py's sparse shape, 231 `mmap`, 444 `mprotect` and 19 `mremap` calls,
//! each a system call that changes the address space under its lock while the other parsing
//! threads fault their fresh pages in. Serving blocks below 4 MiB from the heaps and growing
//! them 4 MiB at a time leaves 35 `mmap` calls and no `mremap`, and shortens the index
//! phase (README "Performance"). 4 MiB rather than more: the heaps keep up to the pad of
//! freed memory resident, and with 32 MiB a bounded window over a 2 GB corpus peaked about
//! 30 MiB higher.
//!
//! The library never changes a host's allocator; a host that wants the same can set
//! `GLIBC_TUNABLES=glibc.malloc.top_pad=4194304:glibc.malloc.mmap_threshold=4194304`, and a
//! `ctf` run with glibc malloc tunables of its own keeps them.

/// Bytes of both settings: the heaps' growth step and the smallest block given its own
/// mapping.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const STEP_BYTES: libc::c_int = 4 << 20;

/// Applies the settings, unless `tunables` (the `GLIBC_TUNABLES` variable) already sets
/// glibc's malloc parameters. Whether it applied them.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn tune(tunables: Option<&std::ffi::OsStr>) -> bool {
    if tunables.is_some_and(|t| t.to_string_lossy().contains("glibc.malloc.")) {
        return false;
    }
    // SAFETY: `mallopt` only stores allocator parameters, takes no pointers, and is safe to
    // call at any time; it runs here before the process starts a thread.
    unsafe {
        libc::mallopt(libc::M_TOP_PAD, STEP_BYTES) == 1
            && libc::mallopt(libc::M_MMAP_THRESHOLD, STEP_BYTES) == 1
    }
}

/// Other platforms' allocators keep their defaults.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn tune(_tunables: Option<&std::ffi::OsStr>) -> bool {
    false
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
mod tests {
    use super::*;

    /// glibc puts the block of a chunk it maps on its own 16 bytes into a page: 1 MiB blocks
    /// from the heap follow each other at 1 MiB + 16 bytes instead.
    fn mapped_alone(block: &[u8]) -> bool {
        block.as_ptr() as usize % 4096 == 16
    }

    #[test]
    fn blocks_below_the_step_come_from_the_heap_once_tuned() {
        assert!(!tune(Some("glibc.malloc.arena_max=2".as_ref())));
        assert!(tune(None));
        let blocks: Vec<Vec<u8>> = (0..8).map(|_| Vec::with_capacity(1 << 20)).collect();
        assert!(
            !blocks.iter().all(|b| mapped_alone(b)),
            "every 1 MiB block was mapped on its own"
        );
        // The variable's other settings do not stop it.
        assert!(tune(Some("glibc.rtld.optional_static_tls=512".as_ref())));
    }
}
