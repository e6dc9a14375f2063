//! The one event type of SCR's logs: [`Entry`], what happened (an event or
//! a transfer and its fields). Every sink writes it, every reader gives it
//! back: the text log parser and the databases return [`Record`]s, an
//! entry with the stamp it was written under. What a job logs is what a
//! reader reads (`record.entry == logged`, control characters aside).
//!
//! The bottom layer of `log/`: it imports nothing else of the module.

use std::collections::BTreeMap;

/// Event types (`event=TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum EventType {
    Start,
    ComputeStart,
    ComputeEnd,
    CheckpointStart,
    CheckpointEnd,
    OutputStart,
    OutputEnd,
    RebuildStart,
    RebuildSuccess,
    RebuildFail,
    RestartSuccess,
    RestartFail,
    FetchStart,
    FetchSuccess,
    FetchFail,
    FlushStart,
    FlushSuccess,
    FlushFail,
    AsyncFlushStart,
    AsyncFlushSuccess,
    AsyncFlushFail,
    Crc32Mismatch,
    Halt,
    RunStart,
    RunEnd,
    NodeFail,
    ScavengeStart,
    ScavengeEnd,
    CheckpointInterval,
    Protected,
}

impl EventType {
    /// Every event type.
    pub const ALL: [EventType; 30] = [
        EventType::Start,
        EventType::ComputeStart,
        EventType::ComputeEnd,
        EventType::CheckpointStart,
        EventType::CheckpointEnd,
        EventType::OutputStart,
        EventType::OutputEnd,
        EventType::RebuildStart,
        EventType::RebuildSuccess,
        EventType::RebuildFail,
        EventType::RestartSuccess,
        EventType::RestartFail,
        EventType::FetchStart,
        EventType::FetchSuccess,
        EventType::FetchFail,
        EventType::FlushStart,
        EventType::FlushSuccess,
        EventType::FlushFail,
        EventType::AsyncFlushStart,
        EventType::AsyncFlushSuccess,
        EventType::AsyncFlushFail,
        EventType::Crc32Mismatch,
        EventType::Halt,
        EventType::RunStart,
        EventType::RunEnd,
        EventType::NodeFail,
        EventType::ScavengeStart,
        EventType::ScavengeEnd,
        EventType::CheckpointInterval,
        EventType::Protected,
    ];

    /// The name written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Start => "START",
            EventType::ComputeStart => "COMPUTE_START",
            EventType::ComputeEnd => "COMPUTE_END",
            EventType::CheckpointStart => "CHECKPOINT_START",
            EventType::CheckpointEnd => "CHECKPOINT_END",
            EventType::OutputStart => "OUTPUT_START",
            EventType::OutputEnd => "OUTPUT_END",
            EventType::RebuildStart => "REBUILD_START",
            EventType::RebuildSuccess => "REBUILD_SUCCESS",
            EventType::RebuildFail => "REBUILD_FAIL",
            EventType::RestartSuccess => "RESTART_SUCCESS",
            EventType::RestartFail => "RESTART_FAIL",
            EventType::FetchStart => "FETCH_START",
            EventType::FetchSuccess => "FETCH_SUCCESS",
            EventType::FetchFail => "FETCH_FAIL",
            EventType::FlushStart => "FLUSH_START",
            EventType::FlushSuccess => "FLUSH_SUCCESS",
            EventType::FlushFail => "FLUSH_FAIL",
            EventType::AsyncFlushStart => "ASYNC_FLUSH_START",
            EventType::AsyncFlushSuccess => "ASYNC_FLUSH_SUCCESS",
            EventType::AsyncFlushFail => "ASYNC_FLUSH_FAIL",
            EventType::Crc32Mismatch => "CRC32_MISMATCH",
            EventType::Halt => "HALT",
            EventType::RunStart => "RUN_START",
            EventType::RunEnd => "RUN_END",
            EventType::NodeFail => "NODE_FAIL",
            EventType::ScavengeStart => "SCAVENGE_START",
            EventType::ScavengeEnd => "SCAVENGE_END",
            // Not in SCR: the adaptive Need_checkpoint policy's choice
            // (secs = the interval, note = why).
            EventType::CheckpointInterval => "CHECKPOINT_INTERVAL",
            // Not in SCR: a checkpoint protected in the background
            // (SCR_ENCODE_ASYNC) after its CHECKPOINT_END; secs = from
            // SCR_Start_output to protected, note = the encode's seconds.
            EventType::Protected => "PROTECTED",
        }
    }

    /// The type written as `name` (exact, upper case), if this library
    /// writes it.
    pub fn from_name(name: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// Transfer types (`xfer=TYPE`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum XferType {
    Write,
    Encode,
    Checkpoint,
    Output,
    Fetch,
    FlushSync,
    FlushAsync,
}

