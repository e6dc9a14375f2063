//! The MySQL/MariaDB log database: `SCR_LOG_DB_HOST=mysql://…` (or
//! `mariadb://…`), the server LLNL's SCR logs to, with the same tables,
//! entries and versioned migrations as the SQLite file ([`super::db`]) and
//! the PostgreSQL server ([`super::server`]).
//!
//! The settings are SCR's: `SCR_LOG_DB_HOST` is a URL,
//! `mysql://[user[:password]@]host[:port][/database][?socket=/path]`
//! (a bare host name stays PostgreSQL's, as it was before this server was
//! supported); `SCR_LOG_DB_NAME` (default `scr`), `SCR_LOG_DB_USER`
//! (default the job's user) and `SCR_LOG_DB_PASS` override what the URL
//! says.
//!
//! Every wait is bounded: connecting gives up after [`CONNECT_TIMEOUT`],
//! each read or write of the connection after [`IO_TIMEOUT`], a row lock
//! after 10 s (`innodb_lock_wait_timeout`), and the job's named lock after
//! [`super::store::LOCK_WAIT_S`]. As with the other databases, the writer
//! warns once and the job goes on.
//!
//! What MySQL does differently, and how the shared code meets it: DDL
//! commits by itself, so a migration is serialised by a named lock and its
//! statements may run again (`CREATE TABLE IF NOT EXISTS`, an index that
//! exists is taken as made); `||` is string concatenation only with
//! `PIPES_AS_CONCAT`, set for the session; a job's id and prefix are
//! binary strings (`VARBINARY`), so they compare byte for byte as in SQLite
//! and PostgreSQL, and the other text is `utf8mb4_bin`; placeholders are
//! positional, so `?N` is rewritten ([`positional`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, Opts, OptsBuilder};

use super::database::DbLog;
use super::event::Record;
use super::scr31::{self, Scr31Log};
use super::sink::LogSink;
pub use super::store::is_mysql_url;
use super::store::{Col, DbError, DbSettings, Dialect, Store, Value, READ_TIMEOUT};

/// Connecting gives up after this long.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A read or write of the connection gives up after this long (longer
/// than the waits for locks, which end first with their own error).
pub const IO_TIMEOUT: Duration = Duration::from_secs(30);

/// Default database name (`SCR_LOG_DB_NAME` unset), as in SCR.
pub const DEFAULT_DB_NAME: &str = "scr";

/// Default port.
pub const DEFAULT_PORT: u16 = 3306;

/// What every connection sets first: `||` concatenates (the reader's job
/// id of a job logged under several prefixes), values too long for their
/// column are errors, and a row lock is waited for 10 s at most.
const SESSION: [&str; 2] = [
    "SET SESSION sql_mode = CONCAT(@@sql_mode, ',PIPES_AS_CONCAT,STRICT_TRANS_TABLES')",
    "SET SESSION innodb_lock_wait_timeout = 10",
];

/// Where the server is and who we are to it. `Debug` never shows the
/// password.
#[derive(Clone)]
pub struct MySettings {
    opts: Opts,
    shown: String,
}

impl std::fmt::Debug for MySettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MySettings")
            .field("server", &self.shown)
            .finish()
    }
}

fn bad_url(url: &str, why: impl Into<String>) -> DbError {
    DbError::BadServer {
        host: crate::config::secret::redact(url),
        why: why.into(),
    }
}

impl MySettings {
    /// From a `mysql://` (or `mariadb://`) URL and the name, user and
    /// password settings, which override the URL's; `default_user` (the
    /// job's user) when no user is given anywhere.
    pub fn parse(
        url: &str,
        name: Option<&str>,
        user: Option<&str>,
        pass: Option<&str>,
        default_user: Option<&str>,
    ) -> Result<MySettings, DbError> {
        let url = url.trim();
        if !is_mysql_url(url) {
            return Err(bad_url(url, "not a mysql:// or mariadb:// URL"));
        }
        let rest = &url[url.find("://").map_or(0, |i| i + 3)..];
        let opts = Opts::from_url(&format!("mysql://{rest}"))
            .map_err(|e| bad_url(url, format!("not a MySQL URL: {e}")))?;
        if opts.get_ip_or_hostname().is_empty() && opts.get_socket().is_none() {
            return Err(bad_url(url, "no host"));
        }
        let name = name
            .map(str::to_owned)
            .or_else(|| opts.get_db_name().map(str::to_owned))
            .unwrap_or_else(|| DEFAULT_DB_NAME.to_string());
        let user = match user.or(opts.get_user()).or(default_user) {
            Some(u) => u.to_string(),
            None => {
                return Err(bad_url(
                    url,
                    "no user: set SCR_LOG_DB_USER (or SCR_USER_NAME)",
                ))
            }
        };
        let pass = pass
            .map(str::to_owned)
            .or_else(|| opts.get_pass().map(str::to_owned));
        let builder = OptsBuilder::from_opts(opts)
            .db_name(Some(name))
            .user(Some(user))
            .pass(pass)
            // A socket only when the URL names one: connecting to a
            // server's TCP port never switches to a local socket.
            .prefer_socket(false)
            .tcp_connect_timeout(Some(CONNECT_TIMEOUT))
            .read_timeout(Some(IO_TIMEOUT))
            .write_timeout(Some(IO_TIMEOUT))
            .init(SESSION.to_vec());
        let opts = Opts::from(builder);
        let shown = show(&opts);
        Ok(MySettings { opts, shown })
    }

