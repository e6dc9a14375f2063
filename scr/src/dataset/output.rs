//! Start, route and complete: a dataset from SCR_Start_output to a
//! protected (or deleted) dataset in cache. The API (`Scr`) decides
//! policy around these steps (which old datasets may be evicted, flushes,
//! halts, Need_checkpoint's accounting); the bookkeeping is here.
//!
//! Filemap writes, one per state change: `begin` records the dataset with
//! its descriptors; `route` records each new file before it exists;
//! `complete` records the final sizes, CRC32s and COMPLETE flag once the
//! vote is known (redundancy files are recorded by the encode before they
//! are created).

use std::path::{Path, PathBuf};

use super::{Dataset, State};
use crate::beneath;
use crate::cache::Job;
use crate::clock::Tick;
use crate::error::{io_err, ScrError, ScrResult};
use crate::ids::DatasetId;
use crate::log::writer::{Entry, EventType, XferType};
use crate::records::dataset::Dataset as DatasetDesc;
use crate::records::meta::{FileType, Meta};
use crate::records::PREFIX_META_DIR as META_DIR;
use crate::storage::dirs;
use crate::storage::node::LogicalPath;
use crate::storage::path as spath;

/// Allocate the next dataset id (and checkpoint id when `is_ckpt`) and
/// choose the redundancy descriptor ([`Job::desc_for_dataset`]: the
/// OUTPUT=1 descriptor for output, else by checkpoint interval). Returns
/// the id and the index of the descriptor in [`Job::sets`].
pub fn next_ids(job: &mut Job, is_ckpt: bool, is_output: bool) -> (DatasetId, usize) {
    job.dataset_id += 1;
    if is_ckpt {
        job.checkpoint_id += 1;
    }
    let set = job.desc_for_dataset(is_ckpt, is_output, job.checkpoint_id);
    (DatasetId(job.dataset_id), set)
}

/// Datasets in cache on any rank that live in the store of descriptor
/// `set`, oldest first: the candidates to make room in it. Collective.
pub fn in_store(job: &Job, set: usize) -> ScrResult<Vec<DatasetId>> {
    let directory = PathBuf::from(&job.sets[set].descriptor.directory);
    let me = job.rank();
    Ok(job
        .datasets_everywhere()?
        .into_iter()
        .filter(|&d| {
            job.filemap
                .desc(d, me)
                .ok()
                .flatten()
                .is_some_and(|r| Path::new(&r.directory) == directory)
        })
        .collect())
}

/// What Start_output records about a new dataset.
#[derive(Debug, Clone, Copy)]
pub struct StartFlags {
    /// SCR_FLAG_CHECKPOINT.
    pub checkpoint: bool,
    /// SCR_FLAG_OUTPUT.
    pub output: bool,
}

