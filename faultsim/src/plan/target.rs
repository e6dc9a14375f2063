//! Which files a corruption damages: area, node, dataset, and a selector
//! by SCR role or by glob.

use std::path::{Component, Path};

use serde::{Deserialize, Serialize};

/// Which files a corruption targets.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Target {
    /// Cache, control or prefix directory.
    pub area: Area,
    /// The node whose cache/control directory (every node when absent; ignored for the prefix).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Only files of this dataset id (those below a `scr.dataset.<id>` directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dataset: Option<u64>,
    /// Which files.
    pub select: Selector,
    /// How many of the matching files (picked by the seed); all when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub files: Option<u32>,
}

/// Where the files are.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Area {
    /// Node-local cache.
    Cache,
    /// Node-local control directory.
    Control,
    /// The prefix directory on the parallel file system.
    Prefix,
}

/// Selects files by their role in SCR or by a glob on their path relative to the area.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Selector {
    /// Files with this role.
    Role(Role),
    /// Relative paths matching this pattern (`*` stays within a path
    /// component, `**` crosses them, `?` and `[...]` as usual).
    Glob(String),
}

/// The role of a file in SCR's layout (developer guide, "Directories").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Role {
    /// A file the application wrote, in a `scr.dataset.<id>` directory.
    AppFile,
    /// Redundancy data, `<grank+1>_of_<gsize>_in_<gid>.<scheme>`.
    ParityFile,
    /// A rank's filemap: `filemap_<rank>.scrinfo` or `<rank>.scrfilemap`.
    Filemap,
    /// The master filemap `filemap.scrinfo`.
    MasterFilemap,
    /// The prefix index `index.scr`.
    Index,
    /// A dataset summary `summary.scr`.
    Summary,
    /// A rank2file map, `rank2file.scr` or `rank2file.<level>.<rank>.scr`.
    Rank2file,
    /// The halt file `halt.scr`.
    Halt,
    /// The flush file `flush.scr`.
    Flush,
    /// The nodes file `nodes.scr`.
    Nodes,
}

impl Role {
    /// Every role.
    pub const ALL: [Role; 10] = [
        Role::AppFile,
        Role::ParityFile,
        Role::Filemap,
        Role::MasterFilemap,
        Role::Index,
        Role::Summary,
        Role::Rank2file,
        Role::Halt,
        Role::Flush,
        Role::Nodes,
    ];

    /// The role of a file, from its path relative to the area's directory.
    pub fn of(rel: &Path) -> Option<Role> {
        let name = rel.file_name()?.to_str()?;
        let in_dataset = rel.components().any(|c| match c {
            Component::Normal(s) => s.to_str().is_some_and(|s| s.starts_with("scr.dataset.")),
            _ => false,
        });
        let role = match name {
            "filemap.scrinfo" => Role::MasterFilemap,
            "index.scr" => Role::Index,
            "summary.scr" => Role::Summary,
            "halt.scr" => Role::Halt,
            "flush.scr" => Role::Flush,
            "nodes.scr" => Role::Nodes,
            _ if name.starts_with("rank2file") => Role::Rank2file,
            _ if (name.starts_with("filemap_") && name.ends_with(".scrinfo"))
                || name.ends_with(".scrfilemap") =>
            {
                Role::Filemap
            }
            _ if is_parity_name(name) => Role::ParityFile,
            _ if in_dataset && !name.ends_with(".lock") && !name.ends_with(".tmp") => Role::AppFile,
            _ => return None,
        };
        Some(role)
    }
}

/// `<a>_of_<b>_in_<c>.<ext>` with decimal a, b, c.
fn is_parity_name(name: &str) -> bool {
    let Some((stem, _ext)) = name.rsplit_once('.') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match stem.split_once("_of_") {
        Some((a, rest)) => match rest.split_once("_in_") {
            Some((b, c)) => digits(a) && digits(b) && digits(c),
            None => false,
        },
        None => false,
    }
}

impl Selector {
    /// True when the file at `rel` (relative to the area) is selected.
    /// A glob that does not parse selects nothing ([`Plan::validate`] rejects it).
    pub fn matches(&self, rel: &Path) -> bool {
        match self {
            Selector::Role(role) => Role::of(rel) == Some(*role),
            Selector::Glob(pattern) => glob::Pattern::new(pattern).is_ok_and(|p| {
                p.matches_path_with(
                    rel,
                    glob::MatchOptions {
                        case_sensitive: true,
                        require_literal_separator: true,
                        require_literal_leading_dot: false,
                    },
                )
            }),
        }
    }
}
