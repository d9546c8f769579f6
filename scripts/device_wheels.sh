#!/usr/bin/env bash
# The packages a GPU measuring machine lacks (it has Python 3.12 with JAX + CUDA, numpy, OpenCV, pillow; no
# network), downloaded here as cp312 manylinux wheels into two ignored folders, each under the 64 MiB a device
# call may carry:  .device-wheels/a  (PyAV, LiteRT, tqdm: ~46 MB)
#                  .device-wheels/b  (Keras 3 and its pure-Python deps, scikit-image for the rendered input,
#                                     setuptools/wheel to install eyeblink itself: ~28 MB)
# Then, on the device (two calls back to back, the machine stays warm):
#   run --carry .device-wheels/a:   bash scripts/device_bench.sh install
#   run --carry .device-wheels/b:   bash scripts/device_bench.sh install && bash scripts/device_bench.sh run
set -euo pipefail
cd "$(dirname "$0")/.."
dl() {
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
        --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
        -d "$@"
}
rm -rf .device-wheels
mkdir -p .device-wheels/a .device-wheels/b
dl .device-wheels/a av ai-edge-litert tqdm flatbuffers backports-strenum
dl .device-wheels/b keras namex optree rich h5py absl-py markdown-it-py mdurl pygments \
    typing-extensions packaging scikit-image lazy-loader imageio tifffile networkx setuptools wheel
du -sh .device-wheels/a .device-wheels/b
