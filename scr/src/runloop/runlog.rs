//! The run loop's own log entries (developer guide, "Logging"): SCR's
//! `scr_run` script adds to the job's log what only the loop sees —
//! `RUN_START` before each launch, `NODE_FAIL` for each node its health
//! checks find down (with the reason), `RUN_END` after each launch, with a
//! note saying how it ended. `scr interval` reads these to tell a run that
//! failed from one that finished, halted or ran out of allocation (only the
//! first counts as a failure when it estimates the MTBF).
//!
//! The loop logs exactly when the job's ranks would: with `SCR_LOG_ENABLE=1`
//! in the environment it gives them (or its configuration files), into the
//! same sinks (`<prefix>/.scr/log`, syslog, the log database) with the same
//! host and job id rules as the library.

use std::collections::BTreeMap;
use std::path::Path;

use crate::config::{Config, LoadOptions, MapEnv};
use crate::log::writer::{Entry, EventType, LogSettings, Logger};

/// The run loop's logger; logs nothing when logging is off.
#[derive(Debug, Default)]
pub struct RunLog {
    logger: Option<Logger>,
}

/// How one launch ended, as the `RUN_END` note says it.
///
/// Words matter: `scr interval` counts a run whose note holds `fail`,
/// `crash`, `killed` or `lost` as a failure (see
/// [`scr::interval::estimate::note_is_failure`]).
pub fn run_end_note(exit_code: Option<i32>, halted: bool, timeout_s: f64) -> String {
    match exit_code {
        Some(0) if halted => "halted".to_string(),
        Some(0) => "finished".to_string(),
        Some(code) => format!("failed: launcher exit code {code}"),
        None => format!("failed: hang, killed after {timeout_s:.0} s"),
    }
}

impl RunLog {
    /// Open the log the job's ranks would write to: the configuration is
    /// this process's environment overlaid with `env` (what the ranks get),
    /// read as the library reads it. A configuration the library would
    /// refuse logs nothing and says nothing here: the job's ranks report it
    /// themselves (a scenario may test exactly that). A log that cannot be
    /// opened is returned as a warning, and nothing is logged.
    pub fn open(prefix: &Path, env: &BTreeMap<String, String>) -> (RunLog, Option<String>) {
        let mut vars: BTreeMap<String, String> = std::env::vars().collect();
        vars.extend(env.iter().map(|(k, v)| (k.clone(), v.clone())));
        let cwd = std::env::current_dir().ok();
        let map = MapEnv { vars, cwd };
        let opts = LoadOptions {
            system_file: None,
            read_app_conf: true,
        };
        let Ok(cfg) = Config::load(&map, &opts) else {
            return (RunLog::default(), None);
        };
        let Ok(Some(settings)) = LogSettings::from_config(&cfg) else {
            return (RunLog::default(), None);
        };
        // The id the ranks log under; a configuration the library refuses
        // is theirs to report, as above.
        let Ok(settings_all) = crate::config::Settings::from_config(&cfg) else {
            return (RunLog::default(), None);
        };
        let jobid = settings_all.job.job_id;
        let host = launch_host();
        if let Err(e) = std::fs::create_dir_all(prefix.join(".scr")) {
            let shown = prefix.join(".scr");
            return (
                RunLog::default(),
                Some(format!("run loop log: {}: {e}", shown.display())),
            );
        }
        match Logger::open(prefix, &host, &jobid, settings) {
            Ok(l) => (RunLog { logger: Some(l) }, None),
            Err(e) => (RunLog::default(), Some(format!("run loop log: {e}"))),
        }
    }

    /// True when something is logged.
    pub fn enabled(&self) -> bool {
        self.logger.is_some()
    }

    fn log(&self, e: Entry) {
        if let Some(l) = &self.logger {
            l.log_or_warn(&e);
        }
    }

    /// `RUN_START` of launch `launch` on `nodes` nodes with `procs` ranks.
    pub fn run_start(&self, launch: u32, max_launches: u32, procs: u64, nodes: &[String]) {
        self.log(
            Entry::event(EventType::RunStart)
                .note(format!(
                    "launch {launch} of at most {max_launches} on {}",
                    nodes.join(",")
                ))
                .procs_nodes(procs, nodes.len() as u64),
        );
    }

    /// `NODE_FAIL` of `node`, with the health check's reason.
    pub fn node_fail(&self, node: &str, reason: &str) {
        self.log(Entry::event(EventType::NodeFail).note(format!("{node}: {reason}")));
    }

