//! The text log's line (developer guide, "Logging"), as written to
//! `<prefix>/.scr/log` and to syslog; [`super::parse`] reads it back:
//! `<timestamp>: host=…, jobid=…, event=TYPE[, note="…"][, dset=N][, name="…"][, secs=F][, procs=N][, nodes=N]`
//! or `<timestamp>: host=…, jobid=…, xfer=TYPE[, from="…"][, to="…"][, dset=N][, name="…"][, secs=F][, bytes=N][, files=N]`.
//!
//! Differences from LLNL SCR, on purpose:
//! - the timestamp is local time *with* its UTC offset and milliseconds
//!   (`2026-11-22T10:11:12.345+01:00`): SCR's zone-less local time is
//!   ambiguous across zones and daylight-saving changes;
//! - free-text values (`note`, `name`, `from`, `to`) are always quoted, and
//!   `host`/`jobid` are quoted when they hold a comma, quote, backslash or
//!   space, with `"` and `\` escaped, so a value can never split a field.
//!   Control characters (a newline would end the line) become spaces; that
//!   is the only way a value does not read back exactly.

use super::event::{Entry, Stamp};
use super::time::format_timestamp;

/// Control characters would end or corrupt the line: spaces instead.
fn clean(v: &str) -> impl Iterator<Item = char> + '_ {
    v.chars().map(|c| if c.is_control() { ' ' } else { c })
}

