//! The cache tier: the job's view of its nodes, stores and redundancy
//! descriptors, the datasets in node-local cache with their filemaps, and
//! restart in place (developer guide: "Concepts", "Group descriptors",
//! "Store descriptors", "Redundancy descriptors", "Filemap"; program flow of
//! SCR_Init, Start/Complete checkpoint, Route_file).
//!
//! This module builds and holds the job's runtime state ([`Job`]); what
//! happens to a dataset in cache is in [`crate::dataset`].
//!
//! Paths recorded in filemaps are *logical* node-local paths
//! (`/dev/shm/<user>/scr.<jobid>/scr.dataset.<id>/<file>`), exactly what SCR
//! records on a real cluster, typed [`LogicalPath`]. A process opens them
//! at their [`RealPath`], which only its [`NodeStorage`] (the
//! [`NodeIdentity`]) gives: the same path on a real node, the simulated
//! node's tree when `SCR_NODE_ROOT` is set; the formats never depend on
//! simulation.
//!
//! Invariant kept everywhere (the guide's filemap rule): a file is added to
//! the filemap, and the filemap file is written, *before* the file is created
//! in cache; an entry may outlive its file, never the reverse.

use std::collections::BTreeMap;
use std::fs;
use std::path::PathBuf;

use crate::comm::{Comm, ReduceOp};
use crate::config::settings::FlushType;
use crate::config::{CkptDesc, Config, Settings};
use crate::error::{io_err, DescriptorError, ScrError, ScrResult};
use crate::ids::{DatasetId, Rank};
use crate::kvtree::KvTree;
use crate::log::writer::{Entry, LogSettings, Logger};
use crate::records::dataset::Dataset;
use crate::records::filemap::{filemap_file_name, Filemap, MasterFilemap, MASTER_FILEMAP_FILE};
use crate::records::meta::{FileType, Meta};
use crate::records::reddesc::{CopyType, RedDesc};
use crate::records::Record;
use crate::redundancy::sets::{build_sets, partner_plan};
use crate::storage::dirs::{self, NodeIdentity};
use crate::storage::node::{LogicalPath, NodeStorage, RealPath};
use crate::storage::path as spath;

mod layout;
use layout::NodeLayout;

/// Filemap tag (`1`) of a dataset whose files are in the prefix directory,
/// not in cache (LLNL's cache index records `BYPASS` per dataset): written
/// in bypass mode, or fetched to be read in place (SCR_FETCH_BYPASS=1). Its
/// file keys are then paths in the prefix, the same on every node, not
/// node-local logical paths; deleting it from cache forgets its entries
/// and never touches those files.
pub const BYPASS_TAG: &str = "BYPASS";

/// A cache store (`scr_storedesc`): a node-local base directory holding at
/// most `count` datasets of this job.
#[derive(Debug, Clone)]
pub struct Store {
    /// Logical base path (`STORE=` / `SCR_CACHE_BASE`).
    pub base: LogicalPath,
    /// Datasets kept at most (`COUNT` / `SCR_CACHE_SIZE`).
    pub count: u64,
    /// How datasets cached here are flushed: the line's `FLUSH=` (or
    /// `TYPE=`) when this library implements it, else `SCR_FLUSH_TYPE`.
    pub flush: FlushType,
}

/// A redundancy descriptor at run time (`scr_reddesc`): the persisted
/// descriptor (with this process's set and its members), the store it
/// writes to, and the set communicator. Owned by the job, lent to the
/// lifecycle by reference.
pub struct RedundancySet {
    /// The descriptor as recorded in filemaps.
    pub descriptor: RedDesc,
    /// Index of its store in [`Job::stores`].
    pub store: usize,
    /// The set communicator (`None` for SINGLE, which has no set).
    pub comm: Option<Box<dyn Comm>>,
    /// The descriptor's BYPASS (default SCR_CACHE_BYPASS): datasets it
    /// takes are written straight to the prefix directory.
    pub bypass: bool,
    /// The descriptor's OUTPUT: datasets flagged SCR_FLAG_OUTPUT take it
    /// (the first so marked; [`Job::desc_for_dataset`]).
    pub output: bool,
    /// The descriptor's ENCODE_ASYNC (default SCR_ENCODE_ASYNC), when the
    /// communicators may be lent to a thread: its checkpoints are
    /// protected in the background ([`crate::dataset::protect`]).
    pub encode_async: bool,
}

