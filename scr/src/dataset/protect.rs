//! Asynchronous protection (SCR_ENCODE_ASYNC, a descriptor's
//! ENCODE_ASYNC; this project only, docs/decisions.md "Asynchronous
//! protection").
//!
//! ```text
//!  complete ──vote──> written (COMPLETE=0 on disk) ──spawn──> encode in a thread
//!                                                              │
//!  next Start_output / finalize / halt / Delete / Current ── settle (collective)
//!                                        all ranks ok ──> COMPLETE=1, PROTECTED
//!                                        any failed   ──> delete everywhere
//! ```
//!
//! `SCR_Complete_output` returns once the application's files are
//! durable in cache (the application closed them; their sizes are in the
//! filemap on disk) and the validity vote passed. The CRC32s and the
//! scheme's encode ([`super::encode::EncodeTask`]) then run in a thread of
//! this rank, with a copy of the filemap (the redundancy files are still
//! recorded on disk before they are created) and the set communicator lent
//! to it ([`crate::comm::Lent`]: MPI must provide `MPI_THREAD_MULTIPLE`,
//! else init refuses the setting with a warning). The main thread keeps
//! the filemap it had and must not write it until the encode is settled
//! ([`crate::cache::Job::filemap_lent`] makes a write an error, never a
//! lost record).
//!
//! The dataset is protected only when every rank's encode finished and the
//! vote at settle agrees; only then is COMPLETE=1 written. A failure before
//! that leaves COMPLETE=0 on disk, and a restart never uses a dataset whose
//! record is not complete ([`super::restart`]): it restarts from the newest
//! protected one, which the cache keeps (a store holds one dataset more
//! while one is being protected; `Scr::start_output`).

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::encode::{EncodeTask, PartnerTag};
use super::PARTNER_NODE_TAG;
use crate::cache::Job;
use crate::clock::Tick;
use crate::comm::Lent;
use crate::error::{EncodeError, ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::log::writer::{Entry, EventType, XferType};
use crate::records::filemap::Filemap;

/// What the encode thread hands back.
struct Returned {
    filemap: Filemap,
    comm: Option<Lent>,
    result: ScrResult<Option<PartnerTag>>,
    /// Seconds the encode took on this rank.
    secs: f64,
}

/// A dataset being protected in the background.
pub struct Protecting {
    dset: DatasetId,
    task: EncodeTask,
    /// The thread, or what the encode returned when no thread could start.
    handle: Result<JoinHandle<Returned>, Returned>,
    /// When its SCR_Start_output began (for the PROTECTED event's time).
    started: Tick,
    /// Bytes and files of the dataset (for the encode's log entry).
    bytes: u64,
    files: u64,
}

impl std::fmt::Debug for Protecting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Protecting")
            .field("dset", &self.dset)
            .finish_non_exhaustive()
    }
}

impl Protecting {
    /// The dataset being protected.
    pub fn dset(&self) -> DatasetId {
        self.dset
    }
}

/// How a background protection ended, the same on every rank.
#[derive(Debug)]
pub struct Settled {
    /// The dataset.
    pub dset: DatasetId,
    /// Every rank's encode succeeded: the dataset is COMPLETE and may be
    /// restarted from.
    pub protected: bool,
    /// This rank's error, when it failed here.
    pub error: Option<ScrError>,
}

/// Start protecting `dset` in the background, after its validity vote
/// passed on every rank. Collective: preparing is agreed on first, so
/// either every rank starts its encode or none does (the caller then
/// deletes the dataset as a failed complete). Where no thread can start,
/// that rank encodes before returning (its set's members are in the same
/// encode), and the outcome is settled like a thread's.
pub fn spawn(
    job: &mut Job,
    dset: DatasetId,
    started: Tick,
    (bytes, files): (u64, u64),
) -> ScrResult<Protecting> {
    let prepared = EncodeTask::prepare(job, dset);
    let all_prepared = job.world.all_true(prepared.is_ok())?;
    let (task, comm) = prepared?;
    if !all_prepared {
        task.give_back(job, comm);
        return Err(ScrError::elsewhere(
            "prepare the background encode",
            Some(dset),
        ));
    }
    let lent = match comm.map(Lent::new).transpose() {
        Ok(l) => l,
        Err(c) => {
            // Init refuses SCR_ENCODE_ASYNC when communicators cannot move;
            // a set communicator that cannot is a bug in set-up.
            task.give_back(job, Some(c));
            return Err(ScrError::Encode {
                dset,
                source: EncodeError::Background {
                    what: "was given a communicator that cannot leave its thread".into(),
                },
            });
        }
    };
    let rank = job.rank();
    // What the thread takes; if it cannot start, this thread takes it back
    // and encodes here, so the set's other members are not left waiting.
    let payload = Arc::new(Mutex::new(Some((task.clone(), job.filemap.clone(), lent))));
    let theirs = Arc::clone(&payload);
    let spawned = std::thread::Builder::new()
        .name(format!("scr-encode-{rank}"))
        .spawn(move || {
            let taken = theirs.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (run_task, filemap, lent) = taken.expect("the payload is taken once");
            encode_here(&run_task, filemap, lent, rank)
        });
    let handle = match spawned {
        Ok(handle) => Ok(handle),
        Err(e) => {
            eprintln!("SCR: rank {rank}: dataset {dset}: no encode thread ({e}): encoding now");
            let taken = payload.lock().unwrap_or_else(|e| e.into_inner()).take();
            let (run_task, filemap, lent) = taken.expect("the thread never started");
            Err(encode_here(&run_task, filemap, lent, rank))
        }
    };
    job.filemap_lent = Some(dset);
    Ok(Protecting {
        dset,
        task,
        handle,
        started,
        bytes,
        files,
    })
}

