#!/usr/bin/env python3
"""Write a synthetic SCR text log of N runs (our format) to stdout, for
timing `scr interval --log`: every run logs RUN_START, a WRITE and an ENCODE
transfer, and RUN_END; about a third end in a failure and are relaunched in
the same job, every other relaunch fetching from the prefix (FETCH).
Deterministic: a fixed seed. Usage: gen_runs_log.py N > log"""
import random
import sys
import time

n = int(sys.argv[1])
rng = random.Random(1)
t = 1.7e9
out = sys.stdout
job = 0
w = out.write
for run in range(n):
    stamp = lambda s: time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s)) + "Z"
    w(f"{stamp(t)}: host=n0, jobid={job}, event=RUN_START\n")
    if run % 2 == 1:
        w(f"{stamp(t + 5)}: host=n0, jobid={job}, xfer=FETCH, dset={run}, secs=4.0\n")
    w(f"{stamp(t + 60)}: host=n0, jobid={job}, xfer=WRITE, dset={run}, secs={30 + rng.uniform(-5, 5):.3f}\n")
    w(f"{stamp(t + 95)}: host=n0, jobid={job}, xfer=ENCODE, dset={run}, secs=2.5\n")
    dur = rng.uniform(2, 24) * 3600
    failed = rng.random() < 0.35
    note = "failed: node lost" if failed else "allocation-ended"
    w(f"{stamp(t + dur)}: host=n0, jobid={job}, event=RUN_END, note=\"{note}\"\n")
    t += dur + 600
    if not failed:
        job += 1