impl XferType {
    /// Every transfer type.
    pub const ALL: [XferType; 7] = [
        XferType::Write,
        XferType::Encode,
        XferType::Checkpoint,
        XferType::Output,
        XferType::Fetch,
        XferType::FlushSync,
        XferType::FlushAsync,
    ];

    /// The name written in the log.
    pub fn as_str(self) -> &'static str {
        match self {
            XferType::Write => "WRITE",
            XferType::Encode => "ENCODE",
            XferType::Checkpoint => "CHECKPOINT",
            XferType::Output => "OUTPUT",
            XferType::Fetch => "FETCH",
            XferType::FlushSync => "FLUSH_SYNC",
            XferType::FlushAsync => "FLUSH_ASYNC",
        }
    }

    /// The type written as `name` (exact, upper case), if this library
    /// writes it.
    pub fn from_name(name: &str) -> Option<XferType> {
        XferType::ALL.into_iter().find(|t| t.as_str() == name)
    }
}

/// What an entry records: an event or a transfer, and its type.
///
/// The `Other…` variants hold types this library does not write, read from
/// LLNL SCR's logs or older ones (`REBUILD_END`, ...), upper case as read:
/// a reader keeps them rather than drop the line.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum EntryKind {
    /// `event=TYPE`.
    Event(EventType),
    /// `xfer=TYPE`.
    Xfer(XferType),
    /// `event=TYPE` of a type this library does not write.
    OtherEvent(String),
    /// `xfer=TYPE` of a type this library does not write.
    OtherXfer(String),
}

impl EntryKind {
    /// The event called `name` (upper case), known or not.
    pub fn event(name: &str) -> EntryKind {
        EventType::from_name(name)
            .map_or_else(|| EntryKind::OtherEvent(name.into()), EntryKind::Event)
    }

    /// The transfer called `name` (upper case), known or not.
    pub fn xfer(name: &str) -> EntryKind {
        XferType::from_name(name).map_or_else(|| EntryKind::OtherXfer(name.into()), EntryKind::Xfer)
    }

    /// The type's name as written (`START`, `FLUSH_SYNC`, ...).
    pub fn name(&self) -> &str {
        match self {
            EntryKind::Event(t) => t.as_str(),
            EntryKind::Xfer(t) => t.as_str(),
            EntryKind::OtherEvent(n) | EntryKind::OtherXfer(n) => n,
        }
    }

    /// Whether this is a transfer (`xfer=`) rather than an event.
    pub fn is_transfer(&self) -> bool {
        matches!(self, EntryKind::Xfer(_) | EntryKind::OtherXfer(_))
    }
}

/// Serialised as before the two line types merged: `{"Event": "START"}` or
/// `{"Transfer": "FLUSH_SYNC"}`.
impl serde::Serialize for EntryKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let variant = if self.is_transfer() {
            "Transfer"
        } else {
            "Event"
        };
        s.serialize_newtype_variant(
            "EntryKind",
            u32::from(self.is_transfer()),
            variant,
            self.name(),
        )
    }
}

/// One log entry: what happened. Built with the setters and written by
/// [`super::writer::Logger::log`]; given back by every reader inside a
/// [`Record`]. Fields left `None` are not written.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Entry {
    /// Event or transfer type.
    pub kind: EntryKind,
    /// `note=` (events; how a run ended, for `RUN_END`).
    pub note: Option<String>,
    /// `from=` (transfers).
    pub from: Option<String>,
    /// `to=` (transfers).
    pub to: Option<String>,
    /// `dset=`.
    pub dset: Option<u64>,
    /// `name=`.
    pub name: Option<String>,
    /// `secs=`: duration of the operation.
    pub secs: Option<f64>,
    /// `bytes=` (transfers). A double, as in SCR's logging calls: LLNL's
    /// logs write it in exponent form (`1.048576e9`).
    pub bytes: Option<f64>,
    /// `files=` (transfers).
    pub files: Option<u64>,
    /// `procs=` (START).
    pub procs: Option<u64>,
    /// `nodes=` (START).
    pub nodes: Option<u64>,
}

