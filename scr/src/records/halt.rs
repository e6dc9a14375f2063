//! Halt file (`halt.scr` in the prefix directory, guide section "Halt
//! file"): conditions under which a run should stop, updated by the
//! library and by `scr_halt`.
//!
//! Times are seconds since the epoch stored as i64: SCR 3.1 reads them into
//! a 32-bit `int`, a known defect that breaks in 2038.

use super::{set_opt, Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The halt file's name.
pub const HALT_FILE: &str = "halt.scr";

/// Halt conditions (`scr_halt_*`). Each is optional; an absent one never fires.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Halt {
    /// `CheckpointsLeft`: checkpoints still allowed; the run halts at 0.
    pub checkpoints_left: Option<i64>,
    /// `ExitAfter`: halt once the time passes this, seconds since the epoch.
    pub exit_after_s: Option<i64>,
    /// `ExitBefore`: halt `HaltSeconds` before this time, seconds since the epoch.
    pub exit_before_s: Option<i64>,
    /// `HaltSeconds`: margin before `ExitBefore` (also before the allocation's end).
    pub halt_seconds_s: Option<i64>,
    /// `ExitReason`: when set, the run halts, e.g. `SCR_FINALIZE_CALLED`.
    pub exit_reason: Option<String>,
    /// Fields this version does not interpret, kept verbatim.
    pub extra: KvTree,
}

const KNOWN: &[&str] = &[
    "CheckpointsLeft",
    "ExitAfter",
    "ExitBefore",
    "HaltSeconds",
    "ExitReason",
];

/// The reason the run finalised normally (written by `SCR_Finalize`).
pub const REASON_FINALIZE_CALLED: &str = "SCR_FINALIZE_CALLED";

impl Halt {
    /// Why a job should not be run (again) at `now_s`, if so: a launcher's
    /// view, as `scr_retries_halt`, where any `ExitReason` counts, including
    /// `SCR_FINALIZE_CALLED`. `ExitBefore` without `HaltSeconds` uses a
    /// margin of 0. A running job decides with [`crate::halt::evaluate`].
    pub fn halt_reason(&self, now_s: i64) -> Option<String> {
        if let Some(r) = &self.exit_reason {
            return Some(format!("reason: {r}"));
        }
        if self.checkpoints_left.is_some_and(|n| n <= 0) {
            return Some("no checkpoints left".into());
        }
        if let Some(t) = self.exit_after_s {
            if now_s >= t {
                return Some(format!("exit after {t}"));
            }
        }
        if let Some(t) = self.exit_before_s {
            let margin = self.halt_seconds_s.unwrap_or(0);
            if now_s >= t.saturating_sub(margin) {
                return Some(format!("exit before {t} with {margin} s margin"));
            }
        }
        None
    }
}

impl Record for Halt {
    const RECORD: &'static str = "halt file";
    /// A halt file holds five conditions and a few unknown keys: 1 MiB is
    /// thousands of times that, and keeps a damaged or planted file (2 M
    /// keys took 988 MB to read) from costing more than a few MB.
    const MAX_FILE_BYTES: u64 = 1 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = self.extra.clone();
        set_opt(&mut t, "CheckpointsLeft", self.checkpoints_left);
        set_opt(&mut t, "ExitAfter", self.exit_after_s);
        set_opt(&mut t, "ExitBefore", self.exit_before_s);
        set_opt(&mut t, "HaltSeconds", self.halt_seconds_s);
        set_opt(&mut t, "ExitReason", self.exit_reason.as_deref());
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let n = Node::root(Self::RECORD, tree);
        Ok(Halt {
            checkpoints_left: n.opt_i64("CheckpointsLeft")?,
            exit_after_s: n.opt_i64("ExitAfter")?,
            exit_before_s: n.opt_i64("ExitBefore")?,
            halt_seconds_s: n.opt_i64("HaltSeconds")?,
            exit_reason: n.opt_str("ExitReason")?,
            extra: n.extra(KNOWN),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    const SPEC: &str = "
CheckpointsLeft
  7
ExitAfter
  1298937600
ExitBefore
  1298944800
HaltSeconds
  1200
ExitReason
  SCR_FINALIZE_CALLED
";

    fn example() -> Halt {
        Halt {
            checkpoints_left: Some(7),
            exit_after_s: Some(1_298_937_600),
            exit_before_s: Some(1_298_944_800),
            halt_seconds_s: Some(1200),
            exit_reason: Some(REASON_FINALIZE_CALLED.into()),
            extra: KvTree::new(),
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Halt::from_tree(&spec).unwrap(), example());
    }

    #[test]
    fn file_roundtrip_keeps_64_bit_times() {
        let dir = tempdir();
        let path = dir.path().join(HALT_FILE);
        let mut h = example();
        h.exit_after_s = Some(4_102_444_800); // 2100-01-01, past 2^31
        h.write_file(&path).unwrap();
        assert_eq!(Halt::read_file(&path).unwrap(), h);
    }

    #[test]
    fn conditions() {
        let mut h = Halt::default();
        assert_eq!(h.halt_reason(0), None);
        h.exit_before_s = Some(1000);
        h.halt_seconds_s = Some(100);
        assert_eq!(h.halt_reason(899), None);
        assert!(h.halt_reason(900).is_some());
        h = Halt {
            checkpoints_left: Some(0),
            ..Halt::default()
        };
        assert!(h.halt_reason(0).is_some());
        h = Halt {
            exit_after_s: Some(10),
            ..Halt::default()
        };
        assert_eq!(h.halt_reason(9), None);
        assert!(h.halt_reason(10).is_some());
        assert!(example()
            .halt_reason(0)
            .unwrap()
            .contains(REASON_FINALIZE_CALLED));
    }

    #[test]
    fn locked_update_decrements() {
        let dir = tempdir();
        let path = dir.path().join(HALT_FILE);
        // A missing halt file starts empty.
        Halt::update_file(&path, |h| h.checkpoints_left = Some(2)).unwrap();
        let left = Halt::update_file(&path, |h| {
            h.checkpoints_left = h.checkpoints_left.map(|n| n - 1);
            h.checkpoints_left
        })
        .unwrap();
        assert_eq!(left, Some(1));
        assert_eq!(Halt::read_file(&path).unwrap().checkpoints_left, Some(1));
        // Invalid contents are reported with the file name and left alone.
        let mut t = example().to_tree();
        t.set_val("HaltSeconds", "soon");
        crate::kvtree::file::write(&path, &t).unwrap();
        let e = Halt::update_file(&path, |h| h.exit_reason = None).unwrap_err();
        assert!(
            e.to_string().contains("halt.scr") && e.to_string().contains("HaltSeconds"),
            "{e}"
        );
        assert_eq!(crate::kvtree::file::read(&path).unwrap(), t);
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        t.set_val("ExitAfter", "tomorrow");
        let e = Halt::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == "ExitAfter"),
            "{e}"
        );
        assert_eq!(Halt::from_tree(&KvTree::new()).unwrap(), Halt::default());
    }
}
