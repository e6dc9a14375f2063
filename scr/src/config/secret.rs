//! Secrets in configuration: what `scr config` (text, `--json`, a query)
//! and every message show instead of a password. A secret parameter is
//! shown as `***` whatever its value; a value that embeds a password (a
//! server URL such as `postgresql://user:PASS@host/db?password=PASS` or
//! `mysql://user:PASS@host/db`, or a libpq keyword string
//! `host=h password=PASS`) is shown with the password replaced by `***`.

/// The mask shown in place of a secret.
pub const MASK: &str = "***";

/// Parameters whose whole value is a secret.
pub const SECRET_PARAMS: &[&str] = &["SCR_LOG_DB_PASS"];

/// Whether parameter `name` holds a secret.
pub fn is_secret(name: &str) -> bool {
    SECRET_PARAMS.iter().any(|s| s.eq_ignore_ascii_case(name))
}

/// `value` of parameter `name` as it may be shown: `***` for a secret
/// parameter, otherwise with any embedded password masked ([`redact`]).
pub fn shown_value(name: &str, value: &str) -> String {
    if is_secret(name) {
        MASK.to_string()
    } else {
        redact(value)
    }
}

/// `text` with embedded passwords replaced by `***`: the password of a
/// URL's `user:PASSWORD@`, `password=` query parameters, and the
/// `password=` keyword of a libpq connection string (quoted or not).
/// Text without a password is returned unchanged.
pub fn redact(text: &str) -> String {
    if let Some((scheme, rest)) = text.split_once("://") {
        return redact_url(scheme, rest);
    }
    if looks_like_conninfo(text) {
        return redact_conninfo(text);
    }
    text.to_string()
}

/// Whether `text` is a libpq keyword/value connection string
/// (`host=h dbname=d ...`): every blank-separated word is `KEY=...` with a
/// libpq key, and at least one is.
pub fn looks_like_conninfo(text: &str) -> bool {
    const KEYS: &[&str] = &[
        "host",
        "hostaddr",
        "port",
        "dbname",
        "user",
        "password",
        "passfile",
        "sslmode",
        "connect_timeout",
        "application_name",
        "options",
    ];
    let t = text.trim_start();
    let Some((key, _)) = t.split_once('=') else {
        return false;
    };
    KEYS.iter().any(|k| k.eq_ignore_ascii_case(key.trim()))
}

fn redact_url(scheme: &str, rest: &str) -> String {
    let (authority, tail) = rest.split_at(rest.find(['/', '?']).unwrap_or(rest.len()));
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, hosts)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{MASK}@{hosts}"),
            None => authority.to_string(),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let q: Vec<String> = query
                .split('&')
                .map(|kv| match kv.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}={MASK}"),
                    _ => kv.to_string(),
                })
                .collect();
            format!("{path}?{}", q.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}://{authority}{tail}")
}

/// Mask `password = value` in a libpq string; the value may be quoted
/// (`'a b'`, with `\'` and `\\` escapes) and blanks may surround `=`.
fn redact_conninfo(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        if chars[i].is_whitespace() {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // A key, blanks, '=', blanks, a value.
        let start = i;
        while i < chars.len() && chars[i] != '=' && !chars[i].is_whitespace() {
            i += 1;
        }
        let key: String = chars[start..i].iter().collect();
        out.push_str(&key);
        while i < chars.len() && chars[i].is_whitespace() {
            out.push(chars[i]);
            i += 1;
        }
        if i >= chars.len() || chars[i] != '=' {
            continue;
        }
        out.push('=');
        i += 1;
        while i < chars.len() && chars[i].is_whitespace() {
            out.push(chars[i]);
            i += 1;
        }
        let vstart = i;
        if i < chars.len() && chars[i] == '\'' {
            i += 1;
            while i < chars.len() && chars[i] != '\'' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = (i + 1).min(chars.len());
        } else {
            while i < chars.len() && !chars[i].is_whitespace() {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i = i.min(chars.len());
        }
        if key.eq_ignore_ascii_case("password") {
            out.push_str(MASK);
        } else {
            out.extend(&chars[vstart..i]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_masked_in_every_form() {
        assert_eq!(shown_value("SCR_LOG_DB_PASS", "hunter2"), "***");
        assert_eq!(shown_value("scr_log_db_pass", ""), "***");
        assert_eq!(shown_value("SCR_PREFIX", "/p"), "/p");
        for (text, want) in [
            (
                "postgresql://bob:hunter2@h:5432/logs?sslmode=disable&password=hunter2",
                "postgresql://bob:***@h:5432/logs?sslmode=disable&password=***",
            ),
            (
                "mysql://bob:hunter2@h:3306/logs",
                "mysql://bob:***@h:3306/logs",
            ),
            (
                "mariadb://bob:hunter2@h/logs?socket=/run/x.sock",
                "mariadb://bob:***@h/logs?socket=/run/x.sock",
            ),
            (
                "host=db password=hunter2 dbname=x",
                "host=db password=*** dbname=x",
            ),
            (
                "host=db password = 'hunter 2' user=u",
                "host=db password = *** user=u",
            ),
            ("password='it\\'s' host=h", "password=*** host=h"),
            ("PASSWORD=hunter2", "PASSWORD=***"),
            ("/path/to/log.db", "/path/to/log.db"),
            ("a=b", "a=b"),
        ] {
            let got = redact(text);
            assert_eq!(got, want, "{text}");
            assert!(!got.contains("hunter"), "{got}");
        }
        assert!(looks_like_conninfo("host=h password=p"));
        assert!(!looks_like_conninfo("/tmp/log=1.db"));
    }
}
