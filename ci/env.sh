# Environment shared by ci/test and ci/demo (sourced, not run).
# OpenMPI refuses to run as root unless told; CI machines run as root.
export OMPI_ALLOW_RUN_AS_ROOT=1
export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# More ranks than cores on 2-core machines.
export OMPI_MCA_rmaps_base_oversubscribe=1
# Tear a job down in ~0.1 s after a rank dies instead of ~1 s.
export OMPI_MCA_odls_base_sigkill_timeout=0
# Faster large messages on one host (measured, RUNTIME.md).
export OMPI_MCA_btl_vader_single_copy_mechanism=none
export CARGO_BUILD_JOBS="${CARGO_BUILD_JOBS:-2}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

# node_contexts NODES PROG ARGS...: set the array CONTEXTS to mpirun's
# application contexts for 4 ranks, rank i alone on simulated node n<i>
# (SCR_NODE_NAME=n<i>, SCR_NODE_ROOT=NODES/n<i>), each running PROG ARGS:
#   node_contexts "$nodes" ./app write; mpirun "${CONTEXTS[@]}"
node_contexts() {
  local nodes="$1" i
  shift
  CONTEXTS=()
  for i in 0 1 2 3; do
    [ "$i" -gt 0 ] && CONTEXTS+=(:)
    CONTEXTS+=(-np 1 -x "SCR_NODE_NAME=n$i" -x "SCR_NODE_ROOT=$nodes/n$i" "$@")
  done
}

# workspace_bins: every binary of the workspace as ci/test's `cargo test
# --workspace` built them. A script that built one package alone
# (`cargo build -p testing --bin scr_app`) unified scr's features and its
# dependencies' differently and compiled scr again: minutes per script on
# 2 cores. With the whole workspace selected and its tests' unification,
# every script finds them built.
workspace_bins() { cargo test --workspace --no-run --quiet; }

# workspace_test TEST ARGS...: one integration test target of the
# workspace, built with the same unification (ARGS go to cargo test, e.g.
# -- --ignored).
workspace_test() {
  local t="$1"
  shift
  cargo test --workspace --quiet --test "$t" "$@"
}

# fault_injection_bins: scr_app and the `scr` command with injection points
# (scr/fault-injection), in target/fault-injection/debug where the harness
# looks for them (harness/src/tools.rs). They are compiled in the
# workspace's target directory, which has every dependency compiled already
# (a target directory of their own compiled all of them again: about
# 5 minutes), copied there, and the workspace's own binaries are linked
# back at once (workspace_bins), so those stay free of injection points
# (ci/tests.d/fault-points-free.sh). They keep the dev profile's
# opt-level 1: unoptimized, scr compiled here in 25 s instead of 152 s,
# but the campaign's and the sweeps' jobs ran about 115 s longer in a
# whole ci/test (docs/decisions.md, "How ci/test builds").
fault_injection_bins() {
  cargo build --quiet -p testing --bin scr_app -p scr --bin scr \
    --features scr/fault-injection,scr/cli
  mkdir -p target/fault-injection/debug
  cp target/debug/scr_app target/debug/scr target/fault-injection/debug/
  workspace_bins
}

# scr_lib_tests_without_logdb ARGS...: scr's unit tests built without the
# log databases and with injection points (ci/test's log::writer step and
# ci/tests.d/fault-points-free.sh share this one build). Workspace code
# compiles unoptimized here: these few tests run in milliseconds, and the
# dev profile's opt-level 1 made this compile of scr 98 s instead of 27 s
# (measured with the dependencies built; they keep their opt-level 2,
# `[profile.dev.package."*"]`, so none of them is compiled again).
scr_lib_tests_without_logdb() {
  cargo test --quiet -p scr --no-default-features --features fault-injection --lib \
    --config profile.dev.opt-level=0 "$@"
}
