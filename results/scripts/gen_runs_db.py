#!/usr/bin/env python3
"""Turn a text log of gen_runs_log.py into an SCR log database, for timing
`scr interval --db`. The schema comes from TEMPLATE, a log.db the library
wrote (SCR_LOG_DB_ENABLE=1 in the system config file); its rows are
dropped. Events go to `events`, transfers to `transfers`, one `jobs` row
per job id (prefix /p). Usage: gen_runs_db.py TEMPLATE LOG OUT"""
import datetime
import shutil
import sqlite3
import sys

template, log, out = sys.argv[1:4]
shutil.copyfile(template, out)
db = sqlite3.connect(out)
for table in ("events", "transfers", "runs", "jobs"):
    db.execute(f"DELETE FROM {table}")
jobs = {}
events = []
transfers = []


def job_row(jobid, t):
    if jobid not in jobs:
        jobs[jobid] = len(jobs) + 1
        db.execute(
            "INSERT INTO jobs (id, jobid, prefix, first_seen_s) VALUES (?, ?, '/p', ?)",
            (jobs[jobid], jobid, t),
        )
    return jobs[jobid]


def flush():
    db.executemany(
        "INSERT INTO events (job_id, time_s, time, host, type, note) VALUES (?, ?, ?, ?, ?, ?)",
        events,
    )
    db.executemany(
        "INSERT INTO transfers (job_id, time_s, time, host, type, dset, secs) VALUES (?, ?, ?, ?, ?, ?, ?)",
        transfers,
    )
    events.clear()
    transfers.clear()


with open(log) as f:
    for line in f:
        stamp, _, rest = line.rstrip("\n").partition(": ")
        t = datetime.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
        fields = {}
        for kv in rest.split(", "):
            k, _, v = kv.partition("=")
            fields[k] = v.strip('"')
        job = job_row(fields["jobid"], t)
        if "event" in fields:
            events.append((job, t, stamp, fields["host"], fields["event"], fields.get("note")))
        else:
            transfers.append(
                (job, t, stamp, fields["host"], fields["xfer"], int(fields["dset"]), float(fields["secs"]))
            )
        if len(events) + len(transfers) >= 100_000:
            flush()
flush()
db.commit()
db.close()
