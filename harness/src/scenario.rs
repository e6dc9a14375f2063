//! The scenario catalogue: named scenarios as data (TOML files in
//! `harness/scenarios/`), each with its expected outcome per redundancy
//! scheme.
//!
//! ```toml
//! [[scenario]]
//! name = "kill-node-during-complete"
//! about = "node n1 dies inside Complete_output of the third checkpoint"
//! quick = true
//! faults = [
//!   { what = { kind = "kill-node", node = "n1" },
//!     when = { at = "during-complete", checkpoint = 3 } },
//! ]
//! [scenario.expect]
//! SINGLE = "scratch, loss"
//! ALL = "scratch, rebuilt:2"        # every other scheme
//! ```
//!
//! Fields (defaults in brackets): `nodes` \[4\], `ranks_per_node` \[2\],
//! `spares` \[2\], `checkpoints` written by the first launch \[3\],
//! `relaunch_checkpoints` \[1\], `launches` (the budget, `SCR_RUNS`) \[3\],
//! `mean_bytes` \[65536\], `app_args` (extra `scr_app` arguments of every
//! launch), `env` (SCR parameters on top of the scheme's and
//! the campaign's; `{scenarios}` in a value is this directory, for data
//! files), `schemes` \[all four\], `faults` (a faultsim plan),
//! `halts` (halt requests, [`HaltEvent`]), `timeout_s` per launch \[60\],
//! `needs` (`root`: skipped unless the harness runs as root),
//! `cache_tmpfs_bytes` (a tmpfs of that size on every node's cache base, so
//! `cache-full` can fill it; needs root), `quick` (in the CI subset), `tags`,
//! `next_allocation` (after the loop and `scr postrun`, a new allocation —
//! fresh node trees, the same prefix — runs the application once more; it
//! must fetch from the prefix and verify every byte).
//!
//! Expectations are outcomes ([`Outcome`]): one token per launch, then
//! `| end` (default `completed`). Keys are scheme names or `ALL`. With
//! `next_allocation = true` every expectation goes on with what postrun
//! saved and how the next allocation restarted:
//! `died | retries; postrun saved:3; next fetched:3` (docs/decisions.md,
//! "Scavenge outcomes"). Faults `at = "postrun"` need `next_allocation`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use faultsim::plan::{Fault, Plan, Topology};
use scr::CopyType;
use serde::{Deserialize, Serialize};

use crate::outcome::Outcome;
use crate::runloop::HaltEvent;

/// The SCR parameters a campaign selects `scheme` with: XOR and RS in sets
/// of 4, RS tolerating 2 failures.
pub fn scheme_env(scheme: CopyType) -> Vec<(&'static str, &'static str)> {
    match scheme {
        CopyType::Single => vec![("SCR_COPY_TYPE", "SINGLE")],
        CopyType::Partner => vec![("SCR_COPY_TYPE", "PARTNER")],
        CopyType::Xor => vec![("SCR_COPY_TYPE", "XOR"), ("SCR_SET_SIZE", "4")],
        CopyType::Rs => vec![
            ("SCR_COPY_TYPE", "RS"),
            ("SCR_SET_SIZE", "4"),
            ("SCR_SET_FAILURES", "2"),
        ],
    }
}

fn d_nodes() -> usize {
    4
}
fn d_rpn() -> usize {
    2
}
fn d_spares() -> usize {
    2
}
fn d_ckpts() -> u64 {
    3
}
fn d_relaunch() -> u64 {
    1
}
fn d_launches() -> u32 {
    3
}
fn d_mean() -> u64 {
    65536
}
fn d_timeout() -> u64 {
    60
}

/// One scenario of the catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Unique name (`[a-z0-9-]`).
    pub name: String,
    /// What happens, for people.
    pub about: String,
    /// In the CI subset.
    #[serde(default)]
    pub quick: bool,
    /// Free-form tags (phase, fault kind).
    #[serde(default)]
    pub tags: Vec<String>,
    /// Nodes a launch needs.
    #[serde(default = "d_nodes")]
    pub nodes: usize,
    /// Ranks on each node.
    #[serde(default = "d_rpn")]
    pub ranks_per_node: usize,
    /// Spare nodes in the allocation.
    #[serde(default = "d_spares")]
    pub spares: usize,
    /// Checkpoints the first launch writes.
    #[serde(default = "d_ckpts")]
    pub checkpoints: u64,
    /// Checkpoints each relaunch writes.
    #[serde(default = "d_relaunch")]
    pub relaunch_checkpoints: u64,
    /// Most launches (`SCR_RUNS`).
    #[serde(default = "d_launches")]
    pub launches: u32,
    /// Mean file size.
    #[serde(default = "d_mean")]
    pub mean_bytes: u64,
    /// Extra arguments of the test application in every launch (e.g.
    /// `["--output-every", "3"]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub app_args: Vec<String>,
    /// SCR parameters on top of the scheme's.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Schemes to run (all four when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schemes: Option<Vec<CopyType>>,
    /// The faults.
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// Halt requests.
    #[serde(default)]
    pub halts: Vec<HaltEvent>,
    /// Bound on each launch, seconds.
    #[serde(default = "d_timeout")]
    pub timeout_s: u64,
    /// Preconditions (`root`).
    #[serde(default)]
    pub needs: Vec<String>,
    /// Mount a tmpfs of this size on every node's cache base (root only),
    /// so that `cache-full` can fill it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_tmpfs_bytes: Option<u64>,
    /// After the loop and `scr postrun`, run the application once more on
    /// a new allocation (fresh node trees, the same prefix) and judge what
    /// postrun saved and what that launch fetched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub next_allocation: bool,
    /// Expected outcome per scheme name, or `ALL`.
    pub expect: BTreeMap<String, Outcome>,
}

