#!/bin/bash
# Where a request's CPU goes under load: gunicorn workers, PostgreSQL backends, the machine.
#
#   tests/bench/cpu_split.sh AGE DURATION REQUESTS_FILE [DATABASE_URL]
#   e.g. after `BENCH_KEEP=1 BENCH_WRK_DURATION=2s BENCH_TARGETS_PER_CONFIG=1500 \
#        .venv/bin/python tests/bench/bench_peer_turkle.py --app-side 1` (keeps perf_app):
#        tests/bench/cpu_split.sh 0 15s /tmp/perf-bench-app/pages.txt
#
# Serves the app with gunicorn (4 sync workers, DATABASE_CONN_MAX_AGE=AGE) on the database,
# warms it with 3 s of wrk, then runs wrk -t2 -c16 for DURATION over the requests file
# (wrk_requests.lua's format) and prints the CPU per request, in ms, from /proc:
# - the gunicorn master and workers;
# - the PostgreSQL backends: the live children of the postmaster, plus the reaped ones
#   (cutime/cstime), so the backends that a new connection per request starts and ends
#   are counted;
# - the postmaster itself;
# - the whole machine from /proc/stat (user, system, irq, idle).
# Needs wrk and a local PostgreSQL whose postmaster's pid is in /var/run/postgresql/*.pid.
set -euo pipefail
AGE=$1 DURATION=$2 FILE=$3
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
export PYTHONPATH=$ROOT DJANGO_SETTINGS_MODULE=config.settings.base DJANGO_DEBUG=false
export DATABASE_URL=${4:-postgres://root@127.0.0.1:5432/perf_app} DATABASE_CONN_MAX_AGE=$AGE
PORT=$(.venv/bin/python -c "import socket; s=socket.socket(); s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])")
POSTMASTER=$(head -1 /var/run/postgresql/*.pid | head -1)
.venv/bin/gunicorn config.wsgi --bind "127.0.0.1:$PORT" --workers 4 --worker-class sync \
    --log-level warning 2>/dev/null &
MASTER=$!
trap 'kill $MASTER 2>/dev/null || true' EXIT
sleep 3
LUA=tests/bench/wrk_requests.lua
wrk -t2 -c16 -d3s -s $LUA "http://127.0.0.1:$PORT" -- "$FILE" 2 >/dev/null
snapshot() {
    python3 - "$POSTMASTER" "$MASTER" <<'PY'
import glob, sys

def times(stat):
    fields = stat.rsplit(")", 1)[1].split()
    return fields[1], [int(x) for x in fields[11:15]]  # ppid; utime stime cutime cstime

postmaster, master = sys.argv[1], sys.argv[2]
_, own = times(open(f"/proc/{postmaster}/stat").read())
_, gmaster = times(open(f"/proc/{master}/stat").read())
backends = workers = 0
for path in glob.glob("/proc/[0-9]*/stat"):
    try:
        ppid, t = times(open(path).read())
    except OSError:
        continue
    if ppid == postmaster:
        backends += t[0] + t[1]
    elif ppid == master:
        workers += t[0] + t[1]
cpu = [int(x) for x in open("/proc/stat").readline().split()[1:]]
print(own[0] + own[1], own[2] + own[3] + backends, workers + gmaster[0] + gmaster[1],
      sum(cpu[:8]), cpu[3] + cpu[4], cpu[0] + cpu[1], cpu[2], cpu[5] + cpu[6])
PY
}
BEFORE=$(snapshot)
RESULT=$(wrk -t2 -c16 -d"$DURATION" -s $LUA "http://127.0.0.1:$PORT" -- "$FILE" 2 | grep RESULT)
AFTER=$(snapshot)
python3 - "$BEFORE" "$AFTER" "$RESULT" "$AGE" <<'PY'
import os, re, sys

before = [int(x) for x in sys.argv[1].split()]
after = [int(x) for x in sys.argv[2].split()]
fields = dict(re.findall(r"(\w+)=([-\d.]+)", sys.argv[3]))
n = float(fields["requests"])
tick = 1000 / os.sysconf("SC_CLK_TCK")
ms = [(b - a) * tick / n for a, b in zip(before, after)]
print(
    f"CONN_MAX_AGE={sys.argv[4]} requests={n:.0f} rps={fields['rps']} | ms per request: "
    f"postmaster {ms[0]:.2f}, backends {ms[1]:.2f}, gunicorn {ms[2]:.2f} | machine "
    f"{ms[3]:.2f} (idle {ms[4]:.2f}, user {ms[5]:.2f}, system {ms[6]:.2f}, irq {ms[7]:.2f})"
)
PY
