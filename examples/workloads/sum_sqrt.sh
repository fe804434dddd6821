#!/bin/sh
# A sharebench workload in POSIX shell, following the replica protocol (README, "Any workload"):
# set up, touch the ready file, wait for the start instant, do the timed work, write the result JSON.
# Work: sum of sqrt(i) for i = 1..SHAREBENCH_WORK, in awk.
set -eu
work="${SHAREBENCH_WORK:-100000}"
case "$work" in ''|*[!0-9]*) echo "bad SHAREBENCH_WORK '$work'; allowed: a whole number > 0" >&2; exit 2;; esac

# set-up done (nothing to build here)
[ -n "${SHAREBENCH_READY_FILE:-}" ] && echo "$$" > "$SHAREBENCH_READY_FILE"

# wait for the start file, then for the instant it holds
if [ -n "${SHAREBENCH_START_FILE:-}" ]; then
    while [ ! -s "$SHAREBENCH_START_FILE" ]; do sleep 0.005; done
    instant=$(cat "$SHAREBENCH_START_FILE")
    while [ "$(awk -v t="$instant" -v now="$(date +%s.%N)" 'BEGIN { print (now < t) }')" = 1 ]; do
        sleep 0.001
    done
fi

start=$(date +%s.%N)
sum=$(awk -v n="$work" 'BEGIN { s = 0; for (i = 1; i <= n; i++) s += sqrt(i); printf "%.10g", s }')
end=$(date +%s.%N)

result="{\"start\": $start, \"end\": $end, \"work\": $work, \"unit\": \"sqrt\", \"sum\": $sum}"
if [ -n "${SHAREBENCH_RESULT_FILE:-}" ]; then
    printf '%s\n' "$result" > "$SHAREBENCH_RESULT_FILE.tmp"
    mv "$SHAREBENCH_RESULT_FILE.tmp" "$SHAREBENCH_RESULT_FILE"
else
    printf '%s\n' "$result"
fi
