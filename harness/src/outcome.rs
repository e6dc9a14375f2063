//! Outcome classes: what one launch did at restart, how the run loop ended,
//! and whether that is what a scenario expected.
//!
//! Each launch of the run loop gets one [`Token`] from what the test
//! application reported ([`AppReport`]): `cache:N` (restarted from
//! checkpoint N as found in cache), `rebuilt:N` (after rebuilding lost
//! files), `fetched:N` (copied back from the prefix), `scratch` (no
//! checkpoint, none lost), `loss` (no checkpoint, and the library reported
//! the ones it could not recover: lost in cache, a fetch that failed, or an
//! index it could not read), `died` (the launch ended before its
//! restart was decided), `error` (the application stopped on an SCR error),
//! and the two that must never happen: `SILENT-CORRUPTION` (a byte read back
//! was wrong, fewer bytes came back than were written, or an older
//! checkpoint was used while the library kept quiet about a newer one it
//! knew) and `HANG` (the launch outlived its time bound).
//!
//! The run loop ends in one [`End`]. A scenario's outcome is the sequence of
//! tokens, one per launch, and the end: `scratch, rebuilt:3 | completed`.
//! docs/decisions.md ("Outcome classes") gives the rules and why.
//!
//! A scenario that checks the scavenge (`next_allocation = true`) adds two
//! clauses after `;`: what `scr postrun` saved ([`Scavenged`], one per
//! dataset it handled) and how the next allocation (new nodes, empty
//! caches, the same prefix) restarted (a [`Token`]):
//! `scratch, died | retries; postrun saved:3; next fetched:3`.
//! docs/decisions.md ("Scavenge outcomes") gives the grammar and the rules.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// The class of a launch's restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Class {
    /// Restarted from a checkpoint found whole in cache.
    Cache,
    /// Restarted from a checkpoint rebuilt in cache.
    Rebuilt,
    /// Restarted from a checkpoint fetched from the prefix directory.
    Fetched,
    /// Started without a checkpoint; none was lost.
    Scratch,
    /// Started without a checkpoint; the library reported the losses.
    Loss,
    /// The launch ended before its restart was decided.
    Died,
    /// The application stopped on an SCR error (bad configuration, ...).
    Error,
    /// Wrong bytes, missing bytes, or a silent roll-back. Must never happen.
    SilentCorruption,
    /// The launch outlived its bound. Must never happen.
    Hang,
}

impl Class {
    /// Every class, in display order.
    pub const ALL: [Class; 9] = [
        Class::Cache,
        Class::Rebuilt,
        Class::Fetched,
        Class::Scratch,
        Class::Loss,
        Class::Died,
        Class::Error,
        Class::SilentCorruption,
        Class::Hang,
    ];

    /// The class's name in tokens.
    pub fn name(self) -> &'static str {
        match self {
            Class::Cache => "cache",
            Class::Rebuilt => "rebuilt",
            Class::Fetched => "fetched",
            Class::Scratch => "scratch",
            Class::Loss => "loss",
            Class::Died => "died",
            Class::Error => "error",
            Class::SilentCorruption => "SILENT-CORRUPTION",
            Class::Hang => "HANG",
        }
    }

    /// True for the classes that carry a checkpoint id.
    pub fn restarted(self) -> bool {
        matches!(self, Class::Cache | Class::Rebuilt | Class::Fetched)
    }

    /// True for the two classes that must never happen.
    pub fn never(self) -> bool {
        matches!(self, Class::SilentCorruption | Class::Hang)
    }
}

/// One launch's restart: a class and, for restarts, the checkpoint id.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Token {
    /// The class.
    pub class: Class,
    /// The checkpoint restarted from (`ckpt.<id>`), for restart classes.
    pub ckpt: Option<u64>,
}

impl Token {
    /// A token without a checkpoint.
    pub fn of(class: Class) -> Token {
        Token { class, ckpt: None }
    }

    /// A restart from checkpoint `ckpt`.
    pub fn restart(class: Class, ckpt: u64) -> Token {
        Token {
            class,
            ckpt: Some(ckpt),
        }
    }
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ckpt {
            Some(c) => write!(f, "{}:{c}", self.class.name()),
            None => f.write_str(self.class.name()),
        }
    }
}