/// Everything a process knows about its job (SCR's globals in `scr_globals.c`).
pub struct Job {
    /// `scr_comm_world`.
    pub world: Box<dyn Comm>,
    /// Processes on the same node (`scr_comm_node`).
    pub node_comm: Box<dyn Comm>,
    /// The effective configuration (identical on every rank): descriptors,
    /// SCR_Config queries, raw values.
    pub cfg: Config,
    /// Every parameter, typed and parsed once at init (identical on every
    /// rank): read these, never a parameter by name.
    pub settings: Settings,
    /// This process's node.
    pub node: NodeIdentity,
    /// Node name of every world rank, learned only when a descriptor needs
    /// them (PARTNER, or sets over failure groups other than nodes); empty
    /// otherwise, so SCR_Init costs no O(P) per rank (issue 17).
    pub node_names: Vec<String>,
    /// Number of distinct nodes in the run.
    pub node_count: usize,
    /// `SCR_USER_NAME`.
    pub user: String,
    /// `SCR_JOB_ID`.
    pub jobid: String,
    /// The prefix directory (absolute, reduced).
    pub prefix: PathBuf,
    /// Logical control directory `<cntl_base>/<user>/scr.<jobid>`.
    pub cntl: LogicalPath,
    /// Cache stores, in descriptor order.
    pub stores: Vec<Store>,
    /// Redundancy descriptors with this process's sets, in CKPT order.
    pub sets: Vec<RedundancySet>,
    /// This process's filemap.
    pub filemap: Filemap,
    /// Real path of this process's filemap file in the control directory.
    pub filemap_file: RealPath,
    /// Last dataset id used (`scr_dataset_id`).
    pub dataset_id: i64,
    /// Last checkpoint id used (`scr_checkpoint_id`).
    pub checkpoint_id: i64,
    /// SCR_MPI_BUF_SIZE: piece size of redundancy transfers.
    pub piece_bytes: usize,
    /// The event log; open on rank 0 only (when SCR_LOG_ENABLE=1), so a
    /// collective event is written once.
    pub log: Option<Logger>,
    /// Now, for every time-driven policy (the [`crate::Scr`]'s clock).
    pub clock: crate::clock::SharedClock,
    /// Messages on stderr in SCR's form, filtered by SCR_DEBUG.
    pub msg: crate::log::msg::Messages,
    /// The dataset whose background encode holds a copy of the filemap
    /// (SCR_ENCODE_ASYNC): until it is settled, [`Job::write_filemap`]
    /// refuses, so no record of the encode is lost.
    pub filemap_lent: Option<DatasetId>,
}

