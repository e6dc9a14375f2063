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
    let copied = copy_all(&list, CRC, Some(throttle), None, || Ok(())).unwrap();
    assert_eq!(copied.len(), 2);
    let took = clock.elapsed(t0);
    assert!(
        took.abs_diff(Duration::from_secs(6)) < Duration::from_millis(1),
        "{took:?}"
    );
    // Without a throttle the clock is not consulted at all.
    let t1 = clock.now();
    copy_all(&list, CRC, None, None, || Ok(())).unwrap();
    assert_eq!(clock.elapsed(t1), Duration::ZERO);
}