/// A catalogue file: `[[scenario]]` entries, each read on its own so that
/// an error names its scenario.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct CatalogueFile {
    scenario: Vec<toml::Table>,
}

/// Why a catalogue is unusable.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CatalogueError {
    /// A file cannot be read.
    #[error("{path}: {source}")]
    Read {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file is not a catalogue.
    #[error("{path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// The parser's message (with line and column).
        reason: String,
    },
    /// A scenario is inconsistent.
    #[error("{path}: scenario `{name}`: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// The scenario.
        name: String,
        /// What is wrong.
        reason: String,
    },
}

/// The scenarios of a catalogue, with the file each came from.
#[derive(Debug, Clone)]
pub struct Catalogue {
    /// Scenarios in file-name order, then file order.
    pub scenarios: Vec<(PathBuf, Scenario)>,
}

/// The catalogue shipped in the repository.
pub fn default_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios")
}

impl Scenario {
    /// The schemes this scenario runs under.
    pub fn schemes(&self) -> Vec<CopyType> {
        self.schemes
            .clone()
            .unwrap_or_else(|| CopyType::ALL.to_vec())
    }

    /// The expected outcome under `scheme`.
    pub fn expected(&self, scheme: CopyType) -> Option<&Outcome> {
        self.expect
            .get(scheme.as_str())
            .or_else(|| self.expect.get("ALL"))
    }

    /// The simulated topology of the first launch (`n0`..).
    pub fn topology(&self) -> Topology {
        Topology::simulated(
            u32::try_from(self.nodes + self.spares).unwrap_or(u32::MAX),
            u32::try_from(self.ranks_per_node).unwrap_or(u32::MAX),
        )
    }

    /// The faults as a plan.
    pub fn plan(&self) -> Plan {
        Plan {
            name: Some(self.name.clone()),
            seed: None,
            faults: self.faults.clone(),
        }
    }

    /// Check names, sizes, the plan and the expectations.
    pub fn check(&self) -> Result<(), String> {
        if self.name.is_empty()
            || !self
                .name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return Err("name must be non-empty [a-z0-9-]".into());
        }
        if self.nodes == 0 || self.ranks_per_node == 0 {
            return Err("nodes and ranks_per_node must be at least 1".into());
        }
        if self.nodes + self.spares > 64 || self.nodes * self.ranks_per_node > 256 {
            return Err("at most 64 nodes and 256 ranks on one machine".into());
        }
        if self.launches == 0 || self.launches > 20 {
            return Err("launches must be in 1..=20".into());
        }
        if self.timeout_s == 0 || self.timeout_s > 3600 {
            return Err("timeout_s must be in 1..=3600".into());
        }
        for n in &self.needs {
            if n != "root" {
                return Err(format!("unknown precondition {n:?} (root)"));
            }
        }
        if self.cache_tmpfs_bytes.is_some() && !self.needs.iter().any(|n| n == "root") {
            return Err("cache_tmpfs_bytes mounts a file system: add needs = [\"root\"]".into());
        }
        // Faults may name spares (they exist from the start).
        self.plan()
            .validate(&self.topology())
            .map_err(|e| format!("faults: {e}"))?;
        for k in self.expect.keys() {
            match CopyType::from_str(k) {
                Err(_) if k != "ALL" => return Err(format!("expect: unknown scheme {k:?}")),
                Ok(s) if !self.schemes().contains(&s) => {
                    return Err(format!("expect: {k} is not among the scenario's schemes"))
                }
                _ => {}
            }
        }
        for s in self.schemes() {
            if self.expected(s).is_none() {
                return Err(format!("no expected outcome for {s} (add it or ALL)"));
            }
        }
        for (k, o) in &self.expect {
            if o.launches.len() > self.launches as usize {
                return Err(format!(
                    "expect.{k}: {} launch outcomes but at most {} launches",
                    o.launches.len(),
                    self.launches
                ));
            }
            let says = o.postrun.is_some() || o.next.is_some();
            if self.next_allocation && (o.postrun.is_none() || o.next.is_none()) {
                return Err(format!(
                    "expect.{k}: next_allocation = true: say what postrun saved and how the next allocation restarted (`{}; postrun saved:N; next fetched:N`)",
                    Outcome::of(o.launches.clone(), o.end)
                ));
            }
            if !self.next_allocation && says {
                return Err(format!(
                    "expect.{k}: `postrun`/`next` clauses need next_allocation = true"
                ));
            }
        }
        if !self.next_allocation {
            if let Some(i) = self.faults.iter().position(|f| f.when.is_postrun()) {
                return Err(format!(
                    "fault {i} happens during postrun: add next_allocation = true so what the scavenge saved is checked"
                ));
            }
        }
        Ok(())
    }
}

