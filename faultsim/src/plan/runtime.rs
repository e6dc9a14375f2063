//! The faults that happen inside the library's processes, as the fault
//! runtime (`faultrt`, behind `scr`'s `fault-injection` feature) reads them
//! from `SCR_FAULT_PLAN`.

use super::{Fault, Plan, What};
use crate::runtime::{Action, FaultPlan, FaultSpec};

impl Plan {
    /// The runtime's form of one fault, `None` for faults the harness
    /// applies from outside.
    pub(super) fn spec_of(&self, f: &Fault) -> Option<FaultSpec> {
        let (point, hit, repeat, when_rank) = f
            .when
            .as_point()
            .or_else(|| f.when.as_postrun_point().map(|(p, h, r)| (p, h, r, None)))?;
        let (action, rank, node) = match &f.what {
            What::KillRank { rank } => (Action::Kill, Some(*rank), None),
            What::PowerLoss { rank } => (Action::PowerLoss, Some(*rank), None),
            What::ExitRank { rank, code } => (Action::Exit { code: *code }, Some(*rank), None),
            What::KillNode { node, .. } => (Action::KillNode, when_rank, Some(node.clone())),
            // The driver has no rank and no node: the point, which the
            // plan's author chose among those only the driver passes, is
            // the whole match.
            What::KillPostrun => (Action::Kill, None, None),
            What::PostrunPowerLoss { node } => (Action::PowerLoss, None, node.clone()),
            What::SlowIo { delay_ms } => (Action::Delay { ms: *delay_ms }, when_rank, None),
            What::IoError { error } => (Action::Error { kind: *error }, when_rank, None),
            _ => return None,
        };
        Some(FaultSpec {
            point: point.to_string(),
            hit,
            repeat,
            rank,
            node,
            action,
        })
    }

    /// The library-side faults of launch `run`, as the fault runtime reads them.
    pub fn fault_plan(&self, run: u32) -> FaultPlan {
        FaultPlan {
            faults: self
                .faults
                .iter()
                .filter(|f| f.run == run && !f.when.is_postrun())
                .filter_map(|f| self.spec_of(f))
                .collect(),
        }
    }

    /// The library-side faults of `scr postrun` (`at = "postrun"` with a
    /// point), as the fault runtime reads them in the scavenge's processes.
    pub fn postrun_fault_plan(&self) -> FaultPlan {
        FaultPlan {
            faults: self
                .faults
                .iter()
                .filter(|f| f.when.as_postrun_point().is_some())
                .filter_map(|f| self.spec_of(f))
                .collect(),
        }
    }

    /// The `SCR_FAULT_PLAN` value for launch `run` (compact form), or `None`
    /// when no fault of that launch happens inside the library.
    pub fn to_env(&self, run: u32) -> Option<String> {
        let plan = self.fault_plan(run);
        (!plan.faults.is_empty()).then(|| plan.to_string())
    }
}
