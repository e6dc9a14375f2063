//! The server log database (`SCR_LOG_DB_HOST`): the same tables, entries
//! and versioned migrations as the embedded SQLite log ([`super::db`]), on a
//! PostgreSQL server that a site runs to collect every job in one place.
//!
//! LLNL's SCR writes to MySQL, which `SCR_LOG_DB_HOST=mysql://…` reaches
//! ([`super::mysql`]); any other host is a PostgreSQL server, spoken to in
//! pure Rust (no client library to install). The settings are SCR's:
//! - `SCR_LOG_DB_HOST`: `host`, `host:port`, `[v6addr]:port`, a socket
//!   directory (`/run/postgresql`), or a `postgresql://` URL. Another
//!   scheme reaching this parser is refused with a clear error, never sent
//!   to the wrong server.
//! - `SCR_LOG_DB_NAME`: the database (default `scr`), `SCR_LOG_DB_USER`
//!   (default the job's user), `SCR_LOG_DB_PASS`.
//!
//! Every wait is bounded: connecting gives up after [`CONNECT_TIMEOUT`],
//! each statement after [`STATEMENT_TIMEOUT`] (server-side
//! `statement_timeout`, and TCP keepalives for a server that vanished). As
//! with SQLite, the writer warns once and the job goes on.
//!
//! This module only connects: [`PgStore`] is the [`Store`] through which
//! the shared schema ([`super::migrate`]), sink ([`super::database`]) and
//! mapping ([`super::row`]) reach the server.
//!
//! Concurrency: migrations run under a transaction-scoped advisory lock, so
//! processes opening a new database at once apply each exactly once; an
//! entry's transaction takes an advisory lock on its job, so a library
//! `START` adopts the run loop's run row exactly once.

use std::path::{Path, PathBuf};
use std::time::Duration;

use postgres::config::Host;
use postgres::types::ToSql;
use postgres::{Client, NoTls};

use super::database::{read_all, DbLog};
use super::event::Record;
use super::store::{Col, DbError, DbSettings, Dialect, Store, Value, READ_TIMEOUT};

/// Connecting gives up after this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The server cancels a statement that runs longer.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Default database name (`SCR_LOG_DB_NAME` unset), as in SCR.
pub const DEFAULT_DB_NAME: &str = "scr";

/// Default port.
pub const DEFAULT_PORT: u16 = 5432;

/// Where the server is and who we are to it. `Debug` never shows the
/// password.
#[derive(Clone)]
pub struct ServerSettings {
    config: postgres::Config,
    shown: String,
}

impl std::fmt::Debug for ServerSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSettings")
            .field("server", &self.shown)
            .finish()
    }
}

/// True when `s` names a server URL rather than a file (`scr interval
/// --db`).
/// Whether `s` names a log database server rather than an SQLite file: a
/// PostgreSQL URL, or a libpq keyword string (`host=h password=p ...`),
/// which is never taken for a file name (nor echoed with its password).
pub fn is_server(s: &str) -> bool {
    is_server_url(s) || crate::config::secret::looks_like_conninfo(s)
}

/// Whether `s` is a PostgreSQL URL (`postgresql://` or `postgres://`).
pub fn is_server_url(s: &str) -> bool {
    let l = s.to_ascii_lowercase();
    l.starts_with("postgresql://") || l.starts_with("postgres://")
}

fn bad_host(host: &str, why: impl Into<String>) -> DbError {
    DbError::BadServer {
        host: redact(host),
        why: why.into(),
    }
}

/// `host` for messages: its password (URL or libpq string) masked.
fn redact(host: &str) -> String {
    crate::config::secret::redact(host)
}

