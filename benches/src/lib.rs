//! Shared code of the benchmarks: the checkpoint-to-cache benchmark runs the
//! same rank code over the thread communicator (`cargo bench --bench
//! checkpoint`) and over MPI (`checkpoint-mpi` under `mpirun`,
//! `benches/mpi-checkpoint.sh`); the scale benchmark draws its figure with
//! [`scale_plot`]; [`warm`] gives a repetition pages freed a moment before
//! (a virtual machine's host takes free memory back).
#![deny(missing_docs)]

pub mod checkpoint;
pub mod scale_plot;
pub mod warm;
