//! Fault plans as data: which fault, where, when (JSON or TOML files).
//!
//! A [`Plan`] is a list of [`Fault`]s, each a [`What`] and a [`When`].
//! Faults that happen inside the library's processes (kill a rank, kill a
//! node's ranks, exit, injected I/O errors, slow I/O) become the
//! `SCR_FAULT_PLAN` of a run ([`Plan::to_env`]); the others (corruption,
//! PFS outage, cache full, a node's directories) are applied by the harness
//! with [`crate::inject`] at the plan's moments ([`Plan::external`]).
//!
//! JSON:
//! ```json
//! {"name": "kill rank 2 as its 3rd encode begins, then damage a filemap",
//!  "faults": [
//!   {"what": {"kind": "kill-rank", "rank": 2},
//!    "when": {"at": "point", "point": "redundancy.encode", "hit": 3}},
//!   {"what": {"kind": "corrupt",
//!             "target": {"area": "cache", "node": "n1", "select": {"role": "filemap"}},
//!             "how": {"kind": "bit-flips", "count": 4}},
//!    "when": {"at": "after-run", "run": 1}}]}
//! ```
//! TOML:
//! ```toml
//! name = "node n1 dies during the second flush"
//! [[faults]]
//! what = { kind = "kill-node", node = "n1", then = "make-unreadable" }
//! when = { at = "point", point = "flush.file.copied", hit = 2 }
//! [[faults]]
//! what = { kind = "pfs-outage" }
//! when = { at = "between-checkpoints", after = 3 }
//! ```
//!
//! Application moments map to the API's injection points
//! ([`POINT_START_OUTPUT`], [`POINT_COMPLETE_OUTPUT`]) and to the test
//! application's own [`POINT_COMPUTE`],
//! so "kill rank 1 during Complete of checkpoint 2" is the 2nd hit of
//! `api.complete_output` on rank 1.
//!
//! Submodules by concern: what a fault does ([`What`]), which files it
//! damages ([`Target`]), when it happens ([`When`]), checking a plan
//! against a job ([`Plan::validate`]), and the in-process part handed to
//! the fault runtime, the `faultrt` crate ([`Plan::to_env`]).

use std::collections::BTreeSet;
use std::path::Path;

use serde::{Deserialize, Serialize};

mod runtime;
mod target;
mod validate;
mod what;
mod when;

pub use target::{Area, Role, Selector, Target};
pub use validate::{PlanError, Topology, Warning};
pub use what::{Corruption, NodeAftermath, OutageMethod, What};
pub use when::When;

/// Injection point reached when the application calls Start_output (once per output, 1-based).
pub const POINT_START_OUTPUT: &str = "api.start_output";
/// Injection point reached inside Complete_output, before the dataset is marked complete.
pub const POINT_COMPLETE_OUTPUT: &str = "api.complete_output";
/// Injection point reached when Complete_output has returned on this rank
/// (other ranks may still be finishing theirs).
pub const POINT_AFTER_COMPLETE: &str = "api.complete_output.done";
/// The application's "between checkpoints N and N+1" moment: the test
/// application (`scr_app`) passes it once per checkpoint after a barrier
/// that follows Complete_output, so every rank has finished checkpoint N
/// (a fault at [`POINT_AFTER_COMPLETE`] can kill ranks still committing N).
pub const POINT_COMPUTE: &str = "app.compute";
/// Injection point of `scr copy` (the scavenge on one node), reached after
/// each file copied to the prefix.
pub const POINT_SCAVENGE_FILE: &str = "scavenge.file";

/// Injection points the library and `scr_app` have, every one of them
/// (`faultsim/tests/known_points.rs` compares the list with the sources;
/// names in other plans are allowed, with a [`Warning`]: plans may target
/// a newer library).
pub const KNOWN_POINTS: &[&str] = &[
    POINT_START_OUTPUT,
    POINT_COMPLETE_OUTPUT,
    POINT_AFTER_COMPLETE,
    POINT_COMPUTE,
    // scr_app's own "during file write" moment (testing/src/bin/scr_app.rs).
    "app.file.write",
    // Entry of the redundancy encode at Complete_output, every scheme.
    "redundancy.encode",
    // SCR_ENCODE_ASYNC: entry of the background encode thread (every
    // scheme), and once every rank recorded the dataset protected on disk.
    "protect.background",
    "protect.protected",
    "flush.file.copied",
    "flush.async.file.copied",
    "rebuild.init",
    // The restart in place recorded every cached dataset restored or
    // dropped in each rank's filemap; the master filemap is next.
    "rebuild.recorded",
    "fetch.file",
    POINT_SCAVENGE_FILE,
    "copy.file.written",
    // Every durable step of a metadata update (the kvtree writer): after
    // the temporary file's fsync, after its rename into place.
    "meta.filemap.synced",
    "meta.filemap.renamed",
    "meta.rank2file.synced",
    "meta.rank2file.renamed",
    "meta.summary.synced",
    "meta.summary.renamed",
    "meta.index.synced",
    "meta.index.renamed",
    "meta.flush.synced",
    "meta.flush.renamed",
    "meta.halt.synced",
    "meta.halt.renamed",
    "meta.nodes.synced",
    "meta.nodes.renamed",
    "meta.transfer.synced",
    "meta.transfer.renamed",
    "meta.other.synced",
    "meta.other.renamed",
    // A redundancy file (partner copy, rebuilt file) or a parity file
    // (XOR, RS) after its fsync, before the filemap records it.
    "redundancy.file.synced",
    "redundancy.parity.synced",
    // Before each piece of a member's files is read for redundancy (the
    // encode's and the rebuild's transfers).
    "redundancy.piece.read",
];

