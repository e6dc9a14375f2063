//! XOR and RS: k parity chunks per member over the pipelined ring
//! (`scr_reddesc_apply_xor()` and `scr_reddesc_recover_xor()` with k = 1,
//! redset's `redset_apply_rs()` and `redset_recover_rs()`): the redundancy
//! file (header, then k parity rows), encode, and rebuild.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::kvtree::file::{self as kvfile, HEADER_LEN};
use crate::kvtree::KvTree;
use crate::records::xor_header::xor_file_name;
use crate::records::{FileType, Meta, Node, Record, RecordError, XorHeader, XorMember};
use crate::scheme::CopyType;

use super::super::logical::LogicalFile;
use super::super::rs::{RsSet, Slot};
use super::crc::{check_crcs, check_sizes, complete_crc, SegmentCrc};
use super::error::{ApplyError, Inconsistency, InputProblem};
use super::member::{
    app_paths, checked_metas, complete_entries, crcs_of, latch, logical_len, member_tree, metas,
    open_logical, open_sized, pack_crcs, sync_logical, unpack_crcs, unpack_member, Ctx,
};
use super::ring::{holder, position, ring, Columns, MemberIo, Src, Tables};
use super::{Encoded, FileEntry, MemberFiles, Rebuilt, Register};

/// The name of an RS redundancy file: `<grank+1>_of_<gsize>_in_<gid>.rs`.
pub fn rs_file_name(group_rank: u64, group_size: u64, group_id: i64) -> String {
    format!("{}_of_{group_size}_in_{group_id}.rs", group_rank + 1)
}

/// The header of an XOR or RS redundancy file.
pub(super) struct CodedHeader {
    pub(super) xor: XorHeader,
    /// Meta of the k members to the left, nearest first (RS only; for XOR
    /// it is `[xor.partner]` and not written separately).
    pub(super) partners: Vec<XorMember>,
    k: usize,
}

impl CodedHeader {
    fn to_tree(&self) -> KvTree {
        let mut t = self.xor.to_tree();
        if self.k > 1 {
            t.set_val("FAILURES", self.k);
            let p = t.entry("PARTNERS");
            for (i, m) in self.partners.iter().enumerate() {
                p.set((i + 1).to_string(), m.to_tree());
            }
        }
        t
    }

    fn from_tree(tree: &KvTree, k: usize) -> Result<Self, RecordError> {
        let xor = XorHeader::from_tree(tree)?;
        let partners = if k > 1 {
            let root = Node::root("RS header", tree);
            let entries = root.int_keyed_under("PARTNERS")?;
            if entries.len() != k
                || entries
                    .iter()
                    .enumerate()
                    .any(|(i, (d, _))| *d != i as i64 + 1)
            {
                return Err(root.inconsistent("PARTNERS", format!("expected entries 1..={k}")));
            }
            entries
                .iter()
                .map(|(_, n)| XorMember::from_node(n))
                .collect::<Result<_, _>>()?
        } else {
            vec![xor.partner.clone()]
        };
        Ok(CodedHeader { xor, partners, k })
    }

    /// Reads the header of the redundancy file at `path`: the header and
    /// its length in bytes (where the parity rows start).
    pub(super) fn read_from(path: &Path, k: usize) -> Result<(Self, u64), RecordError> {
        let io = |op: &'static str| {
            move |source| kvfile::KvFileError::Io {
                path: path.to_path_buf(),
                op,
                source,
            }
        };
        let f = File::open(path).map_err(io("open"))?;
        let mut head = [0u8; HEADER_LEN];
        f.read_exact_at(&mut head, 0).map_err(io("read header"))?;
        let len = crate::records::embedded_len(&head, path)?;
        let mut bytes = head.to_vec();
        bytes.resize(len, 0);
        f.read_exact_at(&mut bytes[HEADER_LEN..], HEADER_LEN as u64)
            .map_err(io("read header"))?;
        let tree = kvfile::decode(&bytes, path)?;
        let h = Self::from_tree(&tree, k).map_err(|e| e.in_file(path))?;
        Ok((h, len as u64))
    }
}

/// A redundancy file being written: header first, then k rows of `chunk`
/// bytes, each row's CRC kept as it is filled (in order) and joined at the
/// end, so the CRC recorded is the one of the bytes written, without
/// reading the file back.
pub(super) struct RedWriter {
    file: File,
    path: PathBuf,
    header_len: u64,
    chunk: u64,
    header_crc: crc32fast::Hasher,
    rows: Vec<crc32fast::Hasher>,
    filled: Vec<u64>,
}

