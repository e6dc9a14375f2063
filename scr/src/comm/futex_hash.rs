//! The process's futex hash, grown for many sleeping threads (the thread
//! communicator's ranks; `thread.rs`).

/// Most futex hash slots [`grow`] asks for (64 bytes each).
const MAX_FUTEX_SLOTS: u64 = 1 << 16;

/// The futex hash slots to ask for so that `ranks` sleeping threads
/// spread to about half a waiter per slot, given the process's `current`
/// slots (0: none of its own yet, or the kernel's global hash); `None`
/// when `current` already has that many (the hash only grows here).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn futex_slots_for(ranks: usize, current: u64) -> Option<u64> {
    let want = (2 * ranks as u64)
        .next_power_of_two()
        .clamp(16, MAX_FUTEX_SLOTS);
    (current < want).then_some(want)
}

/// Since Linux 6.16 a threaded process gets its own futex hash, sized by
/// the online CPUs (16 slots on this 2-core machine), not by its threads.
/// Every futex wake walks its slot's whole list of waiters, so with P rank
/// threads asleep in their parkers each wake-up costs O(P / slots): at
/// 4,096 ranks `futex_wake` was a quarter of all samples in `perf` of the
/// scale benchmark (results/scale.md). P ranks as threads of one process
/// is this communicator's artefact (MPI ranks are processes), so grow the
/// process's hash to about two slots per rank before the ranks start
/// (PR_FUTEX_HASH_SET_SLOTS; it only grows). Best effort: on an older
/// kernel, or one that refuses, the prctl fails and nothing changes but
/// the speed.
#[cfg(target_os = "linux")]
pub(crate) fn grow(ranks: usize) {
    // <linux/prctl.h> (6.16): not in the libc crate yet.
    const PR_FUTEX_HASH: libc::c_int = 78;
    const PR_FUTEX_HASH_SET_SLOTS: libc::c_ulong = 1;
    const PR_FUTEX_HASH_GET_SLOTS: libc::c_ulong = 2;
    // SAFETY: prctl with integer arguments only; no memory is passed.
    let current = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_GET_SLOTS, 0, 0, 0) };
    if current < 0 {
        return;
    }
    if let Some(slots) = futex_slots_for(ranks, current as u64) {
        // SAFETY: as above. The result is ignored: best effort (see above).
        let _ = unsafe { libc::prctl(PR_FUTEX_HASH, PR_FUTEX_HASH_SET_SLOTS, slots, 0, 0) };
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn grow(_ranks: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_two_per_rank_rounded_up_and_only_grow() {
        assert_eq!(futex_slots_for(4096, 16), Some(8192));
        assert_eq!(futex_slots_for(3000, 16), Some(8192));
        assert_eq!(futex_slots_for(256, 0), Some(512));
        // Never fewer than the kernel's smallest private hash.
        assert_eq!(futex_slots_for(2, 0), Some(16));
        // Already large enough (an earlier, larger job): left as it is.
        assert_eq!(futex_slots_for(256, 8192), None);
        assert_eq!(futex_slots_for(256, 512), None);
        // Bounded memory for absurd rank counts.
        assert_eq!(futex_slots_for(1 << 30, 16), Some(MAX_FUTEX_SLOTS));
    }

    /// On a kernel with per-process futex hashes (Linux 6.16+), a job of
    /// 600 thread ranks leaves the process at least 2,048 slots; on an
    /// older kernel the query itself fails and the job still runs.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_large_thread_job_grows_the_process_futex_hash() {
        use crate::comm::thread::ThreadComm;
        let ranks = ThreadComm::run(600, |c| c.rank()).expect("600 ranks");
        assert_eq!(ranks, (0..600).collect::<Vec<_>>());
        // SAFETY: prctl with integer arguments only.
        let slots = unsafe { libc::prctl(78, 2 as libc::c_ulong, 0, 0, 0) };
        if slots >= 0 {
            assert!(slots >= 2048, "futex hash slots {slots}");
        } else {
            assert_eq!(
                std::io::Error::last_os_error().raw_os_error(),
                Some(libc::EINVAL)
            );
        }
    }
}
