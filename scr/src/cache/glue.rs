//! Applying and recovering redundancy for a dataset: the bridge between the
//! cache tier's bookkeeping (filemaps, logical paths) and the collective
//! set operations of [`crate::redundancy`].

use super::{Job, ScrError};
use crate::records::dataset::Dataset;
use crate::records::reddesc::{CopyType, RedDesc};

/// Apply the dataset's redundancy scheme at complete (collective over the
/// world: every rank calls it when every rank's files are valid).
pub fn encode(job: &mut Job, dset: i64) -> Result<(), ScrError> {
    let me = job.rank();
    let Some(rd) = job.filemap.desc(dset, me)? else {
        return Err(ScrError::Redundancy(format!(
            "dataset {dset}: no redundancy descriptor"
        )));
    };
    match rd.copy_type {
        CopyType::Single => Ok(()),
        other => Err(ScrError::Redundancy(format!(
            "{other} not available in this build"
        ))),
    }
}

/// Rebuild what the scheme allows after some rank lost files of `dset`
/// (collective over the world). `lost_here`: this rank's files are
/// missing or damaged.
pub fn rebuild_dataset(
    job: &mut Job,
    dset: i64,
    _ds: &Dataset,
    rd: &RedDesc,
    lost_here: bool,
) -> Result<(), String> {
    let _ = (job, dset);
    match rd.copy_type {
        CopyType::Single if lost_here => {
            Err("SINGLE keeps no redundancy: this rank's files are gone".into())
        }
        CopyType::Single => Ok(()),
        other => Err(format!("{other} not available in this build")),
    }
}
