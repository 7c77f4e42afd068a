#!/usr/bin/env bash
# `make run` started right after `kubectl apply -f crds/`, RUN_STARTS times in a row (20 by
# default): each start must become ready (/readyz 200) and never exit on its own; then it is
# stopped with SIGTERM to its whole process group (as a terminal's Ctrl-C reaches it), which must
# end it gracefully ("stopped" its last log line) with no traceback.
#
# Each round deletes the CRDs first, so that the apply creates them anew and the operator starts
# while they are still being established: the race `make run` used to lose now and then ("the
# CustomResourceDefinition ... is not installed: apply crds/ first"). The cluster in CLUSTER_DIR
# must be up (`make cluster-up`); its LeaderWorkerSets and DisaggregatedSets go with the CRDs,
# so use a cluster of your own. Ports are free ones unless WEBHOOK_PORT, HEALTH_PORT and
# METRICS_PORT are set.
set -uo pipefail

cd "$(dirname "$0")/.."
CLUSTER_DIR=${CLUSTER_DIR:-.cluster}
STARTS=${RUN_STARTS:-20}
READY_TIMEOUT=${READY_TIMEOUT:-120}
KUBECTL=("$CLUSTER_DIR/bin/kubectl" --kubeconfig "$CLUSTER_DIR/kubeconfig")
LOGS=${RUN_STARTS_LOGS:-$CLUSTER_DIR/run-starts}
mkdir -p "$LOGS"

free_port() {
    .venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
WEBHOOK_PORT=${WEBHOOK_PORT:-$(free_port)}
HEALTH_PORT=${HEALTH_PORT:-$(free_port)}
METRICS_PORT=${METRICS_PORT:-$(free_port)}

if ! "${KUBECTL[@]}" get --raw /readyz >/dev/null 2>&1; then
    echo "run-starts: the cluster in $CLUSTER_DIR does not answer (make cluster-up)" >&2
    exit 2
fi

now_ms() {
    echo $(($(date +%s%N) / 1000000))
}

ready() {
    curl -fsS -o /dev/null "http://127.0.0.1:$HEALTH_PORT/readyz" 2>/dev/null
}

failed=0
for i in $(seq 1 "$STARTS"); do
    log="$LOGS/start-$i.log"
    "${KUBECTL[@]}" delete --ignore-not-found --wait -f crds/ >/dev/null || exit 2
    # Server-side, as `make run` applies them (a client-side apply stores the whole CRD in an
    # annotation, over its size limit for these CRDs).
    "${KUBECTL[@]}" apply --server-side --force-conflicts -f crds/ >/dev/null || exit 2
    # setsid: the operator, make and the operator's children in a process group of their own.
    setsid make --no-print-directory run CLUSTER_DIR="$CLUSTER_DIR" \
        WEBHOOK_PORT="$WEBHOOK_PORT" HEALTH_PORT="$HEALTH_PORT" \
        METRICS_PORT="$METRICS_PORT" >"$log" 2>&1 &
    pid=$!
    start=$(now_ms)
    outcome=""
    while [ -z "$outcome" ]; do
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid"
            outcome="exited with status $? before it was ready"
        elif ready; then
            outcome=ready
        elif [ $(($(now_ms) - start)) -gt $((READY_TIMEOUT * 1000)) ]; then
            outcome="not ready after ${READY_TIMEOUT}s"
        else
            sleep 0.1
        fi
    done
    took=$(($(now_ms) - start))
    if [ "$outcome" = ready ]; then
        kill -TERM -- "-$pid" 2>/dev/null
        wait "$pid"
        code=$?
        # make itself dies of the signal (143); the operator, its child, must log its graceful
        # stop last.
        if [ "$code" != 0 ] && [ "$code" != 143 ]; then
            outcome="ready, then make exited with status $code on SIGTERM"
        elif ! tail -n 1 "$log" | grep -q "lws_operator: stopped$"; then
            outcome="ready, then no graceful stop on SIGTERM"
        elif grep -q Traceback "$log"; then
            outcome="ready, then a traceback"
        fi
    else
        kill -KILL -- "-$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
    fi
    if [ "$outcome" = ready ]; then
        printf 'start %2d: ready after %d ms, stopped cleanly\n' "$i" "$took"
    else
        failed=$((failed + 1))
        printf 'start %2d: FAILED: %s (log %s)\n' "$i" "$outcome" "$log"
        tail -n 15 "$log" | sed 's/^/    /'
    fi
done
if [ "$failed" != 0 ]; then
    echo "run-starts: $failed of $STARTS starts failed"
    exit 1
fi
echo "run-starts: all $STARTS starts became ready and none exited"