/// Why an expected outcome does not parse. Catalogue errors wrap it with
/// the file and the scenario's name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OutcomeError {
    /// A token names no class.
    #[error("`{token}`: unknown class {name:?} (one of {known})")]
    UnknownClass {
        /// The token.
        token: String,
        /// The name given.
        name: String,
        /// The classes there are.
        known: String,
    },
    /// A checkpoint id that is not a number.
    #[error("`{token}`: checkpoint id {id:?} is not a number")]
    BadCheckpoint {
        /// The token.
        token: String,
        /// The id given.
        id: String,
    },
    /// A restart class without its checkpoint id.
    #[error("`{token}`: {name} needs a checkpoint id, e.g. {name}:3")]
    NeedsCheckpoint {
        /// The token.
        token: String,
        /// The class.
        name: String,
    },
    /// A class that takes no checkpoint id was given one.
    #[error("`{token}`: {name} takes no checkpoint id")]
    TakesNoCheckpoint {
        /// The token.
        token: String,
        /// The class.
        name: String,
    },
    /// The end after `|` is not one of the ends.
    #[error("unknown end {end:?} (one of {known})")]
    UnknownEnd {
        /// The end given.
        end: String,
        /// The ends there are.
        known: String,
    },
    /// No launch token and no end that explains it.
    #[error("`{text}`: no launch outcome (e.g. `scratch, rebuilt:3`)")]
    NoLaunch {
        /// The outcome text.
        text: String,
    },
    /// A clause after `;` that is neither `postrun ...` nor `next ...`.
    #[error("`{clause}`: unknown clause; after `;` come `postrun saved:N` (or lost:N, nothing, failed) and `next TOKEN`")]
    UnknownClause {
        /// The clause.
        clause: String,
    },
    /// The same clause twice.
    #[error("`{clause}`: the {what} clause is given twice")]
    Repeated {
        /// The clause.
        clause: String,
        /// `postrun` or `next`.
        what: &'static str,
    },
    /// A postrun result that is not one of the forms.
    #[error("`{token}`: unknown postrun result (saved:N, lost:N, nothing, failed, HANG)")]
    BadScavenged {
        /// The token.
        token: String,
    },
    /// `postrun` or `next` with nothing after it.
    #[error("`{clause}`: says nothing (e.g. `postrun saved:3`, `next fetched:3`)")]
    EmptyClause {
        /// The clause.
        clause: String,
    },
}

impl FromStr for Token {
    type Err = OutcomeError;
    fn from_str(s: &str) -> Result<Token, OutcomeError> {
        let s = s.trim();
        let (name, ckpt) = match s.split_once(':') {
            Some((n, c)) => (
                n,
                Some(c.parse::<u64>().map_err(|_| OutcomeError::BadCheckpoint {
                    token: s.to_string(),
                    id: c.to_string(),
                })?),
            ),
            None => (s, None),
        };
        let class = Class::ALL
            .into_iter()
            .find(|c| c.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| OutcomeError::UnknownClass {
                token: s.to_string(),
                name: name.to_string(),
                known: Class::ALL.map(Class::name).join(", "),
            })?;
        if class.restarted() != ckpt.is_some() {
            let (token, name) = (s.to_string(), name.to_string());
            return Err(if class.restarted() {
                OutcomeError::NeedsCheckpoint { token, name }
            } else {
                OutcomeError::TakesNoCheckpoint { token, name }
            });
        }
        Ok(Token { class, ckpt })
    }
}

/// What `scr postrun` did with one dataset, or why it did nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scavenged {
    /// Checkpoint N is complete in the prefix (indexed COMPLETE).
    Saved(u64),
    /// Postrun tried checkpoint N and could not save it whole.
    Lost(u64),
    /// Nothing needed a scavenge (the newest checkpoint was already in the
    /// prefix, or nothing was ever cached).
    Nothing,
    /// Postrun could not run at all (no report: unreadable flush file, no
    /// node up, prefix gone).
    Failed,
    /// Postrun outlived its bound. Must never happen.
    Hang,
}

impl Scavenged {
    /// True for the result that must never happen.
    pub fn never(self) -> bool {
        self == Scavenged::Hang
    }
}

impl fmt::Display for Scavenged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Scavenged::Saved(n) => write!(f, "saved:{n}"),
            Scavenged::Lost(n) => write!(f, "lost:{n}"),
            Scavenged::Nothing => f.write_str("nothing"),
            Scavenged::Failed => f.write_str("failed"),
            Scavenged::Hang => f.write_str("HANG"),
        }
    }
}

impl Serialize for Scavenged {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl FromStr for Scavenged {
    type Err = OutcomeError;
    fn from_str(s: &str) -> Result<Scavenged, OutcomeError> {
        let t = s.trim();
        let bad = || OutcomeError::BadScavenged {
            token: t.to_string(),
        };
        let id = |c: &str| {
            c.parse::<u64>().map_err(|_| OutcomeError::BadCheckpoint {
                token: t.to_string(),
                id: c.to_string(),
            })
        };
        match t.split_once(':') {
            Some((k, c)) if k.eq_ignore_ascii_case("saved") => Ok(Scavenged::Saved(id(c)?)),
            Some((k, c)) if k.eq_ignore_ascii_case("lost") => Ok(Scavenged::Lost(id(c)?)),
            Some(_) => Err(bad()),
            None if t.eq_ignore_ascii_case("nothing") => Ok(Scavenged::Nothing),
            None if t.eq_ignore_ascii_case("failed") => Ok(Scavenged::Failed),
            None if t.eq_ignore_ascii_case("hang") => Ok(Scavenged::Hang),
            None => Err(bad()),
        }
    }
}

/// How the run loop ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum End {
    /// The last launch exited 0.
    Completed,
    /// A halt condition stopped the loop (halt file, `scr halt`).
    Halted,
    /// The launch budget ran out with the last launch failing.
    Retries,
    /// Fewer healthy nodes than the job needs.
    Nodes,
    /// A launch outlived its bound.
    Hang,
    /// The launcher could not be started.
    Launch,
}

