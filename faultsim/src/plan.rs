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
//! {"name": "kill rank 2 in the XOR encode, then damage a filemap",
//!  "faults": [
//!   {"what": {"kind": "kill-rank", "rank": 2},
//!    "when": {"at": "point", "point": "xor.encode.chunk", "hit": 3}},
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

use std::collections::BTreeSet;
use std::fmt;
use std::path::{Component, Path};

use crate::runtime::{Action, ErrorKind, FaultPlan, FaultSpec};
use serde::{Deserialize, Serialize};

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

/// Injection points the library is known to have (names in other plans are
/// allowed, with a [`Warning`]: plans may target a newer library).
pub const KNOWN_POINTS: &[&str] = &[
    POINT_START_OUTPUT,
    POINT_COMPLETE_OUTPUT,
    POINT_AFTER_COMPLETE,
    POINT_COMPUTE,
    "cache.file.write",
    // scr_app's own "during file write" moment (testing/src/bin/scr_app.rs).
    "app.file.write",
    // Entry of the redundancy encode at Complete_output, every scheme.
    "redundancy.encode",
    "xor.encode.chunk",
    "partner.send.file",
    "rs.encode.chunk",
    "flush.file.copied",
    "flush.async.file.copied",
    "rebuild.xor.received",
    "rebuild.init",
    "fetch.file",
    POINT_SCAVENGE_FILE,
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

/// What a fault does.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum What {
    /// SIGKILL one rank.
    KillRank {
        /// The rank.
        rank: u32,
    },
    /// SIGKILL every rank of a node, then damage its node-local directories.
    KillNode {
        /// The node.
        node: String,
        /// What happens to its directories.
        #[serde(default, skip_serializing_if = "is_default")]
        then: NodeAftermath,
    },
    /// A rank exits with a code, without finalizing.
    ExitRank {
        /// The rank.
        rank: u32,
        /// The exit code.
        code: i32,
    },
    /// Damage files.
    Corrupt {
        /// Which files.
        target: Target,
        /// How.
        how: Corruption,
    },
    /// The prefix directory becomes unwritable.
    PfsOutage {
        /// How the outage is made.
        #[serde(default, skip_serializing_if = "is_default")]
        method: OutageMethod,
    },
    /// The cache file system of a node (every node when absent) fills up.
    CacheFull {
        /// The node.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        node: Option<String>,
        /// Bytes left free.
        #[serde(default, skip_serializing_if = "is_default")]
        leave_free_bytes: u64,
    },
    /// Injection points sleep: slow I/O.
    SlowIo {
        /// Milliseconds per hit.
        delay_ms: u64,
    },
    /// Injection points return an I/O error.
    IoError {
        /// Which error.
        #[serde(default, skip_serializing_if = "is_default")]
        error: ErrorKind,
    },
}

/// What happens to a killed node's directories.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NodeAftermath {
    /// Removed (the node and its storage are gone).
    #[default]
    RemoveDirs,
    /// Made unreadable (the node is down, its storage unreachable).
    MakeUnreadable,
    /// Left as they are (the processes died, the node is fine).
    Keep,
}

/// How a PFS outage is made (see [`crate::inject::pfs_outage`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OutageMethod {
    /// `replace-with-file` as root (modes do not stop root), `chmod` otherwise.
    #[default]
    Auto,
    /// Mode 0500 on the prefix directory: works for non-root users only.
    Chmod,
    /// The directory is moved aside and a regular file takes its place:
    /// every create or open below it fails with ENOTDIR, even for root.
    ReplaceWithFile,
}

/// Which files a corruption targets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Cache, control or prefix directory.
    pub area: Area,
    /// The node whose cache/control directory (every node when absent; ignored for the prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Only files of this dataset id (those below a `scr.dataset.<id>` directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<u64>,
    /// Which files.
    pub select: Selector,
    /// How many of the matching files (picked by the seed); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u32>,
}

/// Where the files are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// Node-local cache.
    Cache,
    /// Node-local control directory.
    Control,
    /// The prefix directory on the parallel file system.
    Prefix,
}

/// Selects files by their role in SCR or by a glob on their path relative to the area.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selector {
    /// Files with this role.
    Role(Role),
    /// Relative paths matching this pattern (`*` stays within a path
    /// component, `**` crosses them, `?` and `[...]` as usual).
    Glob(String),
}

