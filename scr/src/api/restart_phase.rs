//! The restart phase: SCR_Route_file between SCR_Start_restart and
//! SCR_Complete_restart, and the restart's end (a rejected restart drops
//! the checkpoint and loads the next older one).

use super::*;

/// A restart phase (between SCR_Start_restart and SCR_Complete_restart).
pub struct RestartPhase<'a> {
    pub(super) scr: &'a mut Scr,
    pub(super) dset: DatasetId,
    pub(super) name: String,
    pub(super) completed: bool,
    pub(super) started: Tick,
}

impl RestartPhase<'_> {
    /// The name of the checkpoint being loaded.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The dataset id being loaded.
    pub fn dataset_id(&self) -> i64 {
        self.dset.get()
    }

    /// SCR_Route_file within a restart: the path in cache of the file this
    /// rank wrote as `name` (same naming as when it was routed for output;
    /// a bare file name is looked up by name, as SCR allows). Fails when
    /// the file is not part of the checkpoint or not readable. Not collective.
    pub fn route_file(&mut self, name: impl AsRef<Path>) -> ScrResult<PathBuf> {
        let name = name.as_ref();
        let text = name.to_string_lossy().into_owned();
        check_name(&text)?;
        let dset = self.dset;
        let job = self
            .scr
            .job("SCR_Route_file")?
            .ok_or_else(|| ScrError::NoSuchRestartFile {
                name: text.clone(),
                why: "SCR is disabled".into(),
            })?;
        let me = job.rank();
        let cwd = std::env::current_dir().map_err(io_err(".", "current directory"))?;
        let abs = spath::absolute(name, &cwd);
        let mut by_name = None;
        let mut found = None;
        for f in job.filemap.list_files(dset, me) {
            let Some(meta) = job.filemap.meta(dset, me, &f)? else {
                continue;
            };
            if meta.file_type.unwrap_or(FileType::Full) != FileType::Full {
                continue;
            }
            let orig = match (&meta.orig_path, &meta.orig_name) {
                (Some(p), Some(n)) => Some(Path::new(p).join(n)),
                _ => None,
            };
            if orig.as_deref() == Some(abs.as_path()) {
                found = Some(f.clone());
                break;
            }
            if meta.orig_name.as_deref() == name.file_name().and_then(|n| n.to_str()) {
                by_name = Some(f.clone());
            }
        }
        let logical = match found.or(by_name) {
            Some(l) => l,
            // Read in place: a file this rank shared with others is
            // recorded under its owner only, and is read where it is (as
            // LLNL SCR 3.1 returns any readable path in the prefix).
            None if job.is_bypass(dset) && spath::is_within(&abs, &job.prefix) && abs.is_file() => {
                return Ok(abs);
            }
            None => {
                return Err(ScrError::NoSuchRestartFile {
                    name: text.clone(),
                    why: format!("rank {me} wrote no such file in {}", self.name),
                })
            }
        };
        let real = job.file_real(dset, &logical);
        fs::File::open(&real).map_err(|e| ScrError::NoSuchRestartFile {
            name: text,
            why: format!("{}: {e}", real.display()),
        })?;
        Ok(real.into_path_buf())
    }

    /// SCR_Complete_restart: true only if every rank read its files
    /// successfully. On failure the checkpoint is dropped from the cache and
    /// the next older one becomes the restart candidate, so the application
    /// can loop over [`Scr::have_restart`]. Collective.
    pub fn complete(mut self, valid: bool) -> ScrResult<bool> {
        self.finish(valid)
    }

    fn finish(&mut self, valid: bool) -> ScrResult<bool> {
        self.completed = true;
        let dset = self.dset;
        let Some(job) = self.scr.job("SCR_Complete_restart")? else {
            return Ok(valid);
        };
        let all = job.world.all_true(valid)?;
        let event = if all {
            EventType::RestartSuccess
        } else {
            EventType::RestartFail
        };
        job.log(
            Entry::event(event)
                .dset(dset)
                .name(self.name.as_str())
                .secs(job.clock.elapsed(self.started).as_secs_f64()),
        );
        if all {
            // The restart is done: nothing older is a candidate any more.
            self.scr.candidates.clear();
        } else {
            job.delete_dataset(dset)?;
            let fetch = job.settings.fetch.enabled || job.settings.fetch.global_restart;
            let fetched_here = self.scr.report.fetched == Some(dset.get());
            self.scr.candidates.retain(|&d| d != dset);
            // "SCR loads the next most recent checkpoint": from the prefix
            // when the cache has no older one (a fetched or bypass
            // dataset, or a cache holding one checkpoint).
            if self.scr.candidates.is_empty() && fetch {
                let job = self.scr.job.as_mut().expect("enabled: checked above");
                let f = crate::prefix::fetch::fetch_sync_below(job, Some(dset))?;
                if let Some(got) = f.fetched {
                    let id = DatasetId(got.id);
                    self.scr.candidates.push(id);
                    self.scr.report.available.push(id);
                    self.scr.report.fetched = Some(got.id);
                    self.scr.report.fetched_dir = Some(got.dir);
                }
                self.scr.report.fetch_failed.extend(f.failed);
            } else if fetched_here && !self.scr.candidates.is_empty() {
                // The next one is in cache: the prefix must not offer the
                // rejected copy to the next run over it (SCR_Init fetches a
                // newer checkpoint than the cache's).
                let job = self.scr.job.as_mut().expect("enabled: checked above");
                crate::prefix::fetch::step_current_below(job, dset)?;
            }
        }
        // Compute resumes unless the application may try an older one.
        if all || self.scr.candidates.is_empty() {
            self.scr.compute_start();
        }
        Ok(all)
    }
}

impl Drop for RestartPhase<'_> {
    fn drop(&mut self) {
        if !self.completed && !std::thread::panicking() {
            if let Err(e) = self.finish(false) {
                eprintln!("SCR: restart phase dropped without complete: {e}");
            }
        }
    }
}