/// Create the dataset's cache directory and record it (dataset and
/// redundancy descriptors, zero files) in the filemap, written once.
/// Fails on every rank when it failed on any. Logs the start. Collective.
pub fn begin(
    job: &mut Job,
    id: DatasetId,
    set: usize,
    name: Option<&str>,
    flags: StartFlags,
) -> ScrResult<Dataset> {
    let dset = id;
    let rd = job.sets[set].descriptor.clone();
    let bypass = job.sets[set].bypass;
    let dir = job.dataset_dir(&LogicalPath::new(&rd.directory), dset);
    let cache_real = job.real(&job.cache_dir(job.sets[set].store));
    // Bypass mode writes nothing to the cache: no directory there.
    let made = if bypass {
        Ok(())
    } else {
        dirs::create_private_dirs_below(&cache_real, &job.real(&dir))
    };
    let desc = DatasetDesc {
        name: Some(name.map_or_else(|| id.default_name(), str::to_owned)),
        user: Some(job.user.clone()),
        jobid: Some(job.jobid.clone()),
        // SCR_JOB_NAME and SCR_CLUSTER_NAME, as SCR 3.1 records them.
        jobname: job.settings.job.job_name.clone(),
        cluster: job.settings.job.cluster_name.clone(),
        ckpt: flags.checkpoint.then_some(job.checkpoint_id),
        complete: Some(false),
        flag_checkpoint: Some(flags.checkpoint),
        flag_output: Some(flags.output),
        created_us: Some(job.clock.unix_secs() * 1_000_000),
        ..DatasetDesc::new(dset.get())
    };
    let me = job.rank();
    job.filemap.set_dataset(dset, me, &desc);
    job.filemap.set_desc(dset, me, &rd);
    job.filemap.set_expected_files(dset, me, 0);
    if bypass {
        job.filemap
            .set_tag(dset, me, crate::cache::BYPASS_TAG, "1")?;
    }
    let written = job.write_filemap();
    let ok = job.world.all_true(made.is_ok() && written.is_ok())?;
    made?;
    written?;
    if !ok {
        return Err(ScrError::elsewhere(
            "create the dataset directory",
            Some(dset),
        ));
    }
    let ds = Dataset {
        id,
        desc,
        set,
        dir,
        state: State::Started,
        bypass,
        streamed: Default::default(),
    };
    let event = if flags.checkpoint {
        EventType::CheckpointStart
    } else {
        EventType::OutputStart
    };
    job.log(Entry::event(event).dset(dset).name(ds.name()));
    Ok(ds)
}

/// SCR_Route_file in an output phase: register `name` (relative to the
/// current directory, or absolute; it must resolve under the prefix
/// directory) and return the real path in cache to write it at — in
/// bypass mode the path in the prefix itself, its directory created. The
/// entry is on disk before the path is returned (the filemap rule).
/// Directories below the prefix are kept, so `ckpt/a` and `other/a` do not
/// collide.
pub fn route(job: &mut Job, ds: &Dataset, name: &Path) -> ScrResult<PathBuf> {
    route_keyed(job, ds, name).map(|(_, p)| p)
}

/// [`route`], also returning the file's filemap key.
pub fn route_keyed(job: &mut Job, ds: &Dataset, name: &Path) -> ScrResult<(String, PathBuf)> {
    assert_eq!(
        ds.state,
        State::Started,
        "files are routed only while started"
    );
    let text = name.to_string_lossy();
    let cwd = std::env::current_dir().map_err(io_err(".", "current directory"))?;
    let abs = spath::absolute(name, &cwd);
    if !spath::is_within(&abs, &job.prefix) || abs == job.prefix {
        return Err(ScrError::OutsidePrefix {
            path: abs,
            prefix: job.prefix.clone(),
        });
    }
    let rel = abs.strip_prefix(&job.prefix).unwrap_or(&abs).to_path_buf();
    if rel
        .components()
        .next()
        .is_some_and(|c| c.as_os_str() == META_DIR)
    {
        return Err(ScrError::RoutesMetadata {
            path: abs,
            meta: job.prefix.join(META_DIR),
        });
    }
    beneath::check(&job.prefix, &abs)?;
    let logical = ds.dir.join(&rel);
    // A bypass dataset's keys are the files' paths in the prefix.
    let logical_s = if ds.bypass {
        abs.to_string_lossy().into_owned()
    } else {
        logical.to_record()
    };
    let me = job.rank();
    let dset = ds.id;
    if !job.filemap.list_files(dset, me).contains(&logical_s) {
        let meta = Meta {
            file: Some(logical_s.clone()),
            file_type: Some(FileType::Full),
            complete: Some(false),
            ckpt: ds.desc.ckpt,
            ranks: Some(job.world.size() as u64),
            orig: Some(text.into_owned()),
            orig_path: abs.parent().map(|p| p.to_string_lossy().into_owned()),
            orig_name: abs.file_name().map(|p| p.to_string_lossy().into_owned()),
            ..Meta::default()
        };
        job.filemap.add_file(dset, me, &logical_s);
        job.filemap.set_meta(dset, me, &logical_s, &meta);
        let n = job.app_files(dset).len() as u64;
        job.filemap.set_expected_files(dset, me, n);
        job.write_filemap()?;
    }
    // The filemap rule: the entry is on disk before the file can exist.
    assert!(
        job.filemap.list_files(dset, me).contains(&logical_s),
        "route: {logical_s} is recorded before it is handed out"
    );
    if ds.bypass {
        // As LLNL SCR 3.1: the directory exists before the application
        // writes (shared with other users' files, so not made private).
        if let Some(parent) = abs.parent() {
            beneath::create_dir_all_in(&job.prefix, parent)
                .map_err(io_err(parent, "create directory"))?;
        }
        return Ok((logical_s, abs));
    }
    let real = job.real(&logical);
    if let Some(parent) = real.parent() {
        dirs::create_private_dirs_below(&job.real(&ds.dir), parent)?;
    }
    Ok((logical_s, real.into_path_buf()))
}

