//! Quantities with units as people write them, parsed in one place for the
//! configuration files, the environment and every command line:
//!
//! - byte counts: `1048576`, `512MB`, `1GB`, `1G`, `2 gb` — SCR's
//!   `scr_abtoull`, where every suffix is a power of 1024
//!   ([`parse_bytes`]);
//! - durations: plain seconds (`90`, `2.5`) or numbers with units
//!   (`90s`, `15m`, `1h`, `2h30m`, `1h 30m`, `1d`), read by the `humantime`
//!   crate ([`parse_duration`], [`seconds_f64`], [`seconds_u64`]);
//! - and back: byte counts for people ([`format_binary`]).
//!
//! Bottom layer: imports nothing else of the crate.

use std::time::Duration;

/// A byte count in binary units for a person, one decimal: `512 B`,
/// `1.5 MiB`, `3.0 GiB` (up to EiB).
pub fn format_binary(n: u64) -> String {
    const UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// Parse a byte count with an optional binary suffix (`scr_abtoull`):
/// `1048576`, `1MB`, `1 MB`, `2g`, `1GiB`. `None` on anything else or on
/// overflow.
pub fn parse_bytes(value: &str) -> Option<u64> {
    let v = value.trim();
    let split = v.find(|c: char| !c.is_ascii_digit()).unwrap_or(v.len());
    let (num, suffix) = v.split_at(split);
    let n: u64 = num.parse().ok()?;
    let shift = match suffix.trim().to_ascii_uppercase().as_str() {
        "" | "B" => 0,
        "K" | "KB" | "KIB" => 10,
        "M" | "MB" | "MIB" => 20,
        "G" | "GB" | "GIB" => 30,
        "T" | "TB" | "TIB" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// A value that is not what a unit-bearing option takes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UnitError {
    /// Not a byte count.
    #[error("{text:?} is not a byte count (e.g. 1048576, 512MB, 1GB, 1G)")]
    Bytes {
        /// The text given.
        text: String,
    },
    /// Not a duration.
    #[error("{text:?} is not a duration (e.g. 90, 90s, 15m, 1h, 2h30m, 1d): {why}")]
    Duration {
        /// The text given.
        text: String,
        /// What is wrong with it.
        why: String,
    },
}

/// A byte count for a command-line option (`clap` value parser).
pub fn bytes(text: &str) -> Result<u64, UnitError> {
    parse_bytes(text).ok_or_else(|| UnitError::Bytes {
        text: text.to_string(),
    })
}

/// A duration: plain non-negative seconds (`90`, `2.5`), or numbers with
/// units (`90s`, `15m`, `1h`, `2h30m`, `1h 30m`, `1d`, `500ms`).
pub fn parse_duration(text: &str) -> Result<Duration, UnitError> {
    let bad = |why: String| UnitError::Duration {
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    if let Ok(v) = t.parse::<f64>() {
        return Duration::try_from_secs_f64(v).map_err(|_| {
            bad("seconds must be a finite number, not negative, not too large".into())
        });
    }
    humantime::parse_duration(t).map_err(|e| bad(e.to_string()))
}

/// A duration in seconds for an `f64` option (`--mtbf 1h`, `--cost 90`).
pub fn seconds_f64(text: &str) -> Result<f64, UnitError> {
    parse_duration(text).map(|d| d.as_secs_f64())
}

/// A duration in whole seconds for an integer option (`--watchdog 2h`).
pub fn seconds_u64(text: &str) -> Result<u64, UnitError> {
    let d = parse_duration(text)?;
    if d.subsec_nanos() != 0 {
        return Err(UnitError::Duration {
            text: text.to_string(),
            why: "give a whole number of seconds".into(),
        });
    }
    Ok(d.as_secs())
}

/// A duration in whole seconds for a `u32` option (`scr halt --seconds`).
pub fn seconds_u32(text: &str) -> Result<u32, UnitError> {
    let s = seconds_u64(text)?;
    u32::try_from(s).map_err(|_| UnitError::Duration {
        text: text.to_string(),
        why: format!("at most {} seconds", u32::MAX),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_print_in_binary_units() {
        assert_eq!(format_binary(0), "0 B");
        assert_eq!(format_binary(1023), "1023 B");
        assert_eq!(format_binary(1024), "1.0 KiB");
        assert_eq!(format_binary(3 << 19), "1.5 MiB");
        assert_eq!(format_binary(3 << 30), "3.0 GiB");
        assert_eq!(format_binary(u64::MAX), "16.0 EiB");
    }

    #[test]
    fn byte_counts_take_binary_suffixes() {
        assert_eq!(parse_bytes("1048576"), Some(1 << 20));
        assert_eq!(parse_bytes("1MB"), Some(1 << 20));
        assert_eq!(parse_bytes("512MB"), Some(512 << 20));
        assert_eq!(parse_bytes("2 gb"), Some(2 << 30));
        assert_eq!(parse_bytes("1G"), Some(1 << 30));
        assert_eq!(parse_bytes("1GB"), Some(1 << 30));
        assert_eq!(parse_bytes("4k"), Some(4096));
        assert_eq!(parse_bytes("1T"), Some(1 << 40));
        assert_eq!(parse_bytes(""), None);
        assert_eq!(parse_bytes("1.5GB"), None);
        assert_eq!(parse_bytes("1PB"), None);
        assert_eq!(parse_bytes("99999999999999T"), None);
        assert!(matches!(bytes("lots"), Err(UnitError::Bytes { .. })));
    }

    #[test]
    fn byte_counts_take_iec_suffixes_newly() {
        assert_eq!(parse_bytes("1GiB"), Some(1 << 30));
        assert_eq!(parse_bytes("512mib"), Some(512 << 20));
        assert_eq!(parse_bytes("8KiB"), Some(8 << 10));
    }

    #[test]
    fn durations_take_plain_seconds_and_units() {
        assert_eq!(seconds_f64("86400"), Ok(86_400.0));
        assert_eq!(seconds_f64("2.5"), Ok(2.5));
        assert_eq!(seconds_f64("1h"), Ok(3600.0));
        assert_eq!(seconds_f64("90s"), Ok(90.0));
        assert_eq!(seconds_f64("2h30m"), Ok(9000.0));
        assert_eq!(seconds_f64("1h 30m"), Ok(5400.0));
        assert_eq!(seconds_f64("1d"), Ok(86_400.0));
        assert_eq!(seconds_u64("15m"), Ok(900));
        assert_eq!(seconds_u32("2h"), Ok(7200));
        assert!(seconds_u64("1.5s").is_err());
        assert!(seconds_u32("200y").is_err());
        for bad in ["", "-5", "soon", "5x", "inf", "NaN", "1h-"] {
            let e = seconds_f64(bad).unwrap_err();
            assert!(e.to_string().contains("not a duration"), "{bad}: {e}");
        }
    }
}
