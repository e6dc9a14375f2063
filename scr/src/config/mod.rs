//! Configuration parameters (`scr_param.c`, `scr_config.c`, SCR_Config).
//!
//! A parameter's effective value is the first one found in this order
//! (SCR 3.1's precedence, `shared/spec/parameters.md`):
//!
//! 1. the environment (unless users may not set the name),
//! 2. the user config file (`$SCR_CONF_FILE`, else `<prefix>/.scrconf`),
//! 3. values set with SCR_Config (persisted to `<prefix>/.scr/app.conf`),
//! 4. the system config file (`$SCR_CONFIG_FILE`, else [`params::DEFAULT_SYSTEM_FILE`]),
//! 5. built-in defaults ([`params::PARAMS`]) and defaults derived from the
//!    environment (`SCR_PREFIX`, `SCR_USER_NAME`, `SCR_JOB_ID`).
//!
//! Descriptor lines (`GROUPS=`, `STORE=`, `CKPT=`) are taken as a whole from
//! the first source of the last three that defines any of that kind, as
//! SCR's `scr_param_get_hash` does; the environment cannot set them.
//!
//! [`Config`] holds the raw text and where each value came from (what
//! `scr config` prints); [`Settings`] is every parameter parsed once, at
//! SCR_Init, into typed fields. Library code reads [`Settings`], never a
//! parameter by name.
//!
//! ```
//! use scr::config::{Config, LoadOptions, MapEnv};
//! let env = MapEnv::new([("SCR_FLUSH", "4")]).with_cwd("/nonexistent/run");
//! let mut cfg = Config::load(&env, &LoadOptions::default()).unwrap();
//! cfg.apply_scr_config("SCR_SET_SIZE=16").unwrap();
//! assert_eq!(cfg.apply_scr_config("SCR_SET_SIZE").unwrap().as_deref(), Some("16"));
//! assert_eq!(cfg.get_u64("SCR_FLUSH").unwrap(), Some(4));
//! assert_eq!(cfg.descriptors().unwrap().ckpts[0].set_size, 16);
//! ```

// Errors carry their file, line and the offending text so the message can
// say what to fix; they are made at most once per load or SCR_Config call,
// so their size costs nothing that matters.
#![allow(clippy::result_large_err)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::kvtree::KvTree;

mod desc;
mod error;
pub mod params;
mod parse;
pub mod refused;
pub mod report;
pub mod secret;
mod serial;
pub mod settings;

pub use desc::{CkptDesc, CopyType, Descriptors, GroupDesc, StoreDesc};
pub use error::{ConfigError, ConfigWarning, Location, Source};
pub use parse::{parse_text, DescLine, Layer, Setting, MAX_LINE_CHARS};
pub use serial::{load_collective, Broadcast};
pub use settings::{MtbfConfig, Settings};

use params::{info, DEFAULT_SYSTEM_FILE, DESCRIPTOR_KEYS, PARAMS};

/// Read access to environment variables and the working directory, so tests
/// never mutate the process environment (SCR calls `getenv` and `getcwd`).
pub trait Environment {
    /// The value of variable `name`, if set.
    fn var(&self, name: &str) -> Option<String>;
    /// The current working directory.
    fn current_dir(&self) -> Option<PathBuf>;
}

/// The real process environment.
#[derive(Debug, Clone, Copy, Default)]
pub struct ProcessEnv;

impl Environment for ProcessEnv {
    fn var(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
    fn current_dir(&self) -> Option<PathBuf> {
        std::env::current_dir().ok()
    }
}

/// An environment held in a map: for tests and for replaying rank 0's view.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MapEnv {
    /// The variables.
    pub vars: BTreeMap<String, String>,
    /// The working directory.
    pub cwd: Option<PathBuf>,
}

impl MapEnv {
    /// An environment holding `vars` and no working directory.
    pub fn new<K: Into<String>, V: Into<String>>(vars: impl IntoIterator<Item = (K, V)>) -> Self {
        MapEnv {
            vars: vars
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
            cwd: None,
        }
    }

