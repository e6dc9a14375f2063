//! `exchange-mpi`: the time of one sparse exchange (`Comm::exchange_sparse`,
//! SCR's hash exchange) over MPI, per call, for a few patterns. Launch it
//! under mpirun (`mpirun -np 8 --oversubscribe target/release/exchange-mpi`);
//! `BENCH_REPS` exchanges per pattern (default 2,000), `BENCH_MSG_BYTES`
//! per message (default 64), `BENCH_NBX_RANKS` the communicator's
//! threshold for NBX (`MpiComm::with_nbx_ranks`; 1: NBX, unset: the
//! default). Rank 0 prints one line per pattern: the median over 5
//! batches of the mean time per exchange.
//!
//! Patterns: `none` (no rank sends: an exchange's fixed cost), `ring`
//! (each rank to the next), `two` (to the next two), `self` (each to
//! itself only), `all` (each to every rank: dense).

use std::collections::BTreeMap;
use std::time::Instant;

use scr::comm::mpi::{abort_job, install_abort_on_panic, MpiComm, MpiEnv};
use scr::comm::Comm;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    install_abort_on_panic();
    let env = MpiEnv::init();
    let nbx = std::env::var("BENCH_NBX_RANKS")
        .ok()
        .and_then(|v| v.parse::<usize>().ok());
    let comm = match MpiComm::world() {
        Ok(c) => match nbx {
            Some(ranks) => c.with_nbx_ranks(ranks),
            None => c,
        },
        Err(e) => {
            eprintln!("exchange-mpi: {e}");
            abort_job(1)
        }
    };
    let reps = env_usize("BENCH_REPS", 2_000).max(1);
    let bytes = env_usize("BENCH_MSG_BYTES", 64);
    let (me, p) = (comm.rank(), comm.size());
    let msg = vec![me as u8; bytes];
    let patterns: [(&str, Vec<usize>); 5] = [
        ("none", vec![]),
        ("ring", vec![(me + 1) % p]),
        ("two", vec![(me + 1) % p, (me + 2) % p]),
        ("self", vec![me]),
        ("all", (0..p).collect()),
    ];
    if me == 0 {
        let how = match nbx {
            Some(r) if p >= r.max(1) => "NBX",
            Some(_) => "counted (reduce-scatter)",
            None if p >= scr::comm::mpi::DEFAULT_NBX_RANKS => "NBX",
            None => "counted (reduce-scatter)",
        };
        println!("{p} ranks, {how}, {reps} exchanges per batch, {bytes} bytes per message");
        println!("| pattern | µs per exchange (median of 5 batches) |");
        println!("| --- | ---: |");
    }
    for (name, dests) in &patterns {
        let sends: BTreeMap<usize, Vec<u8>> = dests.iter().map(|&d| (d, msg.clone())).collect();
        // Every rank expects the messages its pattern sends it.
        let expected = (0..p)
            .filter(|&src| match *name {
                "none" => false,
                "ring" => (src + 1) % p == me,
                "two" => (src + 1) % p == me || (src + 2) % p == me,
                "self" => src == me,
                _ => true,
            })
            .count();
        let mut batches = Vec::new();
        for _ in 0..5 {
            comm.barrier().expect("barrier");
            let t = Instant::now();
            for _ in 0..reps {
                let got = comm.exchange_sparse(&sends).expect("exchange");
                if got.len() != expected {
                    eprintln!(
                        "exchange-mpi: rank {me}, {name}: {} messages, expected {expected}",
                        got.len()
                    );
                    abort_job(1);
                }
            }
            let mut mean = [t.elapsed().as_secs_f64() / reps as f64];
            comm.allreduce_f64(&mut mean, scr::comm::ReduceOp::Max)
                .expect("allreduce");
            batches.push(mean[0]);
        }
        batches.sort_by(f64::total_cmp);
        if me == 0 {
            println!("| {name} | {:.1} |", 1e6 * batches[2]);
        }
    }
    comm.barrier().expect("barrier");
    drop(comm);
    drop(env);
}
