//! Checking a plan against a job: ranks and nodes exist, fields make sense,
//! each fault's kind fits its moment, no two faults contradict.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::{Corruption, Fault, Plan, Selector, What, When, KNOWN_POINTS, MAX_FAULTS};

/// The job a plan is checked against.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// The nodes, in rank order: ranks `i*ranks_per_node ..` run on `nodes[i]`.
    pub nodes: Vec<String>,
    /// Ranks on each node.
    pub ranks_per_node: u32,
}

impl Topology {
    /// `n` nodes named `n0`, `n1`, … with `ranks_per_node` ranks each.
    pub fn simulated(n: u32, ranks_per_node: u32) -> Topology {
        Topology {
            nodes: (0..n).map(|i| format!("n{i}")).collect(),
            ranks_per_node,
        }
    }

    /// Ranks in the job.
    pub fn ranks(&self) -> u32 {
        u32::try_from(self.nodes.len())
            .unwrap_or(u32::MAX)
            .saturating_mul(self.ranks_per_node)
    }

    /// The node of `rank`.
    pub fn node_of(&self, rank: u32) -> Option<&str> {
        let i = rank.checked_div(self.ranks_per_node)?;
        self.nodes.get(usize::try_from(i).ok()?).map(String::as_str)
    }
}

/// Why a plan is invalid. Every variant names the fault (0-based index).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// The file is neither valid JSON nor valid TOML for a plan.
    #[error("{path}: not a fault plan: {reason}")]
    Parse {
        /// The file (or `<string>`).
        path: String,
        /// The parser's message (line and column included).
        reason: String,
    },
    /// The plan file cannot be read.
    #[error("{path}: cannot read the plan: {reason}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        reason: String,
    },
    /// A rank outside the job.
    #[error("fault {index}: rank {rank} does not exist: the job has ranks 0..{ranks}")]
    NoSuchRank {
        /// The fault.
        index: usize,
        /// The rank.
        rank: u32,
        /// Ranks in the job.
        ranks: u32,
    },
    /// A node outside the job.
    #[error("fault {index}: node `{node}` is not one of the job's nodes ({nodes})")]
    NoSuchNode {
        /// The fault.
        index: usize,
        /// The node.
        node: String,
        /// The job's nodes, comma separated.
        nodes: String,
    },
    /// A field has a value that cannot work.
    #[error("fault {index}: {reason}")]
    Invalid {
        /// The fault.
        index: usize,
        /// What is wrong and what would work.
        reason: String,
    },
    /// This kind of fault cannot happen at that moment.
    #[error("fault {index}: {what} cannot happen {when}: {reason}")]
    BadMoment {
        /// The fault.
        index: usize,
        /// The fault's kind.
        what: String,
        /// The moment.
        when: String,
        /// Why, and what to use instead.
        reason: String,
    },
    /// Two faults contradict each other.
    #[error("faults {first} and {second} contradict each other: {reason}")]
    Contradiction {
        /// The earlier fault.
        first: usize,
        /// The later fault.
        second: usize,
        /// How.
        reason: String,
    },
    /// More than [`MAX_FAULTS`] faults.
    #[error("{count} faults: at most {MAX_FAULTS} are allowed")]
    TooMany {
        /// How many.
        count: usize,
    },
}

/// Something legal but suspicious in a plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub enum Warning {
    /// The point is not in [`KNOWN_POINTS`]: if the library has no such
    /// point the fault never fires (the harness sees that in the fault log).
    UnknownPoint {
        /// The fault.
        index: usize,
        /// The point.
        point: String,
    },
}

impl fmt::Display for Warning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Warning::UnknownPoint { index, point } => write!(
                f,
                "fault {index}: injection point `{point}` is not a known point; it fires only if the library has it"
            ),
        }
    }
}

fn kind_name(what: &What) -> String {
    serde_json::to_value(what)
        .ok()
        .and_then(|v| v.get("kind")?.as_str().map(str::to_string))
        .unwrap_or_else(|| "fault".to_string())
}

