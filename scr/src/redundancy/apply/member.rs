//! The plumbing every scheme shares: the set as one member sees it
//! ([`Ctx`]: geometry checked once, error constructors, the agreement that
//! ends every phase), latching local failures, and a member's files and
//! file lists.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::comm::CommError;
use crate::kvtree::KvTree;
use crate::records::{Meta, Node, RecordError, XorMember};
use crate::scheme::CopyType;

use super::super::logical::LogicalFile;
use super::super::RedundancyError;
use super::crc::check_crcs;
use super::error::{ApplyError, FailureKind, Inconsistency, InputProblem};
use super::loss::parity_count;
use super::{FileEntry, Register, SetInfo};

/// Bytes of the set digest at the head of every agreement message.
const DIGEST_BYTES: usize = 8;

/// The set as this member sees it, checked once.
pub(super) struct Ctx<'a> {
    pub(super) set: &'a SetInfo<'a>,
    /// Members in the set.
    pub(super) n: usize,
    /// This member's group rank.
    pub(super) me: usize,
    /// This member's world rank (named by every error).
    pub(super) world_rank: i64,
    /// Parity chunks per member (XOR 1, RS SET_FAILURES, else 0).
    pub(super) k: usize,
    /// Digest of everything the members must agree on ([`set_digest`]).
    digest: u64,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(set: &'a SetInfo<'a>) -> Result<Self, ApplyError> {
        let n = set.comm.size();
        let me = set.comm.rank();
        let world_rank = set.world_ranks.get(me).copied().unwrap_or(-1);
        let k = parity_count(set.scheme, set.set_failures);
        let ctx = Ctx {
            set,
            n,
            me,
            world_rank,
            k,
            digest: set_digest(set),
        };
        if set.world_ranks.len() != n {
            return Err(ctx.input(InputProblem::WorldRanks {
                listed: set.world_ranks.len(),
                comm_size: n,
            }));
        }
        if set.piece_bytes == 0 {
            return Err(ctx.input(InputProblem::ZeroPieceSize));
        }
        let ok = match set.scheme {
            CopyType::Single => true,
            CopyType::Partner | CopyType::Xor => n >= 2,
            CopyType::Rs => k >= 1 && n > k && n <= 256,
        };
        if !ok {
            return Err(ctx.input(InputProblem::Geometry {
                members: n,
                scheme: set.scheme,
                set_failures: set.set_failures,
            }));
        }
        assert!(me < n, "a communicator rank ({me}) is below its size ({n})");
        Ok(ctx)
    }

    /// The member `d` places to the left.
    pub(super) fn left(&self, d: usize) -> usize {
        (self.me + self.n - d % self.n) % self.n
    }

    /// The member `d` places to the right.
    pub(super) fn right(&self, d: usize) -> usize {
        (self.me + d) % self.n
    }

    pub(super) fn input(&self, problem: InputProblem) -> ApplyError {
        ApplyError::Input {
            world_rank: self.world_rank,
            problem,
        }
    }

    pub(super) fn inconsistent(&self, problem: Inconsistency) -> ApplyError {
        ApplyError::Inconsistent {
            world_rank: self.world_rank,
            problem,
        }
    }

    pub(super) fn header_err(&self) -> impl Fn(RecordError) -> ApplyError + '_ {
        move |source| ApplyError::Header {
            world_rank: self.world_rank,
            source,
        }
    }

    pub(super) fn comm_err(&self) -> impl Fn(CommError) -> ApplyError + '_ {
        move |source| ApplyError::Comm {
            world_rank: self.world_rank,
            source,
        }
    }

    pub(super) fn io_err<'p>(
        &self,
        path: &'p Path,
        offset: Option<u64>,
    ) -> impl FnOnce(io::Error) -> ApplyError + 'p {
        let world_rank = self.world_rank;
        move |source| ApplyError::Io {
            world_rank,
            path: path.to_path_buf(),
            offset,
            source,
        }
    }

    pub(super) fn red_err(
        &self,
        offset: Option<u64>,
    ) -> impl Fn(RedundancyError) -> ApplyError + '_ {
        move |e| match e {
            RedundancyError::Io { path, source } => ApplyError::Io {
                world_rank: self.world_rank,
                path,
                offset,
                source,
            },
            source => ApplyError::Redundancy {
                world_rank: self.world_rank,
                source,
            },
        }
    }

    /// One allgather that shares each member's `payload`, agrees on success
    /// and checks that every member was given the same set: if the set
    /// digests differ every member returns [`Inconsistency::SetDigest`];
    /// else if any member failed, every member returns an error of the kind
    /// of the lowest failed member's — the lowest with a CRC32 mismatch
    /// first — (its own error there, `Peer` elsewhere).
    /// Every verdict is computed from the gathered messages alone, so all
    /// members reach the same one.
    pub(super) fn agree<T>(
        &self,
        local: Result<T, ApplyError>,
        payload: impl FnOnce(&T) -> Vec<u8>,
    ) -> Result<(T, Vec<Vec<u8>>), ApplyError> {
        let mut msg = self.digest.to_le_bytes().to_vec();
        match &local {
            Ok(v) => {
                msg.push(0);
                msg.extend_from_slice(&payload(v));
            }
            Err(e) => {
                msg.extend_from_slice(&[1, e.kind().code()]);
                if let Some(p) = e.path() {
                    msg.extend_from_slice(p.as_os_str().as_bytes());
                }
            }
        }
        let all = self
            .set
            .comm
            .allgather_bytes(&msg)
            .map_err(self.comm_err())?;
        self.check_digests(&all)?;
        // A CRC32 mismatch names the damaged file; what the damage causes
        // elsewhere (nonzero padding in a rebuilt member: Inconsistent)
        // does not, so a member with a CRC error is the one reported.
        let failed_with = |m: &Vec<u8>, kind: Option<FailureKind>| {
            m[DIGEST_BYTES] != 0 && kind.is_none_or(|k| m.get(DIGEST_BYTES + 1) == Some(&k.code()))
        };
        let failed = all
            .iter()
            .position(|m| failed_with(m, Some(FailureKind::Crc)))
            .or_else(|| all.iter().position(|m| failed_with(m, None)));
        match (failed, local) {
            (Some(f), Err(e)) if f == self.me => Err(e),
            (Some(f), _) => Err(self.peer_error(f, &all[f][DIGEST_BYTES..])),
            (None, Ok(v)) => {
                let payloads = all.iter().map(|m| m[DIGEST_BYTES + 1..].to_vec());
                Ok((v, payloads.collect()))
            }
            (None, Err(e)) => Err(e),
        }
    }

    /// Every contribution is long enough to read and carries member 0's
    /// digest.
    fn check_digests(&self, all: &[Vec<u8>]) -> Result<(), ApplyError> {
        if all.len() != self.n {
            return Err(self.inconsistent(Inconsistency::Contributions {
                got: all.len(),
                members: self.n,
            }));
        }
        if let Some(member) = all.iter().position(|m| m.len() <= DIGEST_BYTES) {
            return Err(self.inconsistent(Inconsistency::Truncated { member }));
        }
        let digest_of = |m: &[u8]| {
            let mut d = [0u8; DIGEST_BYTES];
            d.copy_from_slice(&m[..DIGEST_BYTES]);
            u64::from_le_bytes(d)
        };
        let first = digest_of(&all[0]);
        match all.iter().position(|m| digest_of(m) != first) {
            Some(member) => Err(self.inconsistent(Inconsistency::SetDigest {
                member,
                digest: digest_of(&all[member]),
                first,
            })),
            None => {
                // Member 0 agrees with all, so this member's own digest is
                // among them: it was given the same set as everyone.
                assert_eq!(
                    first, self.digest,
                    "set digest check let a mismatch through"
                );
                Ok(())
            }
        }
    }

    /// The error a member reports for failed member `member` whose status
    /// bytes (after the digest) are `status`: `[1, kind, path…]`.
    fn peer_error(&self, member: usize, status: &[u8]) -> ApplyError {
        let path = status
            .get(2..)
            .filter(|p| !p.is_empty())
            .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)));
        ApplyError::Peer {
            member,
            world_rank: self.set.world_ranks[member],
            kind: FailureKind::from_code(status.get(1).copied().unwrap_or(u8::MAX)),
            path,
        }
    }

    /// Register `path` (owned by `owner`) before it is created; the first
    /// refusal is latched.
    pub(super) fn register(
        &self,
        register: &mut Register<'_>,
        owner: i64,
        path: &Path,
        meta: &Meta,
        latched: &mut Option<ApplyError>,
    ) {
        if latched.is_none() {
            if let Err(e) = register(owner, path, meta) {
                *latched = Some(e);
            }
        }
    }

    /// Register `files` (owned by `owner`, to be created at `paths`) as
    /// incomplete, then create them as one logical file; both steps latch.
    pub(super) fn register_and_create(
        &self,
        register: &mut Register<'_>,
        owner: i64,
        files: &[Meta],
        paths: &[PathBuf],
        latched: &mut Option<ApplyError>,
    ) -> Option<LogicalFile> {
        assert_eq!(files.len(), paths.len(), "one path per file to create");
        for (path, meta) in paths.iter().zip(files) {
            let reg = Meta {
                complete: Some(false),
                ..meta.clone()
            };
            self.register(register, owner, path, &reg, latched);
        }
        if latched.is_some() {
            return None;
        }
        let list: Vec<(&Path, u64)> = paths
            .iter()
            .map(PathBuf::as_path)
            .zip(files.iter().map(|m| m.size_bytes.unwrap_or(0)))
            .collect();
        latch(
            latched,
            LogicalFile::create(&list).map_err(self.red_err(None)),
        )
    }

    /// The agreement that ends a phase: shares nothing, fails together.
    pub(super) fn agree_done(&self, latched: Option<ApplyError>) -> Result<(), ApplyError> {
        self.agree(latched.map_or(Ok(()), Err), |_| Vec::new())
            .map(|_| ())
    }
}

