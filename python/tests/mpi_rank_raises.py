"""One rank's exception inside a checkpoint block, under mpirun (4 ranks).

ci/user/python.sh runs it twice: `write`, then `read` in a new launch.
write: checkpoint "good" on every rank; then checkpoint "bad", whose body
raises on rank 1 only. The block completes the phase on every rank (no rank
waits for rank 1), rank 1 alone sees the exception, and every rank sees
all_valid False for "bad". read: SCR restarts from "good", not "bad".
Prints "mpi_rank_raises <mode>: ok" on rank 0; exits 1 on any mismatch.
"""

import sys

from mpi4py import MPI

import scr


def main() -> int:
    mode = sys.argv[1]
    comm = MPI.COMM_WORLD
    rank = comm.rank
    scr.init()
    problems = []
    if mode == "write":
        with scr.checkpoint("good") as good:
            with open(good.route(f"rank_{rank}.dat"), "wb") as f:
                f.write(bytes([rank]) * 1000)
        raised = False
        try:
            with scr.checkpoint("bad") as bad:
                with open(bad.route(f"rank_{rank}.dat"), "wb") as f:
                    f.write(b"partial")
                if rank == 1:
                    raise RuntimeError("rank 1 cannot finish its checkpoint")
        except RuntimeError:
            raised = True
        seen = comm.allgather((good.all_valid, bad.all_valid, raised))
        if seen != [(True, False, r == 1) for r in range(comm.size)]:
            problems.append(f"(good.all_valid, bad.all_valid, raised) per rank: {seen}")
    else:
        name = scr.have_restart()
        if name != "good":
            problems.append(f"have_restart() is {name!r}, expected 'good'")
        else:
            with scr.restart() as r:
                with open(r.route(f"rank_{rank}.dat"), "rb") as f:
                    if f.read() != bytes([rank]) * 1000:
                        problems.append(f"rank {rank}: rank_{rank}.dat differs")
                        r.mark_invalid()
            if not r.all_valid:
                problems.append("the restart from 'good' was not valid on every rank")
    scr.finalize()
    problems = [p for ps in comm.allgather(problems) for p in ps]
    if rank == 0:
        print(f"mpi_rank_raises {mode}: " + ("; ".join(problems) if problems else "ok"), flush=True)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
