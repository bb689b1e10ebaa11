#!/usr/bin/env bash
# Serve more students than one Python process can: K Streamlit processes behind nginx.
#
#   deploy/run_cluster.sh                  # 2 processes, nginx on 127.0.0.1:8501
#   TINYGPT_PROCESSES=3 deploy/run_cluster.sh
#   TINYGPT_LISTEN=0.0.0.0 deploy/run_cluster.sh    # let the classroom in (not only this machine)
#   deploy/run_cluster.sh --config-only DIR         # write DIR/nginx.conf and stop (for tests)
#
# Settings (environment): TINYGPT_PROCESSES (K, default 2), TINYGPT_PORT (nginx, 8501),
# TINYGPT_BACKEND_PORT (first Streamlit port, 8601; the others follow), TINYGPT_LISTEN
# (nginx address, 127.0.0.1). The Streamlit processes always listen on 127.0.0.1 only.
# Ctrl+C (or SIGTERM) stops nginx and every process started here.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$HERE")"
K="${TINYGPT_PROCESSES:-2}"
PORT="${TINYGPT_PORT:-8501}"
BACKEND_PORT="${TINYGPT_BACKEND_PORT:-8601}"
LISTEN="${TINYGPT_LISTEN:-127.0.0.1}"

# one BLAS thread per process: K processes share the cores instead of fighting over them
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
# two malloc arenas, not one per thread: every session's script runs in its own thread, and
# per-thread arenas kept freed trace arrays as resident memory (soak, bench/load.py: -60 MB)
export MALLOC_ARENA_MAX="${MALLOC_ARENA_MAX:-2}"
# behind nginx every tab reaches Streamlit from 127.0.0.1: one address for the whole class, so
# the cap on training places per address must not be the single-server default of 4
export TINYGPT_TRAINING_PLACES_PER_ADDRESS="${TINYGPT_TRAINING_PLACES_PER_ADDRESS:-60}"

write_config() {  # $1: run directory -> $1/nginx.conf for K backends
    local dir="$1" servers="" i
    for ((i = 0; i < K; i++)); do
        servers+="server 127.0.0.1:$((BACKEND_PORT + i)); "
    done
    mkdir -p "$dir/tmp"
    sed -e "s|^\( *\)server 127.0.0.1:.*# UPSTREAM.*|\1${servers}|" \
        -e "s|^\( *\)listen .*# LISTEN.*|\1listen ${LISTEN}:${PORT};|" \
        "$HERE/nginx.conf" > "$dir/nginx.conf"
}

if [[ "${1:-}" == "--config-only" ]]; then
    write_config "${2:?usage: run_cluster.sh --config-only DIR}"
    echo "$2/nginx.conf"
    exit 0
fi

command -v nginx >/dev/null || { echo "nginx is not installed (apt-get install nginx)" >&2; exit 1; }
RUN_DIR="$(mktemp -d -t tinygpt-cluster.XXXXXX)"
write_config "$RUN_DIR"
nginx -p "$RUN_DIR" -e stderr -c "$RUN_DIR/nginx.conf" -t -q

PIDS=()
cleanup() {
    trap - EXIT INT TERM
    kill "${PIDS[@]}" 2>/dev/null || true
    wait 2>/dev/null || true
    rm -rf "$RUN_DIR"
}
trap cleanup EXIT INT TERM

cd "$ROOT"
for ((i = 0; i < K; i++)); do
    python -m tinygpt_app.launch --server.headless true --server.address 127.0.0.1 \
        --server.port "$((BACKEND_PORT + i))" --browser.gatherUsageStats false \
        > "$RUN_DIR/streamlit-$i.log" 2>&1 &
    PIDS+=("$!")
done

for ((i = 0; i < K; i++)); do  # wait until every process answers its health check
    for _ in $(seq 1 120); do
        python -c "import urllib.request as u; u.urlopen('http://127.0.0.1:$((BACKEND_PORT + i))/_stcore/health', timeout=2)" \
            2>/dev/null && break
        sleep 0.5
    done
done

nginx -p "$RUN_DIR" -e stderr -c "$RUN_DIR/nginx.conf" -g "daemon off;" &
PIDS+=("$!")
echo "tinygpt: $K processes behind nginx on http://${LISTEN}:${PORT}" >&2
wait -n "${PIDS[@]}"  # if any process dies, stop them all (cleanup)