/// FNV-1a over everything the members of a set must agree on before any
/// data moves: size, member list, set id, scheme and parity, dataset, world
/// size and piece size. Equal inputs give equal digests on every member
/// (no per-process hashing keys).
fn set_digest(set: &SetInfo) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
    };
    eat(&(set.comm.size() as u64).to_le_bytes());
    for w in &set.world_ranks {
        eat(&w.to_le_bytes());
    }
    eat(&set.group_id.to_le_bytes());
    eat(set.scheme.as_str().as_bytes());
    eat(&(parity_count(set.scheme, set.set_failures) as u64).to_le_bytes());
    eat(&set.dataset.id.to_le_bytes());
    eat(&set.world_size.to_le_bytes());
    eat(&(set.piece_bytes as u64).to_le_bytes());
    h
}

/// Keep the first failure; later ones are consequences of it.
pub(super) fn latch<T>(latched: &mut Option<ApplyError>, r: Result<T, ApplyError>) -> Option<T> {
    match r {
        Ok(v) => Some(v),
        Err(e) => {
            if latched.is_none() {
                *latched = Some(e);
            }
            None
        }
    }
}

/// Sizes of a member's files, from their meta (FILE and SIZE must be
/// recorded).
pub(super) fn sizes(ctx: &Ctx, files: &[FileEntry]) -> Result<Vec<u64>, ApplyError> {
    files
        .iter()
        .map(|f| {
            if f.meta.file.is_none() {
                return Err(ctx.input(InputProblem::NoFileName {
                    path: f.path.clone(),
                }));
            }
            f.meta.size_bytes.ok_or_else(|| {
                ctx.input(InputProblem::NoSize {
                    path: f.path.clone(),
                })
            })
        })
        .collect()
}

