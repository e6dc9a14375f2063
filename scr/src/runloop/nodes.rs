//! Which nodes an allocation has (from the resource manager) and which of
//! them the next launch runs on.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::health::{expand_hostlist, DownList, HostlistError};
use crate::launch::run_argv;

/// Where an allocation's node list came from, and why it could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodesError {
    /// A host list in a variable is not in hostlist syntax.
    #[error("{var}: {source}")]
    Hostlist {
        /// The variable.
        var: String,
        /// What is wrong.
        source: HostlistError,
    },
    /// The hostfile could not be read.
    #[error("hostfile {path}: {source}")]
    Hostfile {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A resource manager's command failed.
    #[error("{command} failed: {why}")]
    Command {
        /// The command.
        command: String,
        /// Its error output or exit status.
        why: String,
    },
    /// Nothing says which nodes the job has.
    #[error("no node list: not inside a SLURM, Flux or LSF allocation, and neither SCR_NODELIST nor a hostfile was given")]
    Unknown,
}

/// The allocation's nodes, in order, from the first source that has them:
/// a hostfile (mpirun), `SCR_NODELIST`, SLURM (`SLURM_JOB_NODELIST`, read
/// with `scontrol show hostnames` when it is beyond the syntax expanded
/// here), LSF (`LSB_MCPU_HOSTS`, `LSB_HOSTS`), Flux (`flux getattr hostlist`
/// when `FLUX_JOB_ID` is set). Also returns which source it was.
pub fn allocation_nodes(
    var: &dyn Fn(&str) -> Option<String>,
    hostfile: Option<&Path>,
) -> Result<(&'static str, Vec<String>), NodesError> {
    if let Some(path) = hostfile {
        return Ok(("hostfile", read_hostfile(path)?));
    }
    let from = |name: &str, list: &str| {
        expand_hostlist(list).map_err(|source| NodesError::Hostlist {
            var: name.to_string(),
            source,
        })
    };
    if let Some(list) = var("SCR_NODELIST") {
        return Ok(("SCR_NODELIST", from("SCR_NODELIST", &list)?));
    }
    for name in ["SLURM_JOB_NODELIST", "SLURM_NODELIST"] {
        if let Some(list) = var(name) {
            return match from(name, &list) {
                Ok(v) => Ok(("slurm", v)),
                Err(_) => Ok((
                    "slurm",
                    command_lines(&["scontrol", "show", "hostnames", &list])?,
                )),
            };
        }
    }
    if let Some(v) = var("LSB_MCPU_HOSTS") {
        // "host slots host slots ...": every other word.
        return Ok(("lsf", dedup(v.split_whitespace().step_by(2))));
    }
    if let Some(v) = var("LSB_HOSTS") {
        return Ok(("lsf", dedup(v.split_whitespace())));
    }
    if var("FLUX_JOB_ID").is_some() {
        let out = command_lines(&["flux", "getattr", "hostlist"])?;
        return Ok(("flux", from("flux getattr hostlist", &out.join(","))?));
    }
    Err(NodesError::Unknown)
}

/// Names in order of first appearance.
fn dedup<'a>(names: impl Iterator<Item = &'a str>) -> Vec<String> {
    let mut v: Vec<String> = Vec::new();
    for n in names {
        if !v.iter().any(|x| x == n) {
            v.push(n.to_string());
        }
    }
    v
}

/// The hosts of an OpenMPI/MPICH hostfile: the first word of every line
/// that is not blank or a comment (`node1 slots=2`, `node2:4`).
pub fn read_hostfile(path: &Path) -> Result<Vec<String>, NodesError> {
    let text = std::fs::read_to_string(path).map_err(|source| NodesError::Hostfile {
        path: path.to_path_buf(),
        source,
    })?;
    Ok(dedup(text.lines().filter_map(|l| {
        let l = l.split('#').next().unwrap_or("").trim();
        l.split_whitespace()
            .next()
            .map(|w| w.split(':').next().unwrap_or(w))
    })))
}

/// An OpenMPI hostfile for `nodes`, `slots` ranks each.
pub fn hostfile_text(nodes: &[String], slots: usize) -> String {
    nodes
        .iter()
        .map(|n| format!("{n} slots={slots}\n"))
        .collect()
}

