"""Where a request's CPU goes under load: gunicorn workers, PostgreSQL backends, the machine.

    .venv/bin/python tests/bench/cpu_split.py AGE DURATION REQUESTS_FILE [DATABASE_URL]

e.g. after `BENCH_KEEP=1 BENCH_WRK_DURATION=2s BENCH_TARGETS_PER_CONFIG=1500 .venv/bin/python
tests/bench/bench_peer_turkle.py --app-side 1` (which keeps its database, perf_app):

    .venv/bin/python tests/bench/cpu_split.py 0 15s /tmp/perf-bench-app/pages.txt

Serves the app as the peer bench does (gunicorn, 4 sync workers, DATABASE_CONN_MAX_AGE=AGE),
warms it with 3 s of wrk, runs wrk -t2 -c16 for DURATION over the requests file (the format of
wrk_requests.lua), and prints the CPU per request in ms, from /proc:
- the gunicorn master and workers;
- the PostgreSQL backends: the postmaster's live children and its reaped ones (cutime and
  cstime), so that the backends a new connection per request starts and ends are counted,
  which the peer bench's per-process reading (live backends only) cannot do;
- the postmaster itself;
- the whole machine from /proc/stat (idle, user, system, irq).
Needs wrk and a local PostgreSQL whose postmaster's pid is in /var/run/postgresql/*.pid.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from tests.bench.bench_peer_turkle import DEFAULT_URL, free_port, start_app, stop, wrk  # noqa: E402


def _times(pid: int | str) -> tuple[int, list[int]]:
    """The parent pid and (utime, stime, cutime, cstime) in clock ticks of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[1]), [int(x) for x in fields[11:15]]


def _snapshot(postmaster: int, master: int) -> list[int]:
    """[postmaster, backends, gunicorn, machine, idle, user, system, irq] in clock ticks."""
    _, own = _times(postmaster)
    _, gunicorn_master = _times(master)
    backends, workers = own[2] + own[3], gunicorn_master[0] + gunicorn_master[1]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent, ticks = _times(stat.parent.name)
        except (OSError, ValueError, IndexError):
            continue  # a process that ended meanwhile
        if parent == postmaster:
            backends += ticks[0] + ticks[1]
        elif parent == master:
            workers += ticks[0] + ticks[1]
    cpu = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    machine = [sum(cpu[:8]), cpu[3] + cpu[4], cpu[0] + cpu[1], cpu[2], cpu[5] + cpu[6]]
    return [own[0] + own[1], backends, workers, *machine]


def main(age: str, duration: str, requests_file: str, url: str = DEFAULT_URL) -> None:
    os.environ.update(
        DATABASE_URL=url,
        DATABASE_CONN_MAX_AGE=age,
        DJANGO_SETTINGS_MODULE="config.settings.base",
        DJANGO_DEBUG="false",
        LOG_LEVEL="WARNING",
    )
    postmaster = int(next(Path("/var/run/postgresql").glob("*.pid")).read_text().split()[0])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = start_app(port)
    try:
        wrk(base, requests_file, "3s", latency=False)  # warm-up
        time.sleep(0.5)
        before = _snapshot(postmaster, server.pid)
        result = wrk(base, requests_file, duration)
        after = _snapshot(postmaster, server.pid)
    finally:
        stop(server)
    n = result["requests"]
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    ms = [(b - a) * tick_ms / n for a, b in zip(before, after, strict=True)]
    print(
        f"CONN_MAX_AGE={age} requests={n:.0f} rps={result['rps']:.1f} | ms per request: "
        f"postmaster {ms[0]:.2f}, backends {ms[1]:.2f}, gunicorn {ms[2]:.2f} | machine "
        f"{ms[3]:.2f} (idle {ms[4]:.2f}, user {ms[5]:.2f}, system {ms[6]:.2f}, irq {ms[7]:.2f})"
    )


if __name__ == "__main__":
    if not 4 <= len(sys.argv) <= 5:
        raise SystemExit(__doc__)
    main(*sys.argv[1:])