impl RedWriter {
    /// A redundancy file whose header is known first (a rebuilt member's):
    /// the header at 0, the rows after it.
    fn create(
        ctx: &Ctx,
        path: &Path,
        header: &[u8],
        k: usize,
        chunk: u64,
    ) -> Result<Self, ApplyError> {
        let mut w = Self::create_reserved(ctx, path, header.len() as u64, k, chunk)?;
        w.file
            .write_all_at(header, 0)
            .map_err(ctx.io_err(path, Some(0)))?;
        w.header_crc.update(header);
        Ok(w)
    }

    /// A redundancy file whose header is written last
    /// ([`RedWriter::finish_with_header`]): the rows start at `reserved`,
    /// the longest the header can be.
    fn create_reserved(
        ctx: &Ctx,
        path: &Path,
        reserved: u64,
        k: usize,
        chunk: u64,
    ) -> Result<Self, ApplyError> {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(path)
            .map_err(ctx.io_err(path, None))?;
        file.set_len(reserved + k as u64 * chunk)
            .map_err(ctx.io_err(path, None))?;
        Ok(RedWriter {
            file,
            path: path.to_path_buf(),
            header_len: reserved,
            chunk,
            header_crc: crc32fast::Hasher::new(),
            rows: vec![crc32fast::Hasher::new(); k],
            filled: vec![0; k],
        })
    }

    /// Puts `header` in front of the rows written from the reserved
    /// offset: the rows move down to its end when it is shorter (pieces of
    /// `piece` bytes, front to back, so no byte is overwritten before it
    /// moved), it is written at 0 and the file cut to its size. Then
    /// [`RedWriter::finish`].
    fn finish_with_header(
        mut self,
        ctx: &Ctx,
        header: &[u8],
        piece: usize,
    ) -> Result<(u64, u32), ApplyError> {
        let to = header.len() as u64;
        let from = self.header_len;
        if to > from {
            return Err(ctx.inconsistent(Inconsistency::HeaderReserve {
                path: self.path.clone(),
                reserved: from,
                header: to,
            }));
        }
        let rows = self.rows.len() as u64 * self.chunk;
        if to < from {
            let mut buf = vec![0u8; piece.max(1)];
            let mut off = 0u64;
            while off < rows {
                let take = (rows - off).min(buf.len() as u64) as usize;
                let (src, dst) = (from + off, to + off);
                self.file
                    .read_exact_at(&mut buf[..take], src)
                    .map_err(ctx.io_err(&self.path, Some(src)))?;
                self.file
                    .write_all_at(&buf[..take], dst)
                    .map_err(ctx.io_err(&self.path, Some(dst)))?;
                off += take as u64;
            }
            self.file
                .set_len(to + rows)
                .map_err(ctx.io_err(&self.path, None))?;
        }
        self.file
            .write_all_at(header, 0)
            .map_err(ctx.io_err(&self.path, Some(0)))?;
        self.header_len = to;
        self.header_crc = crc32fast::Hasher::new();
        self.header_crc.update(header);
        self.finish(ctx)
    }

    pub(super) fn write_row(
        &mut self,
        ctx: &Ctx,
        row: usize,
        off: u64,
        bytes: &[u8],
    ) -> Result<(), ApplyError> {
        assert_eq!(self.filled[row], off, "parity row written out of order");
        assert!(
            off + bytes.len() as u64 <= self.chunk,
            "parity row {row} written past its chunk of {} bytes",
            self.chunk
        );
        let pos = self.header_len + row as u64 * self.chunk + off;
        self.file
            .write_all_at(bytes, pos)
            .map_err(ctx.io_err(&self.path, Some(pos)))?;
        self.rows[row].update(bytes);
        self.filled[row] += bytes.len() as u64;
        Ok(())
    }

    /// fsync, and the file's (size, CRC32).
    fn finish(mut self, ctx: &Ctx) -> Result<(u64, u32), ApplyError> {
        assert!(
            self.filled.iter().all(|&f| f == self.chunk),
            "{} was not completely written: rows filled {:?} of {}",
            self.path.display(),
            self.filled,
            self.chunk
        );
        self.file.sync_all().map_err(ctx.io_err(&self.path, None))?;
        crate::fault::synced(&self.path);
        // The parity file (XOR, RS) is durable, not yet in the filemap.
        crate::fault_point!("redundancy.parity.synced")
            .map_err(|e| ctx.io_err(&self.path, None)(e.into()))?;
        for h in &self.rows {
            self.header_crc.combine(h);
        }
        let size = self.header_len + self.rows.len() as u64 * self.chunk;
        Ok((size, self.header_crc.finalize()))
    }
}

