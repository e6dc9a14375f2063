//! Demonstration of SCR's on-disk metadata, built with the library's
//! records: a 4-rank job on 2 simulated nodes writes one checkpoint into its
//! node-local caches (with per-rank and master filemaps in the control
//! directories), then "flushes" it to a prefix directory (dataset directory,
//! summary, rank2file map, index, flush file) and records halt and nodes
//! files. Every file is read back and every data file's CRC32 is checked
//! against its meta data before the demo reports success.
//!
//! This runs in one process without MPI: it shows the formats, not the
//! parallel protocol (the cache tier's demo replaces it when that exists).
//!
//! Usage: `metadata_demo <work-dir>`; prints the tree of files it wrote and
//! the paths to inspect with `scr print`.

use scr::ids::{DatasetId, Rank};
use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use scr::clock::{Clock, SystemClock};
use scr::records::dataset::Dataset;
use scr::records::filemap::{filemap_file_name, Filemap, MasterFilemap, MASTER_FILEMAP_FILE};
use scr::records::flush::{FlushEntry, FlushFile, Location, FLUSH_FILE};
use scr::records::halt::{Halt, HALT_FILE};
use scr::records::index::{index_path, timestamp, Index};
use scr::records::meta::{FileType, Meta};
use scr::records::nodes::{Nodes, NODES_FILE};
use scr::records::rank2file::{Rank2File, Rank2FileEntry, RankFiles};
use scr::records::summary::Summary;
use scr::records::Record;
use scr::storage::dirs::{create_job_dir, create_private_dirs_below, NodeIdentity};
use scr::storage::node::{LogicalPath, NodeStorage};
use testing::data::{file_plan, fill};

const RANKS: u32 = 4;
const NODES: u32 = 2;
const SEED: u64 = 2026;
const DSET: i64 = 1;
const JOBID: &str = "4242";
const USER: &str = "demo";

