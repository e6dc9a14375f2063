//! `scr`: the command-line tool for SCR's files and directories.
//!
//! Exit codes: 0 success, 1 the operation failed (the message says why;
//! for configuration errors it names the file and line), 2 usage error.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Inspect and manage SCR checkpoint metadata.
#[derive(Parser)]
#[command(name = "scr", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print a kvtree file (filemap, index, summary, halt, ...) in the
    /// developer guide's indented form, like scr_print_hash_file.
    Print {
        /// The file to print.
        file: PathBuf,
        /// Print as JSON (keys map to objects) instead of the indented form.
        #[arg(long)]
        json: bool,
    },
    /// Print the effective SCR configuration: every parameter, its value and
    /// where it came from (environment, user file:line, SCR_Config via
    /// <prefix>/.scr/app.conf, system file:line, default), then the group,
    /// store and redundancy descriptors. Reads the same sources as a job
    /// started from this environment. Warnings go to stderr.
    ///
    /// Exit codes: 0 printed; 1 a configuration error (the message names the
    /// file and line) or KEY has no value; 2 usage error.
    Config {
        /// Print only this parameter's value, or a descriptor sub-value in
        /// SCR_Config query form ("CKPT=0 TYPE").
        key: Option<String>,
        /// Print JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
}

/// A failure with its exit code.
struct Failure {
    code: u8,
    message: String,
}

impl From<String> for Failure {
    fn from(message: String) -> Self {
        Failure { code: 1, message }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("scr: {}", f.message);
            ExitCode::from(f.code)
        }
    }
}

fn run(cli: Cli) -> Result<(), Failure> {
    match cli.command {
        Command::Print { file, json } => {
            let tree = scr::kvtree::file::read(&file).map_err(|e| e.to_string())?;
            if json {
                println!("{}", scr::kvtree::print::to_json(&tree));
            } else {
                print!("{}", scr::kvtree::print::to_indented(&tree, 2));
            }
            Ok(())
        }
        Command::Config { key, json } => config(key.as_deref(), json),
    }
}

fn config(key: Option<&str>, json: bool) -> Result<(), Failure> {
    use scr::config::{report::Report, Config, LoadOptions, ProcessEnv};
    if let Some(k) = key {
        // Only queries: the last item must be a bare name ("SCR_FLUSH", "CKPT=0 TYPE").
        if k.split_whitespace()
            .last()
            .is_none_or(|item| item.contains('='))
        {
            return Err(Failure {
                code: 2,
                message: format!(
                    "scr config only queries: give a name like SCR_FLUSH or \"CKPT=0 TYPE\", not {k:?}"
                ),
            });
        }
    }
    let opts = LoadOptions {
        system_file: None,
        read_app_conf: true,
    };
    let mut cfg = Config::load(&ProcessEnv, &opts).map_err(|e| e.to_string())?;
    for w in cfg.warnings() {
        eprintln!("scr: warning: {w}");
    }
    match key {
        Some(k) => match cfg.apply_scr_config(k).map_err(|e| e.to_string())? {
            Some(v) if json => println!("{}", serde_json::json!({ "name": k, "value": v })),
            Some(v) => println!("{v}"),
            None => return Err(format!("{k} is not set").into()),
        },
        None => {
            let report = Report::new(&cfg).map_err(|e| e.to_string())?;
            if json {
                println!("{}", report.to_json());
            } else {
                print!("{}", report.to_table());
            }
        }
    }
    Ok(())
}