    /// `NODE_FAIL` of `node` found by a job script's check (SCR's
    /// `scr_list_down_nodes --log`), with the seconds the job had run when
    /// given (`--secs`).
    pub fn node_fail_after(&self, node: &str, reason: &str, secs: Option<f64>) {
        let e = Entry::event(EventType::NodeFail).note(format!("{node}: {reason}"));
        self.log(match secs {
            Some(s) => e.secs(s),
            None => e,
        });
    }

    /// `RUN_END` of launch `launch`, `secs` after its start.
    pub fn run_end(&self, launch: u32, note: &str, secs: f64) {
        self.log(
            Entry::event(EventType::RunEnd)
                .note(format!("launch {launch}: {note}"))
                .secs(secs),
        );
    }
}

/// The name the launching host goes by (the loop runs there, not on a node).
fn launch_host() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: the buffer is valid for its length; gethostname terminates
    // the name or truncates it, and we stop at the first NUL either way.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "localhost".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::interval::estimate::{note_is_failure, runs, RunEnd};
    use crate::log::read_log;

    fn env(prefix: &Path, conf: &Path) -> BTreeMap<String, String> {
        [
            ("SCR_LOG_ENABLE", "1".to_string()),
            ("SCR_CONFIG_FILE", conf.display().to_string()),
            ("SCR_JOB_ID", "77".to_string()),
            ("SCR_PREFIX", prefix.display().to_string()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    }

    #[test]
    fn notes_say_failure_exactly_when_the_launch_failed() {
        assert!(!note_is_failure(&run_end_note(Some(0), false, 60.0)));
        assert!(!note_is_failure(&run_end_note(Some(0), true, 60.0)));
        assert!(note_is_failure(&run_end_note(Some(137), false, 60.0)));
        assert!(note_is_failure(&run_end_note(None, false, 60.0)));
    }

    #[test]
    fn a_configuration_the_library_refuses_is_left_to_the_job() {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = BTreeMap::new();
        e.insert("SCR_LOG_ENABLE".to_string(), "1".to_string());
        e.insert("SCR_COPY_TYPE".to_string(), "BOGUS".to_string());
        let (log, warn) = RunLog::open(tmp.path(), &e);
        assert!(!log.enabled());
        assert_eq!(warn, None);
    }

    #[test]
    fn off_unless_logging_is_enabled() {
        let tmp = tempfile::tempdir().unwrap();
        let mut e = BTreeMap::new();
        e.insert("SCR_LOG_ENABLE".to_string(), "0".to_string());
        let (log, warn) = RunLog::open(tmp.path(), &e);
        assert!(!log.enabled());
        assert_eq!(warn, None);
        assert!(!tmp.path().join(".scr").exists());
    }

    #[test]
    fn a_failed_launch_and_a_finished_one_read_back_as_one_failure_and_one_censored_run() {
        let tmp = tempfile::tempdir().unwrap();
        let prefix = tmp.path().join("prefix");
        let conf = tmp.path().join("scr.conf");
        std::fs::write(&conf, "SCR_LOG_SYSLOG_ENABLE=0\n").unwrap();
        let (log, warn) = RunLog::open(&prefix, &env(&prefix, &conf));
        assert_eq!(warn, None);
        assert!(log.enabled());
        let nodes: Vec<String> = ["n0", "n1"].iter().map(|s| s.to_string()).collect();
        log.run_start(1, 3, 4, &nodes);
        log.run_end(1, &run_end_note(Some(137), false, 60.0), 1.5);
        log.node_fail("n1", "n1: /dev/shm not reachable");
        let nodes2: Vec<String> = ["n0", "n2"].iter().map(|s| s.to_string()).collect();
        log.run_start(2, 3, 4, &nodes2);
        log.run_end(2, &run_end_note(Some(0), false, 60.0), 2.0);
        drop(log);
        let parsed = read_log(&prefix.join(".scr").join("log"), true).unwrap();
        let events: Vec<String> = parsed
            .records
            .iter()
            .map(|r| format!("{:?}", r.entry.kind))
            .collect();
        assert_eq!(events.len(), 5, "{events:?}");
        assert!(parsed
            .records
            .iter()
            .all(|r| r.jobid.as_deref() == Some("77")));
        let nf = parsed
            .records
            .iter()
            .find(|r| r.is_event("NODE_FAIL"))
            .unwrap();
        assert!(nf.entry.note.as_deref().unwrap().starts_with("n1: "));
        let start = parsed
            .records
            .iter()
            .find(|r| r.is_event("RUN_START"))
            .unwrap();
        assert_eq!((start.entry.procs, start.entry.nodes), (Some(4), Some(2)));
        let r = runs(&parsed.records);
        let ends: Vec<RunEnd> = r.iter().map(|r| r.end).collect();
        assert_eq!(ends, vec![RunEnd::Failed, RunEnd::Censored]);
    }
}