impl Catalogue {
    /// Read every `*.toml` file of `dir`.
    pub fn load(dir: &Path) -> Result<Catalogue, CatalogueError> {
        let read_err = |path: &Path| {
            let path = path.to_path_buf();
            move |source| CatalogueError::Read { path, source }
        };
        let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err(dir))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        files.sort();
        let mut scenarios = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f).map_err(read_err(&f))?;
            let file: CatalogueFile = toml::from_str(&text).map_err(|e| CatalogueError::Parse {
                path: f.clone(),
                reason: e.to_string(),
            })?;
            for (i, table) in file.scenario.into_iter().enumerate() {
                let name = table
                    .get("name")
                    .and_then(|n| n.as_str())
                    .map_or_else(|| format!("#{} (no name)", i + 1), str::to_owned);
                let s: Scenario =
                    table
                        .try_into()
                        .map_err(|e: toml::de::Error| CatalogueError::Invalid {
                            path: f.clone(),
                            name: name.clone(),
                            reason: e.message().to_string(),
                        })?;
                s.check().map_err(|reason| CatalogueError::Invalid {
                    path: f.clone(),
                    name: s.name.clone(),
                    reason,
                })?;
                if let Some((p, _)) = scenarios
                    .iter()
                    .find(|(_, o): &&(PathBuf, Scenario)| o.name == s.name)
                {
                    return Err(CatalogueError::Invalid {
                        path: f.clone(),
                        name: s.name.clone(),
                        reason: format!("the name is already used in {}", Path::display(p)),
                    });
                }
                scenarios.push((f.clone(), s));
            }
        }
        Ok(Catalogue { scenarios })
    }

    /// The scenario called `name`.
    pub fn get(&self, name: &str) -> Option<&Scenario> {
        self.scenarios
            .iter()
            .map(|(_, s)| s)
            .find(|s| s.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_catalogue_loads_and_is_large_enough() {
        let c = Catalogue::load(&default_dir()).expect("catalogue");
        assert!(
            c.scenarios.len() >= 60,
            "{} scenarios; the issue asks for at least 60",
            c.scenarios.len()
        );
        assert!(c.scenarios.iter().any(|(_, s)| s.quick));
    }

    #[test]
    fn bad_scenarios_are_rejected_with_their_name() {
        let tmp = tempfile::tempdir().unwrap();
        let write = |text: &str| {
            std::fs::write(tmp.path().join("a.toml"), text).unwrap();
            Catalogue::load(tmp.path())
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        let e = write(
            "[[scenario]]\nname = \"x\"\nabout = \"\"\n[scenario.expect]\nXOR = \"scratch\"\n",
        );
        assert!(
            e.contains("scenario `x`") && e.contains("no expected outcome for SINGLE"),
            "{e}"
        );
        let e = write(
            "[[scenario]]\nname = \"x\"\nabout = \"\"\n[scenario.expect]\nALL = \"scratch, rebuilt\"\n",
        );
        assert!(e.contains("needs a checkpoint id"), "{e}");
        let e = write(
            "[[scenario]]\nname = \"x\"\nabout = \"\"\nfaults = [{ what = { kind = \"kill-rank\", rank = 99 }, when = { at = \"during-start\", checkpoint = 1 } }]\n[scenario.expect]\nALL = \"scratch\"\n",
        );
        assert!(e.contains("rank 99"), "{e}");
        let e = write("[[scenario]]\nname = \"x\"\n");
        assert!(e.contains("a.toml"), "{e}");
        // Expectation errors name the scenario.
        let e = write(
            "[[scenario]]\nname = \"y\"\nabout = \"\"\nnext_allocation = true\n[scenario.expect]\nALL = \"died | retries; postrun kept:3; next fetched:3\"\n",
        );
        assert!(
            e.contains("scenario `y`") && e.contains("unknown postrun result"),
            "{e}"
        );
        let e = write(
            "[[scenario]]\nname = \"y\"\nabout = \"\"\nnext_allocation = true\n[scenario.expect]\nALL = \"died | retries\"\n",
        );
        assert!(
            e.contains("scenario `y`") && e.contains("postrun saved:N"),
            "{e}"
        );
        let e = write(
            "[[scenario]]\nname = \"y\"\nabout = \"\"\n[scenario.expect]\nALL = \"died | retries; postrun saved:3; next fetched:3\"\n",
        );
        assert!(e.contains("need next_allocation = true"), "{e}");
        let e = write(
            "[[scenario]]\nname = \"y\"\nabout = \"\"\nfaults = [{ what = { kind = \"pfs-outage\" }, when = { at = \"postrun\" } }]\n[scenario.expect]\nALL = \"scratch\"\n",
        );
        assert!(e.contains("happens during postrun"), "{e}");
    }
}
