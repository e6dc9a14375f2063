//! Transfer file (`transfer.scr` in the control directory, guide section
//! "Transfer file"): how the library drives the `scr_transfer` daemon that
//! performs asynchronous flushes (`scr_transfer.c`).
//!
//! ```text
//! FILES/<cache path>/DESTINATION, SIZE, WRITTEN
//! PERCENT/<cpu %>  BW/<bytes/s>  COMMAND/<RUN|STOP|EXIT>
//! STATE/<STOPPED|RUNNING>  FLAG/DONE
//! ```
//! Floating-point fields are written with six decimals like SCR's `%f`.

use std::collections::BTreeMap;

use super::{set_opt, Node, Record, RecordError};
use crate::kvtree::KvTree;

/// The transfer file's name.
pub const TRANSFER_FILE: &str = "transfer.scr";

/// What the library tells the daemon (`COMMAND`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferCommand {
    /// `RUN`: copy the listed files.
    Run,
    /// `STOP`: pause.
    Stop,
    /// `EXIT`: terminate.
    Exit,
}

/// What the daemon reports (`STATE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TransferState {
    /// `STOPPED`: waiting.
    Stopped,
    /// `RUNNING`: actively flushing.
    Running,
}

/// One file to copy (`FILES/<source>`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransferFile {
    /// `DESTINATION`: absolute path to write.
    pub destination: String,
    /// `SIZE`: bytes to copy.
    pub size_bytes: u64,
    /// `WRITTEN`: bytes written and fsynced so far (set by the daemon).
    pub written_bytes: Option<u64>,
}

/// The transfer file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Transfer {
    /// `FILES`: files by absolute source path in cache.
    pub files: BTreeMap<String, TransferFile>,
    /// `PERCENT`: CPU share the daemon may use.
    pub percent: Option<f64>,
    /// `BW`: bandwidth the daemon may use.
    pub bw_bytes_per_s: Option<f64>,
    /// `COMMAND`.
    pub command: Option<TransferCommand>,
    /// `STATE`.
    pub state: Option<TransferState>,
    /// `FLAG/DONE`: every listed file is copied.
    pub done: bool,
}

impl Transfer {
    /// Whether every listed file has `WRITTEN == SIZE`.
    pub fn all_written(&self) -> bool {
        self.files
            .values()
            .all(|f| f.written_bytes == Some(f.size_bytes))
    }
}

impl Record for Transfer {
    const RECORD: &'static str = "transfer file";
    /// A transfer file lists the files of one background flush; a larger file
    /// is damage or a planted file, refused before it is read.
    const MAX_FILE_BYTES: u64 = 16 << 20;

    fn to_tree(&self) -> KvTree {
        let mut t = KvTree::new();
        for (src, f) in &self.files {
            let e = t.set_kv("FILES", src);
            e.set_str("DESTINATION", &f.destination);
            e.set_val("SIZE", f.size_bytes);
            set_opt(e, "WRITTEN", f.written_bytes);
        }
        set_opt(&mut t, "PERCENT", self.percent.map(|p| format!("{p:.6}")));
        set_opt(&mut t, "BW", self.bw_bytes_per_s.map(|b| format!("{b:.6}")));
        set_opt(
            &mut t,
            "COMMAND",
            self.command.map(|c| match c {
                TransferCommand::Run => "RUN",
                TransferCommand::Stop => "STOP",
                TransferCommand::Exit => "EXIT",
            }),
        );
        set_opt(
            &mut t,
            "STATE",
            self.state.map(|s| match s {
                TransferState::Stopped => "STOPPED",
                TransferState::Running => "RUNNING",
            }),
        );
        if self.done {
            t.set_kv("FLAG", "DONE");
        }
        t
    }