impl Job {
    /// Build the job's runtime state (SCR_Init steps 3–20): node layout,
    /// groups, stores, redundancy descriptors and sets, directories.
    /// Collective over `world`. `settings` are `cfg`'s, parsed.
    pub fn new(
        world: Box<dyn Comm>,
        cfg: Config,
        settings: Settings,
        node: NodeIdentity,
    ) -> ScrResult<Job> {
        let layout = NodeLayout::learn(world.as_ref(), &node)?;
        let user = settings
            .job
            .user_name
            .clone()
            .unwrap_or_else(|| dirs::user_name(|k| std::env::var_os(k)));
        let jobid = settings.job.job_id.clone();
        let prefix = prefix_of(&settings);
        let cntl_base = LogicalPath::new(&settings.cache.cntl_base);
        let cntl = LogicalPath::new(dirs::job_dir(cntl_base.as_logical(), &user, &jobid));
        let descs_cfg = cfg.descriptors()?;
        // Every rank's node name costs O(P) per rank: only PARTNER still
        // needs them.
        let node_names = if descs_cfg
            .ckpts
            .iter()
            .any(|c| c.enabled && needs_node_names(c))
        {
            layout::all_node_names(world.as_ref(), &node)?
        } else {
            Vec::new()
        };
        let stores = stores_of(&descs_cfg.stores, &settings);
        // Directories: control dir and each store's job dir on this node.
        // One process per node creates them, the others wait at the barrier.
        let mut created: ScrResult<()> = Ok(());
        if layout.node_comm.rank() == 0 {
            created = create_node_dirs(&node, &cntl_base, &stores, &user, &jobid);
        }
        if world.rank() == 0 {
            let scr_dir = prefix.join(crate::records::PREFIX_META_DIR);
            // Everything SCR keeps in the prefix (index, flush and halt
            // files, logs, app.conf) is below `.scr`: a link there would
            // send it all out of the prefix, so the run does not start.
            if let Err(e) = crate::beneath::check(&prefix, &scr_dir) {
                created = created.and(Err(e.into()));
            } else if let Err(e) = crate::durable::create_dir_all(&scr_dir) {
                created = created.and(Err(io_err(&scr_dir, "create prefix .scr")(e)));
            }
        }
        let ok = world.all_true(created.is_ok())?;
        created?;
        if !ok {
            return Err(ScrError::elsewhere(
                "create the control or cache directory",
                None,
            ));
        }
        // Settings refused anything outside 4 KiB..=1 GiB.
        let piece_bytes = settings.cache.mpi_buf_bytes as usize;
        let local_rank = layout.node_comm.rank() as u32;
        let filemap_file = node.real(&cntl.join(filemap_file_name(local_rank)));
        let msg = crate::log::msg::Messages::new(settings.debug, world.rank() as i64, &node.name);
        let mut job = Job {
            world,
            node_comm: layout.node_comm,
            cfg,
            settings,
            node,
            node_names,
            node_count: layout.count,
            user,
            jobid,
            prefix,
            cntl,
            stores,
            sets: Vec::new(),
            filemap: Filemap::new(),
            filemap_file,
            dataset_id: 0,
            checkpoint_id: 0,
            piece_bytes,
            log: None,
            clock: crate::clock::system(),
            msg,
            filemap_lent: None,
        };
        let mut sets = Vec::new();
        for ckpt in descs_cfg.ckpts.iter().filter(|c| c.enabled) {
            sets.push(job.make_set(ckpt, &descs_cfg.groups, &descs_cfg.stores, layout.largest)?);
        }
        if sets.is_empty() {
            return Err(DescriptorError::NoEnabledCkpt.into());
        }
        if job.rank().is_root() {
            warn_single_member_sets(&sets);
        }
        refuse_async_without_threads(job.world.as_ref(), &mut sets);
        job.sets = sets;
        Ok(job)
    }

    /// Failure group of every world rank for the group name `group`
    /// (NODE, WORLD, or a GROUPS= name from the configuration).
    fn failure_groups(
        &self,
        group: &str,
        groups: &[crate::config::GroupDesc],
    ) -> ScrResult<Vec<String>> {
        match group {
            "NODE" => Ok(self.node_names.clone()),
            "WORLD" => Ok(vec![String::new(); self.world.size()]),
            name => {
                let mine = groups
                    .iter()
                    .find(|g| g.host == self.node.name)
                    .and_then(|g| g.groups.get(name))
                    .cloned()
                    .unwrap_or_else(|| format!("host:{}", self.node.name));
                let all = self.world.allgather_bytes(mine.as_bytes())?;
                Ok(all
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect())
            }
        }
    }

    /// Where this process sits in the sets of CKPT line `ckpt`, whose
    /// failure group of every rank is `fgroups` (`scr_reddesc_create`'s set
    /// construction: SINGLE alone, PARTNER pairs across groups, XOR and RS
    /// sets of SET_SIZE members from distinct groups).
    fn set_place(&self, ckpt: &CkptDesc, fgroups: &[String]) -> ScrResult<SetPlace> {
        let rank = self.world.rank();
        let sets_err = |source| DescriptorError::Sets {
            index: ckpt.index,
            source,
        };
        let plan = match ckpt.copy_type {
            CopyType::Single => {
                return Ok(SetPlace {
                    members: vec![rank as i64],
                    group_id: rank as i64,
                    group_rank: 0,
                    groups: self.world.size() as u64,
                })
            }
            CopyType::Partner => partner_plan(fgroups, 1).map_err(sets_err)?.sets,
            CopyType::Xor | CopyType::Rs => {
                let (set_size, min_members) = xor_rs_geometry(ckpt);
                build_sets(fgroups, set_size, min_members.min(self.world.size()))
                    .map_err(sets_err)?
            }
        };
        let (set, pos) = plan.assignment[rank];
        Ok(SetPlace {
            members: plan.sets[set].iter().map(|&r| r as i64).collect(),
            group_id: plan.set_id(set).unwrap_or(0) as i64,
            group_rank: pos as u64,
            groups: plan.sets.len() as u64,
        })
    }

