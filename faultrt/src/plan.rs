//! Plan types and the parser of `SCR_FAULT_PLAN` (compact form and JSON).
//!
//! The grammar is in the [crate documentation](crate). `Display` of a
//! [`FaultPlan`] writes the compact form, which [`parse_plan`] reads back:
//! faultsim hands plans to the library's processes that way.

use std::fmt;
use std::io;

use serde::{Deserialize, Serialize};

use crate::{ENV_PLAN, MAX_FAULTS};

/// Which error an `error` fault injects (the errno it stands for).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ErrorKind {
    /// EIO: the device failed.
    #[default]
    Eio,
    /// ENOSPC: the file system is full.
    Enospc,
    /// EROFS: the file system is read-only.
    Erofs,
    /// EACCES: permission denied.
    Eacces,
}

impl ErrorKind {
    /// The errno this kind stands for.
    pub fn errno(self) -> i32 {
        match self {
            ErrorKind::Eio => libc::EIO,
            ErrorKind::Enospc => libc::ENOSPC,
            ErrorKind::Erofs => libc::EROFS,
            ErrorKind::Eacces => libc::EACCES,
        }
    }

    /// The name used in plans (`eio`, `enospc`, `erofs`, `eacces`).
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Eio => "eio",
            ErrorKind::Enospc => "enospc",
            ErrorKind::Erofs => "erofs",
            ErrorKind::Eacces => "eacces",
        }
    }

    fn from_name(name: &str) -> Option<ErrorKind> {
        [
            ErrorKind::Eio,
            ErrorKind::Enospc,
            ErrorKind::Erofs,
            ErrorKind::Eacces,
        ]
        .into_iter()
        .find(|k| k.name() == name)
    }
}

/// What happens when a fault fires.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Action {
    /// SIGKILL this process.
    Kill,
    /// SIGKILL every process of this job on this simulated node, this one last.
    KillNode,
    /// Every node of the job loses power at once: every process of the job
    /// is stopped, every file below `SCR_FAULT_DURABLE_ROOTS` loses what
    /// was written after its last fsync (`durable`), then all die.
    PowerLoss,
    /// Exit with this code, without finalizing.
    Exit {
        /// The exit code.
        code: i32,
    },
    /// The injection point returns an error.
    Error {
        /// Which error.
        #[serde(default)]
        kind: ErrorKind,
    },
    /// Sleep (slow I/O).
    Delay {
        /// Milliseconds to sleep.
        ms: u64,
    },
}

impl fmt::Display for Action {
    /// The compact form (`kill`, `exit:3`, `error:enospc`, `delay:20`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Action::Kill => f.write_str("kill"),
            Action::KillNode => f.write_str("kill-node"),
            Action::PowerLoss => f.write_str("power-loss"),
            Action::Exit { code } => write!(f, "exit:{code}"),
            Action::Error { kind } => write!(f, "error:{}", kind.name()),
            Action::Delay { ms } => write!(f, "delay:{ms}"),
        }
    }
}

fn default_hit() -> u64 {
    1
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// One fault of a plan: where, on which hit, on which rank/node, and what.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FaultSpec {
    /// Injection point name, e.g. `redundancy.encode`.
    pub point: String,
    /// 1-based hit count at which the fault fires.
    #[serde(default = "default_hit")]
    pub hit: u64,
    /// Fire on `hit` and on every later hit, not only once.
    #[serde(default, skip_serializing_if = "is_false")]
    pub repeat: bool,
    /// Only on this rank.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<u32>,
    /// Only on processes of this (simulated) node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

impl FaultSpec {
    /// True when this fault fires on hit number `hit` (1-based).
    pub fn fires_on(&self, hit: u64) -> bool {
        if self.repeat {
            hit >= self.hit
        } else {
            hit == self.hit
        }
    }
}

impl fmt::Display for FaultSpec {
    /// The compact form of one entry; [`parse_plan`] reads it back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}#{}", self.point, self.hit)?;
        if self.repeat {
            f.write_str("+")?;
        }
        if let Some(rank) = self.rank {
            write!(f, "@rank:{rank}")?;
        }
        if let Some(node) = &self.node {
            write!(f, "@node:{node}")?;
        }
        write!(f, "={}", self.action)
    }
}