    fn from_tree(tree: &KvTree) -> Result<Self, RecordError> {
        let n = Node::root(Self::RECORD, tree);
        let mut files = BTreeMap::new();
        for (src, f) in n.keyed_under("FILES") {
            let size_bytes = f.req_u64("SIZE")?;
            let written_bytes = f.opt_u64("WRITTEN")?;
            if written_bytes.is_some_and(|w| w > size_bytes) {
                return Err(f.inconsistent("WRITTEN", format!("exceeds SIZE {size_bytes}")));
            }
            files.insert(
                src.to_owned(),
                TransferFile {
                    destination: f.req_str("DESTINATION")?,
                    size_bytes,
                    written_bytes,
                },
            );
        }
        let non_negative = |v: Option<f64>, key: &str| match v {
            Some(x) if x < 0.0 => Err(n.inconsistent(key, format!("{x} is negative"))),
            v => Ok(v),
        };
        Ok(Transfer {
            files,
            percent: non_negative(n.opt_f64("PERCENT")?, "PERCENT")?,
            bw_bytes_per_s: non_negative(n.opt_f64("BW")?, "BW")?,
            command: n.opt_with("COMMAND", "RUN, STOP or EXIT", |s| match s {
                "RUN" => Some(TransferCommand::Run),
                "STOP" => Some(TransferCommand::Stop),
                "EXIT" => Some(TransferCommand::Exit),
                _ => None,
            })?,
            state: n.opt_with("STATE", "STOPPED or RUNNING", |s| match s {
                "STOPPED" => Some(TransferState::Stopped),
                "RUNNING" => Some(TransferState::Running),
                _ => None,
            })?,
            done: n.keyed_under("FLAG").iter().any(|(k, _)| *k == "DONE"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kvtree::print::to_indented;
    use crate::records::testutil::{tempdir, tree_from_indented};

    const SPEC: &str = "
FILES
  /tmp/user1/scr.1001186/index.0/dataset.1/rank_0.ckpt
    DESTINATION
      /p/lscratchb/user1/simulation123/scr.dataset.1/rank_0.ckpt
    SIZE
      524294
    WRITTEN
      524294
  /tmp/user1/scr.1001186/index.0/dataset.1/rank_0.ckpt.scr
    DESTINATION
      /p/lscratchb/user1/simulation123/scr.dataset.1/rank_0.ckpt.scr
    SIZE
      124
    WRITTEN
      124
PERCENT
  0.000000
BW
  52428800.000000
COMMAND
  RUN
STATE
  STOPPED
FLAG
  DONE
";

    fn example() -> Transfer {
        let mut files = BTreeMap::new();
        for (ext, size) in [("", 524_294), (".scr", 124)] {
            files.insert(
                format!("/tmp/user1/scr.1001186/index.0/dataset.1/rank_0.ckpt{ext}"),
                TransferFile {
                    destination: format!(
                        "/p/lscratchb/user1/simulation123/scr.dataset.1/rank_0.ckpt{ext}"
                    ),
                    size_bytes: size,
                    written_bytes: Some(size),
                },
            );
        }
        Transfer {
            files,
            percent: Some(0.0),
            bw_bytes_per_s: Some(52_428_800.0),
            command: Some(TransferCommand::Run),
            state: Some(TransferState::Stopped),
            done: true,
        }
    }

    #[test]
    fn matches_the_guide_example() {
        let spec = tree_from_indented(SPEC);
        assert_eq!(example().to_tree(), spec);
        assert_eq!(Transfer::from_tree(&spec).unwrap(), example());
        assert!(example().all_written());
    }

    #[test]
    fn file_roundtrip() {
        let dir = tempdir();
        let path = dir.path().join(TRANSFER_FILE);
        let mut t = example();
        t.command = Some(TransferCommand::Exit);
        t.state = Some(TransferState::Running);
        t.done = false;
        t.percent = Some(12.5);
        t.files.values_mut().for_each(|f| f.written_bytes = None);
        t.write_file(&path).unwrap();
        assert_eq!(Transfer::read_file(&path).unwrap(), t);
        assert!(!t.all_written());
    }

    #[test]
    fn snapshot() {
        insta::assert_snapshot!(to_indented(&example().to_tree(), 2));
    }

    #[test]
    fn validation() {
        let mut t = example().to_tree();
        let f = t.get_mut("FILES").unwrap().iter().next().unwrap().0.clone();
        t.get_kv_mut("FILES", &f).unwrap().set_val("SIZE", "-1");
        let e = Transfer::from_tree(&t).unwrap_err();
        assert!(
            matches!(&e, RecordError::BadValue { path, .. } if path == &format!("FILES/{f}/SIZE")),
            "{e}"
        );
        let mut t = example().to_tree();
        t.get_kv_mut("FILES", &f).unwrap().unset("DESTINATION");
        assert!(matches!(
            Transfer::from_tree(&t),
            Err(RecordError::Missing { .. })
        ));
        let mut t = example().to_tree();
        t.set_val("BW", "-3");
        assert!(
            matches!(Transfer::from_tree(&t), Err(RecordError::Inconsistent { path, .. }) if path == "BW")
        );
        let mut t = example().to_tree();
        t.set_val("COMMAND", "GO");
        assert!(
            matches!(Transfer::from_tree(&t), Err(RecordError::BadValue { path, .. }) if path == "COMMAND")
        );
    }
}