    /// The redundancy descriptor of CKPT line `ckpt` with this process's
    /// set and its communicator (`scr_reddesc_create`). Collective.
    fn make_set(
        &self,
        ckpt: &CkptDesc,
        groups: &[crate::config::GroupDesc],
        store_descs: &[crate::config::StoreDesc],
        largest_node: usize,
    ) -> ScrResult<RedundancySet> {
        let rank = self.world.rank();
        let store = store_descs
            .iter()
            .filter(|s| s.enabled && s.count > 0)
            .position(|s| s.path == ckpt.store)
            .unwrap_or(0)
            .min(self.stores.len() - 1);
        let copy_type = ckpt.copy_type;
        let k = ckpt.set_failures.max(1) as usize;
        let (place, comm) = if !sets_over_nodes(ckpt) {
            let fgroups = if copy_type == CopyType::Single {
                Vec::new()
            } else {
                self.failure_groups(&ckpt.group, groups)?
            };
            let place = self.set_place(ckpt, &fgroups)?;
            let comm = if copy_type == CopyType::Single {
                None
            } else {
                self.world
                    .split(Some(place.group_id as u32), place.group_rank as i64)?
            };
            if let Some(c) = comm.as_deref() {
                agree_on_members(c, place.group_id, &place.members)?;
            }
            (place, comm)
        } else {
            // XOR or RS over nodes: the set from local information and
            // splits, equal to the whole plan's (cache::layout).
            let (set_size, min_members) = xor_rs_geometry(ckpt);
            let (place, comm) = layout::node_set(
                self.world.as_ref(),
                self.node_comm.as_ref(),
                largest_node,
                set_size,
                min_members,
            )?;
            (place, Some(comm))
        };
        let SetPlace {
            members,
            group_id,
            group_rank,
            groups: groups_n,
        } = place;
        let base = self.stores[store].base.clone();
        assert_eq!(
            members.get(group_rank as usize).copied(),
            Some(rank as i64),
            "a process is the member of its set at its own set rank"
        );
        let descriptor = RedDesc {
            enabled: true,
            index: i64::from(ckpt.index),
            interval: ckpt.interval.max(1),
            base: base.to_record(),
            directory: self.cache_dir(store).to_record(),
            copy_type,
            hop_distance: Some(1),
            set_size: Some(ckpt.set_size),
            set_failures: (copy_type == CopyType::Rs).then_some(k as u64),
            groups: groups_n,
            group_id,
            group_size: members.len() as u64,
            group_rank,
            members,
            world_ranks: Some(self.world.size() as u64),
            extra: KvTree::new(),
        };
        Ok(RedundancySet {
            descriptor,
            store,
            comm,
            bypass: ckpt.bypass,
            output: ckpt.output,
            encode_async: ckpt.encode_async && !ckpt.bypass,
        })
    }

    /// Open the event log on rank 0 when the configuration asks for one.
    /// A log that cannot be opened is a warning, never a failed init.
    pub fn open_log(&mut self) {
        if !self.rank().is_root() {
            return;
        }
        let opened = LogSettings::from_config(&self.cfg).and_then(|s| {
            s.map(|s| Logger::open(&self.prefix, &self.node.name, &self.jobid, s))
                .transpose()
        });
        match opened {
            Ok(l) => self.log = l,
            Err(e) => eprintln!("SCR: warning: logging disabled: {e}"),
        }
    }

    /// Write `entry` to the event log, if this process has one (rank 0).
    pub fn log(&self, entry: Entry) {
        if let Some(l) = &self.log {
            l.log_or_warn(&entry);
        }
    }

    /// This process's world rank.
    pub fn rank(&self) -> Rank {
        Rank::of_index(self.world.rank())
    }

    /// The descriptor for checkpoint `ckpt_id`: the one with the largest
    /// INTERVAL dividing it (`scr_reddesc_for_checkpoint`).
    pub fn desc_for(&self, ckpt_id: i64) -> usize {
        let id = ckpt_id.max(1) as u64;
        let mut best = 0;
        let mut best_interval = 0;
        for (i, d) in self.sets.iter().enumerate() {
            let iv = d.descriptor.interval.max(1);
            if id.is_multiple_of(iv) && iv > best_interval {
                best = i;
                best_interval = iv;
            }
        }
        best
    }

