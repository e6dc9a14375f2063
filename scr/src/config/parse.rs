//! Config file and SCR_Config string syntax (`scr_config_read`,
//! `scr_param.c`): `KEY=VALUE` items separated by blanks, `#` comments,
//! quotes, `$VAR`/`${VAR}` expansion, descriptor lines.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::error::{ConfigError, Location};
use super::params::{self, ValueKind, CKPT_KEYS, DESCRIPTOR_KEYS, STORE_KEYS};
use super::Environment;

/// Longest config line accepted; bounds the work on a hostile file.
pub const MAX_LINE_CHARS: usize = 64 * 1024;

/// One `KEY` or `KEY=VALUE` item of a line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Item {
    pub key: String,
    /// `None` when the item has no `=`.
    pub value: Option<String>,
    /// 1-based character column of the key.
    pub column: u32,
}

/// Split a line into items. Keys are upper-cased (SCR compares them so);
/// values keep their case. Quoting is shell-like: `"..."` expands variables,
/// `'...'` does not, adjacent pieces concatenate. A `#` at the start of an
/// item begins a comment.
pub(crate) fn tokenize(
    line: &str,
    at: &Location,
    env: Option<&dyn Environment>,
) -> Result<Vec<Item>, ConfigError> {
    let chars: Vec<char> = line.chars().collect();
    if chars.len() > MAX_LINE_CHARS {
        return Err(ConfigError::Syntax {
            at: at.clone(),
            message: format!("line longer than {MAX_LINE_CHARS} characters"),
        });
    }
    if chars.contains(&'\0') {
        return Err(ConfigError::Syntax {
            at: at.clone(),
            message: "NUL character in line".into(),
        });
    }
    let col = |i: usize| u32::try_from(i + 1).unwrap_or(u32::MAX);
    let mut items = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            i += 1;
            continue;
        }
        if chars[i] == '#' {
            break;
        }
        let start = i;
        while i < chars.len() && !chars[i].is_whitespace() && chars[i] != '=' {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        if key.is_empty() {
            return Err(ConfigError::Syntax {
                at: at.at_column(col(start)),
                message: "'=' without a key before it; write KEY=VALUE".into(),
            });
        }
        if key.contains(['"', '\'', '$']) {
            return Err(ConfigError::Syntax {
                at: at.at_column(col(start)),
                message: format!("invalid key {key:?}: keys are plain names like SCR_FLUSH"),
            });
        }
        let mut value = None;
        if i < chars.len() && chars[i] == '=' {
            i += 1;
            let mut v = String::new();
            while i < chars.len() && !chars[i].is_whitespace() {
                match chars[i] {
                    q @ ('"' | '\'') => {
                        let open = i;
                        let close = chars[i + 1..]
                            .iter()
                            .position(|&c| c == q)
                            .map(|p| p + i + 1);
                        let Some(close) = close else {
                            return Err(ConfigError::UnterminatedQuote {
                                at: at.at_column(col(open)),
                                quote: q,
                            });
                        };
                        let inner: String = chars[open + 1..close].iter().collect();
                        if q == '"' {
                            v.push_str(&expand(&inner, &at.at_column(col(open + 1)), env)?);
                        } else {
                            v.push_str(&inner);
                        }
                        i = close + 1;
                    }
                    _ => {
                        let s = i;
                        while i < chars.len()
                            && !chars[i].is_whitespace()
                            && chars[i] != '"'
                            && chars[i] != '\''
                        {
                            i += 1;
                        }
                        let raw: String = chars[s..i].iter().collect();
                        v.push_str(&expand(&raw, &at.at_column(col(s)), env)?);
                    }
                }
            }
            value = Some(v);
        }
        items.push(Item {
            key: key.to_ascii_uppercase(),
            value,
            column: col(start),
        });
    }
    Ok(items)
}