fn coded_name(ctx: &Ctx) -> String {
    let (r, n, g) = (ctx.me as u64, ctx.n as u64, ctx.set.group_id);
    match ctx.set.scheme {
        CopyType::Xor => xor_file_name(r, n, g),
        _ => rs_file_name(r, n, g),
    }
}

fn coded_type(ctx: &Ctx) -> FileType {
    match ctx.set.scheme {
        CopyType::Xor => FileType::Xor,
        _ => FileType::Rs,
    }
}

/// This member's redundancy file while it is written: the writer (none
/// after a local failure), where it is, and the meta registered for it.
struct RedFile {
    writer: Option<RedWriter>,
    path: PathBuf,
    meta: Meta,
}

/// Builds and creates (after registering) this member's redundancy file.
fn start_red_file(
    ctx: &Ctx,
    chunk: u64,
    members: &[XorMember],
    dir: &Path,
    register: &mut Register<'_>,
    latched: &mut Option<ApplyError>,
) -> RedFile {
    let k = ctx.k;
    let header = coded_header(ctx, chunk, members);
    let bytes = kvfile::encode(&header.to_tree(), true);
    let path = dir.join(coded_name(ctx));
    let meta = Meta {
        file: Some(path.to_string_lossy().into_owned()),
        file_type: Some(coded_type(ctx)),
        complete: Some(false),
        size_bytes: Some(bytes.len() as u64 + k as u64 * chunk),
        ranks: Some(ctx.set.world_size),
        ckpt: ctx.set.dataset.ckpt,
        ..Meta::default()
    };
    ctx.register(register, ctx.world_rank, &path, &meta, latched);
    let writer = if latched.is_none() {
        latch(latched, RedWriter::create(ctx, &path, &bytes, k, chunk))
    } else {
        None
    };
    RedFile { writer, path, meta }
}

/// The entry of a completely written redundancy file (none after a local
/// failure, which stays latched).
fn finish_red_file(ctx: &Ctx, red: RedFile, latched: &mut Option<ApplyError>) -> Option<FileEntry> {
    let writer = red.writer?;
    if latched.is_some() {
        return None;
    }
    let (size, crc) = latch(latched, writer.finish(ctx))?;
    assert_eq!(
        Some(size),
        red.meta.size_bytes,
        "the redundancy file has the size registered for it"
    );
    Some(FileEntry {
        path: red.path,
        meta: Meta {
            crc32: Some(crc),
            complete: Some(true),
            ..red.meta
        },
    })
}

/// The chunk size of a set whose members' files are `members`.
fn chunk_of(layout: &RsSet, members: &[XorMember]) -> u64 {
    let max = members
        .iter()
        .map(|m| logical_len(&m.files))
        .max()
        .unwrap_or(0);
    layout.chunk_bytes(max)
}

