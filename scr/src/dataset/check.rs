//! What a rank finds of its files of one dataset at restart: the count its
//! filemap records, each file's meta and size, and — as deep as the caller
//! asks ([`Depth`]) — each file's CRC32. A restart first checks sizes only;
//! the CRC32s are then read once, by a whole check when nothing is missing,
//! or by the rebuild's own pass over the same bytes (`super::rebuild`).

use crate::cache::Job;
use crate::ids::DatasetId;
use crate::records::meta::FileType;
use crate::records::RecordError;
use crate::redundancy::apply::MemberLoss;
use crate::storage::node::LogicalPath;
use crate::storage::verify::{verify_file, verify_size, VerifyError};

/// What is wrong with a rank's files of one dataset.
#[derive(Debug, thiserror::Error)]
pub(super) enum FileProblem {
    /// No process kept a record of how many files this rank wrote.
    #[error("no record of this rank's files")]
    NoRecord,
    /// The filemap lists a different number of files than was written.
    #[error("expected {expected} files, found entries for {found}")]
    Count { expected: u64, found: u64 },
    /// A file's meta data is missing: its role is unknown.
    #[error("{file}: no meta data")]
    NoMeta { file: String },
    /// A file's meta data does not decode.
    #[error(transparent)]
    Record(#[from] RecordError),
    /// A file's meta data does not decode (reported with the held copies;
    /// the full error goes with the own files).
    #[error("{file}: meta data unreadable")]
    MetaUnreadable { file: String },
    /// A file does not match its meta data.
    #[error(transparent)]
    Verify(#[from] VerifyError),
}

/// What a rank found of its files of one dataset, checked separately (size
/// and CRC32 against the meta recorded at complete): its own application
/// files, and the redundancy files it holds (PARTNER: copies of its left
/// neighbour's files; XOR/RS: its parity file). `Err` says what is wrong.
pub(super) struct FileCheck {
    pub(super) own: Result<(), FileProblem>,
    pub(super) held: Result<(), FileProblem>,
}

impl FileCheck {
    /// The loss to report ([`MemberLoss`]); a rank with no record of its
    /// files at all cannot know which copies it held, so it lost both.
    pub(super) fn loss(&self, has_record: bool) -> MemberLoss {
        if !has_record {
            return MemberLoss::ALL;
        }
        MemberLoss {
            own: self.own.is_err(),
            held: self.held.is_err(),
        }
    }

    /// The first problem found, own files first.
    pub(super) fn problem(&self) -> Option<&FileProblem> {
        self.own.as_ref().err().or(self.held.as_ref().err())
    }
}

/// How much of a rank's files a check reads: always the count, each file's
/// meta and its size (no byte read); the CRC32 of its own application files
/// and of the redundancy files it holds when asked (a whole read of each).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Depth {
    pub(super) own_crc: bool,
    pub(super) held_crc: bool,
}

impl Depth {
    /// Count, metas and sizes: what a restart looks at first.
    pub(super) const SIZE: Depth = Depth {
        own_crc: false,
        held_crc: false,
    };
    /// Every file's CRC32 too.
    pub(super) const FULL: Depth = Depth {
        own_crc: true,
        held_crc: true,
    };
}

/// Does this rank hold every file of `dset` it should, intact as far as
/// `depth` reads? The expected count is of application files; redundancy
/// files are checked too, and reported apart from them.
pub(super) fn check_files(job: &Job, dset: DatasetId, depth: Depth) -> FileCheck {
    let me = job.rank();
    let mut own = Ok(());
    let mut held = Ok(());
    let apps = job.app_files(dset).len() as u64;
    match job.filemap.expected_files(dset, me) {
        None => own = Err(FileProblem::NoRecord),
        Some(n) if n != apps => {
            own = Err(FileProblem::Count {
                expected: n,
                found: apps,
            })
        }
        _ => {}
    }
    for f in job.filemap.list_files(dset, me) {
        let meta = match job.filemap.meta(dset, me, &f) {
            Ok(Some(m)) => m,
            // Without its meta a file's role is unknown: both kinds count
            // as lost.
            Ok(None) => {
                own = own.and(Err(FileProblem::NoMeta { file: f.clone() }));
                held = held.and(Err(FileProblem::NoMeta { file: f }));
                continue;
            }
            Err(e) => {
                own = own.and(Err(e.into()));
                held = held.and(Err(FileProblem::MetaUnreadable { file: f }));
                continue;
            }
        };
        let is_own = meta.file_type.unwrap_or(FileType::Full) == FileType::Full;
        let crc = if is_own {
            depth.own_crc
        } else {
            depth.held_crc
        };
        let real = job.real(&LogicalPath::new(&f));
        let result = if crc {
            verify_file(&real, &meta)
        } else {
            verify_size(&real, &meta)
        };
        let result = result.map_err(FileProblem::from);
        if is_own {
            own = own.and(result);
        } else {
            held = held.and(result);
        }
    }
    FileCheck { own, held }
}

/// A file whose CRC32 a check reads: its real path, its meta, and whether
/// it is one of the rank's own application files (else a held copy or a
/// redundancy file).
pub(super) struct CrcItem {
    path: std::path::PathBuf,
    meta: crate::records::meta::Meta,
    own: bool,
}

/// The files of `dset` this rank holds whose CRC32 `depth` asks for, to
/// be read apart from the job (a thread beside a rebuild). Files without a
/// readable meta are left out: the size check already counted them lost.
pub(super) fn crc_items(job: &Job, dset: DatasetId, depth: Depth) -> Vec<CrcItem> {
    let me = job.rank();
    job.filemap
        .list_files(dset, me)
        .into_iter()
        .filter_map(|f| {
            let meta = job.filemap.meta(dset, me, &f).ok().flatten()?;
            let own = meta.file_type.unwrap_or(FileType::Full) == FileType::Full;
            let wanted = if own { depth.own_crc } else { depth.held_crc };
            wanted.then(|| CrcItem {
                path: job.real(&LogicalPath::new(&f)).into_path_buf(),
                meta,
                own,
            })
        })
        .collect()
}

/// Reads every item whole and checks it (size and CRC32): what is
/// damaged, own files and the rest apart.
pub(super) fn verify_items(items: &[CrcItem]) -> MemberLoss {
    let mut loss = MemberLoss::NONE;
    for it in items {
        if verify_file(&it.path, &it.meta).is_err() {
            if it.own {
                loss.own = true;
            } else {
                loss.held = true;
            }
        }
    }
    loss
}
