//! The configuration as a kvtree: broadcast by [`load_collective`] (SCR's
//! `scr_param_init` broadcasts rank 0's hashes) and `app.conf`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::kvtree::{self, KvTree};

use super::error::{ConfigError, ConfigWarning};
use super::parse::{DescLine, Layer, Setting};
use super::{Config, Environment, LoadOptions, DESCRIPTOR_KEYS};

/// Version of the layout written by [`Config::to_kvtree`].
const LAYOUT_VERSION: &str = "1";

/// The one collective [`load_collective`] needs. Any communicator provides
/// it (`scr::comm::Comm` does through a blanket impl once both are merged).
pub trait Broadcast {
    /// This process's rank.
    fn rank(&self) -> usize;
    /// Broadcast `buf` from `root`; on other ranks `buf` is replaced.
    fn bcast_bytes(
        &self,
        root: usize,
        buf: &mut Vec<u8>,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// Load the configuration collectively (`scr_param_init`): rank 0 reads the
/// files and the environment and broadcasts the result, so every rank ends
/// with identical parameters; an error on rank 0 is broadcast too and every
/// rank returns it. Collective: every rank must call it.
pub fn load_collective<B: Broadcast + ?Sized>(
    comm: &B,
    env: &dyn Environment,
    opts: &LoadOptions,
) -> Result<Config, ConfigError> {
    let mut buf = Vec::new();
    if comm.rank() == 0 {
        let mut msg = KvTree::new();
        match Config::load(env, opts) {
            Ok(cfg) => msg.set("OK", cfg.to_kvtree()),
            Err(e) => msg.set_val("ERROR", to_json(&e)),
        };
        buf = msg.pack();
    }
    comm.bcast_bytes(0, &mut buf)
        .map_err(|e| ConfigError::Comm {
            message: e.to_string(),
        })?;
    let msg = KvTree::unpack_exact(&buf).map_err(bad)?;
    match (msg.get("OK"), msg.val("ERROR")) {
        (Some(tree), None) => {
            let cfg = Config::from_kvtree(tree)?;
            // Every rank must hold exactly rank 0's configuration: check that
            // nothing was lost in decoding by encoding it again.
            if cfg.to_kvtree() != *tree {
                return Err(bad("decoded configuration differs from the one broadcast"));
            }
            Ok(cfg)
        }
        (None, Some(json)) => Err(serde_json::from_str(json).map_err(bad)?),
        _ => Err(bad("broadcast holds neither OK nor ERROR")),
    }
}

fn bad(e: impl std::fmt::Display) -> ConfigError {
    ConfigError::Serialized {
        message: e.to_string(),
    }
}

fn to_json<T: serde::Serialize>(v: &T) -> String {
    // Serialising these plain data types cannot fail; keep a readable
    // fallback rather than a panic all the same.
    serde_json::to_string(v).unwrap_or_else(|e| format!("{{\"unserialisable\":\"{e}\"}}"))
}

fn one_val<'a>(tree: &'a KvTree, key: &str, what: &str) -> Result<&'a str, ConfigError> {
    let child = tree
        .get(key)
        .ok_or_else(|| bad(format!("{what}: missing {key}")))?;
    if child.len() != 1 {
        return Err(bad(format!(
            "{what}: {key} holds {} values, expected 1",
            child.len()
        )));
    }
    Ok(tree.val(key).unwrap_or_default())
}

fn line_of(tree: &KvTree, what: &str) -> Result<u32, ConfigError> {
    one_val(tree, "LINE", what)?
        .parse()
        .map_err(|_| bad(format!("{what}: LINE is not a line number")))
}

fn desc_to_kvtree(d: &DescLine) -> KvTree {
    let mut t = KvTree::new();
    t.set_val("LINE", d.line);
    let items = t.entry("ITEM");
    for (k, v) in &d.items {
        items.set_val(k, v);
    }
    t
}

fn desc_from_kvtree(t: &KvTree, what: &str) -> Result<DescLine, ConfigError> {
    let mut items = BTreeMap::new();
    if let Some(it) = t.get("ITEM") {
        for (k, _) in it {
            items.insert(k.clone(), one_val(it, k, what)?.to_string());
        }
    }
    Ok(DescLine {
        items,
        line: line_of(t, what)?,
    })
}