/// The encode plan: each member adds its data chunk of every stripe with
/// the generator coefficients; parity row j of stripe s goes to s + j.
fn encode_tables(ctx: &Ctx, layout: &RsSet) -> Result<Tables, ApplyError> {
    let (n, k) = (ctx.n, ctx.k);
    let codec = layout.codec();
    // The generator coefficients of the k parity rows for a data position.
    let coefs_of = |position| {
        (0..k)
            .map(|q| codec.coefficient(q, position).unwrap_or(0))
            .collect::<Vec<u8>>()
    };
    let mut cols = Columns {
        dests: (0..n)
            .map(|s| (0..k).map(|q| (s + q) % n).collect())
            .collect(),
        mine: Vec::with_capacity(n),
        sinks: Vec::with_capacity(n),
    };
    for s in 0..n {
        let slot = layout.slot(ctx.me, s).map_err(ctx.red_err(None))?;
        cols.mine.push(match slot {
            Slot::Data { chunk, position } => Some((Src::Data { chunk }, coefs_of(position))),
            Slot::Parity { .. } => None,
        });
        cols.sinks.push(Src::from(slot));
    }
    // A stripe's bundle starts at its first data member (s + k) and only
    // passes the N − k data members; the last one hands row j to s + j.
    let t = Tables::new(n, k, n - k, k, cols);
    if k < 2 || n - k < 2 {
        return Ok(t);
    }
    // With two rows or more, the first data member sends its share alone
    // (one piece, not k) and the second makes the rows from both.
    let first = (0..n)
        .map(|s| match layout.slot((s + k) % n, s) {
            Ok(Slot::Data { position, .. }) => Ok(coefs_of(position)),
            Ok(Slot::Parity { .. }) => unreachable!("member s + k holds data of stripe s"),
            Err(e) => Err(ctx.red_err(None)(e)),
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(t.forwarding_first(first))
}

/// The header of this member's redundancy file for the set's `members`.
fn coded_header(ctx: &Ctx, chunk: u64, members: &[XorMember]) -> CodedHeader {
    let k = ctx.k;
    CodedHeader {
        xor: XorHeader {
            dataset: ctx.set.dataset.clone(),
            ranks: ctx.set.world_size,
            group_world_ranks: ctx.set.world_ranks.clone(),
            chunk_bytes: chunk,
            current: members[ctx.me].clone(),
            partner: members[ctx.left(1)].clone(),
        },
        partners: (1..=k).map(|d| members[ctx.left(d)].clone()).collect(),
        k,
    }
}

/// `members` with every file's CRC32 set to `crc(member, file)`.
fn with_crcs(members: &[XorMember], crc: impl Fn(usize, usize) -> u32) -> Vec<XorMember> {
    members
        .iter()
        .enumerate()
        .map(|(m, x)| XorMember {
            rank: x.rank,
            files: x
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| Meta {
                    crc32: Some(crc(m, i)),
                    ..f.clone()
                })
                .collect(),
        })
        .collect()
}

/// The agreement after the pass: this member's computed CRCs (checked
/// against the recorded ones) go to every member, which sets them in the
/// lists sent before the pass. Returns this member's metas and the set's
/// lists as the headers record them.
fn agree_crcs(
    ctx: &Ctx,
    mine: &MemberFiles,
    members: &[XorMember],
    computed: Option<Vec<u32>>,
    latched: &mut Option<ApplyError>,
) -> Result<(Vec<Meta>, Vec<XorMember>), ApplyError> {
    let local = match (latched.take(), computed) {
        (Some(e), _) => Err(e),
        (None, Some(c)) => checked_metas(ctx, &mine.files, c),
        (None, None) => unreachable!("without a latched failure the pass computed the CRCs"),
    };
    let (my_metas, all) = ctx.agree(local, |m| pack_crcs(&crcs_of(m)))?;
    let crcs = all
        .iter()
        .enumerate()
        .map(|(m, b)| unpack_crcs(ctx, b, m, members[m].files.len()))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((my_metas, with_crcs(members, |m, i| crcs[m][i])))
}

/// `scr_reddesc_apply_xor()` (k = 1) and redset's `redset_apply_rs()`, in
/// one pass over the member's files (module documentation, "One pass"):
/// the ring reads each piece once and that read feeds the files' CRC32s;
/// the parity goes in from the longest the header can be, the header last.
pub(super) fn encode_coded(
    ctx: &Ctx,
    mine: &MemberFiles,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Encoded, ApplyError> {
    let layout = RsSet::new(ctx.n, ctx.k).map_err(ctx.red_err(None))?;
    let prep = open_sized(ctx, &mine.files);
    // The lists before the pass: names and sizes (the chunk size and the
    // header's layout); their CRCs are set after it.
    let ((my_sizes, lf), all) = ctx.agree(prep, |_| {
        member_tree(ctx.world_rank, &metas(&mine.files)).pack()
    })?;
    let members: Vec<XorMember> = all
        .iter()
        .enumerate()
        .map(|(m, b)| unpack_member(ctx, b, m))
        .collect::<Result<_, _>>()?;
    let chunk = chunk_of(&layout, &members);
    // Every CRC at its longest (`0xffffffff`): the header can only be
    // shorter once the real ones are known.
    let longest = coded_header(ctx, chunk, &with_crcs(&members, |_, _| u32::MAX));
    let reserved = kvfile::encode(&longest.to_tree(), true).len() as u64;
    let mut latched = None;
    let path = dir.join(coded_name(ctx));
    let meta = Meta {
        file: Some(path.to_string_lossy().into_owned()),
        file_type: Some(coded_type(ctx)),
        complete: Some(false),
        size_bytes: Some(reserved + ctx.k as u64 * chunk),
        ranks: Some(ctx.set.world_size),
        ckpt: ctx.set.dataset.ckpt,
        ..Meta::default()
    };
    ctx.register(register, ctx.world_rank, &path, &meta, &mut latched);
    let writer = if latched.is_none() {
        let w = RedWriter::create_reserved(ctx, &path, reserved, ctx.k, chunk);
        latch(&mut latched, w)
    } else {
        None
    };
    let tables = encode_tables(ctx, &layout)?;
    let mut io = MemberIo {
        chunk,
        logical: Some(&lf),
        logical_len: my_sizes.iter().sum(),
        data_crc: Some(SegmentCrc::new(&my_sizes, chunk)),
        red_read: None,
        red_crc: None,
        red_write: writer,
    };
    ring(ctx, chunk, &tables, &mut io, &mut latched)?;
    let writer = io.red_write.take();
    // Every piece of every data chunk went through the ring's reads unless
    // a failure stopped them.
    let computed = latched
        .is_none()
        .then(|| io.data_crc.take().map(SegmentCrc::finish))
        .flatten();
    drop(io);
    let (my_metas, members) = agree_crcs(ctx, mine, &members, computed, &mut latched)?;
    let header = kvfile::encode(&coded_header(ctx, chunk, &members).to_tree(), true);
    let entry = writer.and_then(|w| {
        let done = w.finish_with_header(ctx, &header, ctx.set.piece_bytes);
        latch(&mut latched, done)
    });
    ctx.agree_done(latched)?;
    let (size, crc) = entry.expect("without a latched failure the redundancy file is written");
    Ok(Encoded {
        app_crcs: crcs_of(&my_metas),
        redundancy: vec![FileEntry {
            path,
            meta: Meta {
                size_bytes: Some(size),
                crc32: Some(crc),
                complete: Some(true),
                ..meta
            },
        }],
    })
}

/// What a survivor lends a rebuild: its header, its data and its parity
/// (the redundancy file and where the rows start), and what its files'
/// CRC32s are checked against once the ring has read them.
struct Survivor<'m> {
    header: CodedHeader,
    lf: LogicalFile,
    /// Taken by the ring's I/O.
    red: Option<(File, PathBuf, u64)>,
    /// The member's application files, as recorded.
    mine: &'m MemberFiles,
    /// Its redundancy file, as recorded.
    red_entry: &'m FileEntry,
    /// CRC32 of the header bytes (the rows' are joined to it).
    header_crc: crc32fast::Hasher,
}

impl Survivor<'_> {
    /// Whether any recorded CRC32 is to be checked (a caller that checked
    /// every file just before leaves them out: nothing is read twice).
    fn data_checked(&self) -> bool {
        self.mine.files.iter().any(|f| f.meta.crc32.is_some())
    }

    /// After the ring: reads what the decode did not need (RS lends only
    /// N − k positions of each stripe), then checks the CRC32 of every file
    /// against its record. Each byte was read once, by the ring or here.
    fn verify(
        &self,
        ctx: &Ctx,
        data_crc: Option<SegmentCrc>,
        red_crc: Option<SegmentCrc>,
        red: Option<&(File, PathBuf, u64)>,
    ) -> Result<(), ApplyError> {
        let piece = ctx.set.piece_bytes;
        let mut buf = Vec::new();
        if let Some(mut c) = data_crc {
            complete_crc(&mut c, &mut buf, piece, |pos, b| {
                self.lf.read_at(pos, b).map_err(ctx.red_err(Some(pos)))
            })?;
            let paths: Vec<PathBuf> = self.mine.files.iter().map(|f| f.path.clone()).collect();
            check_crcs(ctx, &paths, &metas(&self.mine.files), c.finish())?;
        }
        let (Some(mut c), Some(expected)) = (red_crc, self.red_entry.meta.crc32) else {
            return Ok(());
        };
        let (f, path, hlen) = red.expect("the ring hands the redundancy file back to the survivor");
        complete_crc(&mut c, &mut buf, piece, |pos, b| {
            f.read_exact_at(b, hlen + pos)
                .map_err(ctx.io_err(path, Some(hlen + pos)))
        })?;
        let mut h = self.header_crc.clone();
        for rows in c.finish_hashers() {
            h.combine(&rows);
        }
        let actual = h.finalize();
        if actual != expected {
            return Err(ApplyError::Crc {
                world_rank: ctx.world_rank,
                path: path.clone(),
                expected,
                actual,
            });
        }
        Ok(())
    }
}