fn main() -> ExitCode {
    let Some(work) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: metadata_demo <work-dir>");
        return ExitCode::from(2);
    };
    match run(&work) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("metadata_demo: FAILED: {e}");
            ExitCode::from(1)
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn run(work: &Path) -> Res<()> {
    if work.exists() {
        fs::remove_dir_all(work)?;
    }
    let prefix = work.join("prefix");
    fs::create_dir_all(prefix.join(".scr"))?;
    let dataset = Dataset {
        user: Some(USER.into()),
        name: Some("ckpt.1".into()),
        jobid: Some(JOBID.into()),
        ckpt: Some(1),
        complete: Some(true),
        flag_checkpoint: Some(true),
        flag_output: Some(false),
        created_us: Some(SystemClock.unix_secs() * 1_000_000),
        ..Dataset::new(DSET)
    };

    // 1. Each simulated node: a directory tree standing for its local storage.
    let mut rank2file = Rank2File {
        ranks: u64::from(RANKS),
        rank: BTreeMap::new(),
    };
    let (mut total_bytes, mut total_files) = (0u64, 0u64);
    let mut cached: Vec<(i64, PathBuf, Meta)> = Vec::new();
    for node in 0..NODES {
        let root = work.join(format!("node{node}"));
        let id = NodeIdentity {
            name: format!("n{node}"),
            root: Some(root.clone()),
        };
        let shm = id.real(&LogicalPath::new("/dev/shm"));
        fs::create_dir_all(&shm)?;
        let cntl = create_job_dir(&shm, USER, JOBID)?;
        let cache = cntl.clone();
        let dsdir = cache.join(Dataset::default_name(DSET));
        create_private_dirs_below(&cache, &dsdir)?;

        let mut master = MasterFilemap::default();
        for local in 0..RANKS / NODES {
            let rank = node * (RANKS / NODES) + local;
            let plan = file_plan(SEED, rank, 1, 64 * 1024);
            let mut fm = Filemap::new();
            let r = i64::from(rank);
            fm.set_dataset(
                DatasetId(DSET),
                Rank::from_i64(r).expect("a rank"),
                &dataset,
            );
            fm.set_expected_files(
                DatasetId(DSET),
                Rank::from_i64(r).expect("a rank"),
                plan.len() as u64,
            );
            // The filemap is written before the files it lists exist: an
            // entry may outlive its file, never the reverse.
            let fm_path = cntl.join(filemap_file_name(local));
            for f in &plan {
                fm.add_file(
                    DatasetId(DSET),
                    Rank::from_i64(r).expect("a rank"),
                    &dsdir.join(&f.name).to_string_lossy(),
                );
            }
            fm.write_file(&fm_path)?;
            let mut files = RankFiles {
                expected_files: Some(plan.len() as u64),
                ..RankFiles::default()
            };
            for f in &plan {
                let path = dsdir.join(&f.name);
                let mut bytes = vec![0u8; f.size_bytes as usize];
                fill(f.key, 0, &mut bytes);
                fs::write(&path, &bytes)?;
                let meta = Meta {
                    file: Some(path.to_string_lossy().into_owned()),
                    file_type: Some(FileType::Full),
                    complete: Some(true),
                    size_bytes: Some(f.size_bytes),
                    crc32: Some(crc32fast::hash(&bytes)),
                    ckpt: Some(1),
                    ranks: Some(u64::from(RANKS)),
                    orig_name: Some(f.name.clone()),
                    orig_path: Some(prefix.to_string_lossy().into_owned()),
                    ..Meta::default()
                };
                fm.set_meta(
                    DatasetId(DSET),
                    Rank::from_i64(r).expect("a rank"),
                    &path.to_string_lossy(),
                    &meta,
                );
                files.files.insert(
                    f.name.clone(),
                    Rank2FileEntry {
                        size_bytes: Some(f.size_bytes),
                        crc32: meta.crc32,
                        ..Rank2FileEntry::default()
                    },
                );
                total_bytes += f.size_bytes;
                total_files += 1;
                cached.push((r, path, meta));
            }
            fm.write_file(&fm_path)?;
            master.files.insert(fm_path.to_string_lossy().into_owned());
            rank2file.rank.insert(r, files);
        }
        master.write_file(cntl.join(MASTER_FILEMAP_FILE))?;
        println!("node n{node}: control+cache dir {}", cntl.display());
    }

    // 2. The flush: copy every file to the prefix dataset directory and
    //    verify its CRC against the cache-time meta data on the way.
    let dirname = Dataset::default_name(DSET);
    let pdir = prefix.join(&dirname);
    fs::create_dir_all(pdir.join(".scr"))?;
    for (rank, path, meta) in &cached {
        let bytes = fs::read(path)?;
        let crc = crc32fast::hash(&bytes);
        if Some(crc) != meta.crc32 || Some(bytes.len() as u64) != meta.size_bytes {
            return Err(format!(
                "rank {rank}: {} does not match its meta data",
                path.display()
            )
            .into());
        }
        let name = path.file_name().ok_or("file without a name")?;
        fs::write(pdir.join(name), &bytes)?;
    }
    let dataset = Dataset {
        size_bytes: Some(total_bytes),
        files: Some(total_files),
        ..dataset
    };
    rank2file.write_split(&pdir, scr::records::rank2file::MAX_RANK2FILE_BYTES)?;
    Summary::new(dataset.clone(), true)
        .write_file(pdir.join(".scr").join(scr::records::summary::SUMMARY_FILE))?;
    let mut index = Index::default();
    index.set_dataset(DSET, &dirname, dataset.clone(), true);
    index.mark_flushed(DSET, &dirname, timestamp(SystemClock.unix_secs()));
    index.set_current(&dirname);
    index.write_file(index_path(&prefix))?;
    let mut flush = FlushFile::default();
    flush.datasets.insert(
        DSET,
        FlushEntry {
            dir: Some(dirname.clone()),
            name: dataset.name.clone(),
            checkpoint: Some(true),
            output: Some(false),
            dataset: Some(dataset.clone()),
            ..FlushEntry::default()
        },
    );
    flush.location_set(DSET, Location::Cache);
    flush.location_set(DSET, Location::Pfs);
    flush.write_file(prefix.join(".scr").join(FLUSH_FILE))?;
    Halt {
        checkpoints_left: Some(5),
        halt_seconds_s: Some(600),
        ..Halt::default()
    }
    .write_file(prefix.join(".scr").join(HALT_FILE))?;
    Nodes {
        nodes: u64::from(NODES),
    }
    .write_file(prefix.join(".scr").join(NODES_FILE))?;

    // 3. Read everything back through the typed readers.
    let index = Index::read_file(index_path(&prefix))?;
    let (id, dir) = index
        .most_recent_complete(None)
        .ok_or("index lists no complete dataset")?;
    let back = Rank2File::read_split(&prefix.join(dir))?;
    let mut checked = 0;
    for (rank, files) in &back.rank {
        for (name, entry) in &files.files {
            let bytes = fs::read(prefix.join(dir).join(name))?;
            if Some(crc32fast::hash(&bytes)) != entry.crc32 {
                return Err(format!("rank {rank}: {name}: CRC mismatch after flush").into());
            }
            checked += 1;
        }
    }
    println!();
    for line in list_tree(work)? {
        println!("{line}");
    }
    println!();
    println!("inspect with: scr print {}", index_path(&prefix).display());
    println!(
        "metadata demo: dataset {id} ({dir}) of {RANKS} ranks on {NODES} simulated nodes: {checked} files, {total_bytes} bytes, every CRC32 verified"
    );
    Ok(())
}

fn list_tree(root: &Path) -> Res<Vec<String>> {
    fn walk(dir: &Path, depth: usize, out: &mut Vec<String>) -> Res<()> {
        let mut entries: Vec<_> = fs::read_dir(dir)?.collect::<Result<_, _>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let md = e.metadata()?;
            let name = e.file_name().to_string_lossy().into_owned();
            if md.is_dir() {
                out.push(format!("{}{name}/", "  ".repeat(depth)));
                walk(&e.path(), depth + 1, out)?;
            } else {
                out.push(format!("{}{name} ({} bytes)", "  ".repeat(depth), md.len()));
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, 0, &mut out)?;
    Ok(out)
}