    /// The descriptor a new dataset takes (SCR 3.1's selection): one
    /// flagged output takes the first descriptor marked OUTPUT=1, if any;
    /// otherwise a checkpoint takes [`Job::desc_for`] its checkpoint id,
    /// and output that is not a checkpoint the first descriptor of
    /// INTERVAL 1 (the first descriptor when none has).
    pub fn desc_for_dataset(&self, is_ckpt: bool, is_output: bool, ckpt_id: i64) -> usize {
        if let Some(i) = self
            .sets
            .iter()
            .position(|d| d.output)
            .filter(|_| is_output)
        {
            return i;
        }
        if is_ckpt {
            return self.desc_for(ckpt_id);
        }
        self.sets
            .iter()
            .position(|d| d.descriptor.interval <= 1)
            .unwrap_or(0)
    }

    /// Logical cache job directory of store `store`.
    pub fn cache_dir(&self, store: usize) -> LogicalPath {
        LogicalPath::new(dirs::job_dir(
            self.stores[store].base.as_logical(),
            &self.user,
            &self.jobid,
        ))
    }

    /// Logical dataset directory: `<cache>/<user>/scr.<jobid>/scr.dataset.<id>`.
    pub fn dataset_dir(&self, directory: &LogicalPath, id: DatasetId) -> LogicalPath {
        directory.join(id.default_name())
    }

    /// Real path of a logical node-local path on this node.
    pub fn real(&self, logical: &LogicalPath) -> RealPath {
        self.node.real(logical)
    }

    /// Whether this rank's entries of `dset` are in the prefix directory
    /// rather than in cache (the dataset's `BYPASS` tag).
    pub fn is_bypass(&self, dset: DatasetId) -> bool {
        self.is_bypass_of(dset, self.rank())
    }

    /// Whether `rank`'s entries of `dset` in this process's filemap are in
    /// the prefix directory.
    pub fn is_bypass_of(&self, dset: DatasetId, rank: Rank) -> bool {
        self.filemap.tag(dset, rank, BYPASS_TAG) == Some("1")
    }

    /// Where this rank's file `key` of `dset` is: its path in the prefix
    /// for a bypass dataset (keys are prefix paths there), else the real
    /// path of the logical cache path.
    pub fn file_real(&self, dset: DatasetId, key: &str) -> RealPath {
        if self.is_bypass(dset) {
            RealPath::new(key)
        } else {
            self.real(&LogicalPath::new(key))
        }
    }

    /// Path of this process's filemap file (real).
    pub fn filemap_path(&self) -> RealPath {
        self.filemap_file.clone()
    }

    /// Persist this process's filemap. Not collective: a caller that goes
    /// on into a collective after it either votes on the result or calls
    /// [`Job::write_filemap_agreed`].
    pub fn write_filemap(&self) -> ScrResult<()> {
        if let Some(dset) = self.filemap_lent {
            return Err(ScrError::FilemapLent { dset });
        }
        self.filemap.write_file(&self.filemap_file)?;
        Ok(())
    }

    /// `local` on this rank, agreed over the world: an error on any rank is
    /// an error on every rank (this rank's own, else "failed on another
    /// rank"), so no rank goes on into a collective one of them skipped.
    /// Collective over the world.
    pub fn agree(&self, op: &'static str, local: ScrResult<()>) -> ScrResult<()> {
        let all = self.world.all_true(local.is_ok())?;
        local?;
        if !all {
            return Err(ScrError::elsewhere(op, None));
        }
        Ok(())
    }

    /// [`Job::write_filemap`] on every rank, agreed ([`Job::agree`]).
    /// Collective over the world.
    pub fn write_filemap_agreed(&self) -> ScrResult<()> {
        self.agree("write the filemap", self.write_filemap())
    }

    /// This rank's filemap and its node's master filemap, agreed
    /// ([`Job::agree`]; the master filemap is gathered even when this
    /// rank's own write failed). Collective over the world and the node.
    pub fn write_filemaps_agreed(&self) -> ScrResult<()> {
        let own = self.write_filemap();
        let master = self.write_master_filemap();
        self.agree("write the filemap", own.and(master))
    }