impl ServerSettings {
    /// From SCR_LOG_DB_HOST and the name, user and password settings;
    /// `default_user` (the job's user) when no user is given anywhere.
    pub fn parse(
        host: &str,
        name: Option<&str>,
        user: Option<&str>,
        pass: Option<&str>,
        default_user: Option<&str>,
    ) -> Result<ServerSettings, DbError> {
        let host = host.trim();
        let mut config = if crate::config::secret::looks_like_conninfo(host) {
            host.parse::<postgres::Config>()
                .map_err(|e| bad_host(host, format!("not a PostgreSQL connection string: {e}")))?
        } else if let Some((scheme, _)) = host.split_once("://") {
            if !is_server_url(host) {
                return Err(bad_host(
                    host,
                    format!(
                        "a {scheme}:// URL is not a PostgreSQL server (postgresql://...; MySQL/MariaDB: mysql://...)"
                    ),
                ));
            }
            host.parse::<postgres::Config>()
                .map_err(|e| bad_host(host, format!("not a PostgreSQL URL: {e}")))?
        } else {
            let mut c = postgres::Config::new();
            if host.is_empty() {
                return Err(bad_host(host, "empty host"));
            }
            if host.starts_with('/') {
                c.host_path(host);
            } else {
                let (h, port) = split_host_port(host)?;
                c.host(h);
                if let Some(p) = port {
                    c.port(p);
                }
            }
            c
        };
        if config.get_ports().is_empty() {
            config.port(DEFAULT_PORT);
        }
        if config.get_dbname().is_none() || name.is_some() {
            config.dbname(name.unwrap_or(DEFAULT_DB_NAME));
        }
        if let Some(u) = user {
            config.user(u);
        } else if config.get_user().is_none() {
            match default_user {
                Some(u) => config.user(u),
                None => {
                    return Err(bad_host(
                        host,
                        "no user: set SCR_LOG_DB_USER (or SCR_USER_NAME)",
                    ))
                }
            };
        }
        if let Some(p) = pass {
            config.password(p);
        }
        config
            .connect_timeout(CONNECT_TIMEOUT)
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(30))
            .application_name("scr")
            .options(&format!(
                "-c statement_timeout={}",
                STATEMENT_TIMEOUT.as_millis()
            ));
        let shown = show(&config);
        Ok(ServerSettings { config, shown })
    }

    /// From the database log settings (which must name a host).
    pub fn from_db_settings(s: &DbSettings) -> Result<ServerSettings, DbError> {
        let host = s
            .host
            .as_deref()
            .ok_or_else(|| bad_host("", "SCR_LOG_DB_HOST is not set"))?;
        ServerSettings::parse(
            host,
            s.name.as_deref(),
            s.user.as_deref(),
            s.pass.as_ref().map(|p| p.expose()),
            s.username.as_deref(),
        )
    }

    /// `postgresql://user@host:port/dbname` (no password): for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn err(&self, what: &'static str) -> impl FnOnce(postgres::Error) -> DbError + '_ {
        move |source| DbError::Server {
            server: self.shown.clone(),
            what,
            source: Box::new(source),
        }
    }

    /// Connect, within [`CONNECT_TIMEOUT`].
    pub fn connect(&self) -> Result<Client, DbError> {
        self.config.connect(NoTls).map_err(self.err("connecting"))
    }

    fn as_path(&self) -> PathBuf {
        PathBuf::from(&self.shown)
    }
}

fn split_host_port(host: &str) -> Result<(&str, Option<u16>), DbError> {
    let port = |p: &str| {
        p.parse::<u16>()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad_host(host, format!("port {p:?} is not a number from 1 to 65535")))
    };
    if let Some(rest) = host.strip_prefix('[') {
        let (h, after) = rest
            .split_once(']')
            .ok_or_else(|| bad_host(host, "missing ']' after an IPv6 address"))?;
        return match after.strip_prefix(':') {
            Some(p) => Ok((h, Some(port(p)?))),
            None if after.is_empty() => Ok((h, None)),
            None => Err(bad_host(host, format!("unexpected {after:?} after ']'"))),
        };
    }
    match host.matches(':').count() {
        0 => Ok((host, None)),
        1 => {
            let (h, p) = host.split_once(':').unwrap_or((host, ""));
            Ok((h, Some(port(p)?)))
        }
        // A bare IPv6 address.
        _ => Ok((host, None)),
    }
}