    /// The same with working directory `cwd`.
    pub fn with_cwd(mut self, cwd: impl Into<PathBuf>) -> Self {
        self.cwd = Some(cwd.into());
        self
    }
}

impl Environment for MapEnv {
    fn var(&self, name: &str) -> Option<String> {
        self.vars.get(name).cloned()
    }
    fn current_dir(&self) -> Option<PathBuf> {
        self.cwd.clone()
    }
}

/// Where [`Config::load`] looks besides the environment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LoadOptions {
    /// System config file to read instead of `$SCR_CONFIG_FILE` or
    /// [`DEFAULT_SYSTEM_FILE`].
    pub system_file: Option<PathBuf>,
    /// Read SCR_Config values a job persisted to `<prefix>/.scr/app.conf`
    /// (what SCR's scripts and `scr config` do; the library itself starts
    /// with none, since its application calls SCR_Config again).
    pub read_app_conf: bool,
}

/// One effective parameter value and where it came from (`scr_param_get`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Effective {
    /// The parameter.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Where the value came from.
    pub source: Source,
}

/// The configuration of one job: every source's settings and rank 0's view
/// of the environment, from which effective values are computed on demand.
/// Identical on every rank after [`load_collective`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Config {
    /// Environment values of parameter names (empty values count as unset).
    env: BTreeMap<String, String>,
    /// Defaults computed from the environment: name -> (value, what from).
    derived: BTreeMap<String, (String, String)>,
    user: Layer,
    app: Layer,
    system: Layer,
    warnings: Vec<ConfigWarning>,
    initialized: bool,
}

/// Which source a layer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Which {
    User,
    App,
    System,
}

/// Largest config file read; real ones are a few kilobytes, so anything
/// larger is a mistake (a wrong path), not configuration.
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// Read a config file; a missing file is an empty layer.
fn read_layer(path: &Path, env: &dyn Environment) -> Result<Layer, ConfigError> {
    use std::io::Read as _;
    let io = |e: std::io::Error| ConfigError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Layer::default()),
        Err(e) => return Err(io(e)),
    };
    let mut bytes = Vec::new();
    // One byte past the limit tells "too large" from "exactly the limit".
    let read = file.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes);
    match read.map(|n| n as u64) {
        Ok(n) if n > MAX_FILE_BYTES => Err(ConfigError::TooLarge {
            path: path.to_path_buf(),
            limit: MAX_FILE_BYTES,
        }),
        Err(e) => Err(io(e)),
        Ok(_) => {
            if let Some(e) = binary_at(&bytes, path) {
                return Err(e);
            }
            // Valid UTF-8 now: the lossy form borrows, replaces nothing.
            parse_text(&String::from_utf8_lossy(&bytes), path, env)
        }
    }
}

/// The first byte of `bytes` that is not text (a NUL, or not UTF-8), as a
/// syntax error at its line and column (1-based), if there is one.
fn binary_at(bytes: &[u8], path: &Path) -> Option<ConfigError> {
    let utf8_end = std::str::from_utf8(bytes).err().map(|e| e.valid_up_to());
    let nul = bytes.iter().position(|&b| b == 0);
    let at = match (utf8_end, nul) {
        (Some(u), Some(n)) => u.min(n),
        (Some(u), None) => u,
        (None, Some(n)) => n,
        (None, None) => return None,
    };
    let before = &bytes[..at];
    let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
    let line_start = before
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |i| i + 1);
    let column = std::str::from_utf8(&bytes[line_start..at])
        .map_or(at - line_start, |t| t.chars().count())
        + 1;
    Some(ConfigError::Syntax {
        at: Location::File {
            path: path.to_path_buf(),
            line: u32::try_from(line).unwrap_or(u32::MAX),
            column: u32::try_from(column).unwrap_or(u32::MAX),
        },
        message: format!(
            "byte {:#04x} at offset {at} is not text (a binary file?); a config file is UTF-8 text",
            bytes[at]
        ),
    })
}

