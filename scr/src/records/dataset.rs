//! Dataset descriptor (`scr_dataset`, guide section "Datasets").
//!
//! Stored inside other records: under `DATADESC` in a filemap, `DSETDESC`
//! in a rank filemap file, `DSET` in the XOR header, summary and index.

use super::{set_bool, set_opt, Node, Record, RecordError};
use crate::kvtree::KvTree;

const KNOWN: &[&str] = &[
    "ID",
    "USER",
    "JOBNAME",
    "NAME",
    "SIZE",
    "FILES",
    "CREATED",
    "JOBID",
    "CLUSTER",
    "CKPT",
    "COMPLETE",
    "FLAG_CKPT",
    "FLAG_OUTPUT",
];

/// Attributes of one dataset (`scr_dataset`, `scr_dataset.c`). Only `ID` is
/// required; the guide notes "not all fields are required".
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Dataset {
    /// `ID`: the dataset id (`scr_dataset_id` when it was created).
    pub id: i64,
    /// `USER`: user name of the job that wrote it.
    pub user: Option<String>,
    /// `JOBNAME`: `$SCR_JOB_NAME`, when set.
    pub jobname: Option<String>,
    /// `NAME`: the dataset's name (`scr.dataset.<id>` unless the app named it).
    pub name: Option<String>,
    /// `SIZE`: total bytes in the dataset.
    pub size_bytes: Option<u64>,
    /// `FILES`: total number of files in the dataset.
    pub files: Option<u64>,
    /// `CREATED`: creation time, microseconds since the epoch.
    pub created_us: Option<i64>,
    /// `JOBID`: the resource manager's job id.
    pub jobid: Option<String>,
    /// `CLUSTER`: the cluster name.
    pub cluster: Option<String>,
    /// `CKPT`: the checkpoint id, when the dataset is a checkpoint.
    pub ckpt: Option<i64>,
    /// `COMPLETE`: whether the dataset is thought valid (1) or not (0).
    pub complete: Option<bool>,
    /// `FLAG_CKPT` (SCR 2+): the dataset is a checkpoint.
    pub flag_checkpoint: Option<bool>,
    /// `FLAG_OUTPUT` (SCR 2+): the dataset is output to keep on the PFS.
    pub flag_output: Option<bool>,
    /// Fields this version does not interpret, kept verbatim.
    pub extra: KvTree,
}

impl Dataset {
    /// A descriptor with just an id.
    pub fn new(id: i64) -> Self {
        Dataset {
            id,
            ..Dataset::default()
        }
    }

    /// The default dataset name, `scr.dataset.<id>`.
    pub fn default_name(id: i64) -> String {
        format!("scr.dataset.{id}")
    }

    pub(crate) fn from_node(n: &Node<'_>) -> Result<Self, RecordError> {
        Ok(Dataset {
            id: n.req_i64("ID")?,
            user: n.opt_str("USER")?,
            jobname: n.opt_str("JOBNAME")?,
            name: n.opt_str("NAME")?,
            size_bytes: n.opt_u64("SIZE")?,
            files: n.opt_u64("FILES")?,
            created_us: n.opt_i64("CREATED")?,
            jobid: n.opt_str("JOBID")?,
            cluster: n.opt_str("CLUSTER")?,
            ckpt: n.opt_i64("CKPT")?,
            complete: n.opt_bool("COMPLETE")?,
            flag_checkpoint: n.opt_bool("FLAG_CKPT")?,
            flag_output: n.opt_bool("FLAG_OUTPUT")?,
            extra: n.extra(KNOWN),
        })
    }
}

