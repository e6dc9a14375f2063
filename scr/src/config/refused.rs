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

/// The refused rows. The no-op value is the row's table default; a row
/// without a default is refused whenever it is set. None is refused now:
/// SCR_CLUSTER_NAME, the last, acts since 2026-11-28 (the CLUSTER of
/// dataset descriptors); the vendor flush types are refused values
/// ([`REFUSED_VALUES`]).
pub const REFUSED: &[Refusal] = &[];

/// Values of acting rows that this library does not implement: the row
/// acts for every other value, and one of these is refused with a
/// warning (and the row's default used instead).
pub const REFUSED_VALUES: &[(&str, &[&str], &str)] = &[(
    "SCR_FLUSH_TYPE",
    &["BBAPI", "DATAWARP"],
    "vendor burst-buffer APIs are not built in; flushes copy with SYNC",
)];

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
        ValueKind::Seconds => {
            let secs = |t: &str| crate::units::seconds_u64(t).ok();
            secs(v).is_some() && secs(v) == secs(default)
        }
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
    for (name, values, why) in REFUSED_VALUES {
        let Some(e) = cfg.get(name) else {
            continue;
        };
        if values
            .iter()
            .any(|v| v.eq_ignore_ascii_case(e.value.trim()))
        {
            out.push(ConfigWarning::NotSupported {
                name: (*name).to_owned(),
                value: e.value,
                source: e.source,
                why: (*why).to_owned(),
            });
        }
    }
    out.extend(store_refusals(cfg));
    out
}

/// The STORE lines' keys that do not act, each refused with a warning
/// naming the store: every store is node-local (GROUP other than NODE,
/// VIEW=GLOBAL), the library makes directories in every store (MKDIR=0),
/// and a FLUSH= (or TYPE=) this library does not implement.
fn store_refusals(cfg: &Config) -> Vec<ConfigWarning> {
    let mut out = Vec::new();
    let Some((which, layer)) = cfg.desc_layer("STORE") else {
        return out;
    };
    for (path, d) in &layer.stores {
        let source = super::layer_source(which, layer, d.line);
        let mut refuse = |key: &str, value: &str, why: &str| {
            out.push(ConfigWarning::NotSupported {
                name: format!("STORE={path} {key}"),
                value: value.to_owned(),
                source: source.clone(),
                why: why.to_owned(),
            });
        };
        for (key, value) in &d.items {
            let v = value.trim();
            match key.as_str() {
                "GROUP" if !v.eq_ignore_ascii_case("NODE") => refuse(
                    key,
                    v,
                    "stores are node-local: each node keeps its own directories below the \
                     store, and a lost node's files are rebuilt, never read from it",
                ),
                "VIEW" if v.eq_ignore_ascii_case("GLOBAL") => refuse(
                    key,
                    v,
                    "stores are node-local (VIEW=LOCAL): each node keeps its own directories \
                     below the store",
                ),
                "MKDIR" if v == "0" => refuse(
                    key,
                    v,
                    "the library creates <user>/scr.<jobid> and a directory per dataset \
                     in every store it uses",
                ),
                "FLUSH" | "TYPE"
                    if super::settings::FlushType::parse(v).is_some_and(|t| !t.is_supported()) =>
                {
                    refuse(
                        key,
                        v,
                        "vendor burst-buffer APIs are not built in; datasets cached here \
                         flush with SCR_FLUSH_TYPE",
                    )
                }
                _ => {}
            }
        }
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