fn show(c: &postgres::Config) -> String {
    let host = c
        .get_hosts()
        .iter()
        .map(|h| match h {
            Host::Tcp(h) if h.contains(':') => format!("[{h}]"),
            Host::Tcp(h) => h.clone(),
            Host::Unix(p) => p.display().to_string(),
        })
        .collect::<Vec<_>>()
        .join(",");
    let port = c
        .get_ports()
        .first()
        .map_or(String::new(), |p| format!(":{p}"));
    let user = c.get_user().map_or(String::new(), |u| format!("{u}@"));
    format!(
        "postgresql://{user}{host}{port}/{}",
        c.get_dbname().unwrap_or(DEFAULT_DB_NAME)
    )
}

/// The PostgreSQL database log of one job on one process.
pub type ServerLog = DbLog<PgStore>;

/// A connection to the log database on a server.
pub struct PgStore {
    client: Client,
    settings: ServerSettings,
    path: PathBuf,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("server", &self.settings.shown)
            .finish()
    }
}

impl PgStore {
    /// Connect, within [`CONNECT_TIMEOUT`].
    pub fn connect(settings: &ServerSettings) -> Result<PgStore, DbError> {
        Ok(PgStore {
            client: settings.connect()?,
            settings: settings.clone(),
            path: settings.as_path(),
        })
    }
}

/// The parameters as the client takes them: each value boxed as the Rust
/// type of its column (`BIGINT` i64, `DOUBLE PRECISION` f64, `TEXT`), NULL
/// as `None`.
fn boxed(params: &[Value]) -> Vec<Box<dyn ToSql + Sync>> {
    params
        .iter()
        .map(|v| -> Box<dyn ToSql + Sync> {
            match v {
                Value::Int(v) => Box::new(*v),
                Value::Real(v) => Box::new(*v),
                Value::Text(v) => Box::new(v.clone()),
            }
        })
        .collect()
}

fn read(row: &postgres::Row, cols: &[Col]) -> Result<Vec<Value>, postgres::Error> {
    cols.iter()
        .enumerate()
        .map(|(i, c)| {
            Ok(match c {
                Col::Int => Value::Int(row.try_get(i)?),
                Col::Real => Value::Real(row.try_get(i)?),
                Col::Text => Value::Text(row.try_get(i)?),
            })
        })
        .collect()
}

impl Store for PgStore {
    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    fn location(&self) -> &Path {
        &self.path
    }

    fn batch(&mut self, sql: &str, what: &'static str) -> Result<(), DbError> {
        let sql = Dialect::Postgres.render(sql);
        self.client
            .batch_execute(&sql)
            .map_err(self.settings.err(what))
    }

    fn execute(&mut self, sql: &str, params: &[Value], what: &'static str) -> Result<(), DbError> {
        let sql = Dialect::Postgres.render(sql);
        let params = boxed(params);
        let refs: Vec<&(dyn ToSql + Sync)> = params.iter().map(|p| p.as_ref()).collect();
        self.client
            .execute(sql.as_str(), &refs)
            .map(drop)
            .map_err(self.settings.err(what))
    }

    /// The rows as the server sends them (`query_raw`): one row in memory
    /// at a time, however many the table holds.
    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
        each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        use postgres::fallible_iterator::FallibleIterator;
        let sql = Dialect::Postgres.render(sql);
        let params = boxed(params);
        let refs = params.iter().map(|p| p.as_ref() as &(dyn ToSql + Sync));
        let mut rows = self
            .client
            .query_raw(sql.as_str(), refs)
            .map_err(self.settings.err(what))?;
        while let Some(row) = rows.next().map_err(self.settings.err(what))? {
            each(read(&row, cols).map_err(self.settings.err(what))?)?;
        }
        Ok(())
    }
}