    /// From the database log settings (which must name a host).
    pub fn from_db_settings(s: &DbSettings) -> Result<MySettings, DbError> {
        let host = s
            .host
            .as_deref()
            .ok_or_else(|| bad_url("", "SCR_LOG_DB_HOST is not set"))?;
        MySettings::parse(
            host,
            s.name.as_deref(),
            s.user.as_deref(),
            s.pass.as_ref().map(|p| p.expose()),
            s.username.as_deref(),
        )
    }

    /// The same server, to read a whole log back: a wait for the server may
    /// take [`READ_TIMEOUT`] instead of a writer's [`IO_TIMEOUT`] (the
    /// server sorts every row before it sends the first).
    pub fn for_reading(&self) -> MySettings {
        let opts = OptsBuilder::from_opts(self.opts.clone())
            .read_timeout(Some(READ_TIMEOUT))
            .into();
        MySettings {
            opts,
            shown: self.shown.clone(),
        }
    }

    /// The bound on one wait for the server's answer.
    pub fn read_timeout(&self) -> Option<Duration> {
        self.opts.get_read_timeout().copied()
    }

    /// `mysql://user@host:port/dbname` (no password): for messages.
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn err(&self, what: &'static str) -> impl FnOnce(mysql::Error) -> DbError + '_ {
        move |source| DbError::MySql {
            server: self.shown.clone(),
            what,
            source: Box::new(source),
        }
    }

    /// Connect, within [`CONNECT_TIMEOUT`].
    pub fn connect(&self) -> Result<Conn, DbError> {
        Conn::new(self.opts.clone()).map_err(self.err("connecting"))
    }
}

fn show(o: &Opts) -> String {
    let host = o.get_ip_or_hostname();
    let host = if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.into_owned()
    };
    let socket = o
        .get_socket()
        .map_or(String::new(), |s| format!("?socket={s}"));
    format!(
        "mysql://{}@{host}:{}/{}{socket}",
        o.get_user().unwrap_or_default(),
        o.get_tcp_port(),
        o.get_db_name().unwrap_or(DEFAULT_DB_NAME)
    )
}

/// The MySQL/MariaDB database log of one job on one process.
pub type MySqlLog = DbLog<MyStore>;

/// A connection to the log database on a MySQL/MariaDB server.
pub struct MyStore {
    conn: Conn,
    settings: MySettings,
    path: PathBuf,
}

impl std::fmt::Debug for MyStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MyStore")
            .field("server", &self.settings.shown)
            .finish()
    }
}

impl MyStore {
    /// Connect, within [`CONNECT_TIMEOUT`].
    pub fn connect(settings: &MySettings) -> Result<MyStore, DbError> {
        Ok(MyStore {
            conn: settings.connect()?,
            settings: settings.clone(),
            path: PathBuf::from(&settings.shown),
        })
    }
}

/// `sql` (rendered) with its numbered placeholders `?N` made positional,
/// and the values in the order the `?` now take them (a number may appear
/// more than once). `Err(n)` names a parameter `?n` beyond `params`.
pub fn positional(sql: &str, params: &[Value]) -> Result<(String, Vec<mysql::Value>), usize> {
    let mut out = String::with_capacity(sql.len());
    let mut values = Vec::new();
    let mut chars = sql.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        out.push(c);
        if c != '?' {
            continue;
        }
        let mut n = 0usize;
        let mut digits = 0;
        while let Some(&(_, d)) = chars.peek() {
            let Some(v) = d.to_digit(10) else { break };
            n = n.saturating_mul(10).saturating_add(v as usize);
            digits += 1;
            chars.next();
        }
        let n = if digits == 0 { values.len() + 1 } else { n };
        let v = params.get(n.wrapping_sub(1)).ok_or(n)?;
        values.push(match v {
            Value::Int(Some(i)) => mysql::Value::Int(*i),
            Value::Real(Some(r)) => mysql::Value::Double(*r),
            Value::Text(Some(t)) => mysql::Value::Bytes(t.clone().into_bytes()),
            Value::Int(None) | Value::Real(None) | Value::Text(None) => mysql::Value::NULL,
        });
    }
    Ok((out, values))
}