fn when_name(when: &When) -> String {
    serde_json::to_string(when).unwrap_or_else(|_| format!("{when:?}"))
}

/// What makes an in-process fault fire: run, point, hit, rank, node.
type Trigger = (u32, String, u64, Option<u32>, Option<String>);

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Plan {
    /// Check the plan against a job: ranks and nodes exist, fields make
    /// sense, each fault's kind fits its moment, no two faults contradict.
    /// Unknown injection point names are allowed and returned as warnings.
    pub fn validate(&self, topo: &Topology) -> Result<Vec<Warning>, PlanError> {
        if self.faults.len() > MAX_FAULTS {
            return Err(PlanError::TooMany {
                count: self.faults.len(),
            });
        }
        let mut warnings = Vec::new();
        for (index, fault) in self.faults.iter().enumerate() {
            Check { index, fault, topo }.fault(&mut warnings)?;
        }
        self.check_contradictions()?;
        Ok(warnings)
    }

    fn check_contradictions(&self) -> Result<(), PlanError> {
        // Two in-process faults with the same trigger: only the first would fire.
        let mut seen: Vec<(usize, Trigger)> = Vec::new();
        for (i, f) in self.faults.iter().enumerate() {
            let Some(spec) = self.spec_of(f) else {
                continue;
            };
            // Postrun faults are keyed apart from every launch's (run 0).
            let run = if f.when.is_postrun() { 0 } else { f.run };
            let key = (run, spec.point, spec.hit, spec.rank, spec.node);
            if let Some((first, _)) = seen.iter().find(|(_, k)| *k == key) {
                return Err(PlanError::Contradiction {
                    first: *first,
                    second: i,
                    reason:
                        "same point, hit, rank and node in the same run: only the first could fire"
                            .into(),
                });
            }
            seen.push((i, key));
        }
        // Deleting a file and also damaging it at the same moment.
        for (i, a) in self.faults.iter().enumerate() {
            for (j, b) in self.faults.iter().enumerate().skip(i + 1) {
                if let (
                    What::Corrupt {
                        target: ta,
                        how: ha,
                    },
                    What::Corrupt {
                        target: tb,
                        how: hb,
                    },
                ) = (&a.what, &b.what)
                {
                    let one_deletes =
                        matches!(ha, Corruption::Delete) != matches!(hb, Corruption::Delete);
                    if ta == tb && a.when == b.when && a.run == b.run && one_deletes {
                        return Err(PlanError::Contradiction {
                            first: i,
                            second: j,
                            reason: "the same files are deleted and damaged at the same moment"
                                .into(),
                        });
                    }
                }
            }
        }
        Ok(())
    }
}

/// One fault of a plan being checked against a job: the fault's index
/// goes into every error.
struct Check<'a> {
    index: usize,
    fault: &'a Fault,
    topo: &'a Topology,
}