    /// Write the node's master filemap (collective over the node).
    pub fn write_master_filemap(&self) -> ScrResult<()> {
        let mine = self.filemap_path().to_string_lossy().into_owned();
        let all = self.node_comm.gather_bytes(0, mine.as_bytes())?;
        if let Some(all) = all {
            let master = MasterFilemap {
                files: all
                    .iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect(),
            };
            master.write_file(self.real(&self.cntl.join(MASTER_FILEMAP_FILE)))?;
        }
        Ok(())
    }

    /// How `dset` is flushed: the type of the store its redundancy
    /// descriptor caches it in (`STORE … FLUSH=`), else `SCR_FLUSH_TYPE`.
    pub fn flush_type(&self, dset: DatasetId) -> FlushType {
        let base = self.filemap.desc(dset, self.rank()).ok().flatten();
        base.and_then(|d| self.stores.iter().find(|s| s.base.to_record() == d.base))
            .map_or(self.settings.flush.flush_type.effective(), |s| s.flush)
    }

    /// The dataset descriptor of `dset` as this rank recorded it.
    pub fn dataset(&self, dset: DatasetId) -> Option<Dataset> {
        self.filemap.dataset(dset, self.rank()).ok().flatten()
    }

    /// Files this rank owns in `dset` with their meta (type FULL).
    pub fn app_files(&self, dset: DatasetId) -> Vec<(String, Meta)> {
        let r = self.rank();
        self.filemap
            .list_files(dset, r)
            .into_iter()
            .filter_map(|f| {
                let m = self.filemap.meta(dset, r, &f).ok().flatten()?;
                (m.file_type.unwrap_or(FileType::Full) == FileType::Full).then_some((f, m))
            })
            .collect()
    }

    /// Redundancy files this rank holds in `dset` with their meta.
    pub fn redundancy_files(&self, dset: DatasetId) -> Vec<(String, Meta)> {
        let r = self.rank();
        self.filemap
            .list_files(dset, r)
            .into_iter()
            .filter_map(|f| {
                let m = self.filemap.meta(dset, r, &f).ok().flatten()?;
                (m.file_type.unwrap_or(FileType::Full) != FileType::Full).then_some((f, m))
            })
            .collect()
    }

    /// Sum of `v` over all ranks.
    pub fn sum(&self, v: i64) -> ScrResult<i64> {
        let mut x = [v];
        self.world.allreduce_i64(&mut x, ReduceOp::Sum)?;
        Ok(x[0])
    }

    /// Maximum of `v` over all ranks.
    pub fn max(&self, v: i64) -> ScrResult<i64> {
        let mut x = [v];
        self.world.allreduce_i64(&mut x, ReduceOp::Max)?;
        Ok(x[0])
    }
}

/// A process's place in the sets of one redundancy descriptor.
struct SetPlace {
    /// World ranks of its set, in set-rank order.
    members: Vec<i64>,
    /// The set's id (the color of its communicator).
    group_id: i64,
    /// Its rank in the set.
    group_rank: u64,
    /// How many sets the descriptor has.
    groups: u64,
}

/// SET_SIZE and the smallest useful set of an XOR or RS descriptor (2 for
/// XOR, k + 1 for RS with SET_FAILURES = k).
fn xor_rs_geometry(ckpt: &CkptDesc) -> (usize, usize) {
    let k = ckpt.set_failures.max(1) as usize;
    let min_members = if ckpt.copy_type == CopyType::Rs {
        k + 1
    } else {
        2
    };
    ((ckpt.set_size as usize).max(min_members), min_members)
}

/// Whether descriptor `ckpt` needs every rank's node name: PARTNER does
/// (its plan over nodes and its node tags).
fn needs_node_names(ckpt: &CkptDesc) -> bool {
    ckpt.copy_type == CopyType::Partner
}

/// Whether descriptor `ckpt`'s sets are XOR or RS sets over nodes, which
/// [`layout::node_set`] finds without the whole plan.
fn sets_over_nodes(ckpt: &CkptDesc) -> bool {
    matches!(ckpt.copy_type, CopyType::Xor | CopyType::Rs) && ckpt.group == "NODE"
}

/// The prefix directory, absolute and reduced (the working directory when
/// SCR_PREFIX is not set).
fn prefix_of(settings: &Settings) -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let raw = settings.job.prefix.clone().unwrap_or_else(|| cwd.clone());
    spath::absolute(&raw, &cwd)
}

