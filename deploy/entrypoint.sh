#!/usr/bin/env bash
# Container entrypoint of the eyeblink images (deploy/Dockerfile.*).
#
#   eyeblink-entrypoint live|process|batch|eval|demo|bench ARGS...   run eyeblink (preset from $EYEBLINK_PIPELINE)
#   eyeblink-entrypoint ray-head [RAY START ARGS...]                  a Ray head node (blocks)
#   eyeblink-entrypoint ray-worker HEAD:PORT [RAY START ARGS...]      a Ray worker node joining HEAD (blocks)
#   eyeblink-entrypoint --help                                        this text
#   eyeblink-entrypoint COMMAND...                                    anything else runs as is (e.g. bash)
#
# Environment:
#   EYEBLINK_PIPELINE  preset added as --pipeline to process/batch/live/eval when the arguments name none
#                      (cpu, gpu, ipu-mk1, ipu-mk2, low-latency or a TOML path); unset: eyeblink's default
#   EYEBLINK_BIN       the eyeblink executable (default: eyeblink on PATH)
#   RAY_BIN            the ray executable (default: ray on PATH)
set -euo pipefail

usage() {
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
}

EYEBLINK_BIN=${EYEBLINK_BIN:-eyeblink}
RAY_BIN=${RAY_BIN:-ray}

has_pipeline() {
    local a
    for a in "$@"; do
        case "$a" in --pipeline|--pipeline=*) return 0 ;; esac
    done
    return 1
}

if [[ $# -eq 0 ]]; then
    usage
    exit 2
fi

cmd=$1
shift
case "$cmd" in
    -h|--help|help)
        usage
        ;;
    live|process|batch|eval)
        if [[ -n "${EYEBLINK_PIPELINE:-}" ]] && ! has_pipeline "$@"; then
            exec "$EYEBLINK_BIN" "$cmd" --pipeline "$EYEBLINK_PIPELINE" "$@"
        fi
        exec "$EYEBLINK_BIN" "$cmd" "$@"
        ;;
    demo|bench|train-landmarks|--version)
        exec "$EYEBLINK_BIN" "$cmd" "$@"
        ;;
    ray-head)
        exec "$RAY_BIN" start --head --port=6379 --dashboard-host=0.0.0.0 --ray-client-server-port=10001 --block "$@"
        ;;
    ray-worker)
        if [[ $# -lt 1 ]]; then
            echo "eyeblink-entrypoint: error: ray-worker needs the head's address, e.g. ray-worker 10.0.0.1:6379" >&2
            exit 2
        fi
        head=$1
        shift
        exec "$RAY_BIN" start --address="$head" --block "$@"
        ;;
    *)
        exec "$cmd" "$@"
        ;;
esac