fn push_quoted(out: &mut String, v: &str) {
    out.push('"');
    for c in clean(v) {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
}

/// Bare when the parser reads it back unchanged, quoted otherwise.
fn push_value(out: &mut String, v: &str) {
    let bare = !v.is_empty()
        && v.chars()
            .all(|c| !(c.is_whitespace() || c.is_control() || matches!(c, ',' | '"' | '\\')));
    if bare {
        out.push_str(v);
    } else {
        push_quoted(out, v);
    }
}

/// One log line (without the newline) at `unix_s`, shown in the zone
/// `offset_s` seconds east of UTC.
pub fn format_line(unix_s: f64, offset_s: i64, host: &str, jobid: &str, e: &Entry) -> String {
    let stamp = Stamp {
        time_s: unix_s,
        offset_s,
        host,
        jobid,
    };
    format_stamped(&stamp, e)
}

/// One log line (without the newline) of `e` written under `stamp`.
pub fn format_stamped(stamp: &Stamp<'_>, e: &Entry) -> String {
    let mut out = format_timestamp(stamp.time_s, stamp.offset_s);
    out.push_str(": host=");
    push_value(&mut out, stamp.host);
    out.push_str(", jobid=");
    push_value(&mut out, stamp.jobid);
    out.push_str(if e.kind.is_transfer() {
        ", xfer="
    } else {
        ", event="
    });
    // A type read from another log may hold anything: it is a bare value.
    push_value(&mut out, e.kind.name());
    let quoted = [("note", &e.note), ("from", &e.from), ("to", &e.to)];
    for (k, v) in quoted {
        if let Some(v) = v {
            out.push_str(&format!(", {k}="));
            push_quoted(&mut out, v);
        }
    }
    if let Some(d) = e.dset {
        out.push_str(&format!(", dset={d}"));
    }
    if let Some(n) = &e.name {
        out.push_str(", name=");
        push_quoted(&mut out, n);
    }
    // Display of f64 is the shortest text that reads back exactly, never in
    // exponent form (a whole number of bytes is written without a point).
    let reals = [("secs", e.secs), ("bytes", e.bytes)];
    let counts = [("files", e.files), ("procs", e.procs), ("nodes", e.nodes)];
    for (k, v) in reals {
        if let Some(v) = v.filter(|v| v.is_finite() && *v >= 0.0) {
            out.push_str(&format!(", {k}={v}"));
        }
    }
    for (k, v) in counts {
        if let Some(v) = v {
            out.push_str(&format!(", {k}={v}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::event::{EntryKind, EventType, XferType};
    use super::super::parse::parse_line;
    use super::*;

    fn full(kind: EntryKind) -> Entry {
        let e = Entry::of_kind(kind.clone())
            .dset(17)
            .name(r#"ckpt "a", b\c"#)
            .secs(12.345_678_9);
        match kind {
            EntryKind::Event(EventType::Start) => e.procs_nodes(64, 4),
            EntryKind::Event(_) | EntryKind::OtherEvent(_) => e.note("node n3 failed, rank 12"),
            EntryKind::Xfer(_) | EntryKind::OtherXfer(_) => e
                .from("/dev/shm/u/scr.7/scr.dataset.17")
                .to("/p/lustre/run, 2")
                .bytes(1_048_576_000)
                .files(64),
        }
    }

    #[test]
    fn every_kind_round_trips_through_the_parser() {
        let kinds = EventType::ALL
            .iter()
            .map(|&t| EntryKind::Event(t))
            .chain(XferType::ALL.iter().map(|&t| EntryKind::Xfer(t)))
            .chain([EntryKind::event("REBUILD_END"), EntryKind::xfer("COPY")]);
        let t = 1_795_350_672.345;
        for (i, kind) in kinds.enumerate() {
            let e = full(kind);
            let offset = [0, 3600, -5 * 3600 - 1800, 13 * 3600 + 45 * 60][i % 4];
            let line = format_line(t, offset, "rzgenie12", "job 42,x", &e);
            let r = parse_line(&line).unwrap_or_else(|err| panic!("{line}: {err}"));
            assert!((r.time_s - t).abs() <= 1e-3, "{line}: {}", r.time_s);
            assert_eq!(r.host.as_deref(), Some("rzgenie12"));
            assert_eq!(r.jobid.as_deref(), Some("job 42,x"));
            // What was written is what is read: the one entry type.
            assert_eq!(r.entry, e, "{line}");
            assert!(r.other.is_empty(), "{line}");
        }
    }

    #[test]
    fn bytes_are_written_as_before() {
        let e = Entry::xfer(XferType::Write).bytes(1_048_576_000).files(3);
        assert_eq!(
            format_line(0.0, 0, "h", "j", &e),
            "1970-01-01T00:00:00.000+00:00: host=h, jobid=j, xfer=WRITE, bytes=1048576000, files=3"
        );
    }

    #[test]
    fn minimal_lines_and_awkward_values() {
        let l = format_line(0.0, 0, "n1", "7", &Entry::event(EventType::Halt));
        assert_eq!(
            l,
            "1970-01-01T00:00:00.000+00:00: host=n1, jobid=7, event=HALT"
        );
        // Newlines cannot survive (one record per line): they become spaces.
        let e = Entry::event(EventType::RunEnd).note("a\nb\"");
        let l = format_line(0.0, 0, "", "", &e);
        assert!(!l.contains('\n'));
        let r = parse_line(&l).unwrap();
        assert_eq!(r.entry.note.as_deref(), Some("a b\""));
        assert_eq!(r.host.as_deref(), Some(""));
        // Values the parser would reject are simply not written.
        let e = Entry::xfer(XferType::Write).secs(f64::NAN).dset(-1);
        let r = parse_line(&format_line(0.0, 0, "h", "j", &e)).unwrap();
        assert_eq!((r.entry.secs, r.entry.dset), (None, None));
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_values_round_trip(
            host in "[ -~]{0,20}",
            note in "\\PC{0,40}",
            name in "[ -~]{0,40}",
            secs in 0.0f64..1e9,
            t in 0.0f64..4e9,
            off_min in -1439i64..1439,
        ) {
            let e = Entry::event(EventType::CheckpointEnd).note(note.clone()).name(name.clone()).secs(secs);
            let line = format_line(t, off_min * 60, &host, "1", &e);
            let r = parse_line(&line).unwrap();
            proptest::prop_assert_eq!(r.entry, e);
            proptest::prop_assert_eq!(r.host, Some(host));
            proptest::prop_assert!((r.time_s - t).abs() <= 1e-3 + 1e-9, "{} vs {}", r.time_s, t);
        }
    }
}