/// The enabled stores of the configuration in order, or the one given by
/// SCR_CACHE_BASE/SCR_CACHE_SIZE when it names none.
fn stores_of(descs: &[crate::config::StoreDesc], settings: &Settings) -> Vec<Store> {
    // A refused type (BBAPI, DATAWARP; warned at init) has no effect.
    let default = settings.flush.flush_type.effective();
    let mut stores: Vec<Store> = descs
        .iter()
        .filter(|s| s.enabled && s.count > 0)
        .map(|s| Store {
            base: LogicalPath::new(&s.path),
            count: s.count,
            flush: s
                .flush
                .as_deref()
                .and_then(FlushType::parse)
                .filter(|t| t.is_supported())
                .unwrap_or(default),
        })
        .collect();
    if stores.is_empty() {
        stores.push(Store {
            base: LogicalPath::new(&settings.cache.cache_base),
            count: settings.cache.cache_size.max(1),
            flush: default,
        });
    }
    stores
}

/// Create this node's control directory and each store's job directory
/// (run by one process per node).
fn create_node_dirs(
    node: &NodeIdentity,
    cntl_base: &LogicalPath,
    stores: &[Store],
    user: &str,
    jobid: &str,
) -> ScrResult<()> {
    let real_cntl_base = node.real(cntl_base);
    fs::create_dir_all(&real_cntl_base).map_err(io_err(&real_cntl_base, "create control base"))?;
    dirs::create_job_dir(&real_cntl_base, user, jobid)?;
    for s in stores {
        let real = node.real(&s.base);
        fs::create_dir_all(&real).map_err(io_err(&real, "create cache base"))?;
        dirs::create_job_dir(&real, user, jobid)?;
    }
    Ok(())
}

/// A set of one member protects nothing beyond SINGLE: say so once.
fn warn_single_member_sets(sets: &[RedundancySet]) {
    for d in sets {
        let rd = &d.descriptor;
        if rd.copy_type != CopyType::Single && rd.members.len() < 2 {
            eprintln!(
                "SCR: warning: CKPT={} {} has a single-member set: it protects nothing beyond SINGLE",
                rd.index,
                rd.copy_type.as_str()
            );
        }
    }
}

/// Every member of a redundancy set must have computed the same set: the
/// encode sends each member's data to the ranks it believes are its
/// partners, so two members disagreeing would protect a checkpoint with
/// parity nobody can rebuild from. Checked once per descriptor at init
/// (one allgather over the set); a disagreement is a bug in the set
/// construction, so it stops the job. Collective over `set`.
fn agree_on_members(set: &dyn Comm, group_id: i64, members: &[i64]) -> ScrResult<()> {
    assert_eq!(
        set.size(),
        members.len(),
        "set {group_id}: its communicator has one process per member"
    );
    let mine: Vec<u8> = std::iter::once(group_id)
        .chain(members.iter().copied())
        .flat_map(i64::to_be_bytes)
        .collect();
    let all = set.allgather_bytes(&mine)?;
    assert!(
        all.iter().all(|theirs| *theirs == mine),
        "set {group_id}: every member computed the same members {members:?}"
    );
    Ok(())
}

/// Dataset descriptors found for a set of datasets: id → descriptor.
pub type DatasetMap = BTreeMap<i64, Dataset>;

/// SCR_ENCODE_ASYNC (or a descriptor's ENCODE_ASYNC) lends set
/// communicators to a background thread, which MPI allows only under
/// `MPI_THREAD_MULTIPLE`: without it every set protects synchronously and
/// rank 0 says why, naming the setting. Returns whether it refused.
pub(crate) fn refuse_async_without_threads(world: &dyn Comm, sets: &mut [RedundancySet]) -> bool {
    if !sets.iter().any(|s| s.encode_async) || world.thread_movable() {
        return false;
    }
    if world.rank() == 0 {
        let which: Vec<String> = sets
            .iter()
            .filter(|s| s.encode_async)
            .map(|s| format!("CKPT={}", s.descriptor.index))
            .collect();
        eprintln!(
            "SCR: warning: SCR_ENCODE_ASYNC refused for {}: MPI does not provide \
             MPI_THREAD_MULTIPLE (initialise it with MPI_Init_thread and \
             MPI_THREAD_MULTIPLE, or with OpenMPI set OMPI_MPI_THREAD_LEVEL=3); \
             checkpoints are protected before SCR_Complete_output returns",
            which.join(", ")
        );
    }
    for s in sets.iter_mut() {
        s.encode_async = false;
    }
    true
}
