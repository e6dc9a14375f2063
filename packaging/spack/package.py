# A Spack recipe for this Rust implementation of SCR (docs/guide/install.md).
#
# It installs what ci/install installs: libscr.so/.a, scr.h, scrf.h, scr.pc,
# the CMake package (find_package(SCR), SCR::scr), the scr and scr-harness
# tools, their man pages and shell completions. Spack's builtin "scr" is
# LLNL's C implementation; to use this one, put this file in a Spack
# repository of your own as packages/scr/package.py and list that
# repository before builtin, then build from a checkout:
#
#   spack repo create ~/spack-scr && mkdir -p ~/spack-scr/packages/scr
#   cp packaging/spack/package.py ~/spack-scr/packages/scr/
#   spack repo add ~/spack-scr
#   spack develop --path "$PWD" scr@3.1.0 && spack install scr@3.1.0
#
# The version is scr.h's SCR_VERSION (scr/capi/tests/packaging.rs checks it).

from spack.package import *


class Scr(Package):
    """Scalable Checkpoint/Restart for MPI applications (the scr.h 3.1 API,
    implemented in Rust): multi-level checkpoints in node-local storage with
    PARTNER, XOR and Reed-Solomon redundancy, flushed to a parallel file
    system, with the scr tool and the scr-harness fault-injection testbed."""

    license("BSD-3-Clause")

    # No release is published: build from a checkout (spack develop, above)
    # or set `git` to your clone's URL.
    version("3.1.0", branch="main")

    depends_on("mpi")
    # rustc 1.89 is the workspace's rust-version (Cargo.toml).
    depends_on("rust@1.89:", type="build")
    # rsmpi generates its MPI bindings with bindgen, which loads libclang.
    depends_on("llvm+clang", type="build")
    depends_on("pkgconfig", type="build")
    # The install check builds examples/c-cmake with find_package(SCR).
    depends_on("cmake@3.16:", type=("build", "test"))

    def setup_build_environment(self, env):
        env.set("LIBCLANG_PATH", self.spec["llvm"].prefix.lib)
        env.set("MPICC", self.spec["mpi"].mpicc)
        env.set("CARGO_BUILD_JOBS", str(make_jobs))
        # Cargo's downloads and build stay in the stage, not in ~/.cargo.
        env.set("CARGO_HOME", join_path(self.stage.path, "cargo-home"))
        env.set("CARGO_TARGET_DIR", join_path(self.stage.path, "cargo-target"))

    def install(self, spec, prefix):
        bash = which("bash")
        bash("ci/install", prefix)

    @run_after("install")
    @on_package_attributes(run_tests=True)
    def check_cmake_package(self):
        """Configure and build examples/c-cmake against the installed tree."""
        cmake = which("cmake")
        build = join_path(self.stage.path, "spack-check-c-cmake")
        cmake(
            "-S",
            "examples/c-cmake",
            "-B",
            build,
            "-DCMAKE_PREFIX_PATH={0}".format(self.prefix),
            "-DCMAKE_C_COMPILER={0}".format(self.spec["mpi"].mpicc),
        )
        cmake("--build", build)