fn layer_to_kvtree(l: &Layer) -> KvTree {
    let mut t = KvTree::new();
    if let Some(p) = &l.path {
        t.set_val("PATH", p.display());
    }
    let params = t.entry("PARAM");
    for (k, s) in &l.values {
        let e = params.entry(k.clone());
        e.set_val("VALUE", &s.value);
        e.set_val("LINE", s.line);
    }
    for (kind, map) in [("GROUPS", &l.groups), ("STORE", &l.stores)] {
        let m = t.entry(kind);
        for (name, d) in map {
            m.set(name.clone(), desc_to_kvtree(d));
        }
    }
    let m = t.entry("CKPT");
    for (idx, d) in &l.ckpts {
        m.set(idx.to_string(), desc_to_kvtree(d));
    }
    t
}

fn layer_from_kvtree(t: &KvTree, what: &str) -> Result<Layer, ConfigError> {
    let mut l = Layer {
        path: t.val("PATH").map(PathBuf::from),
        ..Layer::default()
    };
    if let Some(params) = t.get("PARAM") {
        for (k, e) in params {
            let w = format!("{what} {k}");
            l.values.insert(
                k.clone(),
                Setting {
                    value: one_val(e, "VALUE", &w)?.to_string(),
                    line: line_of(e, &w)?,
                },
            );
        }
    }
    for kind in ["GROUPS", "STORE"] {
        if let Some(m) = t.get(kind) {
            for (name, d) in m {
                let desc = desc_from_kvtree(d, &format!("{what} {kind}={name}"))?;
                if let Some(map) = l.named_descs_mut(kind) {
                    map.insert(name.clone(), desc);
                }
            }
        }
    }
    if let Some(m) = t.get("CKPT") {
        for (idx, d) in m {
            let i: u32 = idx
                .parse()
                .map_err(|_| bad(format!("{what}: CKPT index {idx:?}")))?;
            l.ckpts
                .insert(i, desc_from_kvtree(d, &format!("{what} CKPT={idx}"))?);
        }
    }
    Ok(l)
}

pub(super) fn config_to_kvtree(c: &Config) -> KvTree {
    let mut t = KvTree::new();
    t.set_val("VERSION", LAYOUT_VERSION);
    t.set_val("INIT", u8::from(c.initialized));
    let env = t.entry("ENV");
    for (k, v) in &c.env {
        env.set_val(k, v);
    }
    let derived = t.entry("DERIVED");
    for (k, (v, from)) in &c.derived {
        let e = derived.entry(k.clone());
        e.set_val("VALUE", v);
        e.set_val("FROM", from);
    }
    t.set("USER", layer_to_kvtree(&c.user));
    t.set("APP", layer_to_kvtree(&c.app));
    t.set("SYSTEM", layer_to_kvtree(&c.system));
    let w = t.entry("WARN");
    for (i, warning) in c.warnings.iter().enumerate() {
        w.set_val(i.to_string(), to_json(warning));
    }
    t
}

pub(super) fn config_from_kvtree(t: &KvTree) -> Result<Config, ConfigError> {
    let version = one_val(t, "VERSION", "configuration")?;
    if version != LAYOUT_VERSION {
        return Err(bad(format!(
            "layout version {version}, this library reads {LAYOUT_VERSION}"
        )));
    }
    let initialized = match one_val(t, "INIT", "configuration")? {
        "0" => false,
        "1" => true,
        other => return Err(bad(format!("INIT is {other:?}"))),
    };
    let mut env = BTreeMap::new();
    if let Some(e) = t.get("ENV") {
        for (k, _) in e {
            env.insert(k.clone(), one_val(e, k, "ENV")?.to_string());
        }
    }
    let mut derived = BTreeMap::new();
    if let Some(d) = t.get("DERIVED") {
        for (k, e) in d {
            let w = format!("DERIVED {k}");
            derived.insert(
                k.clone(),
                (
                    one_val(e, "VALUE", &w)?.to_string(),
                    one_val(e, "FROM", &w)?.to_string(),
                ),
            );
        }
    }
    let layer = |key: &str| match t.get(key) {
        Some(l) => layer_from_kvtree(l, key),
        None => Err(bad(format!("missing {key}"))),
    };
    let mut warnings: Vec<(usize, ConfigWarning)> = Vec::new();
    if let Some(w) = t.get("WARN") {
        for (i, _) in w {
            let idx: usize = i.parse().map_err(|_| bad(format!("WARN index {i:?}")))?;
            warnings.push((
                idx,
                serde_json::from_str(one_val(w, i, "WARN")?).map_err(bad)?,
            ));
        }
    }
    warnings.sort_by_key(|(i, _)| *i);
    Ok(Config {
        env,
        derived,
        user: layer("USER")?,
        app: layer("APP")?,
        system: layer("SYSTEM")?,
        warnings: warnings.into_iter().map(|(_, w)| w).collect(),
        initialized,
    })
}