impl Config {
    /// Read every source as seen by this process (`scr_param_init` on rank
    /// 0). Fails, with file and line, on the first malformed setting.
    pub fn load(env: &dyn Environment, opts: &LoadOptions) -> Result<Config, ConfigError> {
        let nonempty = |n: &str| env.var(n).filter(|v| !v.is_empty());
        let cwd = env.current_dir();
        let mut derived = BTreeMap::new();
        if let Some(cwd) = &cwd {
            derived.insert(
                "SCR_PREFIX".to_string(),
                (cwd.display().to_string(), "current directory".to_string()),
            );
        }
        if let Some((var, v)) = ["USER", "LOGNAME"]
            .iter()
            .find_map(|n| nonempty(n).map(|v| (*n, v)))
        {
            derived.insert("SCR_USER_NAME".to_string(), (v, format!("${var}")));
        }
        let job_vars = [
            "SLURM_JOBID",
            "SLURM_JOB_ID",
            "LSB_JOBID",
            "PBS_JOBID",
            "FLUX_JOB_ID",
        ];
        if let Some((var, v)) = job_vars.iter().find_map(|n| nonempty(n).map(|v| (*n, v))) {
            derived.insert("SCR_JOB_ID".to_string(), (v, format!("${var}")));
        }
        // The allocation's end for SCR_HALT_SECONDS (Slurm 23.02+ exports it).
        if let Some(v) = nonempty("SLURM_JOB_END_TIME") {
            derived.insert(
                "SCR_END_TIME".to_string(),
                (v, "$SLURM_JOB_END_TIME".to_string()),
            );
        }

        // The user file is found from the environment alone, as in SCR.
        let prefix: Option<PathBuf> = nonempty("SCR_PREFIX")
            .map(PathBuf::from)
            .or_else(|| cwd.clone());
        let user_path = nonempty("SCR_CONF_FILE")
            .map(PathBuf::from)
            .or_else(|| prefix.as_ref().map(|p| p.join(".scrconf")));
        let user = match &user_path {
            Some(p) => read_layer(p, env)?,
            None => Layer::default(),
        };
        // A file named on purpose that is not there is worth a warning
        // (the default `<prefix>/.scrconf` is optional).
        let missing_user_file = nonempty("SCR_CONF_FILE").map(PathBuf::from).filter(
            |p| matches!(std::fs::metadata(p), Err(e) if e.kind() == std::io::ErrorKind::NotFound),
        );
        let system_path = opts
            .system_file
            .clone()
            .or_else(|| nonempty("SCR_CONFIG_FILE").map(PathBuf::from))
            .unwrap_or_else(|| PathBuf::from(DEFAULT_SYSTEM_FILE));
        let system = read_layer(&system_path, env)?;

        let mut names: BTreeSet<String> = PARAMS.iter().map(|p| p.name.to_string()).collect();
        names.extend(user.values.keys().cloned());
        names.extend(system.values.keys().cloned());
        let mut env_vals = BTreeMap::new();
        for name in names {
            if let Some(v) = nonempty(&name) {
                env_vals.insert(name, v);
            }
        }

        let mut cfg = Config {
            env: env_vals,
            derived,
            user,
            app: Layer::default(),
            system,
            warnings: Vec::new(),
            initialized: false,
        };
        if opts.read_app_conf {
            if let Some(prefix) = cfg.get("SCR_PREFIX") {
                let prefix = Path::new(&prefix.value);
                cfg.app = serial::read_app_conf(prefix, &app_conf_path(prefix))?;
            }
        }
        cfg.check_env()?;
        cfg.collect_warnings();
        if let Some(path) = missing_user_file {
            cfg.warnings
                .insert(0, ConfigWarning::MissingUserFile { path });
        }
        cfg.descriptors()?;
        Ok(cfg)
    }

    /// Reject environment values of the wrong type (users may set them).
    fn check_env(&self) -> Result<(), ConfigError> {
        for (name, value) in &self.env {
            if params::user_may_set(name) {
                parse::check_param(name, value, &Location::Env { name: name.clone() })?;
            }
        }
        Ok(())
    }

