#!/usr/bin/env bash
# The accelerator measurements of issue 14 on a GPU machine (see scripts/device_wheels.sh for the wheels).
#   bash scripts/device_bench.sh install   install whichever .device-wheels/{a,b} this call carried, and then
#                                          eyeblink itself, into .devdeps (kept while the machine stays warm)
#   bash scripts/device_bench.sh run       the plan below; results (JSON + logs) in $OUT
# The plan: BlazeFace, the face mesh and the iris network alone on JAX/XLA (batch sweep 1 ... 4,096, latency
# sweep), then `eyeblink bench` end to end on a rendered 640x480 500 FPS recording with the CPU-only preset
# and with the gpu preset (the accelerator stage), on every core of the machine.
set -euo pipefail
cd "$(dirname "$0")/.."
DEPS="$PWD/.devdeps"
export PYTHONPATH="$DEPS${PYTHONPATH:+:$PYTHONPATH}"
case "${1:-run}" in
install)
    for d in .device-wheels/a .device-wheels/b; do
        if compgen -G "$d/*.whl" > /dev/null; then
            python3 -m pip install -q --no-index --no-deps --target "$DEPS" "$d"/*.whl
        fi
    done
    if KERAS_BACKEND=jax python3 -c "import setuptools, av, ai_edge_litert, keras" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-deps --no-build-isolation --target "$DEPS" --upgrade .
        python3 -m eyeblink --version
    fi
    ;;
run)
    OUT="${OUT:-/tmp/eyeblink-device}"
    mkdir -p "$OUT"
    export PATH="$DEPS/bin:$PATH"
    (nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv || true) > "$OUT/gpu.txt"
    nproc > "$OUT/cores.txt"
    python3 -c "import jax; print(jax.devices())" > "$OUT/jax.txt" 2>&1
    for net in blazeface mesh iris; do
        python3 -m eyeblink bench detector --backend jax --network "$net" \
            --batch-sizes 1,8,64,256,512,1024,2048,4096 --latency-batches 1,2,4,8,16 --images 8192 --repeats 3 \
            --json "$OUT/detector-$net.json" > "$OUT/detector-$net.md" 2>&1 || echo "bench detector $net failed" >> "$OUT/errors.txt"
    done
    W=$(( $(nproc) - 2 ))
    python3 -m eyeblink bench --frames 6000 --repeats 2 --workers "$W" --pipeline cpu --modes decode,default,every \
        --json "$OUT/e2e-cpu.json" > "$OUT/e2e-cpu.txt" 2>&1 || echo "bench cpu failed" >> "$OUT/errors.txt"
    python3 -m eyeblink bench --frames 6000 --repeats 2 --workers "$W" --pipeline gpu --modes default \
        --json "$OUT/e2e-gpu.json" > "$OUT/e2e-gpu.txt" 2>&1 || echo "bench gpu failed" >> "$OUT/errors.txt"
    tail -n 5 "$OUT"/*.txt
    ;;
*)
    echo "usage: $0 install|run" >&2
    exit 2
    ;;
esac