impl End {
    /// Every end.
    pub const ALL: [End; 6] = [
        End::Completed,
        End::Halted,
        End::Retries,
        End::Nodes,
        End::Hang,
        End::Launch,
    ];

    /// The end's name.
    pub fn name(self) -> &'static str {
        match self {
            End::Completed => "completed",
            End::Halted => "halted",
            End::Retries => "retries",
            End::Nodes => "nodes",
            End::Hang => "HANG",
            End::Launch => "launch-failed",
        }
    }
}

impl fmt::Display for End {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for End {
    type Err = OutcomeError;
    fn from_str(s: &str) -> Result<End, OutcomeError> {
        End::ALL
            .into_iter()
            .find(|e| e.name().eq_ignore_ascii_case(s.trim()))
            .ok_or_else(|| OutcomeError::UnknownEnd {
                end: s.trim().to_string(),
                known: End::ALL.map(End::name).join(", "),
            })
    }
}

/// A run loop's outcome: one token per launch, then how it ended; for a
/// scenario that checks the scavenge, what `scr postrun` saved and how the
/// next allocation restarted.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Outcome {
    /// One token per launch, in order.
    pub launches: Vec<Token>,
    /// How the loop ended.
    pub end: End,
    /// What `scr postrun` did, one result per dataset it handled (`None`:
    /// not checked).
    pub postrun: Option<Vec<Scavenged>>,
    /// The next allocation's restart (`None`: no next allocation).
    pub next: Option<Token>,
}

impl Outcome {
    /// Launch tokens and an end, nothing about a scavenge.
    pub fn of(launches: Vec<Token>, end: End) -> Outcome {
        Outcome {
            launches,
            end,
            postrun: None,
            next: None,
        }
    }

    /// The headline class: SILENT CORRUPTION or HANG when any launch (or
    /// the next allocation, or postrun) had it, else the next allocation's
    /// class when there is one, else the last launch's.
    pub fn headline(&self) -> Class {
        for never in [Class::SilentCorruption, Class::Hang] {
            if self
                .launches
                .iter()
                .chain(self.next.as_ref())
                .any(|t| t.class == never)
            {
                return never;
            }
        }
        if self.end == End::Hang || self.postrun.iter().flatten().any(|p| p.never()) {
            return Class::Hang;
        }
        if let Some(n) = &self.next {
            return n.class;
        }
        self.launches.last().map_or(Class::Died, |t| t.class)
    }

    /// The headline token: the next allocation's or the last launch's
    /// (with its checkpoint), or the never-happen class.
    pub fn headline_token(&self) -> Token {
        match self.headline() {
            c if c.never() => Token::of(c),
            _ => self
                .next
                .as_ref()
                .or(self.launches.last())
                .cloned()
                .unwrap_or(Token::of(Class::Died)),
        }
    }

    /// True when something that must never happen happened.
    pub fn never(&self) -> bool {
        self.headline().never()
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tokens: Vec<String> = self.launches.iter().map(Token::to_string).collect();
        if tokens.is_empty() {
            write!(f, "| {}", self.end)?;
        } else {
            write!(f, "{} | {}", tokens.join(", "), self.end)?;
        }
        if let Some(p) = &self.postrun {
            let p: Vec<String> = p.iter().map(Scavenged::to_string).collect();
            write!(f, "; postrun {}", p.join(", "))?;
        }
        if let Some(n) = &self.next {
            write!(f, "; next {n}")?;
        }
        Ok(())
    }
}

