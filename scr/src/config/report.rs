//! What `scr config` prints: every parameter, its value and its source, and
//! the descriptors in effect (SCR's `scr_param_get` as a listing).

use std::fmt::Write as _;

use serde::Serialize;

use super::desc::Descriptors;
use super::error::{ConfigError, ConfigWarning};
use super::params::PARAMS;
use super::secret;
use super::{Config, Effective};

/// The whole report, serialisable as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Parameters with a value: table rows in order, then other names.
    pub params: Vec<Effective>,
    /// Table parameters without a value.
    pub unset: Vec<&'static str>,
    /// Descriptors in effect.
    pub descriptors: Descriptors,
    /// Warnings from loading, with their messages.
    pub warnings: Vec<WarningReport>,
}

/// A warning and its message.
#[derive(Debug, Clone, Serialize)]
pub struct WarningReport {
    /// The warning.
    #[serde(flatten)]
    pub warning: ConfigWarning,
    /// What to tell the user.
    pub message: String,
}

impl Report {
    /// Build the report for `cfg`.
    pub fn new(cfg: &Config) -> Result<Report, ConfigError> {
        Ok(Report {
            // Secrets are masked here, so neither the table nor the JSON
            // can show one.
            params: cfg
                .all()
                .into_iter()
                .map(|mut e| {
                    e.value = secret::shown_value(&e.name, &e.value);
                    e
                })
                .collect(),
            unset: PARAMS
                .iter()
                .filter(|p| cfg.get(p.name).is_none())
                .map(|p| p.name)
                .collect(),
            descriptors: cfg.descriptors()?,
            warnings: cfg
                .all_warnings()
                .into_iter()
                .map(|w| WarningReport {
                    message: w.to_string(),
                    warning: w,
                })
                .collect(),
        })
    }

    /// Pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    /// An aligned table: `NAME  VALUE  SOURCE`, then the descriptors.
    pub fn to_table(&self) -> String {
        let mut rows: Vec<(String, String, String)> = self
            .params
            .iter()
            .map(|e| (e.name.clone(), shown(&e.value), e.source.to_string()))
            .collect();
        rows.extend(
            self.unset
                .iter()
                .map(|n| (n.to_string(), "-".to_string(), "unset".to_string())),
        );
        let w0 = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(4);
        let w1 = rows
            .iter()
            .map(|r| r.1.chars().count())
            .max()
            .unwrap_or(0)
            .max(5);
        let mut out = String::new();
        let _ = writeln!(out, "{:w0$}  {:w1$}  SOURCE", "NAME", "VALUE");
        for (n, v, s) in rows {
            let _ = writeln!(out, "{n:w0$}  {v:w1$}  {s}");
        }
        let d = &self.descriptors;
        if !d.groups.is_empty() {
            let _ = writeln!(out, "\nGROUPS");
            for g in &d.groups {
                let items: Vec<String> = g
                    .groups
                    .iter()
                    .map(|(k, v)| format!("{k}={}", shown(v)))
                    .collect();
                let _ = writeln!(out, "  GROUPS={} {}", shown(&g.host), items.join(" "));
            }
        }
        let implicit = |b: bool| if b { " (implicit)" } else { "" };
        let _ = writeln!(out, "\nSTORE{}", implicit(d.implicit_stores));
        for s in &d.stores {
            let _ = write!(
                out,
                "  STORE={} GROUP={} COUNT={} ENABLED={} MKDIR={}",
                shown(&s.path),
                shown(&s.group),
                s.count,
                u8::from(s.enabled),
                u8::from(s.mkdir)
            );
            if let Some(f) = &s.flush {
                let _ = write!(out, " FLUSH={}", shown(f));
            }
            if let Some(v) = &s.view {
                let _ = write!(out, " VIEW={v}");
            }
            out.push('\n');
        }
        let _ = writeln!(out, "\nCKPT{}", implicit(d.implicit_ckpt));
        for c in &d.ckpts {
            let _ = write!(
                out,
                "  CKPT={} INTERVAL={} GROUP={} STORE={} TYPE={} SET_SIZE={} SET_FAILURES={} OUTPUT={} BYPASS={} ENABLED={}",
                c.index,
                c.interval,
                shown(&c.group),
                shown(&c.store),
                c.copy_type.as_str(),
                c.set_size,
                c.set_failures,
                u8::from(c.output),
                u8::from(c.bypass),
                u8::from(c.enabled)
            );
            // Shown only when on: it is this project's, not SCR 3.1's.
            if c.encode_async {
                out.push_str(" ENCODE_ASYNC=1");
            }
            out.push('\n');
        }
        out
    }
}

/// A value as it would be written in a config file: quoted when it is empty
/// or holds blanks, quotes or `#`, so the table can be pasted back.
fn shown(v: &str) -> String {
    if v.is_empty() || v.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == '#')
    {
        if v.contains('\'') {
            format!("\"{v}\"")
        } else {
            format!("'{v}'")
        }
    } else {
        v.to_string()
    }
}