    fn collect_warnings(&mut self) {
        let mut w = Vec::new();
        for name in self.env.keys() {
            if !params::user_may_set(name) {
                w.push(ConfigWarning::NotUserSettable {
                    name: name.clone(),
                    source: Source::Env,
                });
            }
        }
        for (which, layer) in [(Which::User, &self.user), (Which::System, &self.system)] {
            for (name, s) in &layer.values {
                let source = layer_source(which, layer, s.line);
                if which == Which::User && !params::user_may_set(name) {
                    w.push(ConfigWarning::NotUserSettable {
                        name: name.clone(),
                        source,
                    });
                } else if info(name).is_none() {
                    w.push(ConfigWarning::UnknownParameter {
                        name: name.clone(),
                        source,
                    });
                }
            }
        }
        self.warnings = w;
    }

    /// What was ignored while loading (print these: SCR prints them on rank 0).
    pub fn warnings(&self) -> &[ConfigWarning] {
        &self.warnings
    }

    /// Every warning of this configuration as it stands now: what was
    /// ignored while loading, then the refused parameters
    /// ([`refused::refusals`]; SCR_Config calls count, so ask after them).
    pub fn all_warnings(&self) -> Vec<ConfigWarning> {
        let mut w = self.warnings.clone();
        w.extend(refused::refusals(self));
        w.extend(refused::conflicts(self));
        w
    }

    /// The user config file that was read, if any.
    pub fn user_file(&self) -> Option<&Path> {
        self.user.path.as_deref()
    }

    /// The system config file that was read, if any.
    pub fn system_file(&self) -> Option<&Path> {
        self.system.path.as_deref()
    }

    /// The values set through SCR_Config so far (what `app.conf` holds).
    pub fn scr_config_layer(&self) -> &Layer {
        &self.app
    }

    /// The effective value of `name` and its source (`scr_param_get`).
    pub fn get(&self, name: &str) -> Option<Effective> {
        let user_ok = params::user_may_set(name);
        let found = |value: &str, source: Source| {
            Some(Effective {
                name: name.to_string(),
                value: value.to_string(),
                source,
            })
        };
        if user_ok {
            if let Some(v) = self.env.get(name) {
                return found(v, Source::Env);
            }
            if let Some(s) = self.user.values.get(name) {
                return found(&s.value, layer_source(Which::User, &self.user, s.line));
            }
        }
        if let Some(s) = self.app.values.get(name) {
            return found(&s.value, Source::ScrConfig);
        }
        if let Some(s) = self.system.values.get(name) {
            return found(&s.value, layer_source(Which::System, &self.system, s.line));
        }
        if let Some((v, from)) = self.derived.get(name) {
            return found(v, Source::Derived { from: from.clone() });
        }
        info(name)
            .and_then(|p| p.default)
            .and_then(|d| found(d, Source::Default))
    }

    /// Every parameter that has a value: the table's rows in table order,
    /// then any other names the sources set, sorted.
    pub fn all(&self) -> Vec<Effective> {
        let mut out: Vec<Effective> = PARAMS.iter().filter_map(|p| self.get(p.name)).collect();
        let mut extra: BTreeSet<&String> = BTreeSet::new();
        for layer in [&self.user, &self.app, &self.system] {
            extra.extend(layer.values.keys().filter(|k| info(k).is_none()));
        }
        extra.extend(self.env.keys().filter(|k| info(k).is_none()));
        out.extend(extra.into_iter().filter_map(|k| self.get(k)));
        out
    }

    fn typed<T>(
        &self,
        name: &str,
        kind: params::ValueKind,
        f: impl Fn(&str) -> Option<T>,
    ) -> Result<Option<T>, ConfigError> {
        let Some(e) = self.get(name) else {
            return Ok(None);
        };
        f(e.value.trim())
            .map(Some)
            .ok_or_else(|| ConfigError::BadValue {
                at: Location::of(name, &e.value, &e.source),
                key: name.to_string(),
                value: e.value.clone(),
                expected: kind.expected(),
            })
    }

