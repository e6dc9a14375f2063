//! Typed group, store and redundancy descriptors (`scr_groupdesc.c`,
//! `scr_storedesc.c`, `scr_reddesc.c`), with the implicit ones SCR builds
//! when none are configured.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::error::{ConfigError, Location};
use super::parse::{check_ckpt_set, DescLine, Layer};
use super::{Config, Which};
/// The scheme enum lives at the bottom of the crate ([`crate::scheme`]);
/// configured descriptors name it from here too.
pub use crate::scheme::CopyType;

/// One `GROUPS=<host> NAME=value ...` line: the groups a host belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GroupDesc {
    /// The host name.
    pub host: String,
    /// Group name -> this host's value; hosts with equal values share a group.
    pub groups: BTreeMap<String, String>,
}

/// A store descriptor (`scr_storedesc`): a class of storage.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StoreDesc {
    /// Directory prefix; also the store's name.
    pub path: String,
    /// Group of processes sharing one device (default `NODE`).
    pub group: String,
    /// Datasets it may hold (default `SCR_CACHE_SIZE`).
    pub count: u64,
    /// Whether it may be used (default 1).
    pub enabled: bool,
    /// Whether mkdir/rmdir work there (default 1).
    pub mkdir: bool,
    /// Transfer type (`FLUSH=`, alias `TYPE=`); `None` = `SCR_FLUSH_TYPE`.
    pub flush: Option<String>,
    /// `VIEW=` (`LOCAL`/`GLOBAL`), if given.
    pub view: Option<String>,
}

/// A redundancy descriptor as configured (`CKPT=<n>`, `scr_reddesc`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CkptDesc {
    /// Index, 0-based and sequential.
    pub index: u32,
    /// Applied to checkpoints whose number it divides (default 1).
    pub interval: u64,
    /// Failure group (default `SCR_GROUP`).
    pub group: String,
    /// Store to cache in (default `SCR_CACHE_BASE`).
    pub store: String,
    /// Scheme (default `SCR_COPY_TYPE`, XOR when that is FILE).
    pub copy_type: CopyType,
    /// Set size (default `SCR_SET_SIZE`).
    pub set_size: u64,
    /// RS failures tolerated (default `SCR_SET_FAILURES`).
    pub set_failures: u64,
    /// Use for output datasets (default 0).
    pub output: bool,
    /// Write straight to the prefix (default `SCR_CACHE_BYPASS`).
    pub bypass: bool,
    /// Whether it may be used (default 1).
    pub enabled: bool,
    /// Protect its checkpoints in the background (default
    /// `SCR_ENCODE_ASYNC`; this project only, see [`crate::dataset::protect`]).
    pub encode_async: bool,
}

/// Every descriptor in effect, explicit or implicit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Descriptors {
    /// `GROUPS=` lines.
    pub groups: Vec<GroupDesc>,
    /// Group names usable in GROUP=: `NODE`, `WORLD`, then those of `groups`.
    pub group_names: Vec<String>,
    /// Stores, sorted by path.
    pub stores: Vec<StoreDesc>,
    /// Redundancy descriptors by index.
    pub ckpts: Vec<CkptDesc>,
    /// Whether `stores` are the implicit cache and control stores.
    pub implicit_stores: bool,
    /// Whether `ckpts` is the implicit descriptor built from SCR_* parameters.
    pub implicit_ckpt: bool,
}

/// Where a descriptor line was set: its file line, or the SCR_Config form.
fn where_(which: Which, layer: &Layer, line: u32, desc: String) -> Location {
    match (which, &layer.path) {
        (Which::App, _) | (_, None) => Location::ScrConfig { text: desc },
        (_, Some(p)) => Location::File {
            path: p.clone(),
            line,
            column: 0,
        },
    }
}