impl FromStr for Outcome {
    type Err = OutcomeError;
    /// `tok, tok, ... [| end] [; postrun res, res, ...] [; next tok]`; the
    /// end defaults to `completed`.
    fn from_str(s: &str) -> Result<Outcome, OutcomeError> {
        let mut clauses = s.split(';');
        let head = clauses.next().unwrap_or_default();
        let (tokens, end, explicit_end) = match head.split_once('|') {
            Some((t, e)) => (t, e.parse::<End>()?, true),
            None => (head, End::Completed, false),
        };
        let launches = tokens
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(Token::from_str)
            .collect::<Result<Vec<_>, _>>()?;
        // No launch at all only makes sense with an end that explains it
        // (`| nodes`: too few healthy nodes to launch once).
        if launches.is_empty() && !explicit_end {
            return Err(OutcomeError::NoLaunch {
                text: s.trim().to_string(),
            });
        }
        let mut out = Outcome::of(launches, end);
        for clause in clauses {
            let c = clause.trim();
            let (word, rest) = c.split_once(char::is_whitespace).unwrap_or((c, ""));
            let rest = rest.trim();
            let empty = || OutcomeError::EmptyClause {
                clause: c.to_string(),
            };
            match word {
                "postrun" => {
                    if out.postrun.is_some() {
                        return Err(OutcomeError::Repeated {
                            clause: c.to_string(),
                            what: "postrun",
                        });
                    }
                    let results = rest
                        .split(',')
                        .map(str::trim)
                        .filter(|t| !t.is_empty())
                        .map(Scavenged::from_str)
                        .collect::<Result<Vec<_>, _>>()?;
                    if results.is_empty() {
                        return Err(empty());
                    }
                    out.postrun = Some(results);
                }
                "next" => {
                    if out.next.is_some() {
                        return Err(OutcomeError::Repeated {
                            clause: c.to_string(),
                            what: "next",
                        });
                    }
                    if rest.is_empty() {
                        return Err(empty());
                    }
                    out.next = Some(rest.parse()?);
                }
                _ => {
                    return Err(OutcomeError::UnknownClause {
                        clause: c.to_string(),
                    })
                }
            }
        }
        Ok(out)
    }
}

impl Serialize for Outcome {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for Outcome {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Outcome, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// What `scr_app`'s rank 0 printed in one launch, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct AppReport {
    /// `SCR_APP init`: dataset ids found in cache.
    pub found: Vec<i64>,
    /// Usable after init.
    pub available: Vec<i64>,
    /// Rebuilt at init.
    pub rebuilt: Vec<i64>,
    /// Fetched from the prefix at init.
    pub fetched: Vec<i64>,
    /// Deleted as unrecoverable.
    pub lost: Vec<i64>,
    /// Kept but unusable (different rank count).
    pub skipped: Vec<i64>,
    /// Copies in the prefix a fetch tried and could not use.
    pub fetch_failed: Vec<i64>,
    /// The prefix's index could not be read, so no fetch was tried.
    pub fetch_error: bool,
    /// The init line was printed (init finished).
    pub init_done: bool,
    /// Restart attempts: (checkpoint name, ok, source, verified bytes).
    pub attempts: Vec<Attempt>,
    /// Checkpoints this launch completed (ids), in order.
    pub completed: Vec<u64>,
    /// `SCR_APP MISMATCH ...` lines (wrong bytes).
    pub mismatches: Vec<String>,
    /// `SCR_APP error ...` line, if the application stopped on an error.
    pub error: Option<String>,
    /// The application saw a halt condition and stopped (`SCR_APP halted`).
    pub halted: bool,
    /// The restart was decided (`SCR_APP restarted`).
    pub decided: bool,
    /// The final summary's status (`ok`, `MISMATCH`, ...), when printed.
    pub status: Option<String>,
}

/// One restart attempt of the application.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Attempt {
    /// Checkpoint name (`ckpt.<id>`).
    pub name: String,
    /// Its id, parsed from the name.
    pub ckpt: Option<u64>,
    /// Every rank read every byte right.
    pub ok: bool,
    /// `cache`, `rebuilt` or `fetched` (older applications omit it).
    pub source: Option<String>,
    /// Dataset id.
    pub dataset: Option<i64>,
    /// Bytes verified on all ranks.
    pub verified_bytes: u64,
}

fn ids(s: &str) -> Vec<i64> {
    if s == "-" {
        return Vec::new();
    }
    s.split(',').filter_map(|x| x.parse().ok()).collect()
}

fn fields(line: &str) -> BTreeMap<&str, &str> {
    line.split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect()
}

fn ckpt_id(name: &str) -> Option<u64> {
    name.strip_prefix("ckpt.")?.parse().ok()
}

