//! When a fault happens: at an injection point, at an application moment
//! (mapped to a point), between launches, or during `scr postrun`.

use serde::{Deserialize, Serialize};

#[cfg(doc)]
use super::POINT_SCAVENGE_FILE;
use super::{is_default, one, POINT_COMPLETE_OUTPUT, POINT_COMPUTE, POINT_START_OUTPUT};

/// When a fault happens.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "at", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum When {
    /// At an injection point of the library.
    Point {
        /// The point's name.
        point: String,
        /// The hit (1-based) of the point in the process (per rank).
        #[serde(default = "one")]
        hit: u64,
        /// Also on every later hit (slow I/O, persistent errors).
        #[serde(default, skip_serializing_if = "is_default")]
        repeat: bool,
        /// Only on this rank (for node faults: the rank that triggers it).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        rank: Option<u32>,
    },
    /// After output `after` completed and before output `after + 1` starts.
    BetweenCheckpoints {
        /// The output (1-based) just completed.
        after: u64,
    },
    /// During Start_output of output `checkpoint` (1-based).
    DuringStart {
        /// The output.
        checkpoint: u64,
    },
    /// During Complete_output of output `checkpoint` (1-based).
    DuringComplete {
        /// The output.
        checkpoint: u64,
    },
    /// Before launch `run` (1-based) of the run loop.
    BeforeRun {
        /// The launch.
        run: u32,
    },
    /// After launch `run` (1-based) of the run loop has ended.
    AfterRun {
        /// The launch.
        run: u32,
    },
    /// During `scr postrun`, the scavenge after the run loop's last launch.
    /// Without `point` the harness applies the fault from outside just
    /// before postrun starts (a node dies, files are damaged, the prefix
    /// goes away; transient faults are undone when postrun ends). With
    /// `point` the fault fires inside the scavenge's own processes (`scr
    /// copy` on each node, e.g. at [`POINT_SCAVENGE_FILE`]), matched by
    /// node rather than rank: no rank runs there.
    Postrun {
        /// The injection point, for faults inside the scavenge.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        point: Option<String>,
        /// The hit (1-based) of the point, counted per process (each node's
        /// `scr copy` counts its own files).
        #[serde(default = "one")]
        hit: u64,
        /// Also on every later hit.
        #[serde(default, skip_serializing_if = "is_default")]
        repeat: bool,
    },
}

impl When {
    /// The injection point and hit this moment stands for, if it is inside a run.
    pub fn as_point(&self) -> Option<(&str, u64, bool, Option<u32>)> {
        match self {
            When::Point {
                point,
                hit,
                repeat,
                rank,
            } => Some((point.as_str(), *hit, *repeat, *rank)),
            When::BetweenCheckpoints { after } => Some((POINT_COMPUTE, *after, false, None)),
            When::DuringStart { checkpoint } => {
                Some((POINT_START_OUTPUT, *checkpoint, false, None))
            }
            When::DuringComplete { checkpoint } => {
                Some((POINT_COMPLETE_OUTPUT, *checkpoint, false, None))
            }
            When::BeforeRun { .. } | When::AfterRun { .. } | When::Postrun { .. } => None,
        }
    }

    /// The injection point and hit of a fault inside `scr postrun`'s
    /// processes (`at = "postrun"` with a point).
    pub fn as_postrun_point(&self) -> Option<(&str, u64, bool)> {
        match self {
            When::Postrun {
                point: Some(p),
                hit,
                repeat,
            } => Some((p.as_str(), *hit, *repeat)),
            _ => None,
        }
    }

    /// True for the moments of `scr postrun` (with or without a point).
    pub fn is_postrun(&self) -> bool {
        matches!(self, When::Postrun { .. })
    }
}