/// When the allocation ends, seconds since the epoch, asked of its
/// resource manager (SCR 3.1's scr_run exports it as SCR_END_TIME, which
/// SCR_HALT_SECONDS needs; SLURM exports it itself only from 23.02 on):
/// the `EndTime` of `scontrol --oneliner show job $SLURM_JOB_ID`, in the
/// local time zone; in LSF, now and the `TIME_LEFT` of `bjobs -o time_left
/// $LSB_JOBID` (hours:minutes); in Flux (`FLUX_JOB_ID`), now and the
/// seconds `flux job timeleft` prints for the enclosing job (the
/// allocation's instance: given `FLUX_JOB_ID`, which names the job in the
/// parent instance, it would ask the wrong instance). `Ok(None)` elsewhere
/// and for a job without an end.
pub fn allocation_end_s(
    var: &dyn Fn(&str) -> Option<String>,
    now_s: i64,
) -> Result<Option<i64>, NodesError> {
    if let Some(id) = var("SLURM_JOB_ID").or_else(|| var("SLURM_JOBID")) {
        let words = command_lines(&["scontrol", "--oneliner", "show", "job", &id])?;
        return match words.iter().find_map(|w| w.strip_prefix("EndTime=")) {
            Some(end) => slurm_end_time(end, now_s, &crate::halt::time::TimeZone::system()),
            None => Ok(None),
        };
    }
    if let Some(id) = var("LSB_JOBID") {
        let words = command_lines(&["bjobs", "-o", "time_left", &id])?;
        return Ok(lsf_time_left_s(&words).map(|left| now_s.saturating_add(left)));
    }
    if var("FLUX_JOB_ID").is_some() {
        let words = command_lines(&["flux", "job", "timeleft"])?;
        return flux_time_left_s(&words).map(|left| left.map(|s| now_s.saturating_add(s)));
    }
    Ok(None)
}

/// The seconds left that `flux job timeleft` prints: a whole number (0
/// once the limit passed), `infinity` (or `inf`) for a job without one.
fn flux_time_left_s(words: &[String]) -> Result<Option<i64>, NodesError> {
    let text = words.join(" ");
    let t = text.trim();
    if t.eq_ignore_ascii_case("infinity") || t.eq_ignore_ascii_case("inf") {
        return Ok(None);
    }
    match t.parse::<f64>() {
        Ok(s) if s.is_finite() && s >= 0.0 => Ok(Some(s.floor() as i64)),
        _ => Err(NodesError::Command {
            command: "flux job timeleft".into(),
            why: format!("printed {t:?}, not a number of seconds"),
        }),
    }
}

/// The seconds left that `bjobs -o time_left` prints (`TIME_LEFT` then
/// `0:12 L`, hours and minutes); none for `-` (no limit) or nothing.
fn lsf_time_left_s(words: &[String]) -> Option<i64> {
    words.iter().find_map(|w| {
        let (h, m) = w.split_once(':')?;
        let (h, m) = (h.parse::<i64>().ok()?, m.parse::<i64>().ok()?);
        (h >= 0 && (0..60).contains(&m)).then_some((h * 60 + m) * 60)
    })
}

/// SLURM's `EndTime` value (`2026-11-29T17:00:00` in `zone`; `Unknown`,
/// `None` or `N/A` for a job without an end).
fn slurm_end_time(
    end: &str,
    now_s: i64,
    zone: &crate::halt::time::TimeZone,
) -> Result<Option<i64>, NodesError> {
    if !end.starts_with(|c: char| c.is_ascii_digit()) {
        return Ok(None);
    }
    crate::halt::time::parse_time(end, now_s, zone)
        .map(Some)
        .map_err(|e| NodesError::Command {
            command: "scontrol --oneliner show job".into(),
            why: format!("EndTime={end}: {e}"),
        })
}

/// Standard output lines of a resource manager's query (bounded: 30 s).
fn command_lines(argv: &[&str]) -> Result<Vec<String>, NodesError> {
    let v: Vec<OsString> = argv.iter().map(OsString::from).collect();
    let fail = |why: String| NodesError::Command {
        command: argv.join(" "),
        why,
    };
    let out = run_argv(&v, Duration::from_secs(30)).map_err(|e| fail(e.to_string()))?;
    if !out.success() {
        return Err(fail(format!(
            "exit code {}: {}",
            out.code(),
            out.stderr.trim()
        )));
    }
    Ok(out.stdout.split_whitespace().map(String::from).collect())
}

/// The nodes of the next launch: every healthy node of `previous` keeps its
/// place (its ranks find their cached files there), lost ones are replaced
/// by the first healthy unused nodes of the allocation (spares). With fewer
/// than `need` healthy nodes, as many as there are, but `None` below
/// `min_nodes` (`SCR_MIN_NODES`).
pub fn choose_nodes(
    all: &[String],
    previous: &[String],
    down: &DownList,
    need: usize,
    min_nodes: usize,
) -> Option<Vec<String>> {
    let mut spares = all
        .iter()
        .filter(|n| !down.is_down(n) && !previous.contains(n));
    let mut chosen = Vec::with_capacity(need);
    for i in 0..need {
        let next = match previous.get(i) {
            Some(p) if !down.is_down(p) => Some(p.clone()),
            _ => spares.next().cloned(),
        };
        if let Some(n) = next {
            chosen.push(n);
        }
    }
    (chosen.len() >= min_nodes.max(1)).then_some(chosen)
}

