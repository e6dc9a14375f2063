"""Finding libscr.so: the search order and the error naming what was tried.

Needs no MPI. The tests that load the real library take it from the
``scr`` module already imported (SCR_LIBRARY or another way); without one,
only the not-found tests run.
"""

import ctypes
import ctypes.util
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import unittest

try:
    import scr
    from scr import _library
except ImportError:  # LibraryNotFoundError is an ImportError
    scr = None
    _library = None

needs_library = unittest.skipIf(scr is None, "libscr.so not available (set SCR_LIBRARY)")

# Imports scr in a fresh interpreter and prints what the import raised.
PROBE = textwrap.dedent(
    """
    try:
        import scr
    except ImportError as e:
        print(type(e).__name__)
        print(e)
    else:
        print("LOADED", scr.LIBRARY_PATH)
    """
)


# Where the scr package is (found without importing it), for the subprocesses.
PACKAGE_PARENT = os.path.dirname(os.path.dirname(importlib.util.find_spec("scr").origin))


def import_in_subprocess(env):
    full = {k: v for k, v in os.environ.items() if not k.startswith(("SCR_", "PKG_CONFIG"))}
    full["LD_LIBRARY_PATH"] = ""
    full["PYTHONPATH"] = PACKAGE_PARENT
    full.update(env)
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env=full, capture_output=True, text=True, timeout=60, check=False
    )
    return out.returncode, out.stdout


def install_prefix():
    """The prefix the loaded library was installed into (PREFIX/lib/libscr.so), or None."""
    lib_dir = os.path.dirname(os.path.abspath(scr.LIBRARY_PATH))
    if os.path.basename(lib_dir) != "lib":
        return None
    return os.path.dirname(lib_dir)


class NotFoundTests(unittest.TestCase):
    def test_import_without_library_names_every_place_tried(self):
        saved = os.environ.get("LD_LIBRARY_PATH")
        os.environ["LD_LIBRARY_PATH"] = ""
        try:
            system = ctypes.util.find_library("scr")
        finally:
            if saved is None:
                del os.environ["LD_LIBRARY_PATH"]
            else:
                os.environ["LD_LIBRARY_PATH"] = saved
        if system is not None:
            self.skipTest(f"this system has a libscr ({system}) that the last resort finds")
        with tempfile.TemporaryDirectory() as empty:
            rc, out = import_in_subprocess({"SCR_PREFIX_INSTALL": empty, "PKG_CONFIG_PATH": empty})
        self.assertEqual(rc, 0, out)
        lines = out.splitlines()
        self.assertEqual(lines[0], "LibraryNotFoundError", out)
        self.assertIn("cannot load the SCR C library (libscr.so); tried, in order:", out)
        self.assertIn("SCR_LIBRARY: not set", out)
        self.assertIn(f"SCR_PREFIX_INSTALL -> {empty}/lib/libscr.so: no such file", out)
        self.assertIn(f"SCR_PREFIX_INSTALL -> {empty}/lib64/libscr.so: no such file", out)
        self.assertIn("pkg-config scr:", out)
        self.assertIn('ctypes.util.find_library("scr"): found nothing', out)
        self.assertIn("ci/install PREFIX", out)
        # In the order searched.
        order = [out.index(s) for s in ("SCR_LIBRARY", "SCR_PREFIX_INSTALL ->", "pkg-config scr", "find_library")]
        self.assertEqual(order, sorted(order), out)

    def test_explicit_path_that_does_not_exist_is_the_only_place_tried(self):
        rc, out = import_in_subprocess({"SCR_LIBRARY": "/nonexistent/libscr.so"})
        self.assertEqual(rc, 0, out)
        self.assertTrue(out.startswith("LibraryNotFoundError\n"), out)
        self.assertIn("SCR_LIBRARY -> /nonexistent/libscr.so: no such file", out)
        self.assertNotIn("SCR_PREFIX_INSTALL", out.split("Install it")[0])

    def test_explicit_directory_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            rc, out = import_in_subprocess({"SCR_LIBRARY": d})
        self.assertIn(f"SCR_LIBRARY -> {d}: is a directory, not a library file", out)

    def test_a_library_without_scr_symbols_is_refused(self):
        import _ctypes  # a shared object that surely is no SCR library

        rc, out = import_in_subprocess({"SCR_LIBRARY": _ctypes.__file__})
        self.assertIn("loads, but has no SCR_Init symbol: not an SCR library", out)

    def test_a_file_that_is_no_shared_object_is_refused(self):
        with tempfile.NamedTemporaryFile(suffix=".so") as f:
            f.write(b"not an ELF file")
            f.flush()
            rc, out = import_in_subprocess({"SCR_LIBRARY": f.name})
        self.assertIn(f"SCR_LIBRARY -> {f.name}: cannot be loaded:", out)


@needs_library
class FoundTests(unittest.TestCase):
    def test_explicit_path_loads(self):
        rc, out = import_in_subprocess({"SCR_LIBRARY": scr.LIBRARY_PATH})
        self.assertEqual(out.strip(), f"LOADED {scr.LIBRARY_PATH}")

    def test_install_prefix_loads(self):
        prefix = install_prefix()
        if prefix is None:
            self.skipTest("library not in PREFIX/lib")
        rc, out = import_in_subprocess({"SCR_PREFIX_INSTALL": prefix})
        self.assertEqual(out.strip(), f"LOADED {prefix}/lib/libscr.so")

    def test_pkg_config_loads(self):
        prefix = install_prefix()
        pc = None if prefix is None else os.path.join(prefix, "lib", "pkgconfig")
        if pc is None or not os.path.isfile(os.path.join(pc, "scr.pc")) or shutil.which("pkg-config") is None:
            self.skipTest("no scr.pc next to the library, or no pkg-config")
        rc, out = import_in_subprocess({"PKG_CONFIG_PATH": pc})
        self.assertEqual(out.strip(), f"LOADED {prefix}/lib/libscr.so")

    def test_find_library_is_the_last_resort(self):
        seen = []

        def find(name):
            seen.append(name)
            return scr.LIBRARY_PATH

        lib, where = _library.load(env={"PATH": os.environ.get("PATH", "")}, find_library=find)
        self.assertEqual(seen, ["scr"])
        self.assertEqual(where, scr.LIBRARY_PATH)
        self.assertIsInstance(lib, ctypes.CDLL)

    def test_find_library_naming_a_wrong_file_is_reported(self):
        with self.assertRaises(scr.LibraryNotFoundError) as cm:
            _library.load(env={"PATH": os.environ.get("PATH", "")}, find_library=lambda n: "libnonexistent-scr.so")
        self.assertIn('ctypes.util.find_library("scr") -> libnonexistent-scr.so: cannot be loaded:', str(cm.exception))
        self.assertEqual(cm.exception.tried[0], ("SCR_LIBRARY", "not set"))


if __name__ == "__main__":
    unittest.main()