/// A survivor checks its header and its files' sizes before lending them;
/// their CRC32s are checked by the ring's read of the same bytes
/// ([`Survivor::verify`]).
fn open_survivor<'m>(
    ctx: &Ctx,
    mine: &'m MemberFiles,
    red: &'m [FileEntry],
) -> Result<Survivor<'m>, ApplyError> {
    let want = coded_type(ctx);
    let reds: Vec<&FileEntry> = red
        .iter()
        .filter(|f| f.meta.file_type == Some(want))
        .collect();
    let [red] = reds.as_slice() else {
        return Err(ctx.input(InputProblem::RedundancyFiles {
            file_type: want,
            count: reds.len(),
        }));
    };
    let (header, hlen) = CodedHeader::read_from(&red.path, ctx.k).map_err(ctx.header_err())?;
    check_own_header(ctx, &header, mine)?;
    check_sizes(ctx, &mine.files)?;
    check_sizes(ctx, std::slice::from_ref(*red))?;
    let lf = open_logical(ctx, &mine.files)?;
    let f = File::open(&red.path).map_err(ctx.io_err(&red.path, None))?;
    let mut head = vec![0u8; hlen as usize];
    f.read_exact_at(&mut head, 0)
        .map_err(ctx.io_err(&red.path, Some(0)))?;
    let mut header_crc = crc32fast::Hasher::new();
    header_crc.update(&head);
    Ok(Survivor {
        header,
        lf,
        red: Some((f, red.path.clone(), hlen)),
        mine,
        red_entry: red,
        header_crc,
    })
}