/// Record the size of every routed file of this rank, and its CRC32 when
/// the crate's writer computed it as the file was written and the file is
/// still exactly that (`ds.streamed`). Otherwise, in cache mode the CRC32
/// comes from the encode's read; in bypass mode, with SCR_CRC_ON_FLUSH,
/// from a read here, since this is the dataset's flush. Returns whether
/// every file exists and the bytes.
fn record_sizes(job: &mut Job, ds: &Dataset, valid: bool) -> ScrResult<(bool, u64, usize)> {
    let dset = ds.id;
    let me = job.rank();
    let mut ok = valid;
    let mut bytes = 0u64;
    let files = job.filemap.list_files(dset, me);
    let crc_here = job.is_bypass(dset) && job.settings.flush.crc;
    for f in &files {
        let mut meta = job.filemap.meta(dset, me, f)?.unwrap_or_default();
        let real = job.file_real(dset, f);
        let streamed = ds.streamed.get(f);
        let measured = match std::fs::metadata(&real) {
            Ok(md) if streamed.is_some_and(|s| s.matches(&md)) => {
                Some((md.len(), streamed.map(|s| s.crc32)))
            }
            Ok(md) if md.is_file() && crc_here => crate::storage::verify::crc_of_file(&real)
                .map(|(crc, len)| (len, Some(crc)))
                .ok(),
            Ok(md) if md.is_file() => Some((md.len(), None)),
            _ => None,
        };
        match measured {
            Some((len, crc)) => {
                meta.size_bytes = Some(len);
                meta.crc32 = crc;
                meta.complete = Some(valid);
                bytes += len;
            }
            _ => {
                // A routed file that was never written is not valid.
                meta.complete = Some(false);
                ok = false;
            }
        }
        job.filemap.set_meta(dset, me, f, &meta);
    }
    Ok((ok, bytes, files.len()))
}

/// What Complete_output found, the same on every rank.
#[derive(Debug)]
pub struct Completion {
    /// Every rank's files were valid and the scheme was applied (or, with
    /// `protecting`, is being applied in the background).
    pub protected: bool,
    /// Why this rank failed, when it did.
    pub error: Option<ScrError>,
    /// The background encode (SCR_ENCODE_ASYNC): settle it with
    /// [`super::protect::settle`] before the filemap changes again.
    pub protecting: Option<super::protect::Protecting>,
}