pub(super) fn open_logical(ctx: &Ctx, files: &[FileEntry]) -> Result<LogicalFile, ApplyError> {
    let sizes = sizes(ctx, files)?;
    let list: Vec<(&Path, u64)> = files.iter().map(|f| f.path.as_path()).zip(sizes).collect();
    LogicalFile::open(&list).map_err(ctx.red_err(None))
}

/// Opens a member's files for the single pass of an encode: their sizes
/// (from the meta, checked against the files) and the logical file over
/// them, read through reused buffers (nothing is mapped: the extra memory
/// of an encode does not grow with the checkpoint).
pub(super) fn open_sized(
    ctx: &Ctx,
    files: &[FileEntry],
) -> Result<(Vec<u64>, LogicalFile), ApplyError> {
    let sizes = sizes(ctx, files)?;
    let list: Vec<(&Path, u64)> = files
        .iter()
        .map(|f| f.path.as_path())
        .zip(sizes.iter().copied())
        .collect();
    let lf = LogicalFile::open(&list).map_err(ctx.red_err(None))?;
    Ok((sizes, lf))
}

/// The metas of a member's files with the CRC32s computed by the pass
/// that read them, each checked against the one recorded where there is
/// one (a fetched file): a mismatch is [`ApplyError::Crc`] naming the file.
pub(super) fn checked_metas(
    ctx: &Ctx,
    files: &[FileEntry],
    computed: Vec<u32>,
) -> Result<Vec<Meta>, ApplyError> {
    let paths: Vec<PathBuf> = files.iter().map(|f| f.path.clone()).collect();
    let crcs = check_crcs(ctx, &paths, &metas(files), computed)?;
    Ok(files
        .iter()
        .zip(crcs)
        .map(|(f, crc)| Meta {
            crc32: Some(crc),
            ..f.meta.clone()
        })
        .collect())
}