/// The SCR_Config layer in SCR's own hash form (`NAME/value`,
/// `CKPT/<n>/KEY/value`), as SCR writes `app.conf`.
pub(super) fn app_to_scr_hash(l: &Layer) -> KvTree {
    let mut t = KvTree::new();
    for (k, s) in &l.values {
        t.set_val(k, &s.value);
    }
    for (kind, map) in [("GROUPS", &l.groups), ("STORE", &l.stores)] {
        for (name, d) in map {
            let e = t.set_kv(kind, name);
            for (k, v) in &d.items {
                e.set_val(k, v);
            }
        }
    }
    for (idx, d) in &l.ckpts {
        let e = t.set_kv("CKPT", idx);
        for (k, v) in &d.items {
            e.set_val(k, v);
        }
    }
    t
}

pub(super) fn app_from_scr_hash(t: &KvTree, path: &Path) -> Result<Layer, ConfigError> {
    let what = path.display().to_string();
    let mut l = Layer::default();
    for (key, child) in t {
        if DESCRIPTOR_KEYS.contains(&key.as_str()) {
            for (name, sub) in child {
                let mut items = BTreeMap::new();
                for (k, _) in sub {
                    items.insert(k.clone(), one_val(sub, k, &what)?.to_string());
                }
                let d = DescLine { items, line: 0 };
                if key == "CKPT" {
                    let i: u32 = name
                        .parse()
                        .map_err(|_| bad(format!("{what}: CKPT index {name:?}")))?;
                    l.ckpts.insert(i, d);
                } else if let Some(map) = l.named_descs_mut(key) {
                    map.insert(name.clone(), d);
                }
            }
        } else {
            l.values.insert(
                key.clone(),
                Setting {
                    value: one_val(t, key, &what)?.to_string(),
                    line: 0,
                },
            );
        }
    }
    Ok(l)
}

/// Read `<prefix>/.scr/app.conf` at `path`, below `prefix` (never through
/// a link there). An empty file holds no settings: SCR 3.1 leaves an empty
/// one in the prefixes it ran in (each of the three in
/// scr/tests/data/llnl-3.1 has one), so it is not damage.
pub(super) fn read_app_conf(prefix: &Path, path: &Path) -> Result<Layer, ConfigError> {
    let tree = match kvtree::file::read_or_empty_in(prefix, path) {
        Err(kvtree::file::KvFileError::TooShort { len: 0, .. }) => Ok(KvTree::new()),
        other => other,
    };
    let tree = tree.map_err(|e| match e {
        // The OS refused: permissions, a directory in its place.
        kvtree::file::KvFileError::Io { .. } | kvtree::file::KvFileError::NotRegular { .. } => {
            ConfigError::Io {
                path: path.to_path_buf(),
                message: e.to_string(),
            }
        }
        // The bytes are wrong: permissions have nothing to do with it.
        _ => ConfigError::Damaged {
            path: path.to_path_buf(),
            message: e.to_string(),
        },
    })?;
    app_from_scr_hash(&tree, path)
}

/// Write `<prefix>/.scr/app.conf` at `path`, its directory created and the
/// file written below `prefix` through directory handles.
pub(super) fn write_app_conf(prefix: &Path, path: &Path, l: &Layer) -> Result<(), ConfigError> {
    let io = |e: &dyn std::fmt::Display| ConfigError::Io {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    if let Some(dir) = path.parent() {
        crate::beneath::create_dir_all_in(prefix, dir).map_err(|e| io(&e))?;
    }
    kvtree::file::write_in(prefix, path, &app_to_scr_hash(l)).map_err(|e| io(&e))
}
