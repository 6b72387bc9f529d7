#!/usr/bin/env bash
# Fetch, on a machine with PyPI, the wheels the lent GPU machine's image lacks, into gpu_wheels/ (ignored),
# for benchmarks/gpu_run.sh to install there (`carry: ["gpu_wheels"]`; see benchmarks/GPU_RUN.md).
#
# The device image (/work/.library/device/KINDS.md) runs Python 3.12.3 and already holds numpy, setuptools,
# matplotlib, tqdm, safetensors, regex, pytest, hypothesis, pytest-benchmark, scikit-learn, tiktoken, torch,
# cupy-cuda13x and mpi4py: of pyproject.toml's dependencies and test extras only cffi (and its pycparser)
# is missing. (openai, the test extra's last name, is used by common/tests only, which gpu_run.sh does not run.)
#
#     bash benchmarks/gpu_wheels.sh            # the default list
#     bash benchmarks/gpu_wheels.sh NAME ...   # other requirements, same target
set -euo pipefail
cd "$(dirname "$0")/.."

DEST=gpu_wheels
PY_VERSION=3.12   # the device image's python3 (3.12.3)
PYTHON=${PYTHON:-python3}
if [ "$#" -gt 0 ]; then packages=("$@"); else packages=("cffi>=1.16"); fi

rm -rf "$DEST" && mkdir -p "$DEST"   # one version of each: two would stop the install there
# Dependencies are resolved for the target (cp312, manylinux x86-64), so pycparser comes with cffi.
"$PYTHON" -m pip download -q --only-binary=:all: --python-version "$PY_VERSION" --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_27_x86_64 \
  --platform manylinux_2_28_x86_64 --platform manylinux1_x86_64 \
  -d "$DEST" "${packages[@]}"

ls -l "$DEST"
dups=$(ls "$DEST" | sed -E 's/-[0-9].*//' | tr 'A-Z-' 'a-z_' | sort | uniq -d)
if [ -n "$dups" ]; then echo "gpu_wheels.sh: more than one version of: $dups" >&2; exit 1; fi
bytes=$(du -sb "$DEST" | cut -f1)
echo "gpu_wheels/: $(ls "$DEST" | wc -l) wheels, $bytes bytes ($(du -sh "$DEST" | cut -f1)); the limit for everything carried is 64 MiB"
if [ "$bytes" -gt $((48 * 1024 * 1024)) ]; then echo "gpu_wheels.sh: too large to carry beside the tree" >&2; exit 1; fi