    /// The value of `name` as a non-negative integer.
    pub fn get_u64(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        self.typed(name, params::ValueKind::Int, |v| v.parse().ok())
    }

    /// The value of `name` as whole seconds, plain or with units
    /// (`90`, `15m`, `1h`).
    pub fn get_seconds(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        self.typed(name, params::ValueKind::Seconds, |v| {
            crate::units::seconds_u64(v).ok()
        })
    }

    /// The value of `name` as a flag (`0`/`1`; SCR's `atoi(v) != 0`).
    pub fn get_bool(&self, name: &str) -> Result<Option<bool>, ConfigError> {
        self.typed(name, params::ValueKind::Bool, |v| {
            v.parse::<i64>().ok().map(|n| n != 0)
        })
    }

    /// The value of `name` as a byte count (`scr_abtoull`).
    pub fn get_bytes(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        self.typed(name, params::ValueKind::Bytes, params::parse_bytes)
    }

    /// The value of `name` as a number.
    pub fn get_f64(&self, name: &str) -> Result<Option<f64>, ConfigError> {
        self.typed(name, params::ValueKind::Float, |v| {
            v.parse().ok().filter(|x: &f64| x.is_finite())
        })
    }

    /// The layer whose descriptors of `kind` are in effect, and which it is.
    fn desc_layer(&self, kind: &str) -> Option<(Which, &Layer)> {
        let has = |l: &Layer| match kind {
            "GROUPS" => !l.groups.is_empty(),
            "STORE" => !l.stores.is_empty(),
            _ => !l.ckpts.is_empty(),
        };
        [
            (Which::User, &self.user),
            (Which::App, &self.app),
            (Which::System, &self.system),
        ]
        .into_iter()
        .find(|(_, l)| has(l))
    }

    /// Mark SCR_Init done: from now on SCR_Config only queries.
    pub fn mark_initialized(&mut self) {
        self.initialized = true;
    }

