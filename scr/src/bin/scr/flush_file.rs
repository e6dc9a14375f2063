//! `scr flush-file`: questions about the flush file
//! (`<prefix>/.scr/flush.scr`), SCR's `scr_flush_file`, which the scavenge
//! scripts ask after a run.

use std::path::PathBuf;

use clap::ArgGroup;
use scr::exit::Code;
use scr::records::flush::{FlushFile, Location, FLUSH_FILE};
use scr::records::Record;

use super::CliError;

/// Options of `scr flush-file` (those of `scr_flush_file`, SCR 1.x and 3.x).
#[derive(clap::Args, Debug)]
#[command(
    group(ArgGroup::new("query").required(true).args([
        "latest", "needflush", "location", "subdir", "name", "list_output", "list_ckpt"
    ])),
    after_help = scr::exit::help_for(
        "SUCCESS: yes / found (for --needflush: the dataset is recorded and not yet on \
the parallel file system, so it needs a flush or a scavenge). NO: no / not found; \
nothing is printed.",
        &[Code::Success, Code::No, Code::Usage, Code::Absent, Code::Damaged, Code::Failed],
    )
)]
pub struct FlushFileArgs {
    /// Print the id of the newest dataset in the flush file.
    #[arg(short, long)]
    latest: bool,
    /// Exit 0 (SUCCESS) if dataset ID still needs to be flushed (it is
    /// recorded without the PFS location), 1 (NO) otherwise.
    #[arg(short = 'n', long, alias = "need-flush", value_name = "ID",
          value_parser = clap::value_parser!(i64).range(1..))]
    needflush: Option<i64>,
    /// Print where dataset ID is: CACHE, PFS, FLUSHING, SYNC_FLUSHING (one
    /// per line), or NONE.
    #[arg(short = 'L', long, value_name = "ID", value_parser = clap::value_parser!(i64).range(1..))]
    location: Option<i64>,
    /// Print the directory, relative to the prefix, dataset ID is flushed to.
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(i64).range(1..))]
    subdir: Option<i64>,
    /// Print the name of dataset ID.
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(i64).range(1..))]
    name: Option<i64>,
    /// Print the ids of output datasets, ascending, on one line.
    #[arg(short = 'o', long)]
    list_output: bool,
    /// Print the ids of checkpoints, descending, on one line.
    #[arg(long)]
    list_ckpt: bool,
    /// With --list-output/--list-ckpt: only ids below ID.
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(i64).range(1..))]
    before: Option<i64>,
    /// The prefix directory (or give it as the argument).
    #[arg(short, long, value_name = "PREFIX")]
    dir: Option<PathBuf>,
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
    /// The prefix directory (default: $SCR_PREFIX, else the current directory).
    #[arg(value_name = "PREFIX", conflicts_with = "dir")]
    prefix: Option<PathBuf>,
}

/// A "no" answer: exit NO, nothing on stderr.
fn no() -> CliError {
    CliError::No
}

/// Run `scr flush-file`.
pub fn run(a: FlushFileArgs) -> Result<(), CliError> {
    if a.before.is_some() && !a.list_output && !a.list_ckpt {
        return Err(CliError::Usage(
            "--before filters --list-output or --list-ckpt only".into(),
        ));
    }
    let given: Vec<PathBuf> = a.dir.iter().chain(a.prefix.iter()).cloned().collect();
    let prefix = super::halt_cmd::prefixes(&given).remove(0);
    let path = prefix.join(".scr").join(FLUSH_FILE);
    let f = match FlushFile::read_file_in(&prefix, &path) {
        Ok(f) => f,
        Err(e) if e.is_not_found() => return Err(CliError::NoFlushFile { path }),
        Err(e) => return Err(e.into()),
    };
    let print = |text: String, json: serde_json::Value| {
        if a.json {
            println!("{json}");
        } else {
            println!("{text}");
        }
    };
    if a.latest {
        let id = f.latest().ok_or_else(no)?;
        print(id.to_string(), serde_json::json!({ "latest": id }));
    } else if let Some(id) = a.needflush {
        let e = f.datasets.get(&id).ok_or_else(no)?;
        let need = !e.locations.contains(&Location::Pfs);
        if a.json {
            println!("{}", serde_json::json!({ "id": id, "need_flush": need }));
        }
        if !need {
            return Err(no());
        }
    } else if let Some(id) = a.location {
        let e = f.datasets.get(&id).ok_or_else(no)?;
        let locs: Vec<&str> = e.locations.iter().map(|l| l.as_str()).collect();
        let text = if locs.is_empty() {
            "NONE".to_string()
        } else {
            locs.join("\n")
        };
        print(text, serde_json::json!({ "id": id, "locations": locs }));
    } else if let Some(id) = a.subdir {
        let dir = f
            .datasets
            .get(&id)
            .and_then(|e| e.dir.clone())
            .ok_or_else(no)?;
        print(dir.clone(), serde_json::json!({ "id": id, "dir": dir }));
    } else if let Some(id) = a.name {
        let name = f
            .datasets
            .get(&id)
            .and_then(|e| e.name.clone())
            .ok_or_else(no)?;
        print(name.clone(), serde_json::json!({ "id": id, "name": name }));
    } else {
        let below = |id: &i64| a.before.is_none_or(|b| *id < b);
        let mut ids: Vec<i64> = f
            .datasets
            .iter()
            .filter(|(id, e)| {
                below(id)
                    && if a.list_output {
                        e.output == Some(true)
                    } else {
                        e.checkpoint == Some(true)
                    }
            })
            .map(|(id, _)| *id)
            .collect();
        if a.list_ckpt {
            ids.reverse();
        }
        if ids.is_empty() {
            return Err(no());
        }
        let text: Vec<String> = ids.iter().map(i64::to_string).collect();
        print(text.join(" "), serde_json::json!({ "ids": ids }));
    }
    Ok(())
}