/// Most faults in one plan.
pub const MAX_FAULTS: usize = 1024;

fn is_default<T: Default + PartialEq>(v: &T) -> bool {
    *v == T::default()
}

fn one() -> u64 {
    1
}

fn first_run() -> u32 {
    1
}

fn is_first_run(r: &u32) -> bool {
    *r == 1
}

/// A fault plan: a list of faults, with an optional name and the seed it came from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// What the plan does, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The seed that generated it (see [`crate::seed`]). Written as a
    /// string when above `i64::MAX` (TOML integers are 64-bit signed).
    #[serde(default, skip_serializing_if = "Option::is_none", with = "seed_serde")]
    pub seed: Option<u64>,
    /// The faults.
    #[serde(default)]
    pub faults: Vec<Fault>,
}

/// Seeds are u64, TOML integers i64: large seeds travel as decimal strings.
mod seed_serde {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Repr {
        Int(i64),
        Text(String),
    }

    pub fn serialize<S: Serializer>(seed: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match seed.map(|v| i64::try_from(v).map_err(|_| v)) {
            None => s.serialize_none(),
            Some(Ok(v)) => s.serialize_some(&Repr::Int(v)),
            Some(Err(v)) => s.serialize_some(&Repr::Text(v.to_string())),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let value = match Option::<Repr>::deserialize(d)? {
            None => return Ok(None),
            Some(v) => v,
        };
        let parsed = match value {
            Repr::Int(v) => u64::try_from(v).ok(),
            Repr::Text(t) => t.trim().parse::<u64>().ok(),
        };
        parsed
            .map(Some)
            .ok_or_else(|| serde::de::Error::custom("seed must be an integer in 0..=2^64-1"))
    }
}

/// One fault: what happens and when.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Fault {
    /// What happens.
    pub what: What,
    /// When.
    pub when: When,
    /// The launch of the run loop (1-based) in which an in-run fault
    /// happens; default the first. `before-run`/`after-run` name their own.
    #[serde(default = "first_run", skip_serializing_if = "is_first_run")]
    pub run: u32,
}

impl Plan {
    /// Read a plan file: TOML when the name ends in `.toml`, JSON otherwise.
    pub fn read(path: impl AsRef<Path>) -> Result<Plan, PlanError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| PlanError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        if path.extension().is_some_and(|e| e == "toml") {
            Plan::from_toml(&text, &path.display().to_string())
        } else {
            Plan::from_json(&text, &path.display().to_string())
        }
    }

    /// Parse JSON; `origin` names the source in errors.
    pub fn from_json(text: &str, origin: &str) -> Result<Plan, PlanError> {
        serde_json::from_str(text).map_err(|e| PlanError::Parse {
            path: origin.to_string(),
            reason: e.to_string(),
        })
    }

    /// Parse TOML; `origin` names the source in errors.
    pub fn from_toml(text: &str, origin: &str) -> Result<Plan, PlanError> {
        toml::from_str(text).map_err(|e| PlanError::Parse {
            path: origin.to_string(),
            reason: e.to_string(),
        })
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        // A Plan is plain data (strings, integers, finite floats from
        // validated plans); serializing it cannot fail except on a NaN
        // fraction, which serde_json writes as null.
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// TOML, or why not (TOML has no null: a NaN fraction cannot be written).
    pub fn to_toml(&self) -> Result<String, PlanError> {
        toml::to_string(self).map_err(|e| PlanError::Parse {
            path: "<toml output>".to_string(),
            reason: e.to_string(),
        })
    }

    /// Faults the harness applies from outside (corruption, outages, cache
    /// full, and the directory part of node kills), with their index.
    pub fn external(&self) -> impl Iterator<Item = (usize, &Fault)> {
        self.faults.iter().enumerate().filter(|(_, f)| {
            !f.what.in_process()
                || match f.what {
                    What::KillNode { then, .. } => {
                        then != NodeAftermath::Keep
                            || (f.when.as_point().is_none() && f.when.as_postrun_point().is_none())
                    }
                    _ => false,
                }
        })
    }

    /// The distinct points this plan names, sorted.
    pub fn points(&self) -> BTreeSet<String> {
        self.faults
            .iter()
            .filter_map(|f| {
                f.when
                    .as_point()
                    .map(|(p, ..)| p.to_string())
                    .or_else(|| f.when.as_postrun_point().map(|(p, ..)| p.to_string()))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