impl Record for Dataset {
    const RECORD: &'static str = "dataset descriptor";
    /// A dataset descriptor is a dozen keys; a larger file is damage or a
    /// planted file, refused before it is read.
    const MAX_FILE_BYTES: u64 = 1 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = self.extra.clone();
        t.set_int("ID", self.id);
        set_opt(&mut t, "USER", self.user.as_deref());
        set_opt(&mut t, "JOBNAME", self.jobname.as_deref());
        set_opt(&mut t, "NAME", self.name.as_deref());
        set_opt(&mut t, "SIZE", self.size_bytes);
        set_opt(&mut t, "FILES", self.files);
        set_opt(&mut t, "CREATED", self.created_us);
        set_opt(&mut t, "JOBID", self.jobid.as_deref());
        set_opt(&mut t, "CLUSTER", self.cluster.as_deref());
        set_opt(&mut t, "CKPT", self.ckpt);
        for (key, v) in [
            ("COMPLETE", self.complete),
            ("FLAG_CKPT", self.flag_checkpoint),
            ("FLAG_OUTPUT", self.flag_output),
        ] {
            if let Some(v) = v {
                set_bool(&mut t, key, v);
            }
        }
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        Self::from_node(&Node::root(Self::RECORD, tree))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    /// The guide's "Example dataset hash".
    const SPEC: &str = "
ID
  23
USER
  user1
JOBNAME
  simulation123
NAME
  dataset.23
SIZE
  524294000
FILES
  1024
CREATED
  1312850690668536
CKPT
  6
COMPLETE
  1
";

    pub(crate) fn example() -> Dataset {
        Dataset {
            id: 23,
            user: Some("user1".into()),
            jobname: Some("simulation123".into()),
            name: Some("dataset.23".into()),
            size_bytes: Some(524_294_000),
            files: Some(1024),
            created_us: Some(1_312_850_690_668_536),
            ckpt: Some(6),
            complete: Some(true),
            ..Dataset::default()
        }
    }

    /// The dataset descriptor shown in the XOR header, rank filemap and
    /// scan hash examples (dataset 6).
    pub(crate) fn example6() -> Dataset {
        Dataset {
            id: 6,
            user: Some("user1".into()),
            jobname: Some("simulation123".into()),
            name: Some("scr.dataset.6".into()),
            size_bytes: Some(2_097_182),
            files: Some(4),
            created_us: Some(1_312_850_690_668_536),
            jobid: Some("112573".into()),
            ckpt: Some(6),
            complete: Some(true),
            ..Dataset::default()
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Dataset::from_tree(&spec).unwrap(), example());
    }

    #[test]
    fn file_roundtrip_and_flags() {
        let dir = tempdir();
        let path = dir.path().join("dataset.scr");
        let mut d = example();
        d.flag_checkpoint = Some(true);
        d.flag_output = Some(false);
        d.cluster = Some("atlas".into());
        d.extra.set_str("FUTURE_FIELD", "kept");
        d.write_file(&path).unwrap();
        assert_eq!(Dataset::read_file(&path).unwrap(), d);
        assert_eq!(d.to_tree().val("FLAG_CKPT"), Some("1"));
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn missing_id_is_named() {
        let mut t = example().to_tree();
        t.unset("ID");
        let e = Dataset::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::Missing { path, .. } if path == "ID"),
            "{e}"
        );
        assert_eq!(
            e.to_string(),
            "dataset descriptor: required field ID is missing"
        );
    }

    #[test]
    fn negative_size_is_rejected() {
        let mut t = example().to_tree();
        t.set_val("SIZE", "-5");
        let e = Dataset::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, value, .. } if path == "SIZE" && value == "-5"),
            "{e}"
        );
        t.set_val("SIZE", "5");
        t.set_val("COMPLETE", "yes");
        assert!(matches!(
            Dataset::from_tree(&t),
            Err(RecordError::BadValue { path, .. }) if path == "COMPLETE"
        ));
    }

    #[test]
    fn damaged_file_error_names_the_file() {
        let dir = tempdir();
        let path = dir.path().join("d.scr");
        let mut t = example().to_tree();
        t.set_val("FILES", "many");
        crate::kvtree::file::write(&path, &t).unwrap();
        let e = Dataset::read_file(&path).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("d.scr") && msg.contains("FILES"), "{msg}");
    }
}