impl AppReport {
    /// Parse rank 0's `SCR_APP` lines from a launch's standard output.
    pub fn parse(stdout: &str) -> AppReport {
        let mut r = AppReport::default();
        for line in stdout.lines().map(str::trim) {
            let Some(rest) = line.strip_prefix("SCR_APP ") else {
                continue;
            };
            let (kind, _) = rest.split_once(' ').unwrap_or((rest, ""));
            let f = fields(rest);
            match kind {
                "init" => {
                    r.init_done = true;
                    r.found = f.get("found").map_or_else(Vec::new, |s| ids(s));
                    r.available = f.get("available").map_or_else(Vec::new, |s| ids(s));
                    r.rebuilt = f.get("rebuilt").map_or_else(Vec::new, |s| ids(s));
                    r.fetched = f.get("fetched").map_or_else(Vec::new, |s| ids(s));
                    r.lost = f.get("lost_ids").map_or_else(Vec::new, |s| ids(s));
                    r.skipped = f.get("skipped_ids").map_or_else(Vec::new, |s| ids(s));
                    r.fetch_failed = f.get("fetch_failed").map_or_else(Vec::new, |s| ids(s));
                    r.fetch_error = f.get("fetch_error") == Some(&"true");
                }
                "restart_attempt" => {
                    let name = f.get("name").copied().unwrap_or("").to_string();
                    r.attempts.push(Attempt {
                        ckpt: ckpt_id(&name),
                        name,
                        ok: f.get("ok") == Some(&"true"),
                        source: f.get("source").map(|s| s.to_string()),
                        dataset: f.get("dataset").and_then(|d| d.parse().ok()),
                        verified_bytes: f
                            .get("verified_bytes")
                            .and_then(|v| v.parse().ok())
                            .unwrap_or(0),
                    });
                }
                "checkpoint" if f.get("complete") == Some(&"true") => {
                    if let Some(c) = f.get("name").and_then(|n| ckpt_id(n)) {
                        r.completed.push(c);
                    }
                }
                "MISMATCH" => r.mismatches.push(line.to_string()),
                "error" => r.error = Some(rest.to_string()),
                "halted" => r.halted = true,
                "restarted" => r.decided = true,
                _ if f.contains_key("restart") && f.contains_key("status") => {
                    r.status = f.get("status").map(|s| s.to_string());
                }
                _ => {}
            }
        }
        r
    }

    /// The successful restart attempt, if any.
    pub fn restarted(&self) -> Option<&Attempt> {
        self.attempts.iter().find(|a| a.ok)
    }
}

/// What the harness knows about a launch besides the application's report.
#[derive(Debug, Clone, Default)]
pub struct LaunchFacts {
    /// The launch outlived its bound.
    pub timed_out: bool,
    /// Checkpoints completed by earlier launches (ids), newest last.
    pub completed_before: Vec<u64>,
    /// Bytes checkpoint `id` holds across all ranks, as the data plan says
    /// (`None`: not known, e.g. another application).
    pub plan_bytes: Option<BTreeMap<u64, u64>>,
}

/// Classify one launch. Returns the token and, for SILENT CORRUPTION, why.
pub fn classify(report: &AppReport, facts: &LaunchFacts) -> (Token, Option<String>) {
    if facts.timed_out {
        return (Token::of(Class::Hang), None);
    }
    if !report.mismatches.is_empty() || report.status.as_deref() == Some("MISMATCH") {
        let why = report
            .mismatches
            .first()
            .cloned()
            .unwrap_or_else(|| "the application reported status=MISMATCH".into());
        return (Token::of(Class::SilentCorruption), Some(why));
    }
    if let Some(a) = report.restarted() {
        let Some(ckpt) = a.ckpt else {
            return (
                Token::of(Class::SilentCorruption),
                Some(format!(
                    "restarted from {:?}, not a checkpoint name",
                    a.name
                )),
            );
        };
        if let Some(plan) = &facts.plan_bytes {
            let want = plan.get(&ckpt).copied();
            if want != Some(a.verified_bytes) {
                return (
                    Token::of(Class::SilentCorruption),
                    Some(format!(
                        "restarted from ckpt.{ckpt} with {} bytes verified, the data plan has {}",
                        a.verified_bytes,
                        want.map_or_else(|| "no such checkpoint".to_string(), |w| w.to_string())
                    )),
                );
            }
        }
        if let Some(why) = silent_rollback(report, facts, Some(ckpt)) {
            return (Token::of(Class::SilentCorruption), Some(why));
        }
        let class = match a.source.as_deref() {
            Some("rebuilt") => Class::Rebuilt,
            Some("fetched") => Class::Fetched,
            Some(_) => Class::Cache,
            None => match a.dataset {
                Some(d) if report.rebuilt.contains(&d) => Class::Rebuilt,
                Some(d) if report.fetched.contains(&d) => Class::Fetched,
                _ => Class::Cache,
            },
        };
        return (Token::restart(class, ckpt), None);
    }
    // The restart is decided once every attempt has been made (`SCR_APP
    // restarted`; older applications: the first checkpoint or the summary).
    let decided = report.decided
        || !report.completed.is_empty()
        || report.halted
        || report.status.as_deref().is_some_and(|s| s != "error");
    if !decided && (report.error.is_some() || report.status.as_deref() == Some("error")) {
        return (Token::of(Class::Error), None);
    }
    if !decided {
        return (Token::of(Class::Died), None);
    }
    if let Some(why) = silent_rollback(report, facts, None) {
        return (Token::of(Class::SilentCorruption), Some(why));
    }
    if report.lost.is_empty()
        && report.attempts.is_empty()
        && report.fetch_failed.is_empty()
        && !report.fetch_error
    {
        (Token::of(Class::Scratch), None)
    } else {
        (Token::of(Class::Loss), None)
    }
}