impl Check<'_> {
    /// Every check of one fault: its run, its moment, its kind and how the
    /// kind fits the moment, in that order (the first problem is reported).
    fn fault(&self, warnings: &mut Vec<Warning>) -> Result<(), PlanError> {
        if self.fault.run == 0 {
            return Err(self.invalid("runs are numbered from 1".into()));
        }
        self.when(warnings)?;
        self.what()
    }

    fn invalid(&self, reason: String) -> PlanError {
        PlanError::Invalid {
            index: self.index,
            reason,
        }
    }

    fn bad_moment(&self, reason: &str) -> PlanError {
        PlanError::BadMoment {
            index: self.index,
            what: kind_name(&self.fault.what),
            when: when_name(&self.fault.when),
            reason: reason.to_string(),
        }
    }

    fn rank_ok(&self, rank: u32) -> Result<(), PlanError> {
        if rank < self.topo.ranks() {
            return Ok(());
        }
        Err(PlanError::NoSuchRank {
            index: self.index,
            rank,
            ranks: self.topo.ranks(),
        })
    }

    fn node_ok(&self, node: &str) -> Result<(), PlanError> {
        if self.topo.nodes.iter().any(|n| n == node) {
            return Ok(());
        }
        Err(PlanError::NoSuchNode {
            index: self.index,
            node: node.to_string(),
            nodes: self.topo.nodes.join(","),
        })
    }

    /// An injection point and hit: a valid name, hits counted from 1.
    fn point_ok(&self, point: &str, hit: u64) -> Result<(), PlanError> {
        if !valid_name(point) {
            return Err(self.invalid(format!(
                "point name `{point}` must be non-empty [A-Za-z0-9._-]"
            )));
        }
        if hit == 0 {
            return Err(self.invalid("hit counts start at 1".into()));
        }
        Ok(())
    }

    /// A warning for a point the library is not known to have.
    fn warn_unknown(&self, point: &str, warnings: &mut Vec<Warning>) {
        if !KNOWN_POINTS.contains(&point) {
            warnings.push(Warning::UnknownPoint {
                index: self.index,
                point: point.to_string(),
            });
        }
    }

    /// The moment on its own (numbers from 1, the run it names).
    fn when(&self, warnings: &mut Vec<Warning>) -> Result<(), PlanError> {
        let run = self.fault.run;
        match &self.fault.when {
            When::Point {
                point, hit, rank, ..
            } => {
                self.point_ok(point, *hit)?;
                if let Some(r) = rank {
                    self.rank_ok(*r)?;
                }
                self.warn_unknown(point, warnings);
                Ok(())
            }
            When::BetweenCheckpoints { after: n }
            | When::DuringStart { checkpoint: n }
            | When::DuringComplete { checkpoint: n } => {
                if *n == 0 {
                    return Err(self.invalid("outputs are numbered from 1".into()));
                }
                Ok(())
            }
            When::Postrun { point, hit, .. } => self.postrun(point.as_deref(), *hit, warnings),
            When::BeforeRun { run: moment } | When::AfterRun { run: moment } => {
                if *moment == 0 {
                    return Err(self.invalid("runs are numbered from 1".into()));
                }
                if run != 1 && run != *moment {
                    return Err(self.invalid(format!(
                        "`run = {run}` disagrees with the moment's run {moment}; leave `run` out"
                    )));
                }
                Ok(())
            }
        }
    }

    /// `at = "postrun"`: no run number, an optional point, no rank faults.
    fn postrun(
        &self,
        point: Option<&str>,
        hit: u64,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), PlanError> {
        if self.fault.run != 1 {
            return Err(self.invalid(format!(
                "`run = {}` means nothing for postrun, which comes once after the last launch; leave `run` out",
                self.fault.run
            )));
        }
        if let Some(point) = point {
            self.point_ok(point, hit)?;
            self.warn_unknown(point, warnings);
        }
        if matches!(
            self.fault.what,
            What::KillRank { .. } | What::ExitRank { .. } | What::PowerLoss { .. }
        ) {
            return Err(self.bad_moment(
                "no rank runs during postrun; use kill-node (with a point: that node's `scr copy` dies)",
            ));
        }
        Ok(())
    }

    /// The kind of fault: its fields, and whether it fits its moment.
    fn what(&self) -> Result<(), PlanError> {
        let when = &self.fault.when;
        let postrun_point = when.as_postrun_point().is_some();
        let between_runs = when.as_point().is_none() && !postrun_point;
        let at_point = matches!(when, When::Point { .. }) || postrun_point;
        let when_rank = match when {
            When::Point { rank, .. } => *rank,
            _ => None,
        };
        match &self.fault.what {
            What::KillRank { rank } | What::PowerLoss { rank } => {
                self.rank_fault(*rank, None, between_runs, when_rank)
            }
            What::ExitRank { rank, code } => {
                self.rank_fault(*rank, Some(*code), between_runs, when_rank)
            }
            What::KillPostrun => {
                if !postrun_point {
                    return Err(self.bad_moment(
                        "it kills the `scr postrun` driver at one of its points; use `at = \"postrun\"` with a point",
                    ));
                }
                Ok(())
            }
            What::PostrunPowerLoss { node } => {
                if !postrun_point {
                    return Err(self.bad_moment(
                        "it cuts the power during `scr postrun` at one of its points; use `at = \"postrun\"` with a point (power-loss with a rank is for a launch)",
                    ));
                }
                node.as_deref().map_or(Ok(()), |n| self.node_ok(n))
            }
            What::KillNode { node, .. } => {
                self.node_ok(node)?;
                match when_rank {
                    Some(r) if self.topo.node_of(r) != Some(node.as_str()) => Err(self.invalid(
                        format!("the triggering rank {r} does not run on node {node}"),
                    )),
                    _ => Ok(()),
                }
            }
            What::Corrupt { target, how } => {
                if at_point {
                    return Err(self.bad_moment(
                        "files are damaged by the harness, which cannot stop the library at a point; use between-checkpoints or before-run/after-run",
                    ));
                }
                self.corruption(target, how)
            }
            What::PfsOutage { .. } | What::CacheFull { .. } => {
                if at_point {
                    return Err(self.bad_moment(
                        "the harness applies it from outside; use between-checkpoints or before-run/after-run",
                    ));
                }
                match &self.fault.what {
                    What::CacheFull { node: Some(n), .. } => self.node_ok(n),
                    _ => Ok(()),
                }
            }
            What::SlowIo { .. } | What::IoError { .. } => {
                if between_runs {
                    return Err(self.bad_moment(
                        "it acts at injection points, inside a run; use `at = \"point\"`",
                    ));
                }
                Ok(())
            }
        }
    }

    /// `kill-rank` and `exit-rank` (with its `code`): a rank of the job,
    /// inside a run, the same rank as the moment's.
    fn rank_fault(
        &self,
        rank: u32,
        exit_code: Option<i32>,
        between_runs: bool,
        when_rank: Option<u32>,
    ) -> Result<(), PlanError> {
        self.rank_ok(rank)?;
        if between_runs {
            return Err(self.bad_moment(
                "no rank runs between launches; use kill-node for a node that dies between runs",
            ));
        }
        if let Some(r) = when_rank.filter(|r| *r != rank) {
            return Err(self.invalid(format!(
                "the moment names rank {r} but the fault rank {rank}; leave the moment's rank out"
            )));
        }
        match exit_code {
            Some(code) if !(0..=255).contains(&code) => {
                Err(self.invalid(format!("exit code {code} is not in 0..=255")))
            }
            _ => Ok(()),
        }
    }

    /// Which files and how: a known node, a glob that parses, at least one
    /// file, and exactly one way of saying how much to damage.
    fn corruption(&self, target: &super::Target, how: &Corruption) -> Result<(), PlanError> {
        if let Some(n) = &target.node {
            self.node_ok(n)?;
        }
        if let Selector::Glob(p) = &target.select {
            glob::Pattern::new(p).map_err(|e| self.invalid(format!("glob `{p}`: {e}")))?;
        }
        if target.files == Some(0) {
            return Err(self.invalid("`files = 0` damages nothing; leave it out for all".into()));
        }
        let reason = match how {
            Corruption::BitFlips { count, offsets } => match (count, offsets) {
                (Some(0), None) => "bit-flips with count 0 flips nothing".to_string(),
                (Some(_), None) => return Ok(()),
                (None, Some(o)) if !o.is_empty() => return Ok(()),
                _ => "bit-flips needs exactly one of `count` or a non-empty `offsets`".to_string(),
            },
            Corruption::Truncate { to_bytes, fraction } => match (to_bytes, fraction) {
                (Some(_), None) => return Ok(()),
                (None, Some(f)) if (0.0..1.0).contains(f) => return Ok(()),
                (None, Some(f)) => format!("truncate fraction {f} is not in [0, 1)"),
                _ => "truncate needs exactly one of `to_bytes` or `fraction`".to_string(),
            },
            Corruption::Delete | Corruption::ZeroKvtreeHeader => return Ok(()),
        };
        Err(self.invalid(reason))
    }
}
