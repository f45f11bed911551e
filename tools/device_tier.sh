#!/usr/bin/env bash
# The kernel tier on whatever accelerator JAX sees (a TPU, a GPU), in one process, as a course
# kernel would run it: JAX from the machine's own image on PYTHONPATH (kept first), pytree-lab
# and the rest of its dependencies installed from wheels with `pip install --target` (no
# network needed), then `pytest -m "kernel and not slow"` without xdist workers (one process
# may hold an accelerator; the grader's tests, which need nbgrader and bubblewrap, belong to the
# grading machine) and `python -m bench --only devices`. docs/backends.md says more.
#
#   tools/device_tier.sh [WHEELS [PYTEST ARGS]]  # WHEELS: a folder of wheels (default .whl-tpu), made
#                                   # with tools/device_tier.sh --download [WHEELS] where pip has a network
#                                   # (DEVICE_JAX=0.10.2: the accelerator's JAX, when this machine has none)
#
# The summary, failures, the JUnit XML and the bench table go to $OUT (default artifacts/device).
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS=.whl-tpu
if [ "${1:-}" = "--download" ]; then
  WHEELS=${2:-$WHEELS}
  # what the kernel tier needs beyond JAX, numpy, scipy and pytest (which the image has)
  python3 -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 -d "$WHEELS" \
    "anywidget>=0.11" "ipywidgets>=8.1" "bqplot>=0.13" "optax>=0.2.3" autograd equinox treescope psutil \
    ipykernel jupyter_client nbformat nbclient markdown-it-py pytest-xdist ruff "hatchling>=1.25" "jax==${DEVICE_JAX:-$(python3 -c 'import jax; print(jax.__version__)' 2>/dev/null || echo 0.10.2)}" || exit
  rm -f "$WHEELS"/jax-* "$WHEELS"/jaxlib-* "$WHEELS"/numpy-* "$WHEELS"/scipy-* "$WHEELS"/ml_dtypes-* "$WHEELS"/opt_einsum-*
  exit 0
fi
WHEELS=${1:-$WHEELS}
shift $(( $# > 0 ? 1 : 0 ))  # the rest: more pytest arguments (test files, -k ...)
OUTDIR=${OUT:-artifacts/device}
mkdir -p "$OUTDIR"
SITE=${DEVICE_SITE:-$(mktemp -d)/site}
export PIP_CONFIG_FILE=/dev/null
python3 -m pip install --isolated -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "$WHEELS"/*.whl || exit
export PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$SITE   # the image's JAX stays first
# pytree-lab itself, --target as well (hatchling, from the wheels, builds it), with the Lite engine
# (packages/pytree-lab-lite) and the JupyterLite kernel's glue (lite_build/kernel) the tests use
python3 -m pip install --isolated -q --no-index --no-deps --no-build-isolation --no-compile --target "$SITE" \
  . packages/pytree-lab-lite lite_build/kernel || exit  # and the Lite engine and the site's glue, which tests compare
export JUPYTER_PATH=$SITE/share/jupyter${JUPYTER_PATH:+:$JUPYTER_PATH}  # where --target puts the lab extensions
[ -n "${DEVICE_TIER_FIRST:-}" ] && bash -c "$DEVICE_TIER_FIRST"
python3 -c 'import jax, pytree_lab; print("JAX", jax.__version__, jax.devices(), "pytree-lab", pytree_lab.__file__)' \
  | tee "$OUTDIR/summary.txt"
export PYTHONUNBUFFERED=1
${DEVICE_TIER_TIMEOUT:+timeout $DEVICE_TIER_TIMEOUT} python3 -m pytest -p no:cacheprovider -n 0 -m "kernel and not slow" --ignore=tests/lite --ignore=tests/browser --ignore-glob="tests/test_nbgrader*.py" --ignore=tests/test_graded_in_context.py \
  -W "ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning" -q -rfE --junitxml "$OUTDIR/junit.xml" \
  "$@" > "$OUTDIR/kernel-tier.txt" 2>&1
rc=$?
tail -n 1 "$OUTDIR/kernel-tier.txt" | tee -a "$OUTDIR/summary.txt"
grep -E "^(FAILED|ERROR) " "$OUTDIR/kernel-tier.txt" | tee -a "$OUTDIR/summary.txt"
if [ "${DEVICE_TIER_BENCH:-1}" = 1 ]; then
  python3 -m bench --only devices --json "$OUTDIR/bench.json" > "$OUTDIR/bench.txt" 2>&1 || echo "bench failed (rc $?)" >> "$OUTDIR/summary.txt"
  cat "$OUTDIR/bench.txt"  # the devices table: each size on both devices, the default's ratio to the host CPU
fi
exit $rc