/// The role of a file in SCR's layout (developer guide, "Directories").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Role {
    /// A file the application wrote, in a `scr.dataset.<id>` directory.
    AppFile,
    /// Redundancy data, `<grank+1>_of_<gsize>_in_<gid>.<scheme>`.
    ParityFile,
    /// A rank's filemap: `filemap_<rank>.scrinfo` or `<rank>.scrfilemap`.
    Filemap,
    /// The master filemap `filemap.scrinfo`.
    MasterFilemap,
    /// The prefix index `index.scr`.
    Index,
    /// A dataset summary `summary.scr`.
    Summary,
    /// A rank2file map, `rank2file.scr` or `rank2file.<level>.<rank>.scr`.
    Rank2file,
    /// The halt file `halt.scr`.
    Halt,
    /// The flush file `flush.scr`.
    Flush,
    /// The nodes file `nodes.scr`.
    Nodes,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 10] = [
        Role::AppFile,
        Role::ParityFile,
        Role::Filemap,
        Role::MasterFilemap,
        Role::Index,
        Role::Summary,
        Role::Rank2file,
        Role::Halt,
        Role::Flush,
        Role::Nodes,
    ];

    /// The role of a file, from its path relative to the area's directory.
    pub fn of(rel: &Path) -> Option<Role> {
        let name = rel.file_name()?.to_str()?;
        let in_dataset = rel.components().any(|c| match c {
            Component::Normal(s) => s.to_str().is_some_and(|s| s.starts_with("scr.dataset.")),
            _ => false,
        });
        let role = match name {
            "filemap.scrinfo" => Role::MasterFilemap,
            "index.scr" => Role::Index,
            "summary.scr" => Role::Summary,
            "halt.scr" => Role::Halt,
            "flush.scr" => Role::Flush,
            "nodes.scr" => Role::Nodes,
            _ if name.starts_with("rank2file") => Role::Rank2file,
            _ if (name.starts_with("filemap_") && name.ends_with(".scrinfo"))
                || name.ends_with(".scrfilemap") =>
            {
                Role::Filemap
            }
            _ if is_parity_name(name) => Role::ParityFile,
            _ if in_dataset && !name.ends_with(".lock") && !name.ends_with(".tmp") => Role::AppFile,
            _ => return None,
        };
        Some(role)
    }
}

/// `<a>_of_<b>_in_<c>.<ext>` with decimal a, b, c.
fn is_parity_name(name: &str) -> bool {
    let Some((stem, _ext)) = name.rsplit_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match stem.split_once("_of_") {
        Some((a, rest)) => match rest.split_once("_in_") {
            Some((b, c)) => digits(a) && digits(b) && digits(c),
            None => false,
        },
        None => false,
    }
}

impl Selector {
    /// True when the file at `rel` (relative to the area) is selected.
    /// A glob that does not parse selects nothing ([`Plan::validate`] rejects it).
    pub fn matches(&self, rel: &Path) -> bool {
        match self {
            Selector::Role(role) => Role::of(rel) == Some(*role),
            Selector::Glob(pattern) => glob::Pattern::new(pattern).is_ok_and(|p| {
                p.matches_path_with(
                    rel,
                    glob::MatchOptions {
                        case_sensitive: true,
                        require_literal_separator: true,
                        require_literal_leading_dot: false,
                    },
                )
            }),
        }
    }
}

/// How files are damaged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case", deny_unknown_fields)]
#[non_exhaustive]
pub enum Corruption {
    /// Flip bits: `count` at seeded offsets, or at these exact bit `offsets`
    /// (bit index = byte offset × 8 + bit).
    BitFlips {
        /// How many bits, at offsets the seed picks.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        count: Option<u32>,
        /// Exactly these bit offsets.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        offsets: Option<Vec<u64>>,
    },
    /// Cut the file to `to_bytes`, or to `fraction` of its length.
    Truncate {
        /// New length in bytes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        to_bytes: Option<u64>,
        /// New length as a fraction in [0, 1) of the old one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        fraction: Option<f64>,
    },
    /// Remove the file.
    Delete,
    /// Overwrite the 20-byte kvtree file header with zeros.
    ZeroKvtreeHeader,
}

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