#[cfg(test)]
mod tests {
    use super::super::health::DownReason;
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn relaunches_keep_healthy_nodes_in_place_and_fill_with_spares() {
        let all = names(&["n0", "n1", "n2", "n3", "n4", "n5"]);
        let mut down = DownList::new();
        let first = choose_nodes(&all, &[], &down, 4, 4).unwrap();
        assert_eq!(first, names(&["n0", "n1", "n2", "n3"]));
        down.mark("n1", DownReason::Excluded);
        let second = choose_nodes(&all, &first, &down, 4, 4).unwrap();
        assert_eq!(second, names(&["n0", "n4", "n2", "n3"]));
        down.mark("n2", DownReason::Excluded);
        down.mark("n5", DownReason::Excluded);
        assert_eq!(choose_nodes(&all, &second, &down, 4, 4), None);
        // SCR_MIN_NODES 3: the three healthy nodes still run.
        assert_eq!(
            choose_nodes(&all, &second, &down, 4, 3).unwrap(),
            names(&["n0", "n4", "n3"])
        );
    }

    #[test]
    fn slurms_end_time_is_read_in_the_local_zone_and_unknown_is_none() {
        use crate::halt::time::fixed_zone;
        let now = 1_795_000_000;
        assert_eq!(
            slurm_end_time("2026-11-29T17:00:00", now, &fixed_zone(0)).unwrap(),
            Some(1_795_971_600)
        );
        assert_eq!(
            slurm_end_time("2026-11-29T17:00:00", now, &fixed_zone(3600)).unwrap(),
            Some(1_795_971_600 - 3600)
        );
        for none in ["Unknown", "None", "N/A"] {
            assert_eq!(slurm_end_time(none, now, &fixed_zone(0)).unwrap(), None);
        }
        let e = slurm_end_time("2026-13-45T99:00:00", now, &fixed_zone(0)).unwrap_err();
        assert!(e.to_string().contains("EndTime=2026-13-45T99:00:00"), "{e}");
    }

    #[test]
    fn lsfs_time_left_is_hours_and_minutes_and_a_dash_is_no_limit() {
        let w = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(lsf_time_left_s(&w("TIME_LEFT 0:12 L")), Some(720));
        assert_eq!(lsf_time_left_s(&w("TIME_LEFT\n25:01 E")), Some(90_060));
        assert_eq!(lsf_time_left_s(&w("TIME_LEFT -")), None);
        assert_eq!(lsf_time_left_s(&w("")), None);
        assert_eq!(lsf_time_left_s(&w("TIME_LEFT 1:99 L")), None);
    }

    #[test]
    fn fluxs_time_left_is_seconds_and_infinity_is_no_limit() {
        let w = |t: &str| t.split_whitespace().map(String::from).collect::<Vec<_>>();
        assert_eq!(flux_time_left_s(&w("3600")).unwrap(), Some(3600));
        assert_eq!(flux_time_left_s(&w("12.8\n")).unwrap(), Some(12));
        assert_eq!(flux_time_left_s(&w("0")).unwrap(), Some(0));
        assert_eq!(flux_time_left_s(&w("infinity")).unwrap(), None);
        assert_eq!(flux_time_left_s(&w("inf")).unwrap(), None);
        for bad in ["", "-5", "1h", "nan"] {
            let e = flux_time_left_s(&w(bad)).unwrap_err().to_string();
            assert!(e.contains("flux job timeleft"), "{bad:?}: {e}");
        }
    }

    #[test]
    fn node_lists_come_from_each_resource_manager() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let slurm = env(&[("SLURM_JOB_NODELIST", "node[1-3],login9")]);
        assert_eq!(
            allocation_nodes(&slurm, None).unwrap(),
            ("slurm", names(&["node1", "node2", "node3", "login9"]))
        );
        let lsf = env(&[("LSB_MCPU_HOSTS", "batch1 1 c1 42 c2 42")]);
        assert_eq!(
            allocation_nodes(&lsf, None).unwrap().1,
            names(&["batch1", "c1", "c2"])
        );
        let lsb = env(&[("LSB_HOSTS", "c1 c1 c2 c2")]);
        assert_eq!(
            allocation_nodes(&lsb, None).unwrap().1,
            names(&["c1", "c2"])
        );
        let scr = env(&[("SCR_NODELIST", "a,b"), ("SLURM_JOB_NODELIST", "x")]);
        assert_eq!(allocation_nodes(&scr, None).unwrap().1, names(&["a", "b"]));
        let none = env(&[]);
        assert!(matches!(
            allocation_nodes(&none, None),
            Err(NodesError::Unknown)
        ));
        let tmp = tempfile::tempdir().unwrap();
        let hf = tmp.path().join("hosts");
        std::fs::write(&hf, "# comment\nnode4 slots=2\n\nnode5:2\nnode4\n").unwrap();
        assert_eq!(
            allocation_nodes(&slurm, Some(&hf)).unwrap(),
            ("hostfile", names(&["node4", "node5"]))
        );
        assert_eq!(
            hostfile_text(&names(&["a", "b"]), 2),
            "a slots=2\nb slots=2\n"
        );
    }
}