/// The encode as the thread runs it (or this thread, when none started).
fn encode_here(
    task: &EncodeTask,
    mut filemap: Filemap,
    lent: Option<Lent>,
    rank: crate::ids::Rank,
) -> Returned {
    let t0 = std::time::Instant::now();
    let comm = lent.as_ref().map(Lent::get);
    // Kill and delay faults act inside the background encode; an injected
    // error fails this rank's encode, after it took its part in the set's
    // encode so that nobody waits for it.
    let result = match crate::fault_point!("protect.background", rank = rank.0) {
        Err(e) => {
            let _ = task.run(comm, &mut filemap);
            Err(ScrError::injected("protect.background", e))
        }
        Ok(()) => task.run(comm, &mut filemap),
    };
    Returned {
        filemap,
        comm: lent,
        result,
        secs: t0.elapsed().as_secs_f64(),
    }
}

/// Wait for this rank's background encode, then agree with every rank
/// whether the dataset is protected: if every encode succeeded, record
/// COMPLETE=1 (filemap and master filemap) and agree again that every rank
/// recorded it, then log PROTECTED; if either vote fails delete it on
/// every rank. Collective over the world.
pub fn settle(job: &mut Job, p: Protecting) -> ScrResult<Settled> {
    let Protecting {
        dset,
        task,
        handle,
        started,
        bytes,
        files,
    } = p;
    let joined = match handle {
        Ok(h) => h.join(),
        Err(done) => Ok(done),
    };
    job.filemap_lent = None;
    let (result, secs) = match joined {
        Ok(r) => {
            job.filemap = r.filemap;
            task.give_back(job, r.comm.map(Lent::into_inner));
            (r.result, r.secs)
        }
        Err(_) => (
            Err(ScrError::Encode {
                dset,
                source: EncodeError::Background {
                    what: "panicked".into(),
                },
            }),
            0.0,
        ),
    };
    let me = job.rank();
    let encoded = job.world.all_true(result.is_ok())?;
    let mut slowest = [secs];
    job.world
        .allreduce_f64(&mut slowest, crate::comm::ReduceOp::Max)?;
    // Every rank's encode finished: record COMPLETE=1, then agree that
    // every rank recorded it. Only then is the dataset protected: a node
    // lost while some ranks were still writing their filemap would leave a
    // dataset complete on some ranks and not on others, which a restart
    // rightly refuses, so the PROTECTED entry must not be logged before.
    // The node's master filemap is written by every rank (a collective of
    // the node), even after this rank's own write failed.
    let (recorded, desc) = if encoded {
        if let Ok(Some(PartnerTag(node))) = &result {
            // The tag name is not one of the filemap's own keys: cannot fail.
            let _ = job.filemap.set_tag(dset, me, PARTNER_NODE_TAG, node);
        }
        let mut desc = job
            .dataset(dset)
            .unwrap_or_else(|| crate::records::dataset::Dataset::new(dset.get()));
        desc.complete = Some(true);
        job.filemap.set_dataset(dset, me, &desc);
        let own = job.write_filemap();
        let master = job.write_master_filemap();
        (own.and(master), Some(desc))
    } else {
        (Ok(()), None)
    };
    let protected = encoded && job.world.all_true(recorded.is_ok())?;
    let (true, Some(desc)) = (protected, desc) else {
        let error = match (result, recorded) {
            (Err(e), _) | (Ok(_), Err(e)) => Some(e),
            (Ok(_), Ok(())) => None,
        };
        if let Some(e) = &error {
            eprintln!("SCR: rank {me}: dataset {dset}: background protection failed: {e}");
        }
        let why = match (&error, encoded) {
            (Some(e), _) => format!("failed: {e}"),
            (None, false) => "failed: redundancy failed on another rank".into(),
            (None, true) => "failed: another rank could not record it protected".into(),
        };
        job.log(
            Entry::event(EventType::Protected)
                .dset(dset)
                .secs(job.clock.elapsed(started).as_secs_f64())
                .note(why),
        );
        job.delete_dataset(dset)?;
        return Ok(Settled {
            dset,
            protected: false,
            error,
        });
    };
    // Kill and delay faults act once every rank recorded the dataset
    // protected on disk; an injected error has nothing left to fail, so it
    // is only reported.
    if let Err(e) = crate::fault_point!("protect.protected", rank = me.0) {
        eprintln!(
            "SCR: rank {me}: {}",
            ScrError::injected("protect.protected", e)
        );
    }
    let name = desc.name.clone().unwrap_or_else(|| dset.default_name());
    job.log(
        Entry::xfer(XferType::Encode)
            .dset(dset)
            .name(name.as_str())
            .secs(slowest[0])
            .bytes(bytes)
            .files(files),
    );
    job.log(
        Entry::event(EventType::Protected)
            .dset(dset)
            .name(name.as_str())
            .secs(job.clock.elapsed(started).as_secs_f64())
            .note(format!("encode {:.6} s in the background", slowest[0])),
    );
    Ok(Settled {
        dset,
        protected: true,
        error: None,
    })
}