/// Every survivor's header as it sent it. Every member decodes every one,
/// so all reach the same verdict on the set's consistency.
fn decode_headers(
    ctx: &Ctx,
    lost: &[bool],
    all: &[Vec<u8>],
) -> Result<Vec<Option<CodedHeader>>, ApplyError> {
    let mut headers = Vec::with_capacity(ctx.n);
    for (member, b) in all.iter().enumerate() {
        if lost[member] {
            headers.push(None);
            continue;
        }
        let tree = KvTree::unpack_exact(b).map_err(|source| {
            ctx.inconsistent(Inconsistency::UnreadableHeader { member, source })
        })?;
        let h = CodedHeader::from_tree(&tree, ctx.k).map_err(ctx.header_err())?;
        headers.push(Some(h));
    }
    Ok(headers)
}

/// What a lost member re-creates: its files (metas, paths, the logical
/// file over them) and its redundancy file.
struct Created {
    files: Vec<Meta>,
    paths: Vec<PathBuf>,
    lf: Option<LogicalFile>,
    red: RedFile,
}

/// A lost member registers and creates its files before any data moves.
fn create_lost(
    ctx: &Ctx,
    chunk: u64,
    members: &[XorMember],
    dir: &Path,
    register: &mut Register<'_>,
    latched: &mut Option<ApplyError>,
) -> Created {
    let files: Vec<Meta> = members[ctx.me].files.clone();
    let paths = app_paths(dir, &files);
    let lf = ctx.register_and_create(register, ctx.world_rank, &files, &paths, latched);
    let red = start_red_file(ctx, chunk, members, dir, register, latched);
    Created {
        files,
        paths,
        lf,
        red,
    }
}

/// The decoding plan of every stripe: which positions are missing and how
/// each is computed from the first N − k surviving positions. The
/// survivors a stripe is decoded from can sit anywhere in the set, so its
/// bundle goes all the way round and ends at member s.
fn decode_tables(ctx: &Ctx, layout: &RsSet, lost: &[bool]) -> Result<Tables, ApplyError> {
    let (n, k, me) = (ctx.n, ctx.k, ctx.me);
    let codec = layout.codec();
    let width = lost.iter().filter(|l| **l).count();
    let steps = decode_steps(n, k, DECODE_START, lost);
    let mut cols = Columns {
        dests: Vec::with_capacity(n),
        mine: Vec::with_capacity(n),
        sinks: Vec::with_capacity(n),
    };
    for s in 0..n {
        // Only the members the stripe's bundle visits may contribute.
        let present: Vec<bool> = (0..n)
            .map(|p| {
                let m = holder(n, k, s, p);
                !lost[m] && in_window(n, DECODE_START, steps, s, m)
            })
            .collect();
        let plan = codec.decode_plan(&present).map_err(ctx.red_err(None))?;
        // The outputs are the lost members' positions; a survivor outside
        // the window is "missing" to the plan only.
        let outputs: Vec<usize> = (0..plan.missing.len())
            .filter(|&q| lost[holder(n, k, s, plan.missing[q])])
            .collect();
        let slot = layout.slot(me, s).map_err(ctx.red_err(None))?;
        let p = position(slot, n, k);
        assert_eq!(holder(n, k, s, p), me, "the layout and holder() agree");
        cols.dests.push(
            outputs
                .iter()
                .map(|&q| holder(n, k, s, plan.missing[q]))
                .collect(),
        );
        let share = if lost[me] {
            None
        } else {
            plan.survivors.iter().position(|&x| x == p).map(|i| {
                let coefs = outputs
                    .iter()
                    .map(|&q| plan.coefs[q * (n - k) + i])
                    .collect();
                (Src::from(slot), coefs)
            })
        };
        cols.mine.push(share);
        cols.sinks.push(Src::from(slot));
    }
    let t = Tables::new(n, DECODE_START, steps, width, cols);
    // XOR after one loss: SCR's pipelined reduction to the lost member
    // sends less, and has it receive only its outputs (docs/decisions.md).
    Ok(match (k, lost.iter().position(|&l| l)) {
        (1, Some(root)) if width == 1 => t.reducing_to(root),
        _ => t,
    })
}

