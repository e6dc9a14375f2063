//! Probe for `ci/tests.d/fault-points-free.sh`: one loop with an injection
//! point and the same loop without, so the script can check that without the
//! `fault-injection` feature the point leaves no string, no symbol and no
//! instruction behind, and that with it every action really happens.
//!
//! Usage: `fault_point_probe [ITERATIONS] [SLEEP_BEFORE_MS] [SLEEP_AFTER_MS]`.
//! Exit codes: 0 when every iteration ran, 3 when the point returned an
//! injected error (printed), 2 on bad arguments.

use std::hint::black_box;
use std::time::Duration;

/// XOR a constant into `data`, reaching the point `probe.xor.chunk` once per element.
#[inline(never)]
#[no_mangle]
pub fn probe_with_point(data: &mut [u64]) -> i32 {
    for (i, x) in data.iter_mut().enumerate() {
        if let Err(e) = scr::fault_point!("probe.xor.chunk", rank = i as u32 % 4) {
            eprintln!("fault_point_probe: {e}");
            return -1;
        }
        *x ^= 0x5a5a_5a5a_5a5a_5a5a;
    }
    0
}

/// The same loop without the point: with the feature off both compile to
/// the same instructions.
#[inline(never)]
#[no_mangle]
pub fn probe_without_point(data: &mut [u64]) -> i32 {
    for x in data.iter_mut() {
        *x ^= 0x5a5a_5a5a_5a5a_5a5a;
    }
    0
}

fn arg(args: &[String], i: usize, default: u64) -> Option<u64> {
    match args.get(i) {
        None => Some(default),
        Some(a) => a.parse().ok(),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let (Some(iters), Some(before_ms), Some(after_ms)) =
        (arg(&args, 1, 8), arg(&args, 2, 0), arg(&args, 3, 0))
    else {
        eprintln!("usage: fault_point_probe [ITERATIONS] [SLEEP_BEFORE_MS] [SLEEP_AFTER_MS]");
        std::process::exit(2);
    };
    std::thread::sleep(Duration::from_millis(before_ms));
    let mut data = vec![1u64; usize::try_from(iters).unwrap_or(usize::MAX).min(1 << 20)];
    let a = probe_with_point(black_box(&mut data));
    let b = probe_without_point(black_box(&mut data));
    std::thread::sleep(Duration::from_millis(after_ms));
    if a != 0 || b != 0 {
        std::process::exit(3);
    }
    // Both loops ran: every element is back to 1.
    assert!(data.iter().all(|&x| x == 1), "probe data damaged");
    println!("fault_point_probe: {} iterations ok", data.len());
}
