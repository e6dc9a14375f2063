//! `scr`: the command-line tool for SCR's files and directories.
//!
//! Exit codes: 0 success, 1 the operation failed (the message says why),
//! 2 usage error.

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
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("scr: {msg}");
            ExitCode::from(1)
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
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
    }
}
