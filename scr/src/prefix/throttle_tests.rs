//! The background flush's bandwidth throttle (SCR_FLUSH_ASYNC_BW) paced on
//! a manual clock: the copy "sleeps" by advancing it, so the pace is exact
//! and the test takes no time.

use std::time::Duration;

use super::*;
use crate::clock::{Clock, ManualClock, SharedClock};

const CRC: CopyChecks = CopyChecks {
    crc: true,
    read_back: false,
    attrs: false,
    buf_bytes: 0,
};

pub(super) fn items(dir: &Path, sizes: &[usize]) -> Vec<CopyItem> {
    sizes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let src = dir.join(format!("src{i}"));
            fs::write(&src, vec![i as u8; *n]).unwrap();
            CopyItem {
                src,
                dst: dir.join("out").join(format!("dst{i}")),
                rel: format!("dst{i}"),
                size: Some(*n as u64),
                crc: None,
                attrs: None,
                packing: None,
                within: None,
            }
        })
        .collect()
}

#[test]
fn the_flush_bandwidth_paces_the_copy_by_the_clock() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::at_unix_s(1_000);
    let shared: SharedClock = clock.clone();
    let t0 = clock.now();
    // 1.5 MiB at 256 KiB/s: the copy must take 6 s of the clock's time.
    let list = items(tmp.path(), &[1 << 20, 1 << 19]);
    let throttle = Throttle {
        bw: Some(f64::from(256u32 << 10)),
        percent: 0.0,
        clock: shared,
    };
    let copied = copy_all(&list, CRC, Some(throttle), None, 1, || Ok(())).unwrap();
    assert_eq!(copied.len(), 2);
    let took = clock.elapsed(t0);
    assert!(
        took.abs_diff(Duration::from_secs(6)) < Duration::from_millis(1),
        "{took:?}"
    );
    // Without a throttle the clock is not consulted at all.
    let t1 = clock.now();
    copy_all(&list, CRC, None, None, 1, || Ok(())).unwrap();
    assert_eq!(clock.elapsed(t1), Duration::ZERO);
}

// SCR_FLUSH_ASYNC_PERCENT: a background copy that was busy for `b` sleeps
// `b * (100 / percent - 1)` after it, so it holds `percent` of one CPU.
// 0 and 100 mean no limit.
#[test]
fn the_async_percent_sleeps_in_proportion_to_the_busy_time() {
    let clock = ManualClock::at_unix_s(1_000);
    let shared: SharedClock = clock.clone();
    for (percent, want_ms) in [(25.0, 3_000), (50.0, 1_000), (100.0, 0), (0.0, 0)] {
        let th = Throttle {
            bw: None,
            percent,
            clock: shared.clone(),
        };
        let mut pace = Pace::new(&shared);
        let t0 = clock.now();
        pace.after(&th, 1 << 20, Duration::from_secs(1));
        assert_eq!(
            clock.elapsed(t0),
            Duration::from_millis(want_ms),
            "SCR_FLUSH_ASYNC_PERCENT={percent}"
        );
    }
}

// SCR_FLUSH_WIDTH and SCR_FETCH_WIDTH: `windowed` lets at most `width`
// ranks copy at once, and with a width as large as the job all may.
#[test]
fn the_flush_and_fetch_width_bound_the_ranks_copying_at_once() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    for (width, ranks) in [(1usize, 6usize), (2, 6), (3, 7), (8, 8)] {
        let inside = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        crate::comm::thread::ThreadComm::run(ranks, |c| {
            windowed(c, width, || {
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                std::thread::sleep(Duration::from_millis(20));
                inside.fetch_sub(1, Ordering::SeqCst);
            })
            .unwrap();
        })
        .unwrap();
        let most = most.load(Ordering::SeqCst);
        assert!(most <= width, "width {width}: {most} ranks copied at once");
        assert!(most >= 1);
    }
}