/// The stripe offset of the rebuild's ring: at step t member m adds its
/// share of stripe (m − 1 − t) mod N.
const DECODE_START: usize = 1;

/// Whether stripe `s`'s bundle visits member `m` in a ring of `steps`
/// steps starting at stripe offset `start`.
fn in_window(n: usize, start: usize, steps: usize, s: usize, m: usize) -> bool {
    (m + 2 * n - s - start) % n < steps
}

/// The fewest ring steps of a rebuild after the `lost` members: each
/// stripe's bundle passes `steps` consecutive members, and must pass N − k
/// survivors to decode. XOR (k = 1) needs all N: the N − 1 survivors of a
/// stripe are never N − 1 consecutive members of every stripe's window. RS
/// with fewer losses than k needs fewer: one loss in an RS set of 4 with
/// k = 2 passes each bundle to 3 members instead of 4, so each member sends
/// a quarter fewer bundles.
pub(super) fn decode_steps(n: usize, k: usize, start: usize, lost: &[bool]) -> usize {
    (1..=n)
        .find(|&steps| {
            (0..n).all(|s| {
                (0..n)
                    .filter(|&m| !lost[m] && in_window(n, start, steps, s, m))
                    .count()
                    >= n - k
            })
        })
        .unwrap_or(n)
}

/// `scr_reddesc_recover_xor()` (k = 1) and redset's `redset_recover_rs()`.
/// `survivor` is this member's files when it lost nothing.
pub(super) fn rebuild_coded(
    ctx: &Ctx,
    lost: &[bool],
    survivor: Option<(&MemberFiles, &[FileEntry])>,
    dir: &Path,
    register: &mut Register<'_>,
) -> Result<Rebuilt, ApplyError> {
    assert_eq!(
        survivor.is_none(),
        lost[ctx.me],
        "a member lends its files iff it lost nothing"
    );
    let layout = RsSet::new(ctx.n, ctx.k).map_err(ctx.red_err(None))?;
    let prep = survivor.map_or(Ok(None), |(mine, red)| {
        open_survivor(ctx, mine, red).map(Some)
    });
    let (mut prep, all) = ctx.agree(prep, |p| {
        p.as_ref()
            .map_or_else(Vec::new, |s| s.header.to_tree().pack())
    })?;
    let headers = decode_headers(ctx, lost, &all)?;
    let (members, chunk) = set_metas(ctx, lost, &headers)?;
    let needed = chunk_of(&layout, &members);
    if needed != chunk {
        return Err(ctx.inconsistent(Inconsistency::ChunkSize {
            recorded: chunk,
            needed,
        }));
    }
    let mut latched = None;
    let mut created =
        lost[ctx.me].then(|| create_lost(ctx, chunk, &members, dir, register, &mut latched));
    let tables = decode_tables(ctx, &layout, lost)?;
    let mut io = match (&mut prep, &mut created) {
        (Some(s), _) => {
            let sizes: Vec<u64> = s
                .mine
                .files
                .iter()
                .map(|f| f.meta.size_bytes.unwrap_or(0))
                .collect();
            let rows = [ctx.k as u64 * chunk];
            MemberIo {
                chunk,
                logical: Some(&s.lf),
                logical_len: s.lf.len(),
                data_crc: s.data_checked().then(|| SegmentCrc::new(&sizes, chunk)),
                red_read: s.red.take(),
                red_crc: s
                    .red_entry
                    .meta
                    .crc32
                    .map(|_| SegmentCrc::new(&rows, chunk)),
                red_write: None,
            }
        }
        (None, Some(c)) => {
            let sizes: Vec<u64> = c.files.iter().map(|m| m.size_bytes.unwrap_or(0)).collect();
            MemberIo {
                chunk,
                logical: c.lf.as_ref(),
                logical_len: sizes.iter().sum(),
                data_crc: Some(SegmentCrc::new(&sizes, chunk)),
                red_read: None,
                red_crc: None,
                red_write: c.red.writer.take(),
            }
        }
        (None, None) => unreachable!("a member is a survivor or lost (asserted above)"),
    };
    ring(ctx, chunk, &tables, &mut io, &mut latched)?;
    let (data_crc, red_write) = (io.data_crc.take(), io.red_write.take());
    let (red_read, red_crc) = (io.red_read.take(), io.red_crc.take());
    drop(io);
    let rebuilt = match (created, &prep) {
        (Some(mut c), _) => {
            c.red.writer = red_write;
            finish_lost(ctx, c, data_crc, &mut latched)
        }
        (None, Some(s)) => {
            if latched.is_none() {
                let checked = s.verify(ctx, data_crc, red_crc, red_read.as_ref());
                latch(&mut latched, checked);
            }
            Rebuilt::default()
        }
        (None, None) => unreachable!("a member is a survivor or lost (asserted above)"),
    };
    ctx.agree_done(latched)?;
    Ok(rebuilt)
}

