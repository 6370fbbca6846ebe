//! The CPUs the test process may use, for the tests of packer pinning (which pins only when
//! the packers are exactly as many).

/// How many CPUs this process may use (its affinity mask), where the system tells them.
pub fn allowed_cpus() -> Option<usize> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{sched_getaffinity, CpuSet};
        let set = sched_getaffinity(nix::unistd::Pid::from_raw(0)).ok()?;
        Some(
            (0..CpuSet::count())
                .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
                .count(),
        )
    }
    #[cfg(not(target_os = "linux"))]
    None
}