/// Expand `$NAME` and `${NAME}` from `env`. A `$` not followed by a name is
/// kept literally; an unset variable is an error (a silently empty path
/// component would put files somewhere unexpected).
/// With `env = None` the text is returned unchanged (SCR_Config values).
pub(crate) fn expand(
    s: &str,
    at: &Location,
    env: Option<&dyn Environment>,
) -> Result<String, ConfigError> {
    let Some(env) = env else {
        return Ok(s.to_string());
    };
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    let is_name = |c: char, first: bool| {
        c == '_' || c.is_ascii_alphabetic() || (!first && c.is_ascii_digit())
    };
    while i < chars.len() {
        if chars[i] != '$' {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        let name: String;
        if chars.get(i + 1) == Some(&'{') {
            let Some(close) = chars[i + 2..].iter().position(|&c| c == '}') else {
                return Err(ConfigError::Syntax {
                    at: at.clone(),
                    message: "'${' without a closing '}'".into(),
                });
            };
            name = chars[i + 2..i + 2 + close].iter().collect();
            if name.is_empty() || !name.chars().enumerate().all(|(k, c)| is_name(c, k == 0)) {
                return Err(ConfigError::Syntax {
                    at: at.clone(),
                    message: format!("invalid variable name {name:?} in ${{...}}"),
                });
            }
            i += close + 3;
        } else {
            let s = i + 1;
            let mut e = s;
            while e < chars.len() && is_name(chars[e], e == s) {
                e += 1;
            }
            if e == s {
                out.push('$');
                i += 1;
                continue;
            }
            name = chars[s..e].iter().collect();
            i = e;
        }
        match env.var(&name) {
            Some(v) => out.push_str(&v),
            None => {
                return Err(ConfigError::UndefinedVariable {
                    at: at.clone(),
                    name,
                })
            }
        }
    }
    Ok(out)
}

/// A simple parameter as set in one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Setting {
    /// The value (after expansion).
    pub value: String,
    /// Line in the layer's file (0 for SCR_Config).
    pub line: u32,
}

/// One descriptor line (`GROUPS=`, `STORE=` or `CKPT=`) as set in one layer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DescLine {
    /// The sub-keys and their values; empty values are dropped (= not given).
    pub items: BTreeMap<String, String>,
    /// Line in the layer's file (0 for SCR_Config).
    pub line: u32,
}

/// Everything one source (user file, SCR_Config, system file) sets: SCR's
/// per-source parameter hash.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Layer {
    /// The file it was read from (`None` for SCR_Config, or no file).
    pub path: Option<PathBuf>,
    /// Simple parameters.
    pub values: BTreeMap<String, Setting>,
    /// `GROUPS=<host>` lines by host.
    pub groups: BTreeMap<String, DescLine>,
    /// `STORE=<path>` lines by path.
    pub stores: BTreeMap<String, DescLine>,
    /// `CKPT=<n>` lines by index.
    pub ckpts: BTreeMap<u32, DescLine>,
}

impl Layer {
    /// Whether nothing is set.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
            && self.groups.is_empty()
            && self.stores.is_empty()
            && self.ckpts.is_empty()
    }

    /// The descriptor map for `kind` (`GROUPS`/`STORE`), keyed by name.
    pub(crate) fn named_descs_mut(
        &mut self,
        kind: &str,
    ) -> Option<&mut BTreeMap<String, DescLine>> {
        match kind {
            "GROUPS" => Some(&mut self.groups),
            "STORE" => Some(&mut self.stores),
            _ => None,
        }
    }
}

/// The transfer types a STORE line's `FLUSH=` (or `TYPE=`) names.
const STORE_FLUSH_TYPES: &[&str] = &["SYNC", "PTHREAD", "BBAPI", "DATAWARP", "DW"];

/// Check one descriptor sub-item's key and value.
pub(crate) fn check_desc_item(
    kind: &str,
    key: &str,
    value: &str,
    at: &Location,
) -> Result<(), ConfigError> {
    let allowed: &[&str] = match kind {
        "STORE" => STORE_KEYS,
        "CKPT" => CKPT_KEYS,
        _ => return Ok(()), // GROUPS: any group name
    };
    if !allowed.contains(&key) {
        return Err(ConfigError::UnknownDescriptorKey {
            at: at.clone(),
            descriptor: kind.to_string(),
            key: key.to_string(),
            allowed: allowed.join(", "),
        });
    }
    if value.is_empty() {
        return Ok(());
    }
    let vk = match key {
        "COUNT" | "INTERVAL" | "SET_SIZE" | "SET_FAILURES" => ValueKind::Int,
        "ENABLED" | "MKDIR" | "OUTPUT" | "BYPASS" | "ENCODE_ASYNC" => ValueKind::Bool,
        "VIEW" => ValueKind::Choice(&["LOCAL", "GLOBAL"]),
        // A store's transfer type: SCR_FLUSH_TYPE's names, and `DW`.
        "FLUSH" | "TYPE" if kind == "STORE" => ValueKind::Choice(STORE_FLUSH_TYPES),
        "TYPE" if kind == "CKPT" => {
            if crate::scheme::CopyType::parse_ignore_case(value).is_some() {
                return Ok(());
            }
            return Err(ConfigError::UnknownCopyType {
                at: at.clone(),
                value: value.to_string(),
            });
        }
        _ => ValueKind::Str,
    };
    check_value(key, value, vk, at)
}