/// A lost member's files after the ring: checked against the CRC32s its
/// survivors' headers record (never handed back with other bytes), synced,
/// and its redundancy file finished.
fn finish_lost(
    ctx: &Ctx,
    c: Created,
    data_crc: Option<SegmentCrc>,
    latched: &mut Option<ApplyError>,
) -> Rebuilt {
    let mut rebuilt = Rebuilt::default();
    if latched.is_none() {
        let crcs = data_crc
            .expect("a lost member's rebuilt data is checksummed as it lands")
            .finish();
        let checked = check_crcs(ctx, &c.paths, &c.files, crcs).and_then(|crcs| {
            if let Some(lf) = &c.lf {
                sync_logical(ctx, lf)?;
            }
            Ok(crcs)
        });
        if let Some(crcs) = latch(latched, checked) {
            rebuilt.app_files = complete_entries(&c.paths, &c.files, &crcs);
        }
    }
    rebuilt.redundancy_files = finish_red_file(ctx, c.red, latched).into_iter().collect();
    rebuilt
}

/// A survivor's header must describe this set and this member's files.
fn check_own_header(ctx: &Ctx, h: &CodedHeader, mine: &MemberFiles) -> Result<(), ApplyError> {
    let x = &h.xor;
    if x.group_world_ranks != ctx.set.world_ranks || x.current.rank != ctx.world_rank {
        return Err(ctx.inconsistent(Inconsistency::HeaderSet {
            header_rank: x.current.rank,
            header_set: x.group_world_ranks.clone(),
            rank: ctx.world_rank,
            set: ctx.set.world_ranks.clone(),
        }));
    }
    if x.dataset.id != ctx.set.dataset.id {
        return Err(ctx.inconsistent(Inconsistency::HeaderDataset {
            header: x.dataset.id,
            dataset: ctx.set.dataset.id,
        }));
    }
    let recorded: Vec<Option<u64>> = x.current.files.iter().map(|m| m.size_bytes).collect();
    let given: Vec<Option<u64>> = mine.files.iter().map(|f| f.meta.size_bytes).collect();
    if recorded != given {
        return Err(ctx.inconsistent(Inconsistency::HeaderSizes { recorded, given }));
    }
    Ok(())
}

/// The chunk size all surviving headers record (they must agree).
fn common_chunk(ctx: &Ctx, headers: &[Option<CodedHeader>]) -> Result<u64, ApplyError> {
    let mut chunk = None;
    for h in headers.iter().flatten() {
        match chunk {
            None => chunk = Some(h.xor.chunk_bytes),
            Some(first) if first != h.xor.chunk_bytes => {
                return Err(ctx.inconsistent(Inconsistency::ChunkDisagree {
                    first,
                    other: h.xor.chunk_bytes,
                }))
            }
            Some(_) => {}
        }
    }
    // The loss check left at least N − k survivors, each with a header.
    Ok(chunk.expect("a recoverable set has a surviving header"))
}

/// Every member's file list and the set's chunk size, from the survivors'
/// headers: a survivor's own list from CURRENT, a lost member's from the
/// nearest survivor to its right (which lists it among its k PARTNERS).
fn set_metas(
    ctx: &Ctx,
    lost: &[bool],
    headers: &[Option<CodedHeader>],
) -> Result<(Vec<XorMember>, u64), ApplyError> {
    let (n, k) = (ctx.n, ctx.k);
    let chunk = common_chunk(ctx, headers)?;
    let mut out = Vec::with_capacity(n);
    for member in 0..n {
        let expected = ctx.set.world_ranks[member];
        let found = if lost[member] {
            (1..=k).find_map(|d| {
                let h = headers[(member + d) % n].as_ref()?;
                h.partners.get(d - 1).cloned()
            })
        } else {
            headers[member].as_ref().map(|h| h.xor.current.clone())
        };
        let m = found.ok_or_else(|| ctx.inconsistent(Inconsistency::Unlisted { member }))?;
        if m.rank != expected {
            return Err(ctx.inconsistent(Inconsistency::HeaderRank {
                member,
                listed: m.rank,
                expected,
            }));
        }
        out.push(m);
    }
    Ok((out, chunk))
}