/// A list of faults, as read from `SCR_FAULT_PLAN`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct FaultPlan {
    /// The faults, checked in order; the first match fires.
    pub faults: Vec<FaultSpec>,
}

impl fmt::Display for FaultPlan {
    /// The compact form, entries joined by `;`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, spec) in self.faults.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            write!(f, "{spec}")?;
        }
        Ok(())
    }
}

/// Why a fault plan could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// An entry of the compact form is malformed.
    #[error("{ENV_PLAN} entry {index} `{entry}`: {reason} (form: POINT[#HIT[+]][@rank:R][@node:NAME]=kill|kill-node|exit:CODE|error[:eio|enospc|erofs|eacces]|delay:MS)")]
    Syntax {
        /// 0-based entry index.
        index: usize,
        /// The entry text.
        entry: String,
        /// What is wrong.
        reason: EntryError,
    },
    /// The JSON form does not parse.
    #[error("{ENV_PLAN}: bad JSON plan{}: {source}", path.as_ref().map(|p| format!(" in {p}")).unwrap_or_default())]
    Json {
        /// The file, when the plan came from one.
        path: Option<String>,
        /// The parser's error (with line and column).
        source: serde_json::Error,
    },
    /// The plan file cannot be read.
    #[error("{ENV_PLAN}: cannot read plan file {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: io::Error,
    },
    /// A fault in a JSON plan has an invalid field.
    #[error("{ENV_PLAN}: fault {index}: {reason}")]
    Invalid {
        /// 0-based fault index.
        index: usize,
        /// What is wrong.
        reason: EntryError,
    },
    /// More faults than [`MAX_FAULTS`].
    #[error("{ENV_PLAN}: {count} faults, at most {MAX_FAULTS} are allowed")]
    TooMany {
        /// How many there were.
        count: usize,
    },
}

/// What is wrong with one fault of a plan (an entry of the compact form or
/// a fault of the JSON form).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryError {
    /// No `=` between the target and the action.
    #[error("missing `=ACTION`")]
    MissingAction,
    /// `#HIT` is not a number.
    #[error("hit `{0}` is not a positive integer (optionally with +)")]
    BadHit(String),
    /// `#0`: hits are counted from 1.
    #[error("hit counts start at 1")]
    HitZero,
    /// The point name is empty, too long or has other characters than `[A-Za-z0-9._-]`.
    #[error("point name `{0}` must be non-empty [A-Za-z0-9._-]")]
    PointName(String),
    /// `@rank:` is not a non-negative integer.
    #[error("rank `{0}` is not a non-negative integer")]
    BadRank(String),
    /// The node name is empty, too long or has other characters than `[A-Za-z0-9._-]`.
    #[error("node name `{0}` must be non-empty [A-Za-z0-9._-]")]
    NodeName(String),
    /// An unknown or repeated `@` qualifier.
    #[error("qualifier `@{0}`: expected one @rank:R and one @node:NAME at most")]
    Qualifier(String),
    /// `exit` or `delay` without its number.
    #[error("`{action}` needs `:{what}`")]
    MissingArgument {
        /// The action.
        action: String,
        /// What it needs (`CODE`, `MS`).
        what: &'static str,
    },
    /// The action's argument is not an integer.
    #[error("`{action}:{arg}`: {what} must be an integer")]
    NotAnInteger {
        /// The action.
        action: String,
        /// The argument given.
        arg: String,
        /// What it stands for (`CODE`, `MS`).
        what: &'static str,
    },
    /// An exit code outside what a process can return.
    #[error("exit code {0} is not in 0..=255")]
    ExitCode(i64),
    /// An unknown `error:KIND`.
    #[error("error kind `{0}`: expected eio, enospc, erofs or eacces")]
    ErrorKind(String),
    /// A negative delay.
    #[error("delay {0} ms is negative")]
    NegativeDelay(i64),
    /// An unknown action.
    #[error("unknown action `{0}`: expected kill, kill-node, exit:CODE, error[:KIND] or delay:MS")]
    UnknownAction(String),
}

fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Parse a plan in any of the forms `SCR_FAULT_PLAN` accepts (reads the
/// file for the path form). An empty value is an empty plan.
pub fn parse_plan(value: &str) -> Result<FaultPlan, PlanError> {
    let v = value.trim();
    if v.starts_with('{') || v.starts_with('[') {
        return parse_json(v, None);
    }
    if v.starts_with('/') || v.starts_with('.') || v.ends_with(".json") {
        let text = std::fs::read_to_string(v).map_err(|source| PlanError::Read {
            path: v.to_string(),
            source,
        })?;
        return parse_json(&text, Some(v));
    }
    parse_compact(v)
}

/// Parse the JSON form: a [`FaultPlan`] object or an array of [`FaultSpec`].
pub fn parse_json(text: &str, path: Option<&str>) -> Result<FaultPlan, PlanError> {
    let json_err = |source| PlanError::Json {
        path: path.map(str::to_string),
        source,
    };
    let plan = if text.trim_start().starts_with('[') {
        FaultPlan {
            faults: serde_json::from_str(text).map_err(json_err)?,
        }
    } else {
        serde_json::from_str(text).map_err(json_err)?
    };
    check(&plan)?;
    Ok(plan)
}

/// What serde cannot check in a JSON plan: its size, names, hit counts.
fn check(plan: &FaultPlan) -> Result<(), PlanError> {
    if plan.faults.len() > MAX_FAULTS {
        return Err(PlanError::TooMany {
            count: plan.faults.len(),
        });
    }
    for (index, spec) in plan.faults.iter().enumerate() {
        let reason = if !valid_name(&spec.point) {
            EntryError::PointName(spec.point.clone())
        } else if spec.hit == 0 {
            EntryError::HitZero
        } else if let Some(node) = spec.node.as_deref().filter(|n| !valid_name(n)) {
            EntryError::NodeName(node.to_string())
        } else {
            continue;
        };
        return Err(PlanError::Invalid { index, reason });
    }
    Ok(())
}

/// Parse the compact form (see the crate documentation).
pub fn parse_compact(text: &str) -> Result<FaultPlan, PlanError> {
    let mut faults = Vec::new();
    for (index, raw) in text.split(';').enumerate() {
        let entry = raw.trim();
        if entry.is_empty() {
            continue;
        }
        if faults.len() >= MAX_FAULTS {
            return Err(PlanError::TooMany {
                count: text.split(';').count(),
            });
        }
        let syntax = |reason: EntryError| PlanError::Syntax {
            index,
            entry: entry.to_string(),
            reason,
        };
        faults.push(parse_entry(entry).map_err(syntax)?);
    }
    Ok(FaultPlan { faults })
}

fn parse_entry(entry: &str) -> Result<FaultSpec, EntryError> {
    let (target, action) = entry.split_once('=').ok_or(EntryError::MissingAction)?;
    let action = parse_action(action.trim())?;
    let mut parts = target.trim().split('@');
    let (point, hit, repeat) = parse_point_hit(parts.next().unwrap_or_default())?;
    let (rank, node) = parse_qualifiers(parts)?;
    Ok(FaultSpec {
        point: point.to_string(),
        hit,
        repeat,
        rank,
        node,
        action,
    })
}

/// `POINT[#HIT[+]]`: the point, the hit (default 1) and whether it repeats.
fn parse_point_hit(head: &str) -> Result<(&str, u64, bool), EntryError> {
    let (point, hit, repeat) = match head.split_once('#') {
        None => (head, 1, false),
        Some((point, hit)) => {
            let (digits, repeat) = match hit.strip_suffix('+') {
                Some(d) => (d, true),
                None => (hit, false),
            };
            let n: u64 = digits
                .parse()
                .map_err(|_| EntryError::BadHit(hit.to_string()))?;
            if n == 0 {
                return Err(EntryError::HitZero);
            }
            (point, n, repeat)
        }
    };
    if !valid_name(point) {
        return Err(EntryError::PointName(point.to_string()));
    }
    Ok((point, hit, repeat))
}

/// The `@rank:R` and `@node:NAME` qualifiers, each at most once.
fn parse_qualifiers<'a>(
    quals: impl Iterator<Item = &'a str>,
) -> Result<(Option<u32>, Option<String>), EntryError> {
    let (mut rank, mut node) = (None, None);
    for qual in quals {
        match qual.split_once(':') {
            Some(("rank", r)) if rank.is_none() => {
                rank = Some(
                    r.parse::<u32>()
                        .map_err(|_| EntryError::BadRank(r.to_string()))?,
                );
            }
            Some(("node", n)) if node.is_none() => {
                if !valid_name(n) {
                    return Err(EntryError::NodeName(n.to_string()));
                }
                node = Some(n.to_string());
            }
            _ => return Err(EntryError::Qualifier(qual.to_string())),
        }
    }
    Ok((rank, node))
}