    /// Apply an SCR_Config string (`SCR_Config`): `KEY=VALUE` sets, `KEY`
    /// queries, `KEY=` unsets; `CKPT=0 TYPE=XOR SET_SIZE=16` sets sub-values
    /// of a descriptor (an empty sub-value unsets it), `CKPT=0 TYPE` queries
    /// one (falling back to the value in effect, e.g. SCR_COPY_TYPE for an
    /// implicit CKPT=0), `CKPT=` removes every CKPT set by SCR_Config, `CKPT` lists the
    /// defined indices. Values are taken literally (no `$` expansion) and may
    /// contain `=` or be quoted. Returns `Some(value)` for a query that finds
    /// a value (defaults included), `None` otherwise. On error nothing changes.
    pub fn apply_scr_config(&mut self, text: &str) -> Result<Option<String>, ConfigError> {
        let at = Location::ScrConfig {
            text: text.to_string(),
        };
        let items = parse::tokenize(text, &at, None)?;
        let syntax = |message: String| ConfigError::Syntax {
            at: at.clone(),
            message,
        };
        let Some(first) = items.first() else {
            return Err(syntax("empty string; pass KEY=VALUE, KEY or KEY=".into()));
        };
        let key = first.key.clone();
        let changing = |cfg: &Config| {
            if cfg.initialized {
                Err(ConfigError::AfterInit {
                    text: text.to_string(),
                })
            } else {
                Ok(())
            }
        };
        if !DESCRIPTOR_KEYS.contains(&key.as_str()) {
            if let Some(extra) = items.get(1) {
                return Err(syntax(format!(
                    "unexpected {} after {key}; quote the value if it contains blanks",
                    extra.key
                )));
            }
            return match first.value.as_deref() {
                None => Ok(self.get(&key).map(|e| e.value)),
                Some(v) => {
                    if !params::scr_config_may_set(&key) {
                        return Err(ConfigError::Refused { key });
                    }
                    changing(self)?;
                    if v.is_empty() {
                        self.app.values.remove(&key);
                    } else {
                        parse::check_param(&key, v, &at)?;
                        self.app.values.insert(
                            key,
                            Setting {
                                value: v.to_string(),
                                line: 0,
                            },
                        );
                    }
                    Ok(None)
                }
            };
        }
        let Some(name) = first.value.clone() else {
            if items.len() > 1 {
                return Err(syntax(format!(
                    "{key} needs a value before sub-keys, as in {key}=0 TYPE"
                )));
            }
            let names: Vec<String> = match self.desc_layer(&key) {
                Some((_, l)) => match key.as_str() {
                    "GROUPS" => l.groups.keys().cloned().collect(),
                    "STORE" => l.stores.keys().cloned().collect(),
                    _ => l.ckpts.keys().map(u32::to_string).collect(),
                },
                None => Vec::new(),
            };
            return Ok((!names.is_empty()).then(|| names.join(" ")));
        };
        let rest = &items[1..];
        let queries = rest.iter().filter(|i| i.value.is_none()).count();
        if queries > 0 {
            if rest.len() != 1 {
                return Err(syntax(
                    "query one sub-key at a time, as in CKPT=0 TYPE".into(),
                ));
            }
            let sub = &rest[0].key;
            let line = self.desc_layer(&key).and_then(|(_, l)| match key.as_str() {
                "CKPT" => name.parse::<u32>().ok().and_then(|i| l.ckpts.get(&i)),
                "GROUPS" => l.groups.get(&name),
                _ => l.stores.get(&name),
            });
            if let Some(v) = line.and_then(|d| d.items.get(sub)) {
                return Ok(Some(v.clone()));
            }
            return Ok(self.descriptor_field(&key, &name, sub));
        }
        changing(self)?;
        if name.is_empty() {
            if !rest.is_empty() {
                return Err(syntax(format!(
                    "{key}= removes every {key}; it takes no sub-keys"
                )));
            }
            match key.as_str() {
                "CKPT" => self.app.ckpts.clear(),
                "GROUPS" => self.app.groups.clear(),
                _ => self.app.stores.clear(),
            }
            return Ok(None);
        }
        for item in rest {
            parse::check_desc_item(&key, &item.key, item.value.as_deref().unwrap_or(""), &at)?;
        }
        let entry = if key == "CKPT" {
            let idx = parse::ckpt_index(&name, &at)?;
            self.app.ckpts.entry(idx).or_default()
        } else {
            match self.app.named_descs_mut(&key) {
                Some(map) => map.entry(name).or_default(),
                None => return Err(syntax(format!("{key} is not a descriptor"))),
            }
        };
        for item in rest {
            match item.value.as_deref() {
                Some("") | None => entry.items.remove(&item.key),
                Some(v) => entry.items.insert(item.key.clone(), v.to_string()),
            };
        }
        Ok(None)
    }

    /// Write the SCR_Config values to `<prefix>/.scr/app.conf` (a kvtree
    /// file, as SCR persists them for its scripts), creating `.scr`.
    pub fn write_app_conf(&self, prefix: &Path) -> Result<PathBuf, ConfigError> {
        let path = app_conf_path(prefix);
        serial::write_app_conf(prefix, &path, &self.app)?;
        Ok(path)
    }

    /// The configuration as a kvtree, to broadcast or store.
    pub fn to_kvtree(&self) -> KvTree {
        serial::config_to_kvtree(self)
    }

    /// Rebuild a configuration from [`Config::to_kvtree`]'s output.
    pub fn from_kvtree(tree: &KvTree) -> Result<Config, ConfigError> {
        serial::config_from_kvtree(tree)
    }
}

/// `<prefix>/.scr/app.conf`.
pub fn app_conf_path(prefix: &Path) -> PathBuf {
    prefix.join(".scr").join("app.conf")
}

fn layer_source(which: Which, layer: &Layer, line: u32) -> Source {
    let path = layer.path.clone().unwrap_or_default();
    match which {
        Which::User => Source::UserFile { path, line },
        Which::App => Source::ScrConfig,
        Which::System => Source::SystemFile { path, line },
    }
}

#[cfg(test)]
mod tests;
