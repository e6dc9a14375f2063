//! The API's side of asynchronous protection (SCR_ENCODE_ASYNC,
//! [`crate::dataset::protect`]): which calls wait for the background
//! encode, and what happens once it is settled (the checkpoint becomes a
//! restart candidate and is flushed when due).

use super::Scr;
use crate::dataset::protect::{self, Protecting};
use crate::error::ScrResult;

/// A checkpoint being protected in the background, with what its
/// Complete_output would have done next.
#[derive(Debug)]
pub(super) struct Pending {
    pub protecting: Protecting,
    /// It is also output (SCR_FLAG_OUTPUT): flush it once protected.
    pub output: bool,
    /// Its entry in Need_checkpoint's costs: the time the application
    /// waits for the background encode at settle is added to it.
    pub cost_entry: Option<usize>,
}

impl Scr {
    /// What each checkpoint of this run cost the application, as
    /// Need_checkpoint's overhead and adaptive policies count it:
    /// (checkpoint id, seconds blocked from Start_output to the end of
    /// Complete_output, plus, with SCR_ENCODE_ASYNC, the seconds a later
    /// call waited for its background encode). Not in SCR's API.
    pub fn checkpoint_costs(&self) -> &[(i64, f64)] {
        &self.need.costs
    }

    /// Whether a checkpoint is being protected in the background.
    pub fn protecting(&self) -> bool {
        self.pending_protect.is_some()
    }

    /// Wait until the newest checkpoint is protected (SCR_ENCODE_ASYNC):
    /// its background encode finished on every rank and it is recorded
    /// complete, or it failed and was deleted. Returns whether a checkpoint
    /// was waited for and ended protected. Collective. Not in SCR's API:
    /// the next Start_output and finalize wait anyway; this lets an
    /// application (or a benchmark) choose the moment.
    pub fn wait_protection(&mut self) -> ScrResult<bool> {
        let waited = self.pending_protect.as_ref().map(|p| p.protecting.dset());
        self.settle_protection(false)?;
        Ok(waited.is_some_and(|d| self.candidates.first() == Some(&d)))
    }

    /// Wait for the background protection, if any, and settle it on every
    /// rank (collective): a protected checkpoint becomes the newest restart
    /// candidate and is recorded in the flush file and flushed when due
    /// (`force`: a halt makes it due); a failed one was deleted. Called by
    /// every collective call that changes the filemap or the cache, or
    /// answers which checkpoint to restart from: Start_output,
    /// Have_restart, Start_restart, Current, Delete, a halt's exit and
    /// finalize.
    pub(super) fn settle_protection(&mut self, force: bool) -> ScrResult<()> {
        let Some(pending) = self.pending_protect.take() else {
            return Ok(());
        };
        let Some(job) = self.job.as_mut() else {
            return Ok(());
        };
        let waiting = self.clock.now();
        let settled = protect::settle(job, pending.protecting)?;
        // What the checkpoint cost the application is the time it was
        // blocked in Complete_output plus what it waits here: the overhead
        // and adaptive policies of Need_checkpoint see both.
        let waited = self.clock.elapsed(waiting).as_secs_f64();
        if let Some(entry) = pending.cost_entry.and_then(|i| self.need.costs.get_mut(i)) {
            entry.1 += waited;
            self.need.total_cost_s += waited;
        }
        if !settled.protected {
            return Ok(());
        }
        self.candidates.insert(0, settled.dset);
        self.after_complete(settled.dset, true, pending.output, force)
    }
}