fn parse_action(text: &str) -> Result<Action, EntryError> {
    let (name, arg) = match text.split_once(':') {
        Some((n, a)) => (n, Some(a)),
        None => (text, None),
    };
    let number = |what: &'static str| -> Result<i64, EntryError> {
        let a = arg.ok_or_else(|| EntryError::MissingArgument {
            action: name.to_string(),
            what,
        })?;
        a.parse::<i64>().map_err(|_| EntryError::NotAnInteger {
            action: name.to_string(),
            arg: a.to_string(),
            what,
        })
    };
    match (name, arg) {
        ("kill", None) => Ok(Action::Kill),
        ("kill-node", None) => Ok(Action::KillNode),
        ("power-loss", None) => Ok(Action::PowerLoss),
        ("exit", _) => {
            let code = number("CODE")?;
            let code = i32::try_from(code)
                .ok()
                .filter(|c| (0..=255).contains(c))
                .ok_or(EntryError::ExitCode(code))?;
            Ok(Action::Exit { code })
        }
        ("error", None) => Ok(Action::Error {
            kind: ErrorKind::Eio,
        }),
        ("error", Some(k)) => ErrorKind::from_name(k)
            .map(|kind| Action::Error { kind })
            .ok_or_else(|| EntryError::ErrorKind(k.to_string())),
        ("delay", _) => {
            let ms = number("MS")?;
            let ms = u64::try_from(ms).map_err(|_| EntryError::NegativeDelay(ms))?;
            Ok(Action::Delay { ms })
        }
        _ => Err(EntryError::UnknownAction(text.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compact_form_parses_every_field() {
        let plan = parse_plan(
            " redundancy.encode#3@rank:2=kill ; flush.file.copied#1+@node:n1=delay:20;\
             fetch.file=error:enospc; a.b@node:n0@rank:7=exit:3; c=kill-node; d#2=error;",
        )
        .expect("valid plan");
        let f = &plan.faults;
        assert_eq!(f.len(), 6);
        assert_eq!(
            f[0],
            FaultSpec {
                point: "redundancy.encode".into(),
                hit: 3,
                repeat: false,
                rank: Some(2),
                node: None,
                action: Action::Kill
            }
        );
        assert!(f[1].repeat && f[1].node.as_deref() == Some("n1"));
        assert_eq!(f[1].action, Action::Delay { ms: 20 });
        assert_eq!(
            f[2].action,
            Action::Error {
                kind: ErrorKind::Enospc
            }
        );
        assert_eq!(f[2].hit, 1);
        assert_eq!(
            (f[3].rank, f[3].action.clone()),
            (Some(7), Action::Exit { code: 3 })
        );
        assert_eq!(f[4].action, Action::KillNode);
        let p = parse_plan("meta.index.synced#2@rank:1=power-loss").expect("power-loss");
        assert_eq!(p.faults[0].action, Action::PowerLoss);
        assert_eq!(p.faults[0].action.to_string(), "power-loss");
        assert_eq!(
            f[5].action,
            Action::Error {
                kind: ErrorKind::Eio
            }
        );
    }

    #[test]
    fn display_round_trips_through_the_compact_parser() {
        let text = "x.y#3@rank:2=kill;f#1+@node:n1=delay:20;g#1=error:erofs;h#9@rank:0@node:n-2=exit:255;i#1=kill-node";
        let plan = parse_plan(text).expect("valid plan");
        assert_eq!(plan.to_string(), text);
        assert_eq!(parse_plan(&plan.to_string()).expect("reparse"), plan);
    }

    #[test]
    fn json_forms_inline_array_and_file() {
        let obj = r#"{"faults":[{"point":"redundancy.encode","hit":3,"rank":2,"action":"kill"},
                      {"point":"p","action":"error","kind":"eacces","repeat":true}]}"#;
        let plan = parse_plan(obj).expect("object form");
        assert_eq!(
            plan.faults[0].to_string(),
            "redundancy.encode#3@rank:2=kill"
        );
        assert_eq!(plan.faults[1].to_string(), "p#1+=error:eacces");
        let arr = r#"[{"point":"q","action":"delay","ms":5}]"#;
        assert_eq!(
            parse_plan(arr).expect("array form").faults[0].to_string(),
            "q#1=delay:5"
        );
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("plan.json");
        std::fs::write(&path, serde_json::to_string(&plan).expect("serialize")).expect("write");
        assert_eq!(
            parse_plan(path.to_str().expect("utf-8")).expect("file form"),
            plan
        );
    }

    #[test]
    fn bad_plans_are_typed_errors_naming_the_entry() {
        for (text, needle) in [
            ("x", "missing `=ACTION`"),
            ("x#0=kill", "start at 1"),
            ("x#a=kill", "not a positive integer"),
            ("x=explode", "unknown action"),
            ("x=exit", "needs `:CODE`"),
            ("x=exit:256", "not in 0..=255"),
            ("x=delay:-1", "negative"),
            ("x=error:ebadf", "error kind"),
            ("x@rank:-1=kill", "rank"),
            ("x@rank:1@rank:2=kill", "qualifier"),
            ("x@host:a=kill", "qualifier"),
            ("=kill", "point name"),
            ("x y=kill", "point name"),
            ("ok=kill;x@node:=kill", "node name"),
        ] {
            let err = parse_plan(text).expect_err(text).to_string();
            assert!(err.contains(needle), "{text}: `{err}` lacks `{needle}`");
        }
        let err = parse_plan("ok=kill;bad").expect_err("second entry bad");
        assert!(matches!(err, PlanError::Syntax { index: 1, .. }), "{err}");
        assert!(matches!(
            parse_plan("{\"faults\":[{\"point\":\"x\",\"hit\":0,\"action\":\"kill\"}]}"),
            Err(PlanError::Invalid { index: 0, .. })
        ));
        assert!(matches!(
            parse_plan("{\"faults\":[{\"point\":\"x\"}]}"),
            Err(PlanError::Json { .. })
        ));
        assert!(matches!(
            parse_plan("/nonexistent/plan.json"),
            Err(PlanError::Read { .. })
        ));
        assert!(matches!(
            parse_plan(&"x=kill;".repeat(MAX_FAULTS + 1)),
            Err(PlanError::TooMany { .. })
        ));
        assert!(matches!(
            parse_plan("{\"faults\":[{\"point\":\"x\",\"node\":\"a b\",\"action\":\"kill\"}]}"),
            Err(PlanError::Invalid { index: 0, reason: EntryError::NodeName(n) }) if n == "a b"
        ));
        assert_eq!(parse_plan("  ").expect("empty plan"), FaultPlan::default());
    }
}