/// Check a value against its kind.
pub(crate) fn check_value(
    key: &str,
    value: &str,
    kind: ValueKind,
    at: &Location,
) -> Result<(), ConfigError> {
    if kind.accepts(value) {
        Ok(())
    } else {
        Err(ConfigError::BadValue {
            at: at.clone(),
            key: key.to_string(),
            value: value.to_string(),
            expected: kind.expected(),
        })
    }
}

/// Check a simple parameter's value against the table.
pub(crate) fn check_param(key: &str, value: &str, at: &Location) -> Result<(), ConfigError> {
    match params::info(key) {
        Some(info) => check_value(key, value, info.kind, at),
        None => Ok(()),
    }
}

/// Parse the index of `CKPT=<n>`.
pub(crate) fn ckpt_index(value: &str, at: &Location) -> Result<u32, ConfigError> {
    value.parse::<u32>().map_err(|_| ConfigError::BadValue {
        at: at.clone(),
        key: "CKPT".into(),
        value: value.to_string(),
        expected: "a descriptor index 0, 1, 2, ...".into(),
    })
}

/// Parse config file text into a layer (`scr_config_read`). Nothing is
/// returned unless the whole text is valid.
pub fn parse_text(text: &str, path: &Path, env: &dyn Environment) -> Result<Layer, ConfigError> {
    let mut layer = Layer {
        path: Some(path.to_path_buf()),
        ..Layer::default()
    };
    for (n, line) in text.lines().enumerate() {
        let line_no = u32::try_from(n + 1).unwrap_or(u32::MAX);
        let at = Location::File {
            path: path.to_path_buf(),
            line: line_no,
            column: 0,
        };
        let items = tokenize(line, &at, Some(env))?;
        let Some(first) = items.first() else { continue };
        let first_at = at.at_column(first.column);
        let Some(value) = first.value.clone() else {
            return Err(ConfigError::Syntax {
                at: first_at,
                message: format!("{} has no value; write {}=VALUE", first.key, first.key),
            });
        };
        if DESCRIPTOR_KEYS.contains(&first.key.as_str()) {
            let mut desc = DescLine {
                items: BTreeMap::new(),
                line: line_no,
            };
            for item in &items[1..] {
                let iat = at.at_column(item.column);
                let Some(v) = &item.value else {
                    return Err(ConfigError::Syntax {
                        at: iat,
                        message: format!("{} has no value; write {}=VALUE", item.key, item.key),
                    });
                };
                check_desc_item(&first.key, &item.key, v, &iat)?;
                if !v.is_empty() {
                    desc.items.insert(item.key.clone(), v.clone());
                }
            }
            if value.is_empty() {
                return Err(ConfigError::Syntax {
                    at: first_at,
                    message: format!("{}= needs a name (a host, a path or an index)", first.key),
                });
            }
            let dup = |first_line: u32, name: &str| ConfigError::DuplicateDescriptor {
                at: first_at.clone(),
                descriptor: first.key.clone(),
                name: name.to_string(),
                first_line,
            };
            if first.key == "CKPT" {
                let idx = ckpt_index(&value, &first_at)?;
                if let Some(prev) = layer.ckpts.get(&idx) {
                    return Err(dup(prev.line, &value));
                }
                layer.ckpts.insert(idx, desc);
            } else if let Some(map) = layer.named_descs_mut(&first.key) {
                if let Some(prev) = map.get(&value) {
                    return Err(dup(prev.line, &value));
                }
                map.insert(value, desc);
            }
        } else {
            if let Some(extra) = items.get(1) {
                return Err(ConfigError::Syntax {
                    at: at.at_column(extra.column),
                    message: format!(
                        "unexpected {} after {}=...; quote the value if it contains blanks",
                        extra.key, first.key
                    ),
                });
            }
            check_param(&first.key, &value, &first_at)?;
            layer.values.insert(
                first.key.clone(),
                Setting {
                    value,
                    line: line_no,
                },
            );
        }
    }
    check_ckpt_set(&layer.ckpts, &path.display().to_string())?;
    Ok(layer)
}

/// Whole-set checks on CKPT descriptors: indices 0..n without gaps and one
/// with INTERVAL=1 (a missing INTERVAL means 1).
pub(crate) fn check_ckpt_set(ckpts: &BTreeMap<u32, DescLine>, at: &str) -> Result<(), ConfigError> {
    if ckpts.is_empty() {
        return Ok(());
    }
    for (expected, idx) in (0u32..).zip(ckpts.keys()) {
        if *idx != expected {
            return Err(ConfigError::CkptNotSequential {
                at: at.to_string(),
                expected,
            });
        }
    }
    let has_one = ckpts
        .values()
        .any(|d| d.items.get("INTERVAL").is_none_or(|v| v == "1"));
    if !has_one {
        return Err(ConfigError::NoIntervalOne { at: at.to_string() });
    }
    Ok(())
}