/// A newer checkpoint than the one used (`used`, `None` for none) that the
/// library found in cache and neither used, tried, nor reported lost or
/// skipped: a silent roll-back.
fn silent_rollback(report: &AppReport, facts: &LaunchFacts, used: Option<u64>) -> Option<String> {
    let tried: Vec<u64> = report.attempts.iter().filter_map(|a| a.ckpt).collect();
    // Dataset ids equal checkpoint ids for scr_app (one output per
    // checkpoint, numbered from 1 after the restarted one).
    let reported: Vec<u64> = report
        .lost
        .iter()
        .chain(&report.skipped)
        .filter_map(|&d| u64::try_from(d).ok())
        .collect();
    facts
        .completed_before
        .iter()
        .rev()
        .filter(|&&n| used.is_none_or(|u| n > u))
        .find(|&&n| {
            report.found.contains(&(n as i64)) && !tried.contains(&n) && !reported.contains(&n)
        })
        .map(|n| {
            format!(
                "ckpt.{n} was found in cache but neither used, tried nor reported lost; restarted from {}",
                used.map_or_else(|| "nothing".to_string(), |u| format!("ckpt.{u}"))
            )
        })
}

/// Whether an outcome met an expectation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// As expected.
    Expected,
    /// Different from the expectation, but nothing that must never happen.
    Unexpected,
    /// Wrong bytes, a silent roll-back, or a hang.
    Never,
}

/// A restart older than the expected `e` (or none at all) that the
/// library did not explain (it neither reported `e`'s checkpoint lost nor
/// tried it): a silent roll-back.
fn unexplained_older(a: &Token, e: &Token, report: Option<&AppReport>) -> Option<u64> {
    let (Some(want), true) = (e.ckpt, e.class.restarted()) else {
        return None;
    };
    let older = match (a.class.restarted(), a.ckpt) {
        (true, Some(got)) => got < want,
        _ => matches!(a.class, Class::Scratch | Class::Loss),
    };
    let said = report.is_some_and(|r| {
        r.lost.contains(&(want as i64))
            || r.fetch_failed.contains(&(want as i64))
            || r.attempts.iter().any(|t| t.ckpt == Some(want))
    });
    (older && !said).then_some(want)
}