impl Entry {
    /// An entry of `kind` with no fields.
    pub fn of_kind(kind: EntryKind) -> Entry {
        Entry {
            kind,
            note: None,
            from: None,
            to: None,
            dset: None,
            name: None,
            secs: None,
            bytes: None,
            files: None,
            procs: None,
            nodes: None,
        }
    }
    /// An event.
    pub fn event(t: EventType) -> Entry {
        Entry::of_kind(EntryKind::Event(t))
    }
    /// A transfer.
    pub fn xfer(t: XferType) -> Entry {
        Entry::of_kind(EntryKind::Xfer(t))
    }
    /// Set `note=`.
    pub fn note(mut self, v: impl Into<String>) -> Entry {
        self.note = Some(v.into());
        self
    }
    /// Set `from=`.
    pub fn from(mut self, v: impl Into<String>) -> Entry {
        self.from = Some(v.into());
        self
    }
    /// Set `to=`.
    pub fn to(mut self, v: impl Into<String>) -> Entry {
        self.to = Some(v.into());
        self
    }
    /// Set `dset=` (a negative id is not written).
    pub fn dset(mut self, v: impl Into<i64>) -> Entry {
        self.dset = u64::try_from(v.into()).ok();
        self
    }
    /// Set `name=`.
    pub fn name(mut self, v: impl Into<String>) -> Entry {
        self.name = Some(v.into());
        self
    }
    /// Set `secs=` (a negative or non-finite value is not written).
    pub fn secs(mut self, v: f64) -> Entry {
        self.secs = (v.is_finite() && v >= 0.0).then_some(v);
        self
    }
    /// Set `bytes=`.
    pub fn bytes(mut self, v: u64) -> Entry {
        // Exact below 2^53 bytes (8 PiB), far beyond one process's transfer.
        self.bytes = Some(v as f64);
        self
    }
    /// Set `files=`.
    pub fn files(mut self, v: u64) -> Entry {
        self.files = Some(v);
        self
    }
    /// Set `procs=` and `nodes=` (START).
    pub fn procs_nodes(mut self, procs: u64, nodes: u64) -> Entry {
        self.procs = Some(procs);
        self.nodes = Some(nodes);
        self
    }
    /// Whether this is the event `name` (`START`, ...).
    pub fn is_event(&self, name: &str) -> bool {
        !self.kind.is_transfer() && self.kind.name() == name
    }
    /// Whether this is the transfer `name` (`FLUSH_SYNC`, ...).
    pub fn is_transfer(&self, name: &str) -> bool {
        self.kind.is_transfer() && self.kind.name() == name
    }
}

/// How a writer stamps an entry: when (shown in which zone), on which
/// host, for which job. Every sink gets the same stamp for one entry.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stamp<'a> {
    /// Seconds since the Unix epoch.
    pub time_s: f64,
    /// The zone the time is shown in, seconds east of UTC.
    pub offset_s: i64,
    /// `host=`.
    pub host: &'a str,
    /// `jobid=`.
    pub jobid: &'a str,
}

/// An entry as a reader finds it in a log: the stamp it was written under
/// and the entry itself.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Record {
    /// Seconds since the Unix epoch (unzoned text stamps read as UTC).
    pub time_s: f64,
    /// `host=` (a text line may lack it).
    pub host: Option<String>,
    /// `jobid=` (a text line may lack it).
    pub jobid: Option<String>,
    /// What happened.
    #[serde(flatten)]
    pub entry: Entry,
    /// Fields of a text line this library does not know, as written (LLNL's
    /// or a newer version's); the databases have no column for them.
    pub other: BTreeMap<String, String>,
}

impl Record {
    /// Whether this is the event `name` (`START`, ...).
    pub fn is_event(&self, name: &str) -> bool {
        self.entry.is_event(name)
    }
    /// Whether this is the transfer `name` (`FLUSH_SYNC`, ...).
    pub fn is_transfer(&self, name: &str) -> bool {
        self.entry.is_transfer(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_back_to_their_types() {
        for t in EventType::ALL {
            assert_eq!(EntryKind::event(t.as_str()), EntryKind::Event(t));
        }
        for t in XferType::ALL {
            assert_eq!(EntryKind::xfer(t.as_str()), EntryKind::Xfer(t));
        }
        let old = EntryKind::event("REBUILD_END");
        assert_eq!(old, EntryKind::OtherEvent("REBUILD_END".into()));
        assert_eq!((old.name(), old.is_transfer()), ("REBUILD_END", false));
        // An event and a transfer of the same name are not confused.
        let e = Entry::event(EventType::Start);
        assert!(e.is_event("START") && !e.is_transfer("START"));
        let x = Entry::of_kind(EntryKind::xfer("CHECKPOINT"));
        assert!(x.is_transfer("CHECKPOINT") && !x.is_event("CHECKPOINT"));
    }

    #[test]
    fn records_serialise_as_before() {
        let r = Record {
            time_s: 1.5,
            host: Some("n0".into()),
            jobid: None,
            entry: Entry::xfer(XferType::FlushSync).bytes(10),
            other: BTreeMap::new(),
        };
        let v = serde_json::to_value(&r).unwrap();
        assert_eq!(v["kind"], serde_json::json!({"Transfer": "FLUSH_SYNC"}));
        assert_eq!(v["bytes"], 10.0);
        assert_eq!(v["time_s"], 1.5);
        let v = serde_json::to_value(EntryKind::event("HALT")).unwrap();
        assert_eq!(v, serde_json::json!({"Event": "HALT"}));
    }
}