impl Config {
    /// Build the typed descriptors (`scr_groupdescs_create`,
    /// `scr_storedescs_create`, `scr_reddescs_create`) and check that every
    /// GROUP and STORE they name exists.
    pub fn descriptors(&self) -> Result<Descriptors, ConfigError> {
        let text = |n: &str| self.get(n).map(|e| e.value).unwrap_or_default();
        let num = |n: &str| self.get_u64(n).map(Option::unwrap_or_default);
        let flag = |n: &str| self.get_bool(n).map(Option::unwrap_or_default);

        let mut groups = Vec::new();
        let mut group_names = vec!["NODE".to_string(), "WORLD".to_string()];
        if let Some((_, l)) = self.desc_layer("GROUPS") {
            for (host, d) in &l.groups {
                groups.push(GroupDesc {
                    host: host.clone(),
                    groups: d.items.clone(),
                });
                for g in d.items.keys() {
                    if !group_names.contains(g) {
                        group_names.push(g.clone());
                    }
                }
            }
        }
        let check_group = |g: &str, at: Location| {
            if group_names.iter().any(|n| n == g) {
                Ok(())
            } else {
                Err(ConfigError::UnknownReference {
                    at,
                    key: "GROUP".into(),
                    value: g.to_string(),
                    what: "group".into(),
                    known: group_names.join(", "),
                })
            }
        };

        let cache_size = num("SCR_CACHE_SIZE")?;
        let mut stores = Vec::new();
        let implicit_stores = self.desc_layer("STORE").is_none();
        if let Some((which, l)) = self.desc_layer("STORE") {
            for (path, d) in &l.stores {
                let at = || where_(which, l, d.line, format!("STORE={path}"));
                let get_num = |k: &str, default: u64| field(d, k, default, at, |v| v.parse().ok());
                let get_flag = |k: &str, default: bool| {
                    field(d, k, default, at, |v| v.parse::<u8>().ok().map(|n| n != 0))
                };
                let store = StoreDesc {
                    path: path.clone(),
                    group: d
                        .items
                        .get("GROUP")
                        .cloned()
                        .unwrap_or_else(|| "NODE".into()),
                    count: get_num("COUNT", cache_size)?,
                    enabled: get_flag("ENABLED", true)?,
                    mkdir: get_flag("MKDIR", true)?,
                    flush: d
                        .items
                        .get("FLUSH")
                        .or_else(|| d.items.get("TYPE"))
                        .cloned(),
                    view: d.items.get("VIEW").map(|v| v.to_ascii_uppercase()),
                };
                check_group(&store.group, at())?;
                stores.push(store);
            }
        } else {
            let cache = text("SCR_CACHE_BASE");
            let cntl = text("SCR_CNTL_BASE");
            let mk = |path: String, count| StoreDesc {
                path,
                group: "NODE".into(),
                count,
                enabled: true,
                mkdir: true,
                flush: None,
                view: None,
            };
            if cntl != cache {
                stores.push(mk(cntl, 0));
            }
            stores.push(mk(cache, cache_size));
            stores.sort_by(|a, b| a.path.cmp(&b.path));
        }

        let copy_type_param = text("SCR_COPY_TYPE");
        let default_type = CopyType::parse_ignore_case(&copy_type_param).unwrap_or(CopyType::Xor);
        let mut ckpts = Vec::new();
        let implicit_ckpt = self.desc_layer("CKPT").is_none();
        let defaults = (
            text("SCR_GROUP"),
            text("SCR_CACHE_BASE"),
            num("SCR_SET_SIZE")?,
            num("SCR_SET_FAILURES")?,
            flag("SCR_CACHE_BYPASS")?,
            flag("SCR_ENCODE_ASYNC")?,
        );
        if let Some((which, l)) = self.desc_layer("CKPT") {
            let set_at = match (which, &l.path) {
                (Which::App, _) | (_, None) => "SCR_Config".to_string(),
                (_, Some(p)) => p.display().to_string(),
            };
            check_ckpt_set(&l.ckpts, &set_at)?;
            for (idx, d) in &l.ckpts {
                let at = || where_(which, l, d.line, format!("CKPT={idx}"));
                let get_num = |k: &str, default: u64| field(d, k, default, at, |v| v.parse().ok());
                let get_flag = |k: &str, default: bool| {
                    field(d, k, default, at, |v| v.parse::<u8>().ok().map(|n| n != 0))
                };
                let copy_type = match d.items.get("TYPE") {
                    Some(t) => CopyType::parse_ignore_case(t).ok_or_else(|| {
                        ConfigError::UnknownCopyType {
                            at: at(),
                            value: t.clone(),
                        }
                    })?,
                    None => default_type,
                };
                let c = CkptDesc {
                    index: *idx,
                    interval: get_num("INTERVAL", 1)?,
                    group: d
                        .items
                        .get("GROUP")
                        .cloned()
                        .unwrap_or_else(|| defaults.0.clone()),
                    store: d
                        .items
                        .get("STORE")
                        .cloned()
                        .unwrap_or_else(|| defaults.1.clone()),
                    copy_type,
                    set_size: get_num("SET_SIZE", defaults.2)?,
                    set_failures: get_num("SET_FAILURES", defaults.3)?,
                    output: get_flag("OUTPUT", false)?,
                    bypass: get_flag("BYPASS", defaults.4)?,
                    enabled: get_flag("ENABLED", true)?,
                    encode_async: get_flag("ENCODE_ASYNC", defaults.5)?,
                };
                check_group(&c.group, at())?;
                if !stores.iter().any(|s| s.path == c.store) {
                    return Err(ConfigError::UnknownReference {
                        at: at(),
                        key: "STORE".into(),
                        value: c.store.clone(),
                        what: "store".into(),
                        known: stores
                            .iter()
                            .map(|s| s.path.as_str())
                            .collect::<Vec<_>>()
                            .join(", "),
                    });
                }
                ckpts.push(c);
            }
        } else {
            if copy_type_param.eq_ignore_ascii_case("FILE") {
                let source = self
                    .get("SCR_COPY_TYPE")
                    .map(|e| e.source)
                    .unwrap_or(super::Source::Default);
                return Err(ConfigError::NoCkptDescriptors { source_: source });
            }
            let c = CkptDesc {
                index: 0,
                interval: 1,
                group: defaults.0,
                store: defaults.1,
                copy_type: default_type,
                set_size: defaults.2,
                set_failures: defaults.3,
                output: false,
                bypass: defaults.4,
                enabled: true,
                encode_async: defaults.5,
            };
            let at = self
                .get("SCR_GROUP")
                .map(|e| Location::of("SCR_GROUP", &e.value, &e.source))
                .unwrap_or(Location::Builtin {
                    name: "SCR_GROUP".into(),
                });
            check_group(&c.group, at)?;
            ckpts.push(c);
        }
        Ok(Descriptors {
            groups,
            group_names,
            stores,
            ckpts,
            implicit_stores,
            implicit_ckpt,
        })
    }
}

