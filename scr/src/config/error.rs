//! Errors, warnings and where a setting came from.

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// Where an effective parameter value came from (what `scr config` prints).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Source {
    /// An environment variable of the same name.
    Env,
    /// A line of the user config file (`SCR_CONF_FILE` or `<prefix>/.scrconf`).
    UserFile {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u32,
    },
    /// A call to SCR_Config (or `<prefix>/.scr/app.conf`, where SCR persists them).
    ScrConfig,
    /// A line of the system config file (`SCR_CONFIG_FILE` or `/etc/scr/scr.conf`).
    SystemFile {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: u32,
    },
    /// The built-in default of the parameter table.
    Default,
    /// A default computed from the environment at load time (rank 0's).
    Derived {
        /// What it was computed from, e.g. `$USER` or `current directory`.
        from: String,
    },
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Env => write!(f, "environment"),
            Source::UserFile { path, line } => write!(f, "user file {}:{line}", path.display()),
            Source::ScrConfig => write!(f, "SCR_Config"),
            Source::SystemFile { path, line } => write!(f, "system file {}:{line}", path.display()),
            Source::Default => write!(f, "default"),
            Source::Derived { from } => write!(f, "default from {from}"),
        }
    }
}

/// Where a piece of configuration text was read, for error messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Location {
    /// A config file, line and column (both 1-based; column 0 = whole line).
    File {
        /// The file.
        path: PathBuf,
        /// Line number.
        line: u32,
        /// Column (characters), or 0 when the whole line is meant.
        column: u32,
    },
    /// An environment variable.
    Env {
        /// Its name.
        name: String,
    },
    /// The argument of an SCR_Config call.
    ScrConfig {
        /// The string passed.
        text: String,
    },
    /// A built-in default of the parameter table.
    Builtin {
        /// The parameter.
        name: String,
    },
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::File {
                path,
                line,
                column: 0,
            } => write!(f, "{}:{line}", path.display()),
            Location::File { path, line, column } => {
                write!(f, "{}:{line}:{column}", path.display())
            }
            Location::Env { name } => write!(f, "environment variable {name}"),
            Location::ScrConfig { text } => write!(f, "SCR_Config({text:?})"),
            Location::Builtin { name } => write!(f, "built-in default of {name}"),
        }
    }
}

impl Location {
    /// The location of a value that came from `source` (for typed getters).
    pub fn of(name: &str, value: &str, source: &Source) -> Location {
        match source {
            Source::Env => Location::Env {
                name: name.to_string(),
            },
            Source::UserFile { path, line } | Source::SystemFile { path, line } => Location::File {
                path: path.clone(),
                line: *line,
                column: 0,
            },
            Source::ScrConfig => Location::ScrConfig {
                text: format!("{name}={value}"),
            },
            Source::Default | Source::Derived { .. } => Location::Builtin {
                name: name.to_string(),
            },
        }
    }

    /// The same location at another column (files only).
    pub(crate) fn at_column(&self, col: u32) -> Location {
        match self {
            Location::File { path, line, .. } => Location::File {
                path: path.clone(),
                line: *line,
                column: col,
            },
            other => other.clone(),
        }
    }
}

