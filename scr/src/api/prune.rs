//! Datasets leaving the prefix directory by configuration:
//! SCR_PREFIX_PURGE (every dataset, at SCR_Init, before any fetch) and
//! SCR_PREFIX_SIZE (after each successful flush, the checkpoints beyond
//! the newest N; never CURRENT, never the dataset being flushed, never
//! output, as in SCR 3.1).
//!
//! Written against the index's public view (its entries by id and key,
//! `remove_dir`; the key is the directory in the old layout, the name in
//! SCR 3.1's) and one function that deletes a dataset's
//! files from the prefix ([`super::flushing::delete_copy`]), so a change
//! of the prefix layout touches those two places only.

use std::collections::BTreeSet;

use super::flushing::delete_copy;
use crate::cache::Job;
use crate::error::ScrResult;
use crate::ids::DatasetId;
use crate::prefix::{self, on_rank0, update_flush_file, update_index};
use crate::records::index::index_path;
use crate::records::{Index, Location, Record};

/// Which datasets go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Prune {
    /// SCR_PREFIX_PURGE: every dataset in the index.
    All,
    /// SCR_PREFIX_SIZE: checkpoints beyond the newest `keep`, sparing
    /// CURRENT and the ids in `busy` (being flushed).
    Keep {
        keep: u64,
        busy: BTreeSet<DatasetId>,
    },
}

/// The (id, directory) entries of `idx` that `how` deletes, oldest first.
fn victims(idx: &Index, how: &Prune) -> Vec<(i64, String)> {
    let entries = idx.entries();
    match how {
        Prune::All => entries.map(|(id, key, _)| (id, key.to_owned())).collect(),
        Prune::Keep { keep, busy } => {
            let mut ckpts: Vec<(i64, String)> = entries
                .filter(|(_, _, e)| {
                    e.complete == Some(true)
                        && e.dataset
                            .as_ref()
                            .is_some_and(|d| d.flag_checkpoint.unwrap_or(d.ckpt.is_some()))
                })
                .map(|(id, key, _)| (id, key.to_owned()))
                .collect();
            // Newest first; the first `keep` stay.
            ckpts.sort_by(|a, b| b.cmp(a));
            let mut out: Vec<(i64, String)> = ckpts
                .into_iter()
                .skip(*keep as usize)
                .filter(|(id, dir)| {
                    !busy.contains(&DatasetId(*id)) && idx.current.as_deref() != Some(dir.as_str())
                })
                .collect();
            out.reverse();
            out
        }
    }
}

/// Delete what `how` selects from the prefix directory: each dataset's
/// files and metadata, then its index entry, then its PFS location in the
/// flush file. Returns the ids deleted, on every rank. Collective; rank 0
/// does the work.
pub(super) fn prune(job: &Job, how: &Prune) -> ScrResult<Vec<DatasetId>> {
    let p = job.prefix.clone();
    let msg = job.msg.clone();
    let removed = on_rank0(
        job.world.as_ref(),
        "delete datasets from the prefix",
        || {
            if !prefix::meta_exists(&p, &index_path(&p))? {
                return Ok(Vec::new());
            }
            let idx = Index::read_file_in(&p, index_path(&p))?;
            let mut ids = Vec::new();
            for (id, dir) in victims(&idx, how) {
                msg.dbg(
                    1,
                    format_args!("deleting dataset {id} ({dir}) from the prefix ({how:?})"),
                );
                delete_copy(&p, idx.layout(), id, &dir)?;
                update_index(&p, |idx| {
                    idx.remove_dir(&dir);
                    if idx.current.as_deref() == Some(dir.as_str()) {
                        idx.current = None;
                    }
                })?;
                ids.push(id);
            }
            if !ids.is_empty() && prefix::meta_exists(&p, &prefix::flush_file_path(&p))? {
                update_flush_file(&p, |ff| {
                    for id in &ids {
                        ff.location_unset(*id, Location::Pfs);
                        if ff.datasets.get(id).is_some_and(|e| e.locations.is_empty()) {
                            ff.remove(*id);
                        }
                    }
                })?;
            }
            Ok(ids)
        },
    )?;
    let mut b: Vec<u8> = removed
        .unwrap_or_default()
        .iter()
        .flat_map(|i| i.to_be_bytes())
        .collect();
    job.world.bcast_bytes(0, &mut b)?;
    Ok(b.chunks_exact(8)
        .map(|c| DatasetId(i64::from_be_bytes(c.try_into().expect("8 bytes"))))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::dataset::Dataset;

    fn index(ids: &[(i64, bool)]) -> Index {
        let mut idx = Index::default();
        for &(id, ckpt) in ids {
            let ds = Dataset {
                id,
                flag_checkpoint: Some(ckpt),
                ..Dataset::default()
            };
            idx.set_dataset(id, &format!("d{id}"), ds, true);
        }
        idx
    }

    #[test]
    fn keep_spares_the_newest_current_busy_and_output() {
        let mut idx = index(&[(1, true), (2, false), (3, true), (4, true), (5, true)]);
        idx.set_current("d1");
        let how = Prune::Keep {
            keep: 2,
            busy: [DatasetId(3)].into(),
        };
        // Newest two are 5 and 4; 3 is busy, 1 is CURRENT, 2 is output.
        assert!(victims(&idx, &how).is_empty());
        idx.set_current("d5");
        assert_eq!(victims(&idx, &how), vec![(1, "d1".to_string())]);
        let how = Prune::Keep {
            keep: 1,
            busy: BTreeSet::new(),
        };
        let ids: Vec<i64> = victims(&idx, &how).iter().map(|v| v.0).collect();
        assert_eq!(ids, vec![1, 3, 4]);
        assert_eq!(victims(&idx, &Prune::All).len(), 5);
    }
}