/// SCR_Complete_output's bookkeeping: every rank says whether its files
/// are valid; sizes are recorded, the vote taken, the scheme applied
/// ([`super::encode::encode`]), the dataset recorded COMPLETE (filemap
/// written once) or deleted on every rank. Logs the transfer and the end
/// event. Collective.
pub fn complete(
    job: &mut Job,
    ds: &mut Dataset,
    valid: bool,
    started: Tick,
) -> ScrResult<Completion> {
    assert_eq!(ds.state, State::Started, "a dataset completes once");
    let dset = ds.id;
    let write_s = job.clock.elapsed(started).as_secs_f64();
    check_shared(job, ds)?;
    let (ok, bytes, files) = record_sizes(job, ds, valid)?;
    let all_valid = job.world.all_true(ok)?;
    if all_valid && !ds.bypass && ds.is_checkpoint() && job.sets[ds.set].encode_async {
        return complete_async(job, ds, (bytes, files), started, write_s);
    }
    let encode_at = job.clock.now();
    // A bypass dataset is in the prefix directory: no scheme in cache.
    let applied = if all_valid && !ds.bypass {
        super::encode::encode(job, dset)
    } else {
        Ok(())
    };
    // all_valid is identical on every rank, so the short circuit keeps the
    // collective matched.
    let encoded = all_valid && job.world.all_true(applied.is_ok())?;
    // Measured after the vote, so rank 0's figure covers the slowest set.
    let encode_s = job.clock.elapsed(encode_at).as_secs_f64();
    let total_bytes = job.sum(bytes as i64)?.max(0) as u64;
    let total_files = job.sum(files as i64)?.max(0) as u64;
    ds.desc.complete = Some(encoded);
    ds.desc.size_bytes = Some(total_bytes);
    ds.desc.files = Some(total_files);
    let me = job.rank();
    job.filemap.set_dataset(dset, me, &ds.desc);
    // Every rank must have its record on disk, or none uses the dataset:
    // a rank returning early here would leave the others in the next
    // collective for ever. The node's master filemap is written by every
    // rank (a collective of the node), even after its own write failed.
    let own = job.write_filemap();
    let master = job.write_master_filemap();
    let wrote = own.and(master);
    let protected = job.world.all_true(wrote.is_ok())? && encoded;
    let applied = applied.and(wrote);
    let times = Times {
        started,
        write_s,
        encode_s,
    };
    log_complete(
        job,
        ds,
        (total_bytes, total_files),
        times,
        all_valid,
        &applied,
        protected,
    );
    if !protected {
        if let Err(e) = &applied {
            eprintln!("SCR: rank {me}: dataset {dset}: {e}");
        }
        job.delete_dataset(dset)?;
        ds.state = State::Failed;
        return Ok(Completion {
            protected,
            error: applied.err(),
            protecting: None,
        });
    }
    ds.state = State::Protected;
    Ok(Completion {
        protected,
        error: None,
        protecting: None,
    })
}

/// Complete_output of a checkpoint protected in the background
/// (SCR_ENCODE_ASYNC), after every rank's files were found valid: record
/// the sizes with COMPLETE=0 (a restart does not use it until it is
/// protected), log the write and CHECKPOINT_END, and start the encode
/// thread ([`super::protect::spawn`]). Collective.
fn complete_async(
    job: &mut Job,
    ds: &mut Dataset,
    (bytes, files): (u64, usize),
    started: Tick,
    write_s: f64,
) -> ScrResult<Completion> {
    let dset = ds.id;
    let total_bytes = job.sum(bytes as i64)?.max(0) as u64;
    let total_files = job.sum(files as i64)?.max(0) as u64;
    ds.desc.complete = Some(false);
    ds.desc.size_bytes = Some(total_bytes);
    ds.desc.files = Some(total_files);
    let me = job.rank();
    job.filemap.set_dataset(dset, me, &ds.desc);
    // As in the synchronous path: no rank starts an encode the others
    // will not join.
    let wrote = job.write_filemap();
    if !job.world.all_true(wrote.is_ok())? {
        let error = wrote.err();
        if let Some(e) = &error {
            eprintln!("SCR: rank {me}: dataset {dset}: {e}");
        }
        job.log(
            Entry::event(EventType::CheckpointEnd)
                .dset(dset)
                .name(ds.name().as_str())
                .secs(job.clock.elapsed(started).as_secs_f64())
                .note(match &error {
                    Some(e) => format!("failed: {e}"),
                    None => "failed: its record failed on another rank".into(),
                }),
        );
        job.delete_dataset(dset)?;
        ds.state = State::Failed;
        return Ok(Completion {
            protected: false,
            error,
            protecting: None,
        });
    }
    let name = ds.name();
    let to = ds.dir.to_record();
    job.log(
        Entry::xfer(XferType::Write)
            .dset(dset)
            .name(name.as_str())
            .secs(write_s)
            .bytes(total_bytes)
            .files(total_files)
            .to(to),
    );
    job.log(
        Entry::event(EventType::CheckpointEnd)
            .dset(dset)
            .name(name.as_str())
            .secs(job.clock.elapsed(started).as_secs_f64())
            .note("written; protecting in the background"),
    );
    match super::protect::spawn(job, dset, started, (total_bytes, total_files)) {
        Ok(p) => {
            ds.state = State::Protecting;
            Ok(Completion {
                protected: true,
                error: None,
                protecting: Some(p),
            })
        }
        Err(e) => {
            eprintln!("SCR: rank {me}: dataset {dset}: {e}");
            job.delete_dataset(dset)?;
            ds.state = State::Failed;
            Ok(Completion {
                protected: false,
                error: Some(e),
                protecting: None,
            })
        }
    }
}