/// SINGLE: each file's CRC32, read once in pieces of `piece_bytes` and
/// checked against the recorded one.
pub(super) fn read_checked(ctx: &Ctx, files: &[FileEntry]) -> Result<Vec<Meta>, ApplyError> {
    let (_, lf) = open_sized(ctx, files)?;
    let computed = lf.crcs(ctx.set.piece_bytes).map_err(ctx.red_err(None))?;
    checked_metas(ctx, files, computed)
}

/// The CRC32 of each meta (all set by [`checked_metas`]).
pub(super) fn crcs_of(metas: &[Meta]) -> Vec<u32> {
    metas
        .iter()
        .map(|m| m.crc32.expect("checked_metas sets every CRC32"))
        .collect()
}

/// CRC32s as they travel in an agreement: 4 bytes each, little-endian.
pub(super) fn pack_crcs(crcs: &[u32]) -> Vec<u8> {
    crcs.iter().flat_map(|c| c.to_le_bytes()).collect()
}

/// The CRC32s member `member` sent for its `files` files.
pub(super) fn unpack_crcs(
    ctx: &Ctx,
    bytes: &[u8],
    member: usize,
    files: usize,
) -> Result<Vec<u32>, ApplyError> {
    if bytes.len() != 4 * files {
        return Err(ctx.inconsistent(Inconsistency::CrcList {
            member,
            files,
            bytes: bytes.len(),
        }));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

pub(super) fn member_tree(rank: i64, files: &[Meta]) -> KvTree {
    XorMember {
        rank,
        files: files.to_vec(),
    }
    .to_tree()
}

pub(super) fn member_from_tree(tree: &KvTree) -> Result<XorMember, RecordError> {
    XorMember::from_node(&Node::root("member meta", tree))
}

/// A member's file list as it sent it in an agreement.
pub(super) fn unpack_member(
    ctx: &Ctx,
    bytes: &[u8],
    member: usize,
) -> Result<XorMember, ApplyError> {
    let tree = KvTree::unpack_exact(bytes)
        .map_err(|source| ctx.inconsistent(Inconsistency::UnreadableList { member, source }))?;
    member_from_tree(&tree).map_err(ctx.header_err())
}

/// [`unpack_member`], also checking it names the member's world rank.
pub(super) fn checked_member(
    ctx: &Ctx,
    bytes: &[u8],
    member: usize,
) -> Result<XorMember, ApplyError> {
    let m = unpack_member(ctx, bytes, member)?;
    let expected = ctx.set.world_ranks[member];
    if m.rank != expected {
        return Err(ctx.inconsistent(Inconsistency::ListRank {
            member,
            key: "FILES",
            listed: m.rank,
            expected,
        }));
    }
    Ok(m)
}

pub(super) fn metas(files: &[FileEntry]) -> Vec<Meta> {
    files.iter().map(|f| f.meta.clone()).collect()
}

/// Bytes of the logical file a list of metas describes.
pub(super) fn logical_len(files: &[Meta]) -> u64 {
    files
        .iter()
        .map(|m| m.size_bytes.unwrap_or(0))
        .fold(0u64, u64::saturating_add)
}

pub(super) fn sync_logical(ctx: &Ctx, lf: &LogicalFile) -> Result<(), ApplyError> {
    lf.sync_all().map_err(ctx.red_err(None))
}

pub(super) fn basename(logical: &str) -> String {
    Path::new(logical)
        .file_name()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".to_string())
}

/// Where a lost member's application files are rebuilt: `dir` joined with
/// the basename of each recorded FILE.
pub(super) fn app_paths(dir: &Path, files: &[Meta]) -> Vec<PathBuf> {
    // encode refuses files without FILE, so the fallback only names files
    // whose headers were written by something else.
    files
        .iter()
        .enumerate()
        .map(|(i, m)| dir.join(m.file.as_deref().map_or(format!("file.{i}"), basename)))
        .collect()
}

/// The entries of files whose bytes matched `crcs`, marked complete.
pub(super) fn complete_entries(paths: &[PathBuf], files: &[Meta], crcs: &[u32]) -> Vec<FileEntry> {
    assert!(
        paths.len() == files.len() && files.len() == crcs.len(),
        "one path and one CRC per file"
    );
    paths
        .iter()
        .zip(files)
        .zip(crcs)
        .map(|((path, meta), &crc)| FileEntry {
            path: path.clone(),
            meta: Meta {
                crc32: Some(crc),
                complete: Some(true),
                ..meta.clone()
            },
        })
        .collect()
}