impl What {
    /// True for faults carried out inside the library's processes (via `SCR_FAULT_PLAN`).
    pub fn in_process(&self) -> bool {
        matches!(
            self,
            What::KillRank { .. }
                | What::KillNode { .. }
                | What::ExitRank { .. }
                | What::SlowIo { .. }
                | What::IoError { .. }
        )
    }
}

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
            self.validate_one(index, fault, topo, &mut warnings)?;
        }
        self.check_contradictions()?;
        Ok(warnings)
    }

    fn validate_one(
        &self,
        index: usize,
        fault: &Fault,
        topo: &Topology,
        warnings: &mut Vec<Warning>,
    ) -> Result<(), PlanError> {
        let invalid = |reason: String| PlanError::Invalid { index, reason };
        let rank_ok = |rank: u32| {
            if rank < topo.ranks() {
                Ok(())
            } else {
                Err(PlanError::NoSuchRank {
                    index,
                    rank,
                    ranks: topo.ranks(),
                })
            }
        };
        let node_ok = |node: &str| {
            if topo.nodes.iter().any(|n| n == node) {
                Ok(())
            } else {
                Err(PlanError::NoSuchNode {
                    index,
                    node: node.to_string(),
                    nodes: topo.nodes.join(","),
                })
            }
        };
        let bad_moment = |reason: &str| PlanError::BadMoment {
            index,
            what: kind_name(&fault.what),
            when: when_name(&fault.when),
            reason: reason.to_string(),
        };
        if fault.run == 0 {
            return Err(invalid("runs are numbered from 1".into()));
        }
        match &fault.when {
            When::Point {
                point, hit, rank, ..
            } => {
                if !valid_name(point) {
                    return Err(invalid(format!(
                        "point name `{point}` must be non-empty [A-Za-z0-9._-]"
                    )));
                }
                if *hit == 0 {
                    return Err(invalid("hit counts start at 1".into()));
                }
                if let Some(r) = rank {
                    rank_ok(*r)?;
                }
                if !KNOWN_POINTS.contains(&point.as_str()) {
                    warnings.push(Warning::UnknownPoint {
                        index,
                        point: point.clone(),
                    });
                }
            }
            When::BetweenCheckpoints { after: n }
            | When::DuringStart { checkpoint: n }
            | When::DuringComplete { checkpoint: n } => {
                if *n == 0 {
                    return Err(invalid("outputs are numbered from 1".into()));
                }
            }
            When::Postrun { point, hit, .. } => {
                if fault.run != 1 {
                    return Err(invalid(format!(
                        "`run = {}` means nothing for postrun, which comes once after the last launch; leave `run` out",
                        fault.run
                    )));
                }
                if let Some(point) = point {
                    if !valid_name(point) {
                        return Err(invalid(format!(
                            "point name `{point}` must be non-empty [A-Za-z0-9._-]"
                        )));
                    }
                    if *hit == 0 {
                        return Err(invalid("hit counts start at 1".into()));
                    }
                    if !KNOWN_POINTS.contains(&point.as_str()) {
                        warnings.push(Warning::UnknownPoint {
                            index,
                            point: point.clone(),
                        });
                    }
                }
                if matches!(fault.what, What::KillRank { .. } | What::ExitRank { .. }) {
                    return Err(bad_moment(
                        "no rank runs during postrun; use kill-node (with a point: that node's `scr copy` dies)",
                    ));
                }
            }
            When::BeforeRun { run } | When::AfterRun { run } => {
                if *run == 0 {
                    return Err(invalid("runs are numbered from 1".into()));
                }
                if fault.run != 1 && fault.run != *run {
                    return Err(invalid(format!(
                        "`run = {}` disagrees with the moment's run {run}; leave `run` out",
                        fault.run
                    )));
                }
            }
        }
        let postrun_point = fault.when.as_postrun_point().is_some();
        let between_runs = fault.when.as_point().is_none() && !postrun_point;
        let at_point = matches!(fault.when, When::Point { .. }) || postrun_point;
        let when_rank = match &fault.when {
            When::Point { rank, .. } => *rank,
            _ => None,
        };
        match &fault.what {
            What::KillRank { rank } | What::ExitRank { rank, .. } => {
                rank_ok(*rank)?;
                if between_runs {
                    return Err(bad_moment(
                        "no rank runs between launches; use kill-node for a node that dies between runs",
                    ));
                }
                if when_rank.is_some_and(|r| r != *rank) {
                    return Err(invalid(format!(
                        "the moment names rank {} but the fault rank {rank}; leave the moment's rank out",
                        when_rank.unwrap_or_default()
                    )));
                }
                if let What::ExitRank { code, .. } = &fault.what {
                    if !(0..=255).contains(code) {
                        return Err(invalid(format!("exit code {code} is not in 0..=255")));
                    }
                }
            }
            What::KillNode { node, .. } => {
                node_ok(node)?;
                if let Some(r) = when_rank {
                    if topo.node_of(r) != Some(node.as_str()) {
                        return Err(invalid(format!(
                            "the triggering rank {r} does not run on node {node}"
                        )));
                    }
                }
            }
            What::Corrupt { target, how } => {
                if at_point {
                    return Err(bad_moment(
                        "files are damaged by the harness, which cannot stop the library at a point; use between-checkpoints or before-run/after-run",
                    ));
                }
                if let Some(n) = &target.node {
                    node_ok(n)?;
                }
                if let Selector::Glob(p) = &target.select {
                    glob::Pattern::new(p).map_err(|e| invalid(format!("glob `{p}`: {e}")))?;
                }
                if target.files == Some(0) {
                    return Err(invalid(
                        "`files = 0` damages nothing; leave it out for all".into(),
                    ));
                }
                match how {
                    Corruption::BitFlips { count, offsets } => {
                        match (count, offsets) {
                            (Some(0), None) => {
                                return Err(invalid("bit-flips with count 0 flips nothing".into()))
                            }
                            (Some(_), None) => {}
                            (None, Some(o)) if !o.is_empty() => {}
                            _ => return Err(invalid(
                                "bit-flips needs exactly one of `count` or a non-empty `offsets`"
                                    .into(),
                            )),
                        }
                    }
                    Corruption::Truncate { to_bytes, fraction } => match (to_bytes, fraction) {
                        (Some(_), None) => {}
                        (None, Some(f)) if (0.0..1.0).contains(f) => {}
                        (None, Some(f)) => {
                            return Err(invalid(format!("truncate fraction {f} is not in [0, 1)")))
                        }
                        _ => {
                            return Err(invalid(
                                "truncate needs exactly one of `to_bytes` or `fraction`".into(),
                            ))
                        }
                    },
                    Corruption::Delete | Corruption::ZeroKvtreeHeader => {}
                }
            }
            What::PfsOutage { .. } | What::CacheFull { .. } => {
                if at_point {
                    return Err(bad_moment(
                        "the harness applies it from outside; use between-checkpoints or before-run/after-run",
                    ));
                }
                if let What::CacheFull { node: Some(n), .. } = &fault.what {
                    node_ok(n)?;
                }
            }
            What::SlowIo { .. } | What::IoError { .. } => {
                if between_runs {
                    return Err(bad_moment(
                        "it acts at injection points, inside a run; use `at = \"point\"`",
                    ));
                }
            }
        }
        Ok(())
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

    fn spec_of(&self, f: &Fault) -> Option<FaultSpec> {
        let (point, hit, repeat, when_rank) = f
            .when
            .as_point()
            .or_else(|| f.when.as_postrun_point().map(|(p, h, r)| (p, h, r, None)))?;
        let (action, rank, node) = match &f.what {
            What::KillRank { rank } => (Action::Kill, Some(*rank), None),
            What::ExitRank { rank, code } => (Action::Exit { code: *code }, Some(*rank), None),
            What::KillNode { node, .. } => (Action::KillNode, when_rank, Some(node.clone())),
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
mod tests {
    use super::*;

    const JSON: &str = r#"{"name": "kill rank 2 in the XOR encode, then damage a filemap",
     "faults": [
      {"what": {"kind": "kill-rank", "rank": 2},
       "when": {"at": "point", "point": "xor.encode.chunk", "hit": 3}},
      {"what": {"kind": "corrupt",
                "target": {"area": "cache", "node": "n1", "select": {"role": "filemap"}},
                "how": {"kind": "bit-flips", "count": 4}},
       "when": {"at": "after-run", "run": 1}}]}"#;

    const TOML: &str = r#"
name = "node n1 dies during the second flush"
[[faults]]
what = { kind = "kill-node", node = "n1", then = "make-unreadable" }
when = { at = "point", point = "flush.file.copied", hit = 2 }
[[faults]]
what = { kind = "pfs-outage" }
when = { at = "between-checkpoints", after = 3 }
[[faults]]
run = 2
what = { kind = "slow-io", delay_ms = 20 }
when = { at = "point", point = "fetch.file", repeat = true, rank = 3 }
"#;

    fn topo() -> Topology {
        Topology::simulated(4, 2)
    }

    #[test]
    fn documented_examples_parse_validate_and_round_trip() {
        let plan = Plan::from_json(JSON, "json").expect("json example");
        assert_eq!(plan.validate(&topo()), Ok(vec![]));
        assert_eq!(
            plan.to_env(1).as_deref(),
            Some("xor.encode.chunk#3@rank:2=kill")
        );
        assert_eq!(plan.external().map(|(i, _)| i).collect::<Vec<_>>(), [1]);
        let again = Plan::from_toml(&plan.to_toml().expect("toml"), "t").expect("reparse");
        assert_eq!(again, plan);

        let plan = Plan::from_toml(TOML, "toml").expect("toml example");
        assert_eq!(plan.validate(&topo()), Ok(vec![]));
        assert_eq!(
            plan.to_env(1).as_deref(),
            Some("flush.file.copied#2@node:n1=kill-node")
        );
        assert_eq!(
            plan.to_env(2).as_deref(),
            Some("fetch.file#1+@rank:3=delay:20")
        );
        assert_eq!(plan.to_env(3), None);
        // The kill-node leaves directories for the harness, and the outage.
        assert_eq!(plan.external().map(|(i, _)| i).collect::<Vec<_>>(), [0, 1]);
        let again = Plan::from_json(&plan.to_json(), "j").expect("reparse");
        assert_eq!(again, plan);
        for run in 1..=2 {
            let env = plan.to_env(run).expect("env");
            assert_eq!(
                crate::runtime::parse_plan(&env).expect("scr parses it"),
                plan.fault_plan(run)
            );
        }
    }

    #[test]
    fn application_moments_become_api_points() {
        let plan = Plan {
            faults: vec![
                Fault {
                    what: What::KillRank { rank: 1 },
                    when: When::DuringComplete { checkpoint: 2 },
                    run: 1,
                },
                Fault {
                    what: What::ExitRank { rank: 0, code: 4 },
                    when: When::BetweenCheckpoints { after: 3 },
                    run: 1,
                },
                Fault {
                    what: What::IoError {
                        error: ErrorKind::Enospc,
                    },
                    when: When::DuringStart { checkpoint: 1 },
                    run: 1,
                },
            ],
            ..Plan::default()
        };
        assert_eq!(plan.validate(&topo()), Ok(vec![]));
        assert_eq!(
            plan.to_env(1).as_deref(),
            Some("api.complete_output#2@rank:1=kill;app.compute#3@rank:0=exit:4;api.start_output#1=error:enospc")
        );
    }

    fn one_fault(what: What, when: When) -> Plan {
        Plan {
            faults: vec![Fault { what, when, run: 1 }],
            ..Plan::default()
        }
    }

    fn point(p: &str) -> When {
        When::Point {
            point: p.into(),
            hit: 1,
            repeat: false,
            rank: None,
        }
    }

    #[test]
    fn invalid_plans_are_typed_errors() {
        let t = topo();
        let err = |p: Plan| p.validate(&t).expect_err("invalid plan");
        assert!(matches!(
            err(one_fault(What::KillRank { rank: 8 }, point("fetch.file"))),
            PlanError::NoSuchRank {
                rank: 8,
                ranks: 8,
                ..
            }
        ));
        assert!(matches!(
            err(one_fault(
                What::KillNode {
                    node: "n9".into(),
                    then: NodeAftermath::Keep
                },
                point("fetch.file")
            )),
            PlanError::NoSuchNode { .. }
        ));
        assert!(matches!(
            err(one_fault(
                What::KillRank { rank: 1 },
                When::BeforeRun { run: 1 }
            )),
            PlanError::BadMoment { .. }
        ));
        assert!(matches!(
            err(one_fault(
                What::PfsOutage {
                    method: OutageMethod::Auto
                },
                point("fetch.file")
            )),
            PlanError::BadMoment { .. }
        ));
        assert!(matches!(
            err(one_fault(
                What::SlowIo { delay_ms: 1 },
                When::AfterRun { run: 1 }
            )),
            PlanError::BadMoment { .. }
        ));
        let corrupt = |how| What::Corrupt {
            target: Target {
                area: Area::Cache,
                node: None,
                dataset: None,
                select: Selector::Role(Role::AppFile),
                files: None,
            },
            how,
        };
        let after = When::AfterRun { run: 1 };
        for how in [
            Corruption::BitFlips {
                count: None,
                offsets: None,
            },
            Corruption::BitFlips {
                count: Some(0),
                offsets: None,
            },
            Corruption::BitFlips {
                count: Some(1),
                offsets: Some(vec![1]),
            },
            Corruption::Truncate {
                to_bytes: None,
                fraction: Some(1.5),
            },
            Corruption::Truncate {
                to_bytes: Some(1),
                fraction: Some(0.5),
            },
        ] {
            let e = err(one_fault(corrupt(how.clone()), after.clone()));
            assert!(
                matches!(e, PlanError::Invalid { index: 0, .. }),
                "{how:?}: {e}"
            );
        }
        let e = err(one_fault(
            What::KillNode {
                node: "n0".into(),
                then: NodeAftermath::RemoveDirs,
            },
            When::Point {
                point: "fetch.file".into(),
                hit: 1,
                repeat: false,
                rank: Some(5),
            },
        ));
        assert!(
            e.to_string().contains("rank 5 does not run on node n0"),
            "{e}"
        );
        let e = err(one_fault(
            What::KillRank { rank: 1 },
            When::Point {
                point: "fetch.file".into(),
                hit: 0,
                repeat: false,
                rank: None,
            },
        ));
        assert!(e.to_string().contains("start at 1"), "{e}");
    }

    #[test]
    fn contradictions_and_unknown_points() {
        let t = topo();
        let mut plan = one_fault(What::KillRank { rank: 1 }, point("fetch.file"));
        plan.faults.push(Fault {
            what: What::ExitRank { rank: 1, code: 3 },
            when: point("fetch.file"),
            run: 1,
        });
        assert!(matches!(
            plan.validate(&t),
            Err(PlanError::Contradiction {
                first: 0,
                second: 1,
                ..
            })
        ));
        plan.faults[1].run = 2;
        assert_eq!(plan.validate(&t), Ok(vec![]), "different runs do not clash");
        let plan = one_fault(What::KillRank { rank: 1 }, point("my.new.point"));
        assert_eq!(
            plan.validate(&t),
            Ok(vec![Warning::UnknownPoint {
                index: 0,
                point: "my.new.point".into()
            }])
        );
    }

    #[test]
    fn unknown_fields_and_kinds_are_rejected_with_position() {
        let e = Plan::from_json(r#"{"faults":[{"what":{"kind":"kill-rank","rnak":1},"when":{"at":"after-run","run":1}}]}"#, "p.json")
            .expect_err("typo");
        assert!(e.to_string().starts_with("p.json: not a fault plan"), "{e}");
        assert!(e.to_string().contains("rnak"), "{e}");
        let e = Plan::from_toml(
            "[[faults]]\nwhat = { kind = \"melt\" }\nwhen = { at = \"after-run\", run = 1 }\n",
            "p.toml",
        )
        .expect_err("unknown kind");
        assert!(e.to_string().contains("melt"), "{e}");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.toml");
        std::fs::write(&path, TOML).expect("write");
        assert_eq!(Plan::read(&path), Plan::from_toml(TOML, "x"));
        assert!(matches!(
            Plan::read(dir.path().join("none.json")),
            Err(PlanError::Read { .. })
        ));
    }

    #[test]
    fn example_plans_in_the_repo_are_valid() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("plans");
        let mut read = 0;
        for entry in std::fs::read_dir(&dir).expect("faultsim/plans") {
            let path = entry.expect("entry").path();
            let plan = Plan::read(&path).unwrap_or_else(|e| panic!("{e}"));
            let warnings = plan
                .validate(&topo())
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert_eq!(warnings, [], "{}", path.display());
            assert!(!plan.faults.is_empty(), "{}", path.display());
            read += 1;
        }
        assert!(read >= 2, "example plans missing from {}", dir.display());
    }

    #[test]
    fn roles_follow_the_scr_layout() {
        let cases = [
            ("scr.dataset.3/rank_0.ckpt", Some(Role::AppFile)),
            ("scr.dataset.3/sub/dir/out.h5", Some(Role::AppFile)),
            ("scr.dataset.3/.scr/1_of_4_in_0.xor", Some(Role::ParityFile)),
            (
                "scr.dataset.3/.scr/12_of_16_in_8.rs",
                Some(Role::ParityFile),
            ),
            ("filemap.scrinfo", Some(Role::MasterFilemap)),
            ("filemap_7.scrinfo", Some(Role::Filemap)),
            ("scr.dataset.3/.scr/7.scrfilemap", Some(Role::Filemap)),
            (".scr/index.scr", Some(Role::Index)),
            (".scr/scr.dataset.3/summary.scr", Some(Role::Summary)),
            (
                ".scr/scr.dataset.3/rank2file.0.0.scr",
                Some(Role::Rank2file),
            ),
            (".scr/halt.scr", Some(Role::Halt)),
            ("flush.scr", Some(Role::Flush)),
            ("nodes.scr", Some(Role::Nodes)),
            ("x_of_4_in_0.xor", None),
            ("random.txt", None),
            ("scr.dataset.3/file.lock", None),
        ];
        for (path, role) in cases {
            assert_eq!(Role::of(Path::new(path)), role, "{path}");
        }
        let glob = Selector::Glob("scr.dataset.*/*.ckpt".into());
        assert!(glob.matches(Path::new("scr.dataset.3/rank_0.ckpt")));
        assert!(!glob.matches(Path::new("scr.dataset.3/sub/rank_0.ckpt")));
        assert!(Selector::Glob("**/*.xor".into()).matches(Path::new("a/b/.scr/1_of_2_in_0.xor")));
    }

    #[test]
    fn postrun_moments_route_faults_to_the_scavenge() {
        let text = r#"
[[faults]]
what = { kind = "kill-node", node = "n1", then = "keep" }
when = { at = "postrun", point = "scavenge.file", hit = 2 }
[[faults]]
what = { kind = "pfs-outage" }
when = { at = "postrun" }
[[faults]]
what = { kind = "kill-rank", rank = 1 }
when = { at = "point", point = "scavenge.file", hit = 2 }
"#;
        let plan = Plan::from_toml(text, "t").expect("parses");
        assert_eq!(plan.validate(&topo()), Ok(vec![]));
        // The postrun point is not a launch's; a launch's point with the
        // same name and hit does not contradict it.
        assert_eq!(
            plan.postrun_fault_plan().to_string(),
            "scavenge.file#2@node:n1=kill-node"
        );
        assert_eq!(
            plan.fault_plan(1).to_string(),
            "scavenge.file#2@rank:1=kill"
        );
        let ext: Vec<usize> = plan.external().map(|(i, _)| i).collect();
        assert_eq!(ext, [1]);
        assert!(plan.points().contains("scavenge.file"));
        let bad = one_fault(
            What::KillRank { rank: 1 },
            When::Postrun {
                point: Some("scavenge.file".into()),
                hit: 1,
                repeat: false,
            },
        );
        let e = bad.validate(&topo()).unwrap_err().to_string();
        assert!(e.contains("no rank runs during postrun"), "{e}");
        let bad = one_fault(
            What::Corrupt {
                target: Target {
                    area: Area::Cache,
                    node: None,
                    dataset: None,
                    select: Selector::Role(Role::AppFile),
                    files: None,
                },
                how: Corruption::Delete,
            },
            When::Postrun {
                point: Some("scavenge.file".into()),
                hit: 1,
                repeat: false,
            },
        );
        assert!(bad.validate(&topo()).is_err());
        let mut late = plan.clone();
        late.faults[1].run = 2;
        let e = late.validate(&topo()).unwrap_err().to_string();
        assert!(e.contains("leave `run` out"), "{e}");
    }
}