impl Config {
    /// The value in effect of sub-key `key` of descriptor `kind`=`name`
    /// (defaults and implicit descriptors included), as SCR_Config prints it.
    pub(super) fn descriptor_field(&self, kind: &str, name: &str, key: &str) -> Option<String> {
        let d = self.descriptors().ok()?;
        let flag = |b: bool| Some(u8::from(b).to_string());
        match kind {
            "CKPT" => {
                let idx: u32 = name.parse().ok()?;
                let c = d.ckpts.iter().find(|c| c.index == idx)?;
                match key {
                    "INTERVAL" => Some(c.interval.to_string()),
                    "GROUP" => Some(c.group.clone()),
                    "STORE" => Some(c.store.clone()),
                    "TYPE" => Some(c.copy_type.as_str().to_string()),
                    "SET_SIZE" => Some(c.set_size.to_string()),
                    "SET_FAILURES" => Some(c.set_failures.to_string()),
                    "OUTPUT" => flag(c.output),
                    "BYPASS" => flag(c.bypass),
                    "ENABLED" => flag(c.enabled),
                    "ENCODE_ASYNC" => flag(c.encode_async),
                    _ => None,
                }
            }
            "STORE" => {
                let s = d.stores.iter().find(|s| s.path == name)?;
                match key {
                    "GROUP" => Some(s.group.clone()),
                    "COUNT" => Some(s.count.to_string()),
                    "ENABLED" => flag(s.enabled),
                    "MKDIR" => flag(s.mkdir),
                    "FLUSH" | "TYPE" => s.flush.clone(),
                    "VIEW" => s.view.clone(),
                    _ => None,
                }
            }
            _ => d
                .groups
                .iter()
                .find(|g| g.host == name)?
                .groups
                .get(key)
                .cloned(),
        }
    }
}

/// Read sub-key `key` of a descriptor line, or `default` when absent.
fn field<T>(
    d: &DescLine,
    key: &str,
    default: T,
    at: impl Fn() -> Location,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<T, ConfigError> {
    match d.items.get(key) {
        None => Ok(default),
        Some(v) => parse(v).ok_or_else(|| ConfigError::BadValue {
            at: at(),
            key: key.to_string(),
            value: v.clone(),
            expected: "a non-negative integer (0 or 1 for flags)".into(),
        }),
    }
}