/// A column the server sent that is not the type the reader asked for.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Text that is not UTF-8.
    #[error("text that is not UTF-8")]
    NotUtf8,
    /// An unsigned integer beyond `i64`.
    #[error("{0} does not fit 64 bits")]
    TooLarge(u64),
    /// Text that does not parse as the number asked for.
    #[error("{text:?} is not {want}")]
    NotANumber {
        /// The text.
        text: String,
        /// "an integer" or "a number".
        want: &'static str,
    },
    /// Another type altogether.
    #[error("{got} where {want:?} was expected")]
    Unexpected {
        /// What came, as the client shows it.
        got: String,
        /// What was asked for.
        want: Col,
    },
}

/// One column as the shared code reads it.
fn read_value(v: mysql::Value, col: Col) -> Result<Value, ValueError> {
    use mysql::Value as M;
    let text = |b: &[u8]| String::from_utf8(b.to_vec()).map_err(|_| ValueError::NotUtf8);
    let number = |text: String, want: &'static str| ValueError::NotANumber { text, want };
    Ok(match (col, v) {
        (Col::Int, M::NULL) => Value::Int(None),
        (Col::Real, M::NULL) => Value::Real(None),
        (Col::Text, M::NULL) => Value::Text(None),
        (Col::Int, M::Int(i)) => Value::Int(Some(i)),
        (Col::Int, M::UInt(u)) => {
            Value::Int(Some(i64::try_from(u).map_err(|_| ValueError::TooLarge(u))?))
        }
        (Col::Real, M::Double(d)) => Value::Real(Some(d)),
        (Col::Real, M::Float(f)) => Value::Real(Some(f64::from(f))),
        (Col::Real, M::Int(i)) => Value::Real(Some(i as f64)),
        (Col::Text, M::Bytes(b)) => Value::Text(Some(text(&b)?)),
        // What the text protocol or a server's own types give instead.
        (Col::Int, M::Bytes(b)) => {
            let t = text(&b)?;
            match t.trim().parse() {
                Ok(i) => Value::Int(Some(i)),
                Err(_) => return Err(number(t, "an integer")),
            }
        }
        (Col::Real, M::Bytes(b)) => {
            let t = text(&b)?;
            match t.trim().parse() {
                Ok(r) => Value::Real(Some(r)),
                Err(_) => return Err(number(t, "a number")),
            }
        }
        (want, got) => {
            return Err(ValueError::Unexpected {
                got: format!("{got:?}"),
                want,
            })
        }
    })
}

impl MyStore {
    fn run(
        &mut self,
        sql: &str,
        params: &[Value],
        what: &'static str,
    ) -> Result<(String, Vec<mysql::Value>), DbError> {
        positional(&Dialect::MySql.render(sql), params).map_err(|n| DbError::BadServer {
            host: self.settings.shown.clone(),
            why: format!("{what}: the statement names parameter ?{n}, which has no value"),
        })
    }
}

/// MySQL's "duplicate key name": an index a migration cut short had made.
const ER_DUP_KEYNAME: u16 = 1061;

impl Store for MyStore {
    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    fn location(&self) -> &Path {
        &self.path
    }

    /// Each statement on its own (the statements hold no `;` but between
    /// them); an index that exists already counts as made.
    fn batch(&mut self, sql: &str, what: &'static str) -> Result<(), DbError> {
        let sql = Dialect::MySql.render(sql);
        for stmt in sql.split(';').map(str::trim).filter(|s| !s.is_empty()) {
            match self.conn.query_drop(stmt) {
                Err(mysql::Error::MySqlError(e))
                    if e.code == ER_DUP_KEYNAME && stmt.starts_with("CREATE INDEX") => {}
                r => r.map_err(self.settings.err(what))?,
            }
        }
        Ok(())
    }

    fn execute(&mut self, sql: &str, params: &[Value], what: &'static str) -> Result<(), DbError> {
        let (sql, values) = self.run(sql, params, what)?;
        self.conn
            .exec_drop(sql, values)
            .map_err(self.settings.err(what))
    }

