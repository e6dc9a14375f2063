"""Return codes become exceptions; arguments are checked; config and version.

Runs against the real libscr.so without starting MPI (every call here is
one the library answers before SCR_Init).
"""

import os
import re
import unittest

try:
    import scr
except ImportError:
    scr = None


def header_version():
    """SCR_VERSION of the scr.h installed next to the library, or None."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(scr.LIBRARY_PATH)))
    try:
        with open(os.path.join(prefix, "include", "scr.h"), encoding="utf-8") as f:
            m = re.search(r'^#define SCR_VERSION "([^"]+)"', f.read(), re.M)
    except OSError:
        return None
    return m.group(1) if m else None


@unittest.skipIf(scr is None, "libscr.so not available (set SCR_LIBRARY)")
class BeforeInitTests(unittest.TestCase):
    def setUp(self):
        self.assertFalse(scr.is_initialized())

    def assert_scr_error(self, cm, call, arguments=()):
        e = cm.exception
        self.assertIsInstance(e, RuntimeError)  # as LLNL's bindings raise
        self.assertEqual(e.call, call)
        self.assertEqual(e.code, 1)
        self.assertEqual(e.arguments, tuple(arguments))
        self.assertEqual(e.reason, "SCR is not initialized (call scr.init() first)")
        self.assertIn(f"{call}(", str(e))
        self.assertIn("with return code 1", str(e))

    def test_every_collective_call_before_init_raises_scr_error_naming_it(self):
        cases = [
            ("SCR_Need_checkpoint", scr.need_checkpoint, (), ()),
            ("SCR_Should_exit", scr.should_exit, (), ()),
            ("SCR_Have_restart", scr.have_restart, (), ()),
            ("SCR_Start_restart", scr.start_restart, (), ()),
            ("SCR_Start_output", scr.start_output, ("ckpt.1", scr.FLAG_CHECKPOINT), ("ckpt.1", scr.FLAG_CHECKPOINT)),
            ("SCR_Current", scr.current, ("ckpt.1",), ("ckpt.1",)),
            ("SCR_Delete", scr.delete, ("ckpt.1",), ("ckpt.1",)),
            ("SCR_Drop", scr.drop, ("ckpt.1",), ("ckpt.1",)),
            ("SCR_Route_file", scr.route_file, ("rank_0.dat",), ("rank_0.dat",)),
            ("SCR_Complete_output", scr.complete_output, (True,), (True,)),
            ("SCR_Complete_restart", scr.complete_restart, (False,), (False,)),
        ]
        for call, fn, args, shown in cases:
            with self.subTest(call=call):
                with self.assertRaises(scr.SCRError) as cm:
                    fn(*args)
                self.assert_scr_error(cm, call, shown)

    def test_finalize_before_init_raises(self):
        with self.assertRaises(scr.SCRError) as cm:
            scr.finalize()
        self.assertEqual(cm.exception.call, "SCR_Finalize")
        self.assertEqual(cm.exception.reason, "SCR is not initialized")

    def test_route_accepts_path_like(self):
        import pathlib

        with self.assertRaises(scr.SCRError) as cm:
            scr.route_file(pathlib.PurePosixPath("dir/rank_0.dat"))
        self.assertEqual(cm.exception.arguments, ("dir/rank_0.dat",))

    def test_bad_arguments_never_reach_the_library(self):
        with self.assertRaisesRegex(ValueError, "contains a NUL character"):
            scr.route_file("a\0b")
        with self.assertRaisesRegex(ValueError, "contains a NUL character"):
            scr.config("SCR_DEBUG=1\0")
        with self.assertRaisesRegex(TypeError, "name must be a str, not int"):
            scr.delete(7)
        with self.assertRaisesRegex(TypeError, r"flags must be an int \(scr.FLAG_\*\), not str"):
            scr.start_output("x", "checkpoint")

    def test_flags_are_scr_h_values(self):
        self.assertEqual((scr.FLAG_NONE, scr.FLAG_CHECKPOINT, scr.FLAG_OUTPUT), (0, 1, 2))
        self.assertEqual(int(scr.FLAG_CHECKPOINT | scr.FLAG_OUTPUT), 3)

    def test_config_set_query_unset_before_init(self):
        key = "SCR_CHECKPOINT_INTERVAL"
        if os.environ.get(key) is not None:
            self.skipTest(f"{key} is set in the environment")
        before = scr.config(key)  # the default, "0" (off)
        self.assertNotEqual(before, "5")
        self.assertIsNone(scr.config(f"{key}=5"))
        self.assertEqual(scr.config(key), "5")
        self.assertIsNone(scr.config(f"{key}="))
        self.assertEqual(scr.config(key), before)

    def test_version_is_the_headers(self):
        want = header_version()
        if want is None:
            self.skipTest("no scr.h next to the library")
        self.assertTrue(scr.version().startswith(want), (scr.version(), want))


@unittest.skipIf(scr is None, "libscr.so not available (set SCR_LIBRARY)")
class ErrorTextTests(unittest.TestCase):

    def test_scr_error_text(self):
        from scr.errors import SCRError

        e = SCRError("SCR_Route_file", 1, ("rank_0.dat",))
        self.assertEqual(
            str(e), "SCR_Route_file('rank_0.dat') failed with return code 1 (the library printed the reason on stderr)"
        )
        e = SCRError("SCR_Init", None, (), "MPI is already finalized")
        self.assertEqual(str(e), "SCR_Init() failed: MPI is already finalized")


if __name__ == "__main__":
    unittest.main()
