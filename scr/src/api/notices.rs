//! What SCR_Init tells the user on stderr (rank 0, in SCR's message form,
//! [`crate::log::msg`]): every configuration warning — ignored settings,
//! unknown names, refused parameters — always; with SCR_DEBUG >= 1 also
//! the job's shape and every parameter set by something other than the
//! table (LLNL's SCR prints its parameters at SCR_DEBUG=1).

use crate::cache::Job;
use crate::config::{ConfigWarning, Source};

/// Print init's notices on rank 0 and return the warnings (the same on
/// every rank: the configuration is rank 0's, broadcast).
pub(super) fn announce(job: &Job) -> Vec<ConfigWarning> {
    let warnings = job.cfg.all_warnings();
    if !job.rank().is_root() {
        return warnings;
    }
    for w in &warnings {
        job.msg.warn(w);
    }
    job.msg.dbg(
        1,
        format_args!(
            "init: {} ranks on {} nodes, prefix {}",
            job.world.size(),
            job.node_count,
            job.prefix.display()
        ),
    );
    for e in job.cfg.all() {
        if !matches!(e.source, Source::Default | Source::Derived { .. }) {
            job.msg
                .dbg(1, format_args!("{}={} ({})", e.name, e.value, e.source));
        }
    }
    warnings
}
