#!/usr/bin/env python3
"""Dump the jobs, events and transfers of an SCR log database that
gen_runs_db.py wrote into tab-separated files (NULL as \\N), the form both
MySQL's LOAD DATA INFILE and PostgreSQL's COPY read, to time
`scr interval --db mysql://...` and `--db postgresql://...` on the same
runs. The first line of each file is not a header: the columns are those
COLUMNS names. Usage: export_runs_tsv.py DB OUTDIR"""
import os
import sqlite3
import sys

COLUMNS = {
    "jobs": ["id", "jobid", "prefix", "first_seen_s"],
    "events": ["job_id", "time_s", "time", "host", "type", "note"],
    "transfers": ["job_id", "time_s", "time", "host", "type", "dset", "secs"],
}

db_path, out = sys.argv[1:3]
os.makedirs(out, exist_ok=True)
db = sqlite3.connect(db_path)
for table, cols in COLUMNS.items():
    with open(os.path.join(out, f"{table}.tsv"), "w") as f:
        for row in db.execute(f"SELECT {', '.join(cols)} FROM {table} ORDER BY rowid"):
            f.write("\t".join("\\N" if v is None else repr(v) if isinstance(v, float) else str(v) for v in row))
            f.write("\n")
    print(table, ", ".join(cols))
