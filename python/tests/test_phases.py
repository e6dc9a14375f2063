"""init/finalize and the context managers, in one MPI process without mpirun.

Each test runs a script in a fresh interpreter (mpi4py starts a singleton
MPI there; MPI can be initialised once per process) on one simulated node
in a temporary directory. The script prints one line per check it passed;
the test compares those lines, so a check that did not run fails it.
"""

import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

try:
    import scr
except ImportError:
    scr = None

try:
    import mpi4py  # noqa: F401
except ImportError:
    mpi4py = None

WRITE = textwrap.dedent(
    """
    import scr
    scr.init({"SCR_CHECKPOINT_INTERVAL": 1, "SCR_DEBUG": None})
    print("initialized", scr.is_initialized())
    print("have_restart", scr.have_restart())
    print("need_checkpoint", scr.need_checkpoint())
    print("route outside a phase", scr.route_file("x.dat"))

    with scr.checkpoint("ckpt.1") as c:
        with open(c.route("a.dat"), "wb") as f:
            f.write(b"first checkpoint")
    print("ckpt.1 all_valid", c.all_valid)

    try:
        with scr.checkpoint("ckpt.2") as c:
            with open(c.route("a.dat"), "wb") as f:
                f.write(b"half written")
            raise KeyError("the body failed")
    except KeyError as e:
        print("ckpt.2 raised", e)
    print("ckpt.2 all_valid", c.all_valid)

    with scr.checkpoint("ckpt.3") as c:
        c.mark_invalid()
    print("ckpt.3 all_valid", c.all_valid)

    try:
        c.route("a.dat")
    except scr.SCRError as e:
        print("route after the block:", e.reason)
    try:
        scr.complete_output()
    except scr.SCRError as e:
        print("complete_output without a phase:", e.reason)
    try:
        scr.init()
    except scr.SCRError as e:
        print("second init:", e.reason)
    try:
        scr.current("no.such.dataset")
    except scr.SCRError as e:
        print("current of an unknown dataset:", e.call, e.arguments, e.code, e.reason)

    with scr.output("out.1") as o:
        with open(o.route("b.dat"), "wb") as f:
            f.write(b"output")
    print("out.1", o.flags == scr.FLAG_OUTPUT, o.all_valid)
    scr.delete("out.1")
    print("deleted out.1")
    scr.finalize()
    print("finalized", scr.is_initialized())
    """
)

WRITE_EXPECTED = [
    "initialized True",
    "have_restart None",
    "need_checkpoint True",
    "route outside a phase x.dat",
    "ckpt.1 all_valid True",
    "ckpt.2 raised 'the body failed'",
    "ckpt.2 all_valid False",
    "ckpt.3 all_valid False",
    "route after the block: the output phase is not open",
    "complete_output without a phase: no output phase is open (call scr.start_output() first)",
    "second init: SCR is already initialized",
    "current of an unknown dataset: SCR_Current ('no.such.dataset',) 1 None",
    "out.1 True True",
    "deleted out.1",
    "finalized False",
]

READ = textwrap.dedent(
    """
    import scr
    scr.init()
    print("have_restart", scr.have_restart())
    with scr.restart() as r:
        with open(r.route("a.dat"), "rb") as f:
            print("read", r.name, f.read())
        try:
            r.route("never_written.dat")
        except scr.SCRError as e:
            print("a file the checkpoint lacks:", e.call, e.arguments, e.code)
    print("restart all_valid", r.all_valid)
    print("after a good restart", scr.have_restart())
    scr.finalize()
    """
)

READ_EXPECTED = [
    "have_restart ckpt.1",
    "read ckpt.1 b'first checkpoint'",
    "a file the checkpoint lacks: SCR_Route_file ('never_written.dat',) 1",
    "restart all_valid True",
    "after a good restart None",
]

READ_FAILS = textwrap.dedent(
    """
    import scr
    scr.init()
    try:
        with scr.restart() as r:
            raise ValueError("cannot parse " + r.route("a.dat").rsplit("/", 1)[1])
    except ValueError as e:
        print("restart raised", e)
    print("restart all_valid", r.all_valid)
    print("after a failed restart", scr.have_restart())
    scr.finalize()
    """
)

READ_FAILS_EXPECTED = [
    "restart raised cannot parse a.dat",
    "restart all_valid False",
    "after a failed restart None",
]

NO_FINALIZE = "import scr\nscr.init()\nprint('exiting without finalize')\n"


@unittest.skipIf(scr is None or mpi4py is None, "needs libscr.so (SCR_LIBRARY) and mpi4py")
class PhaseTests(unittest.TestCase):
    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name
        self.prefix = os.path.join(self.tmp, "prefix")
        os.makedirs(self.prefix)

    def tearDown(self):
        self._tmp.cleanup()

    def run_script(self, script):
        env = {k: v for k, v in os.environ.items() if not k.startswith("SCR_") or k == "SCR_LIBRARY"}
        env.update(
            SCR_LIBRARY=scr.LIBRARY_PATH,
            SCR_PREFIX=self.prefix,
            SCR_JOB_ID="python-unit",
            SCR_NODE_NAME="n0",
            SCR_NODE_ROOT=os.path.join(self.tmp, "nodes", "n0"),
            SCR_COPY_TYPE="SINGLE",
            SCR_FLUSH="0",
            SCR_CACHE_SIZE="4",
            OMPI_ALLOW_RUN_AS_ROOT="1",
            OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
        )
        out = subprocess.run(
            [sys.executable, "-c", script],
            cwd=self.prefix,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return out

    def assert_lines(self, out, expected):
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(out.stdout.splitlines(), expected, out.stderr)

    def test_checkpoint_context_completes_invalid_on_exception_and_restart_reads_back(self):
        self.assert_lines(self.run_script(WRITE), WRITE_EXPECTED)
        self.assert_lines(self.run_script(READ), READ_EXPECTED)

    def test_restart_context_completes_invalid_on_exception(self):
        self.assert_lines(self.run_script(WRITE), WRITE_EXPECTED)
        self.assert_lines(self.run_script(READ_FAILS), READ_FAILS_EXPECTED)

    def test_exit_without_finalize_warns(self):
        out = self.run_script(NO_FINALIZE)
        self.assertEqual(out.stdout, "exiting without finalize\n", out.stderr)
        self.assertIn("scr.init() was called but scr.finalize() was not", out.stderr)


if __name__ == "__main__":
    unittest.main()