/// Why configuration could not be read, changed or queried. A configuration
/// that returned one of these is unchanged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ConfigError {
    /// A config file exists but could not be read.
    #[error("cannot read config file {path}: {message}; fix its permissions or point SCR_CONF_FILE/SCR_CONFIG_FILE elsewhere")]
    Io {
        /// The file.
        path: PathBuf,
        /// The operating system's message.
        message: String,
    },
    /// A config file larger than any configuration (a wrong path): not read.
    #[error("config file {path} is larger than the {limit}-byte limit for config files: not read (check that SCR_CONF_FILE/SCR_CONFIG_FILE name a config file)")]
    TooLarge {
        /// The file.
        path: PathBuf,
        /// The limit.
        limit: u64,
    },
    /// A file the library writes (`<prefix>/.scr/app.conf`) whose contents
    /// are damaged: bad CRC32, truncated, not a kvtree file.
    #[error("{path} is damaged: {message}; remove it (SCR_Config writes it again) or restore a good copy")]
    Damaged {
        /// The file.
        path: PathBuf,
        /// What is wrong (with the offset).
        message: String,
    },
    /// A line that is not `KEY=VALUE` (or a descriptor line).
    #[error("{at}: {message}")]
    Syntax {
        /// Where.
        at: Location,
        /// What is wrong and how to write it instead.
        message: String,
    },
    /// A quote opened and never closed.
    #[error("{at}: unterminated {quote} quote; close it on the same line")]
    UnterminatedQuote {
        /// Where the quote opened.
        at: Location,
        /// The quote character.
        quote: char,
    },
    /// `$VAR` or `${VAR}` names a variable that is not set.
    #[error("{at}: variable ${name} is not set; set it or write the value literally")]
    UndefinedVariable {
        /// Where.
        at: Location,
        /// The variable.
        name: String,
    },
    /// A value of the wrong type (a number, 0/1, a byte count, a word from a list).
    #[error("{at}: {key}={value:?} is not {expected}")]
    BadValue {
        /// Where.
        at: Location,
        /// The key.
        key: String,
        /// The value given.
        value: String,
        /// What is accepted.
        expected: String,
    },
    /// A value that becomes one component of a directory path (a user
    /// name, a job id) but could leave or alias its parent: `/`, `.`, `..`,
    /// empty, a NUL byte or a control character.
    #[error("{at}: {key}={value:?} cannot name a directory: {why}; use a plain name")]
    BadPathComponent {
        /// Where.
        at: Location,
        /// The parameter.
        key: String,
        /// The value given.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A key a descriptor line does not know.
    #[error("{at}: {descriptor} descriptors have no key {key}; allowed keys: {allowed}")]
    UnknownDescriptorKey {
        /// Where.
        at: Location,
        /// `STORE` or `CKPT`.
        descriptor: String,
        /// The unknown key.
        key: String,
        /// The allowed keys, comma separated.
        allowed: String,
    },
    /// `TYPE=` names no redundancy scheme.
    #[error("{at}: unknown redundancy TYPE {value:?}; use SINGLE, PARTNER, XOR or RS")]
    UnknownCopyType {
        /// Where.
        at: Location,
        /// The value given.
        value: String,
    },
    /// The same descriptor (CKPT index, STORE path, GROUPS host) twice in one file.
    #[error("{at}: {descriptor}={name} is defined twice (first at line {first_line}); merge the two lines")]
    DuplicateDescriptor {
        /// The second definition.
        at: Location,
        /// `CKPT`, `STORE` or `GROUPS`.
        descriptor: String,
        /// The index, path or host.
        name: String,
        /// Line of the first definition.
        first_line: u32,
    },
    /// CKPT indices must run 0, 1, 2, ... without gaps.
    #[error("{at}: CKPT indices must be numbered 0, 1, 2, ...; index {expected} is missing")]
    CkptNotSequential {
        /// Where the descriptors were defined.
        at: String,
        /// The first missing index.
        expected: u32,
    },
    /// CKPT descriptors exist but none has INTERVAL=1, so some checkpoints have no scheme.
    #[error("{at}: no CKPT descriptor has INTERVAL=1; give one (usually CKPT=0) INTERVAL=1")]
    NoIntervalOne {
        /// Where the descriptors were defined.
        at: String,
    },
    /// SCR_COPY_TYPE=FILE but no CKPT lines anywhere.
    #[error("SCR_COPY_TYPE=FILE ({source_}) but no CKPT descriptor is defined; add CKPT lines or choose a scheme")]
    NoCkptDescriptors {
        /// Where SCR_COPY_TYPE=FILE came from.
        source_: Source,
    },
    /// A CKPT or STORE descriptor names a group or store that does not exist.
    #[error("{at}: {key}={value:?} names no defined {what}; define it or use one of: {known}")]
    UnknownReference {
        /// Where.
        at: Location,
        /// `GROUP` or `STORE`.
        key: String,
        /// The name given.
        value: String,
        /// `group` or `store`.
        what: String,
        /// The names that exist.
        known: String,
    },
    /// SCR_Config may not set or unset this parameter.
    #[error("SCR_Config cannot change {key}; set it in the system or user config file or the environment")]
    Refused {
        /// The parameter.
        key: String,
    },
    /// SCR_Config set or unset after SCR_Init.
    #[error("SCR_Config({text:?}) after SCR_Init: parameters can only be changed before SCR_Init")]
    AfterInit {
        /// The string passed.
        text: String,
    },
    /// A serialised configuration (a broadcast, `app.conf`) does not decode.
    #[error("configuration record is damaged: {message}")]
    Serialized {
        /// What is wrong.
        message: String,
    },
    /// The collective load's broadcast failed.
    #[error("broadcasting the configuration failed: {message}")]
    Comm {
        /// The communicator's message.
        message: String,
    },
}

/// Something ignored while loading, reported but not fatal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ConfigWarning {
    /// A parameter users may not set was set in the environment or the user file.
    NotUserSettable {
        /// The parameter.
        name: String,
        /// Where the ignored setting was.
        source: Source,
    },
    /// A name no table row has (kept: scripts use their own; maybe a typo).
    UnknownParameter {
        /// The name.
        name: String,
        /// Where it was set.
        source: Source,
    },
    /// `SCR_CONF_FILE` names a file that does not exist: no user config
    /// file is read (SCR ignores this silently).
    MissingUserFile {
        /// The path `SCR_CONF_FILE` gives.
        path: PathBuf,
    },
    /// A table parameter this library does not implement, set to something
    /// other than its no-op default ([`super::refused::REFUSED`]): it has
    /// no effect.
    NotSupported {
        /// The parameter.
        name: String,
        /// The value refused.
        value: String,
        /// Where it was set.
        source: Source,
        /// What is missing.
        why: String,
    },
}

impl fmt::Display for ConfigWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigWarning::NotUserSettable { name, source } => write!(
                f,
                "ignoring {name} from {source}: users may not set it; ask the administrator to change the system config file"
            ),
            ConfigWarning::UnknownParameter { name, source } => {
                write!(f, "unknown parameter {name} ({source}); check its spelling")
            }
            ConfigWarning::MissingUserFile { path } => write!(
                f,
                "SCR_CONF_FILE={}: no such file; no user config file is read",
                path.display()
            ),
            ConfigWarning::NotSupported {
                name,
                value,
                source,
                why,
            } => write!(
                f,
                "not supported: {name}={value} ({source}) has no effect in the library: {why}"
            ),
        }
    }
}