impl DbLog<PgStore> {
    /// Connect to the server `settings` name, migrate, and find or add this
    /// job's row.
    pub fn open(settings: &DbSettings, prefix: &Path, jobid: &str) -> Result<ServerLog, DbError> {
        let server = ServerSettings::from_db_settings(settings)?;
        DbLog::open_on(PgStore::connect(&server)?, settings, prefix, jobid)
    }
}

impl PgStore {
    /// Connect to read a whole log back: a statement may take
    /// [`READ_TIMEOUT`] instead of a writer's [`STATEMENT_TIMEOUT`].
    pub fn connect_reader(settings: &ServerSettings) -> Result<PgStore, DbError> {
        let mut s = PgStore::connect(settings)?;
        s.batch(
            &format!("SET statement_timeout = {}", READ_TIMEOUT.as_millis()),
            "setting the reader's statement timeout",
        )?;
        Ok(s)
    }
}

/// Every entry on the server as log records, in time order (events before
/// transfers at equal times), as [`super::db::read_records`] reads a file.
/// Under a writer's bounds: this is what a job reads (the adaptive
/// policy's history), and a job does not wait minutes for it.
pub fn read_records(server: &ServerSettings) -> Result<Vec<Record>, DbError> {
    read_all(&mut PgStore::connect(server)?)
}

/// [`read_records`] handing each record to `each` as the server's rows
/// arrive (never all of them in memory): what a tool reads (`scr interval
/// --db`), a statement bounded by [`READ_TIMEOUT`].
pub fn each_record(server: &ServerSettings, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    super::database::each_record(&mut PgStore::connect_reader(server)?, each)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(host: &str) -> Result<ServerSettings, DbError> {
        ServerSettings::parse(host, None, None, None, Some("alice"))
    }

    #[test]
    fn host_forms() {
        assert_eq!(
            parse("db1").unwrap().shown(),
            "postgresql://alice@db1:5432/scr"
        );
        assert_eq!(
            parse("db1:6543").unwrap().shown(),
            "postgresql://alice@db1:6543/scr"
        );
        assert_eq!(
            parse("[::1]:6543").unwrap().shown(),
            "postgresql://alice@[::1]:6543/scr"
        );
        assert_eq!(
            parse("/run/postgresql").unwrap().shown(),
            "postgresql://alice@/run/postgresql:5432/scr"
        );
        let s = ServerSettings::parse(
            "postgresql://bob:secret@h:7/logs",
            None,
            None,
            None,
            Some("alice"),
        )
        .unwrap();
        assert_eq!(s.shown(), "postgresql://bob@h:7/logs");
        assert!(!format!("{s:?}").contains("secret"));
        let s = ServerSettings::parse("h", Some("site"), Some("carol"), Some("pw"), None).unwrap();
        assert_eq!(s.shown(), "postgresql://carol@h:5432/site");
        assert!(!format!("{s:?}").contains("pw"));
    }

    #[test]
    fn bad_hosts_are_named() {
        for (h, want) in [
            ("mysql://db/scr", "mysql:// URL is not a PostgreSQL server"),
            ("http://db/scr", "http:// URL is not a PostgreSQL server"),
            ("db:0", "port \"0\""),
            ("db:http", "port \"http\""),
            ("[::1", "missing ']'"),
            ("", "empty host"),
        ] {
            let e = parse(h).unwrap_err().to_string();
            assert!(e.contains(want), "{h}: {e}");
        }
        let e = ServerSettings::parse("db", None, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("SCR_LOG_DB_USER"), "{e}");
        // A URL that does not parse is named without its password.
        for h in [
            "postgresql://bob:s3cret@h:99999/db",
            "postgresql://bob@h:99999/db?password=s3cret&sslmode=x",
            "mysql://bob:s3cret@h/db",
        ] {
            let e = parse(h).unwrap_err().to_string();
            assert!(!e.contains("s3cret"), "{e}");
            assert!(e.contains("***") && e.contains("bob"), "{e}");
        }
        assert!(is_server_url("PostgreSQL://x/y"));
        assert!(!is_server_url("/tmp/log.db"));
    }
}
