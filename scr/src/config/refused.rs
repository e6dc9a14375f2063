//! Parameters of the table that this library does not implement (yet): a
//! value other than the row's no-op default is refused at SCR_Init with a
//! [`ConfigWarning::NotSupported`] naming it (printed by rank 0, listed by
//! `scr config`), never silently ignored. Every other row acts; the table
//! walk in `settings/tests.rs` checks that each row is one or the other.
//!
//! When a parameter starts acting, its row leaves [`REFUSED`] and its
//! table meaning loses the `[not supported: …]` mark (a test keeps the
//! two in step).

use super::error::ConfigWarning;
use super::params::{self, parse_bytes, ValueKind};
use super::{Config, Source};

/// A parameter refused unless left at its no-op value, and why.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refusal {
    /// The parameter.
    pub name: &'static str,
    /// What is missing, for the warning.
    pub why: &'static str,
}

const fn r(name: &'static str, why: &'static str) -> Refusal {
    Refusal { name, why }
}

/// The refused rows. The no-op value is the row's table default; a row
/// without a default (SCR_CLUSTER_NAME) is refused whenever
/// it is set.
pub const REFUSED: &[Refusal] = &[
    r(
        "SCR_CLUSTER_NAME",
        "log entries do not record a cluster name",
    ),
    r(
        "SCR_FLUSH_TYPE",
        "flushes are SYNC, or background threads with SCR_FLUSH_ASYNC=1",
    ),
];

/// The refusal of `name`, if it is refused.
pub fn refusal(name: &str) -> Option<&'static Refusal> {
    REFUSED.iter().find(|r| r.name == name)
}

/// Whether `value` means the same as `default` for a row of kind `kind`.
fn same_value(kind: ValueKind, value: &str, default: &str) -> bool {
    let v = value.trim();
    match kind {
        ValueKind::Bool | ValueKind::Int => v.parse::<u64>().ok() == default.parse::<u64>().ok(),
        ValueKind::Bytes => parse_bytes(v).is_some() && parse_bytes(v) == parse_bytes(default),
        ValueKind::Float => v.parse::<f64>().ok() == default.parse::<f64>().ok(),
        ValueKind::Choice(_) => v.eq_ignore_ascii_case(default),
        ValueKind::Str | ValueKind::Path => v == default,
    }
}

/// The refusal warnings of `cfg`: every refused row set (by any source but
/// the table) to something other than its no-op default.
pub fn refusals(cfg: &Config) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    for refused in REFUSED {
        let Some(row) = params::info(refused.name) else {
            continue;
        };
        let Some(e) = cfg.get(refused.name) else {
            continue;
        };
        if matches!(e.source, Source::Default | Source::Derived { .. }) || e.value.is_empty() {
            continue;
        }
        if row
            .default
            .is_some_and(|d| same_value(row.kind, &e.value, d))
        {
            continue;
        }
        out.push(ConfigWarning::NotSupported {
            name: refused.name.to_owned(),
            value: e.value,
            source: e.source,
            why: refused.why.to_owned(),
        });
    }
    out
}

/// Settings that act alone but not together, each refused with a warning
/// naming the one that has no effect: SCR_USE_CONTAINERS=1 with
/// SCR_CACHE_BYPASS=1 (bypass mode writes each file straight to its place
/// in the prefix; nothing is flushed, so nothing is packed).
pub fn conflicts(cfg: &Config) -> Vec<ConfigWarning> {
    let on = |name: &str| cfg.get_bool(name).ok().flatten().unwrap_or(false);
    let mut out = Vec::new();
    if on("SCR_USE_CONTAINERS") && on("SCR_CACHE_BYPASS") {
        if let Some(e) = cfg.get("SCR_USE_CONTAINERS") {
            out.push(ConfigWarning::NotSupported {
                name: e.name,
                value: e.value,
                source: e.source,
                why: "datasets written with SCR_CACHE_BYPASS=1 go straight to the prefix, \
                      not into containers"
                    .to_owned(),
            });
        }
    }
    out
}