/// Shared files (several ranks routed one path; see [`super::shared`]):
/// in bypass mode each is kept in its owner's entries only; in cache mode
/// the dataset is deleted on every rank and every rank returns
/// [`ScrError::SharedFile`] naming the files and ranks. Collective.
fn check_shared(job: &mut Job, ds: &mut Dataset) -> ScrResult<()> {
    let found = super::shared::find(job, ds.id)?;
    if !found.any {
        return Ok(());
    }
    if ds.bypass {
        let kept = super::shared::keep_owner_only(job, ds.id, &found);
        let ok = job.world.all_true(kept.is_ok())?;
        kept?;
        if !ok {
            return Err(ScrError::elsewhere("record the shared files", Some(ds.id)));
        }
        return Ok(());
    }
    let e = ScrError::SharedFile {
        dset: ds.id,
        files: found.gather(job.world.as_ref())?,
    };
    if job.rank().is_root() {
        job.msg.err(format_args!("{e}"));
    }
    job.log(
        Entry::event(if ds.is_checkpoint() {
            EventType::CheckpointEnd
        } else {
            EventType::OutputEnd
        })
        .dset(ds.id)
        .name(ds.name())
        .note(format!("failed: {e}")),
    );
    job.delete_dataset(ds.id)?;
    ds.state = State::Failed;
    Err(e)
}

/// When the phases of a complete happened.
#[derive(Debug, Clone, Copy)]
struct Times {
    started: Tick,
    write_s: f64,
    encode_s: f64,
}

/// Log a complete: the write and encode transfers, then the end event with
/// why it failed when it did.
fn log_complete(
    job: &Job,
    ds: &Dataset,
    (bytes, files): (u64, u64),
    times: Times,
    all_valid: bool,
    applied: &ScrResult<()>,
    protected: bool,
) {
    if job.log.is_none() {
        return;
    }
    let dset = ds.id;
    let name = ds.name();
    let xfer = |t: XferType, secs: f64| {
        Entry::xfer(t)
            .dset(dset)
            .name(name.as_str())
            .secs(secs)
            .bytes(bytes)
            .files(files)
    };
    let to = if ds.bypass {
        job.prefix.to_string_lossy().into_owned()
    } else {
        ds.dir.to_record()
    };
    if protected && ds.is_checkpoint() {
        job.log(xfer(XferType::Write, times.write_s).to(to));
        job.log(xfer(XferType::Encode, times.encode_s));
    } else if protected {
        job.log(xfer(XferType::Output, times.write_s + times.encode_s).to(to));
    }
    let end = if ds.is_checkpoint() {
        EventType::CheckpointEnd
    } else {
        EventType::OutputEnd
    };
    let mut e = Entry::event(end)
        .dset(dset)
        .name(name.as_str())
        .secs(job.clock.elapsed(times.started).as_secs_f64());
    if !all_valid {
        e = e.note("failed: a rank's files were invalid");
    } else if let Err(err) = applied {
        e = e.note(format!("failed: {err}"));
    } else if !protected {
        e = e.note("failed: redundancy or its record failed on another rank");
    }
    job.log(e);
}
