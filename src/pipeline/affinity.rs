//! Where the packer threads run: one per CPU, when asked ([`PipelineOptions::pin_packers`])
//! and when the packers are exactly as many as the CPUs the process may use.
//!
//! The packers sleep and wake several times a millisecond (waiting for planned batches or
//! for room in their queues), and each wake-up lets the kernel place the thread anew. On a
//! 2-core VM it often placed both on one CPU for most of a sweep, with the consumer or the
//! planner alone on the other: `perf sched timehist` of `ctf bench` on the 100 MB seq file
//! showed the two packers' run time on one CPU in the slow runs and on one each in the fast
//! ones, which made the phase after the index bimodal (23–27 or 35–55 ms). Pinned, they stay
//! apart. The index helpers, busy without a pause, stay apart anyway (pinning them changed
//! nothing measurable).
//!
//! Pinning is a choice about the whole machine, so the library leaves it off by default (the
//! `ctf` tool turns it on, as it owns its process). Even when asked, it pins only where that
//! takes no CPU away from the process: when the calling thread may run on exactly as many
//! CPUs as there are packers, packer `i` gets the `i`-th of them. With more CPUs allowed
//! (fewer packers asked for, or a CPU quota of a container without a CPU set), on other
//! systems than Linux, or in loom models, nothing is pinned. Pinning changes only where the
//! packers run, never what they pack.
//!
//! [`PipelineOptions::pin_packers`]: super::engine::PipelineOptions::pin_packers

/// The CPU each of `packers` packer threads should be pinned to (packer `i` to the `i`-th),
/// or `None` when they should not be: see the module documentation.
pub(crate) fn packer_cpus(packers: usize) -> Option<Vec<usize>> {
    one_per_cpu(allowed_cpus()?, packers)
}

/// `allowed` (the CPUs the process may use, in increasing order) when it holds exactly
/// `packers` CPUs, one for each packer, else `None`.
fn one_per_cpu(allowed: Vec<usize>, packers: usize) -> Option<Vec<usize>> {
    (packers > 0 && allowed.len() == packers).then_some(allowed)
}

/// The CPUs the calling thread may run on, in increasing order; `None` where that is not
/// known (or in loom models, whose threads are not the system's).
#[cfg(all(target_os = "linux", not(loom)))]
fn allowed_cpus() -> Option<Vec<usize>> {
    use nix::sched::{sched_getaffinity, CpuSet};
    use nix::unistd::Pid;

    let set = sched_getaffinity(Pid::from_raw(0)).ok()?;
    Some(
        (0..CpuSet::count())
            .filter(|&cpu| set.is_set(cpu).unwrap_or(false))
            .collect(),
    )
}

/// The CPUs the calling thread may run on: not known here.
#[cfg(not(all(target_os = "linux", not(loom))))]
fn allowed_cpus() -> Option<Vec<usize>> {
    None
}

/// Pins the calling thread to CPU `cpu`; whether it is (a thread the system refuses to
/// pin runs where it did).
#[cfg(all(target_os = "linux", not(loom)))]
pub(crate) fn pin_current_thread(cpu: usize) -> bool {
    use nix::sched::{sched_setaffinity, CpuSet};
    use nix::unistd::Pid;

    let mut set = CpuSet::new();
    set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
}

/// Pins the calling thread to CPU `cpu`: not done here.
#[cfg(not(all(target_os = "linux", not(loom))))]
pub(crate) fn pin_current_thread(_cpu: usize) -> bool {
    false
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn packers_get_one_cpu_each_only_when_they_fill_the_allowed_cpus() {
        assert_eq!(one_per_cpu(vec![0, 1], 2), Some(vec![0, 1]));
        assert_eq!(one_per_cpu(vec![2, 5, 7], 3), Some(vec![2, 5, 7]));
        // More CPUs than packers (fewer threads asked for), or fewer: nothing pinned.
        assert_eq!(one_per_cpu(vec![0, 1, 2, 3], 2), None);
        assert_eq!(one_per_cpu(vec![0], 2), None);
        assert_eq!(one_per_cpu(vec![], 0), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_may_run_on_its_cpu_only() {
        let allowed = allowed_cpus().expect("Linux tells the allowed CPUs");
        let last = *allowed.last().unwrap();
        // On a thread of its own, so that the test's thread keeps its CPUs.
        let after = std::thread::spawn(move || (pin_current_thread(last), allowed_cpus()))
            .join()
            .unwrap();
        assert_eq!(after, (true, Some(vec![last])));
        assert_eq!(
            allowed_cpus(),
            Some(allowed),
            "the other threads keep theirs"
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn as_many_packers_as_allowed_cpus_are_pinned_to_them() {
        let allowed = allowed_cpus().unwrap();
        assert_eq!(packer_cpus(allowed.len()), Some(allowed.clone()));
        assert_eq!(packer_cpus(allowed.len() + 1), None);
    }
}
