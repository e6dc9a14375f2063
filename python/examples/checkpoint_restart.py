#!/usr/bin/env python3
"""Checkpoint and restart an MPI application with SCR from Python.

Every rank writes its own file of deterministic, rank-dependent bytes into
each checkpoint through SCR. A run first restarts from the newest checkpoint
SCR has, if any, reading every rank's file back and checking it byte for
byte, then runs --steps more timesteps, taking a checkpoint whenever
scr.need_checkpoint() says so (SCR_CHECKPOINT_INTERVAL, 2 unless set: every
second step).

    mpirun -np 4 python checkpoint_restart.py --steps 6   # ckpt.2, ckpt.4, ckpt.6
    mpirun -np 4 python checkpoint_restart.py --steps 6   # restarts from ckpt.6

Exit status 0 when every restart read back exactly what was written, 1 when
a byte differs, a file is missing or a checkpoint failed.
"""

import argparse
import hashlib
import sys

from mpi4py import MPI

import scr


def contents(seed: int, rank: int, step: int, size: int) -> bytes:
    """What `rank` writes at `step`: `size` bytes, the same in every run."""
    out = bytearray()
    block = 0
    while len(out) < size:
        key = f"{seed}:{rank}:{step}:{block}".encode()
        out += hashlib.blake2b(key, digest_size=64).digest()
        block += 1
    return bytes(out[:size])


def file_name(step: int, rank: int) -> str:
    return f"ckpt.{step}/rank_{rank}.dat"


def difference(got: bytes, want: bytes) -> str:
    """Why `got` is not `want`, or "" when it is."""
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            return f"byte {i} is 0x{g:02x}, expected 0x{w:02x}"
    if len(got) != len(want):
        return f"{len(got)} bytes, expected {len(want)}"
    return ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6, help="timesteps to run after the restart")
    parser.add_argument("--size", type=int, default=256 * 1024, help="bytes per rank per checkpoint")
    parser.add_argument("--seed", type=int, default=1, help="what the data is made from")
    args = parser.parse_args()

    comm = MPI.COMM_WORLD
    rank = comm.rank

    def say(text: str) -> None:
        if rank == 0:
            print(f"checkpoint_restart: {text}", flush=True)

    # Settings go before init. Unless the environment or a config file set
    # an interval (the default, 0, is off), checkpoint every second step.
    if scr.config("SCR_CHECKPOINT_INTERVAL") in (None, "0"):
        scr.config("SCR_CHECKPOINT_INTERVAL=2")
    scr.init()  # starts MPI through mpi4py if needed, then SCR_Init

    step = 0
    name = scr.have_restart()
    if name is None:
        say("no checkpoint to restart from: starting at step 0")
    else:
        with scr.restart() as r:
            step = int(r.name.rsplit(".", 1)[1])
            want = contents(args.seed, rank, step, args.size)
            try:
                with open(r.route(file_name(step, rank)), "rb") as f:
                    problem = difference(f.read(), want)
            except (OSError, scr.SCRError) as e:
                problem = f"cannot read: {e}"
            if problem:
                print(f"rank {rank}: {r.name}: {file_name(step, rank)}: {problem}", file=sys.stderr, flush=True)
                r.mark_invalid()
        total = comm.allreduce(args.size if r.all_valid else 0)
        if not r.all_valid:
            say(f"restart from {r.name} FAILED: the data read back differs from what was written")
            scr.finalize()
            return 1
        say(f"restarted from {r.name} (step {step}): {comm.size} ranks verified {total} bytes, bit-exact")

    written = []
    for step in range(step + 1, step + 1 + args.steps):
        # ... one timestep of the application's work ...
        if scr.need_checkpoint():
            with scr.checkpoint(f"ckpt.{step}") as ckpt:
                with open(ckpt.route(file_name(step, rank)), "wb") as f:
                    f.write(contents(args.seed, rank, step, args.size))
            if not ckpt.all_valid:
                say(f"checkpoint {ckpt.name} FAILED on some rank")
                scr.finalize()
                return 1
            written.append(ckpt.name)
        if scr.should_exit():
            say(f"SCR asks to stop after step {step}")
            break
    say(f"wrote {', '.join(written) or 'no checkpoint'} ({args.size} bytes per rank each)")
    scr.finalize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