    fn insert_id(
        &mut self,
        sql: &str,
        params: &[Value],
        what: &'static str,
    ) -> Result<i64, DbError> {
        self.execute(sql, params, what)?;
        i64::try_from(self.conn.last_insert_id())
            .ok()
            .filter(|&id| id > 0)
            .ok_or_else(|| DbError::NoRow {
                path: self.path.clone(),
                what,
            })
    }

    /// The rows as the server sends them: one row in memory at a time,
    /// however many the table holds.
    fn query_each(
        &mut self,
        sql: &str,
        params: &[Value],
        cols: &[Col],
        what: &'static str,
        each: &mut dyn FnMut(Vec<Value>) -> Result<(), DbError>,
    ) -> Result<(), DbError> {
        let (sql, values) = self.run(sql, params, what)?;
        let shown = self.settings.shown.clone();
        let err = |source| DbError::MySql {
            server: shown.clone(),
            what,
            source: Box::new(source),
        };
        let rows = self.conn.exec_iter(sql, values).map_err(err)?;
        for row in rows {
            let mut row = row.map_err(err)?;
            let row: Vec<mysql::Value> = (0..row.len())
                .map(|i| row.take::<mysql::Value, _>(i).unwrap_or(mysql::Value::NULL))
                .collect();
            if row.len() < cols.len() {
                return Err(DbError::BadServer {
                    host: shown.clone(),
                    why: format!(
                        "{what}: {} columns where {} were asked for",
                        row.len(),
                        cols.len()
                    ),
                });
            }
            let vals = row
                .into_iter()
                .zip(cols)
                .enumerate()
                .map(|(i, (v, &c))| {
                    read_value(v, c).map_err(|why| DbError::BadServer {
                        host: shown.clone(),
                        why: format!("{what}: column {}: {why}", i + 1),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?;
            each(vals)?;
        }
        Ok(())
    }
}

impl DbLog<MyStore> {
    /// Connect to the server `settings` name, migrate, and find or add this
    /// job's row.
    pub fn open(settings: &DbSettings, prefix: &Path, jobid: &str) -> Result<MySqlLog, DbError> {
        let server = MySettings::from_db_settings(settings)?;
        DbLog::open_on(MyStore::connect(&server)?, settings, prefix, jobid)
    }
}

/// The log of one job on the server `settings` name: in SCR 3.1's own
/// tables when the database is one made from SCR's `scr.mysql`
/// ([`scr31::is_scr31`]), else in this library's (migrated, as
/// [`MySqlLog::open`]).
pub fn open_sink(
    settings: &DbSettings,
    prefix: &Path,
    jobid: &str,
) -> Result<Box<dyn LogSink>, DbError> {
    let server = MySettings::from_db_settings(settings)?;
    let mut store = MyStore::connect(&server)?;
    if scr31::is_scr31(&mut store)? {
        return Ok(Box::new(Scr31Log::open_on(store, settings)?));
    }
    Ok(Box::new(DbLog::open_on(store, settings, prefix, jobid)?))
}

/// Every record of the database `store` is connected to, in either layout.
fn each_of(store: &mut MyStore, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    if scr31::is_scr31(store)? {
        scr31::each_record(store, each)
    } else {
        super::database::each_record(store, each)
    }
}

/// Every entry on the server as log records, in time order (events before
/// transfers at equal times), as [`super::server::read_records`] reads
/// PostgreSQL. Under a writer's bounds: this is what a job reads (the
/// adaptive policy's history), and a job does not wait minutes for it.
pub fn read_records(server: &MySettings) -> Result<Vec<Record>, DbError> {
    let mut records = Vec::new();
    each_of(&mut MyStore::connect(server)?, &mut |r| records.push(r))?;
    Ok(records)
}

/// [`read_records`] handing each record to `each` as the server's rows
/// arrive (never all of them in memory): what a tool reads (`scr interval
/// --db`), each wait for the server bounded by [`READ_TIMEOUT`].
pub fn each_record(server: &MySettings, each: &mut dyn FnMut(Record)) -> Result<(), DbError> {
    each_of(&mut MyStore::connect(&server.for_reading())?, each)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(url: &str) -> Result<MySettings, DbError> {
        MySettings::parse(url, None, None, None, Some("alice"))
    }

    #[test]
    fn url_forms() {
        assert_eq!(
            parse("mysql://db1").unwrap().shown(),
            "mysql://alice@db1:3306/scr"
        );
        assert_eq!(
            parse("MariaDB://db1:3307/logs").unwrap().shown(),
            "mysql://alice@db1:3307/logs"
        );
        let s = parse("mysql://bob:s3cret@[::1]:3310/x").unwrap();
        assert_eq!(s.shown(), "mysql://bob@[::1]:3310/x");
        assert!(!format!("{s:?}").contains("s3cret"));
        // The settings override the URL.
        let s = MySettings::parse(
            "mysql://bob@h/x",
            Some("site"),
            Some("carol"),
            Some("pw"),
            None,
        )
        .unwrap();
        assert_eq!(s.shown(), "mysql://carol@h:3306/site");
        assert!(is_mysql_url(" mysql://h") && is_mysql_url("MARIADB://h"));
        // A writer waits 30 s for an answer, a reader of the whole log 10 min.
        assert_eq!(s.read_timeout(), Some(IO_TIMEOUT));
        assert_eq!(s.for_reading().read_timeout(), Some(READ_TIMEOUT));
        assert_eq!(s.for_reading().shown(), s.shown());
        assert!(!is_mysql_url("postgresql://h") && !is_mysql_url("h"));
    }

    #[test]
    fn bad_urls_are_named_without_their_password() {
        for (u, want) in [
            ("mysql://bob:s3cret@h:99999/db", "not a MySQL URL"),
            ("postgresql://h", "not a mysql://"),
        ] {
            let e = parse(u).unwrap_err().to_string();
            assert!(e.contains(want), "{u}: {e}");
            assert!(!e.contains("s3cret"), "{e}");
        }
        let e = MySettings::parse("mysql://h", None, None, None, None)
            .unwrap_err()
            .to_string();
        assert!(e.contains("SCR_LOG_DB_USER"), "{e}");
    }

    #[test]
    fn numbered_placeholders_become_positional_in_order() {
        let p = [
            Value::Int(Some(7)),
            Value::Text(Some("n0".into())),
            Value::Real(None),
        ];
        let (sql, v) = positional("VALUES (?1, ?2, ?3, ?3, ?1)", &p).unwrap();
        assert_eq!(sql, "VALUES (?, ?, ?, ?, ?)");
        assert_eq!(
            v,
            vec![
                mysql::Value::Int(7),
                mysql::Value::Bytes(b"n0".to_vec()),
                mysql::Value::NULL,
                mysql::Value::NULL,
                mysql::Value::Int(7),
            ]
        );
        assert_eq!(positional("x = ?4", &p), Err(4));
        assert_eq!(positional("x = ?0", &p), Err(0));
    }

    #[test]
    fn columns_read_as_asked_whatever_the_protocol_gave() {
        use mysql::Value as M;
        assert_eq!(read_value(M::Int(5), Col::Int), Ok(Value::Int(Some(5))));
        assert_eq!(read_value(M::UInt(5), Col::Int), Ok(Value::Int(Some(5))));
        assert_eq!(
            read_value(M::Bytes(b"12".to_vec()), Col::Int),
            Ok(Value::Int(Some(12)))
        );
        assert_eq!(
            read_value(M::Double(1.5), Col::Real),
            Ok(Value::Real(Some(1.5)))
        );
        assert_eq!(
            read_value(M::Bytes(b"2.5".to_vec()), Col::Real),
            Ok(Value::Real(Some(2.5)))
        );
        assert_eq!(read_value(M::NULL, Col::Text), Ok(Value::Text(None)));
        assert_eq!(
            read_value(M::UInt(u64::MAX), Col::Int),
            Err(ValueError::TooLarge(u64::MAX))
        );
        assert_eq!(
            read_value(M::Bytes(vec![0xff]), Col::Text),
            Err(ValueError::NotUtf8)
        );
        assert_eq!(
            read_value(M::Bytes(b"x".to_vec()), Col::Real),
            Err(ValueError::NotANumber {
                text: "x".into(),
                want: "a number"
            })
        );
        assert!(matches!(
            read_value(M::Double(1.0), Col::Text),
            Err(ValueError::Unexpected {
                want: Col::Text,
                ..
            })
        ));
    }

    #[test]
    fn the_schema_renders_for_mysql() {
        let v1 = Dialect::MySql.render(super::super::migrate::MIGRATIONS[0].sql);
        assert!(v1.contains("CREATE TABLE IF NOT EXISTS jobs ("), "{v1}");
        assert!(
            v1.contains("id           BIGINT AUTO_INCREMENT PRIMARY KEY,"),
            "{v1}"
        );
        assert!(v1.contains("jobid        VARBINARY(512) NOT NULL,"), "{v1}");
        assert!(
            v1.contains("prefix       VARBINARY(2048) NOT NULL,"),
            "{v1}"
        );
        assert!(v1.contains(") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;"));
        assert!(!v1.contains('{'), "{v1}");
        assert_eq!(
            super::super::store::MYSQL_KEY_BYTES,
            (512, 2048),
            "the VARCHARs above"
        );
    }
}
