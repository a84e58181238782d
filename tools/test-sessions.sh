#!/usr/bin/env bash
# `make test`: three pytest sessions at once (see the Makefile's comment on `test`).
#   in front, at normal priority: the tests marked `timing`, TIMING_WORKERS at a time, shown live;
#   behind: the rest in TEST_WORKERS workers at `nice -n BACKGROUND_NICE`, the real vLLM tier at REAL_ENGINE_NICE.
# The background sessions' output is printed once the timing session and they have ended. Exit: the first failing session's code;
# an empty selection (pytest exit 5) is not a failure.
# Usage: tools/test-sessions.sh BIN_DIR [pytest args...]
set -uo pipefail
bin=$1; shift
workers=${TEST_WORKERS:-3} timing_workers=${TIMING_WORKERS:-3} nice_level=${BACKGROUND_NICE:-10}
real_engine_nice=${REAL_ENGINE_NICE:-5}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
t0=$(date +%s)

background() {  # name, nice, pytest args...: run behind at lower priority; its exit code and end time to files
  local name=$1 level=$2; shift 2
  (
    # a session (and so an autogroup) of its own: see tools/background_autogroups.py
    [ "${START_DELAY:-0}" -gt 0 ] && sleep "$START_DELAY"
    KVGATE_TEST_BACKGROUND=$level setsid --wait nice -n "$level" "$bin/pytest" "$@" >"$tmp/$name.log" 2>&1 &
    child=$!
    # a script's background jobs ignore Ctrl-C: pass it on, so pytest stops what its tests started
    trap 'kill -INT "$child" 2>/dev/null; wait "$child"; exit 130' TERM
    wait "$child"
    echo $? >"$tmp/$name.rc"
    date +%s >"$tmp/$name.end"
  ) &
  sessions+=($!)
}
sessions=()
trap 'kill -TERM $(jobs -p) 2>/dev/null; wait; exit 130' INT TERM

# Bytecode first, once. Where PYTHONDONTWRITEBYTECODE is set (this machine kind sets it) nothing is
# cached on import: every pytest worker rewrote and compiled every test module at collection (12 s of
# CPU each; 2.4 s from the cache), and every kvgate, emulator and agent process compiled harness/
# again. compileall writes kvgate's own modules; one collection with writes allowed leaves pytest's
# rewritten test modules, which pytest reads whatever the variable says.
"$bin/python" -m compileall -q -j 0 harness tests bench tools >/dev/null
env -u PYTHONDONTWRITEBYTECODE "$bin/pytest" --collect-only -q -p no:cacheprovider "$@" >/dev/null

# the real vLLM tier is two long chains of server start-ups (the conformance scenario, the drain),
# the last session to end: in two workers, side by side; ahead of the parallel session, whose many
# short tests fill both cores at the end
# ... after REAL_ENGINE_DELAY seconds (default 60): the timing session first measures the session's
# shared G1+G2 baseline, and its G2 FAILed throughput_repeatability in a CI run while the tier's vLLM
# start-ups took the CPU (its first repetition 11.7 tok/s, the other four 15.2); the tier then ends
# about when the timing session does (593 and 633 s in that run), well within the budget
START_DELAY=${REAL_ENGINE_DELAY:-60} background real-engine "$real_engine_nice" -n "${REAL_ENGINE_WORKERS:-2}" -m "real_engine and not timing" --durations=15 "$@"
background parallel "$nice_level" -n "$workers" --dist loadgroup -m "not timing and not real_engine" --durations=15 "$@"
# nice reaches no process that calls setsid (engines, fio, soak agents: each its own autogroup);
# this gives their autogroups the background's nice too (see the tool's docstring)
"$bin/python" "$(dirname "$0")/background_autogroups.py" $$ KVGATE_TEST_BACKGROUND &
renicer=$!
echo "make test: the parallel session (nice $nice_level) and the real-engine tier (nice $real_engine_nice) run behind this one;" \
     "their output follows when they end"
"$bin/pytest" -n "$timing_workers" --dist loadgroup -m timing --durations=15 "$@"
timing_rc=$?
t1=$(date +%s)
wait "${sessions[@]}"
kill "$renicer" 2>/dev/null
wait "$renicer" 2>/dev/null

rc=0
keep() { [ "$1" -eq 0 ] || [ "$1" -eq 5 ] || [ "$rc" -ne 0 ] || rc=$1; }
keep "$timing_rc"
for name in parallel real-engine; do
  echo "--- the $name session (ran behind the timing session) ---"
  cat "$tmp/$name.log"
  keep "$(cat "$tmp/$name.rc" 2>/dev/null || echo 1)"
done
echo "make test: timing session $((t1 - t0)) s, parallel session $(( $(cat "$tmp/parallel.end") - t0 )) s," \
     "real-engine tier $(( $(cat "$tmp/real-engine.end") - t0 )) s, all at once: total $(( $(date +%s) - t0 )) s"
exit "$rc"
