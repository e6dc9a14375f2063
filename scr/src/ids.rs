//! Typed identifiers: a dataset id and a rank are both integers in SCR's
//! files, and a signature such as `(dset: i64, rank: i64)` is easy to call
//! with the two swapped. These newtypes make the swap a compile error.

use std::fmt;

/// A dataset id (`scr_dataset_id`): 1 for the first dataset of a job,
/// increasing by one with each Start_output, never reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DatasetId(pub i64);

impl DatasetId {
    /// The id as SCR's files write it.
    pub fn get(self) -> i64 {
        self.0
    }

    /// The default dataset name, `scr.dataset.<id>` (also the name of its
    /// cache directory).
    pub fn default_name(self) -> String {
        format!("scr.dataset.{}", self.0)
    }
}

impl From<DatasetId> for i64 {
    /// The id as records and the log write it.
    fn from(d: DatasetId) -> i64 {
        d.0
    }
}

impl fmt::Display for DatasetId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A rank in the world communicator (`scr_my_rank_world`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Rank(pub u32);

impl Rank {
    /// The rank as SCR's files write it (filemap `RANK` keys are integers).
    pub fn as_i64(self) -> i64 {
        i64::from(self.0)
    }

    /// Whether this is rank 0, the one that writes shared records.
    pub fn is_root(self) -> bool {
        self.0 == 0
    }

    /// The rank of a process in a communicator (`world.rank()`).
    pub fn of_index(i: usize) -> Rank {
        Rank(u32::try_from(i).expect("an MPI rank fits in 32 bits"))
    }

    /// The rank as an index into per-rank vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }

    /// The rank a file names, when it is one (non-negative, 32 bits).
    pub fn from_i64(r: i64) -> Option<Rank> {
        u32::try_from(r).ok().map(Rank)
    }
}

impl fmt::Display for Rank {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_conversions_refuse_what_no_rank_can_be() {
        assert_eq!(Rank::from_i64(3), Some(Rank(3)));
        assert_eq!(Rank::from_i64(-1), None);
        assert_eq!(Rank::from_i64(i64::from(u32::MAX) + 1), None);
        assert_eq!(Rank(7).as_i64(), 7);
        assert_eq!(DatasetId(4).default_name(), "scr.dataset.4");
    }
}