/// Compare an outcome with the expected one. A restart from an older
/// checkpoint than expected, when the expected one was not reported lost,
/// is a silent roll-back and counts as SILENT CORRUPTION; so is a next
/// allocation that restarts older than expected. `reports` are the
/// launches' application reports, `next_report` the next allocation's.
pub fn judge(
    actual: &Outcome,
    expected: &Outcome,
    reports: &[AppReport],
    next_report: Option<&AppReport>,
) -> (Verdict, String) {
    if actual.never() {
        return (
            Verdict::Never,
            format!("{} happened", actual.headline().name()),
        );
    }
    for (i, (a, e)) in actual.launches.iter().zip(&expected.launches).enumerate() {
        if let Some(want) = unexplained_older(a, e, reports.get(i)) {
            return (
                Verdict::Never,
                format!(
                    "launch {}: {a} although ckpt.{want} was expected to be recoverable and the library did not report it lost",
                    i + 1
                ),
            );
        }
    }
    if let (Some(a), Some(e)) = (&actual.next, &expected.next) {
        if let Some(want) = unexplained_older(a, e, next_report) {
            return (
                Verdict::Never,
                format!(
                    "next allocation: {a} although ckpt.{want} was expected in the prefix and the library did not report it lost"
                ),
            );
        }
    }
    if actual == expected {
        (Verdict::Expected, String::new())
    } else {
        (
            Verdict::Unexpected,
            format!("expected `{expected}`, got `{actual}`"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_outcomes_round_trip() {
        for s in [
            "scratch, rebuilt:3 | completed",
            "scratch, died, loss | retries",
            "error | retries",
            "scratch, SILENT-CORRUPTION | completed",
            "| nodes",
        ] {
            let o: Outcome = s.parse().unwrap();
            assert_eq!(o.to_string(), s);
        }
        let o: Outcome = "scratch, cache:2".parse().unwrap();
        assert_eq!(o.end, End::Completed);
        assert!("scratch, rebuilt".parse::<Outcome>().is_err());
        assert!("scratch:3".parse::<Outcome>().is_err());
        assert!("scratch | nowhere".parse::<Outcome>().is_err());
        assert!("".parse::<Outcome>().is_err());
    }

    #[test]
    fn scavenge_clauses_round_trip_and_are_checked() {
        for s in [
            "scratch, died | retries; postrun saved:3; next fetched:3",
            "died | retries; postrun lost:3; next scratch",
            "died | retries; postrun saved:2, saved:3; next fetched:3",
            "died | retries; postrun failed; next fetched:2",
            "scratch | completed; postrun nothing; next fetched:3",
        ] {
            let o: Outcome = s.parse().unwrap();
            assert_eq!(o.to_string(), s);
        }
        let o: Outcome = "died | retries ;postrun  saved:3 ; next fetched:3"
            .parse()
            .unwrap();
        assert_eq!(o.postrun, Some(vec![Scavenged::Saved(3)]));
        assert_eq!(o.next, Some(Token::restart(Class::Fetched, 3)));
        assert_eq!(o.headline(), Class::Fetched);
        let err = |s: &str| s.parse::<Outcome>().unwrap_err();
        assert!(matches!(
            err("died; postrun kept:3"),
            OutcomeError::BadScavenged { .. }
        ));
        assert!(matches!(
            err("died; postrun saved:x"),
            OutcomeError::BadCheckpoint { .. }
        ));
        assert!(matches!(
            err("died; later x"),
            OutcomeError::UnknownClause { .. }
        ));
        assert!(matches!(
            err("died; next"),
            OutcomeError::EmptyClause { .. }
        ));
        assert!(matches!(
            err("died; next scratch; next scratch"),
            OutcomeError::Repeated { what: "next", .. }
        ));
        assert!(matches!(
            err("died; next fetched"),
            OutcomeError::NeedsCheckpoint { .. }
        ));
        // A hung postrun or a corrupt next allocation is the headline.
        let o: Outcome = "died | retries; postrun HANG; next scratch"
            .parse()
            .unwrap();
        assert!(o.never());
        let o: Outcome = "died | retries; postrun saved:3; next SILENT-CORRUPTION"
            .parse()
            .unwrap();
        assert_eq!(o.headline(), Class::SilentCorruption);
    }

    #[test]
    fn an_older_next_allocation_than_expected_is_never() {
        let exp: Outcome = "died | retries; postrun saved:3; next fetched:3"
            .parse()
            .unwrap();
        let older: Outcome = "died | retries; postrun saved:3; next fetched:2"
            .parse()
            .unwrap();
        let (v, why) = judge(&older, &exp, &[], Some(&AppReport::default()));
        assert_eq!(v, Verdict::Never, "{why}");
        assert!(why.contains("next allocation"), "{why}");
        let scratch: Outcome = "died | retries; postrun lost:3; next scratch"
            .parse()
            .unwrap();
        assert_eq!(
            judge(&scratch, &exp, &[], Some(&AppReport::default())).0,
            Verdict::Never
        );
        let lost: Outcome = "died | retries; postrun lost:3; next fetched:3"
            .parse()
            .unwrap();
        assert_eq!(
            judge(&lost, &exp, &[], Some(&AppReport::default())).0,
            Verdict::Unexpected
        );
        assert_eq!(judge(&exp, &exp, &[], None).0, Verdict::Expected);
    }

    const RESTARTED: &str = "\
SCR_APP init ranks=8 found=2,3 available=2,3 rebuilt=3 lost_ids=- skipped_ids=- moved_files=0
SCR_APP restart_attempt name=ckpt.3 dataset=3 ok=true verified_bytes=100 mismatches=0 unreadable=0
SCR_APP checkpoint name=ckpt.4 complete=true
SCR_APP restart=ckpt.3 source=rebuilt verified_bytes=100 checkpoints_written=1 status=ok
";

    fn facts(before: &[u64], plan: &[(u64, u64)]) -> LaunchFacts {
        LaunchFacts {
            timed_out: false,
            completed_before: before.to_vec(),
            plan_bytes: Some(plan.iter().copied().collect()),
        }
    }

    #[test]
    fn a_rebuilt_restart_with_the_planned_bytes_is_rebuilt() {
        let r = AppReport::parse(RESTARTED);
        assert_eq!(r.completed, [4]);
        let (t, why) = classify(&r, &facts(&[1, 2, 3], &[(3, 100)]));
        assert_eq!((t.to_string(), why), ("rebuilt:3".to_string(), None));
    }

    #[test]
    fn fewer_bytes_than_planned_is_silent_corruption() {
        let r = AppReport::parse(RESTARTED);
        let (t, why) = classify(&r, &facts(&[1, 2, 3], &[(3, 101)]));
        assert_eq!(t.class, Class::SilentCorruption);
        assert!(why.unwrap().contains("101"));
    }

    #[test]
    fn a_mismatch_line_is_silent_corruption_even_after_a_crash() {
        let r = AppReport::parse(
            "SCR_APP init ranks=8 found=3 available=3 rebuilt=- lost_ids=- skipped_ids=- moved_files=0\n\
             SCR_APP MISMATCH rank=2 ckpt=3 file=f offset=7 why=\"wrong byte\"\n",
        );
        assert_eq!(
            classify(&r, &facts(&[3], &[])).0.class,
            Class::SilentCorruption
        );
    }

    #[test]
    fn ignoring_a_newer_checkpoint_found_in_cache_is_a_silent_rollback() {
        let r = AppReport::parse(
            "SCR_APP init ranks=8 found=2,3 available=2 rebuilt=- lost_ids=- skipped_ids=- moved_files=0\n\
             SCR_APP restart_attempt name=ckpt.2 dataset=2 ok=true verified_bytes=5 mismatches=0 unreadable=0\n\
             SCR_APP restart=ckpt.2 source=cache verified_bytes=5 checkpoints_written=0 status=ok\n",
        );
        let (t, why) = classify(&r, &facts(&[2, 3], &[(2, 5)]));
        assert_eq!(t.class, Class::SilentCorruption, "{why:?}");
        // Reported lost: a loud loss, restart from the older one is fine.
        let r2 = AppReport::parse(
            "SCR_APP init ranks=8 found=2,3 available=2 rebuilt=- lost_ids=3 skipped_ids=- moved_files=0\n\
             SCR_APP restart_attempt name=ckpt.2 dataset=2 ok=true verified_bytes=5 mismatches=0 unreadable=0\n",
        );
        assert_eq!(
            classify(&r2, &facts(&[2, 3], &[(2, 5)])).0.to_string(),
            "cache:2"
        );
    }

    #[test]
    fn no_restart_is_scratch_or_loss_or_died() {
        let none = "SCR_APP init ranks=8 found=- available=- rebuilt=- lost_ids=- skipped_ids=- moved_files=0\n\
                    SCR_APP checkpoint name=ckpt.1 complete=true\n";
        assert_eq!(
            classify(&AppReport::parse(none), &facts(&[], &[])).0,
            Token::of(Class::Scratch)
        );
        let lost = "SCR_APP init ranks=8 found=3 available=- rebuilt=- lost_ids=3 skipped_ids=- moved_files=0\n\
                    SCR_APP restart=none source=none verified_bytes=0 checkpoints_written=1 status=ok\n";
        assert_eq!(
            classify(&AppReport::parse(lost), &facts(&[3], &[])).0,
            Token::of(Class::Loss)
        );
        // A fetch that failed, or an index that could not be read, is a
        // loss the library reported, not a start from scratch.
        let fetch_failed = "SCR_APP init ranks=8 found=- available=- rebuilt=- lost_ids=- skipped_ids=- moved_files=0 fetched=none fetch_failed=3,2 fetch_error=false\n\
                    SCR_APP restart=none source=none verified_bytes=0 checkpoints_written=1 status=ok\n";
        let r = AppReport::parse(fetch_failed);
        assert_eq!(r.fetch_failed, vec![3, 2]);
        assert_eq!(classify(&r, &facts(&[3], &[])).0, Token::of(Class::Loss));
        let index = "SCR_APP init ranks=8 found=- available=- rebuilt=- lost_ids=- skipped_ids=- moved_files=0 fetched=none fetch_failed=- fetch_error=true\n\
                    SCR_APP restart=none source=none verified_bytes=0 checkpoints_written=1 status=ok\n";
        let r = AppReport::parse(index);
        assert!(r.fetch_error);
        assert_eq!(classify(&r, &facts(&[3], &[])).0, Token::of(Class::Loss));
        let died = "SCR_APP init ranks=8 found=3 available=3 rebuilt=- lost_ids=- skipped_ids=- moved_files=0\n";
        assert_eq!(
            classify(&AppReport::parse(died), &facts(&[3], &[])).0,
            Token::of(Class::Died)
        );
        let mut f = facts(&[], &[]);
        f.timed_out = true;
        assert_eq!(
            classify(&AppReport::parse(none), &f).0,
            Token::of(Class::Hang)
        );
    }

    #[test]
    fn judging_treats_an_unreported_older_restart_as_never() {
        let exp: Outcome = "scratch, rebuilt:3".parse().unwrap();
        let got: Outcome = "scratch, cache:2".parse().unwrap();
        let quiet = vec![AppReport::default(), AppReport::default()];
        assert_eq!(judge(&got, &exp, &quiet, None).0, Verdict::Never);
        let mut loud = quiet.clone();
        loud[1].lost = vec![3];
        assert_eq!(judge(&got, &exp, &loud, None).0, Verdict::Unexpected);
        let mut fetch_said = quiet.clone();
        fetch_said[1].fetch_failed = vec![3];
        assert_eq!(judge(&got, &exp, &fetch_said, None).0, Verdict::Unexpected);
        assert_eq!(judge(&exp, &exp, &quiet, None).0, Verdict::Expected);
        let newer: Outcome = "scratch, rebuilt:4".parse().unwrap();
        assert_eq!(judge(&newer, &exp, &quiet, None).0, Verdict::Unexpected);
    }
}
