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
