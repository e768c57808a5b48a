"""CPU per request of a Django app, in-process: the load-independent side of bench_peer_turkle.py.

    python inprocess_cpu.py KIND REQUESTS_FILE [N] [--follow]   (Django set up by the environment)

Sends the last N (200) lines of a wrk_requests.lua file (METHOD<TAB>PATH<TAB>COOKIE[<TAB>BODY])
through Django's full stack in this process (django.test.Client: middleware, sessions, auth,
templates; no HTTP server, CSRF not enforced), after 20 unmeasured requests of the same file,
and prints `CPU kind=KIND requests=N app_ms=... postgres_ms=...`: user+sys CPU time per
request of this process and of its PostgreSQL backend (from /proc). Run with the same settings
for both apps (DEBUG off, kept connections), it compares the work each does per request
whatever the neighbours on the machine do to wall-clock throughput. With --follow, a redirect
answer is followed once (a GET of its Location, measured as part of the same request): a
submit then includes opening the next task, as a browser would. Only lines no load run
used are sent (the last ones of a file of one-use requests). Pure Django, so it runs in this
app's virtualenv and in the peer's.
"""

import os
import resource
import sys
from pathlib import Path

import django

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402


def own_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def backend_cpu(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def send(client: Client, line: str, follow: bool = False):
    method, path, cookie, *rest = line.rstrip("\n").split("\t")
    client.cookies.clear()
    for part in cookie.split("; "):
        name, _, value = part.partition("=")
        client.cookies[name] = value
    if method == "GET":
        answer = client.get(path)
    else:
        body = rest[0] if rest else ""
        answer = client.post(path, body, content_type="application/x-www-form-urlencoded")
    if answer.status_code not in (200, 302):
        raise SystemExit(f"{method} {path} -> {answer.status_code}")
    if follow and answer.status_code == 302:
        location = answer["Location"]
        answer = client.get(location)
        if answer.status_code not in (200, 302):
            raise SystemExit(f"GET {location} (after {method} {path}) -> {answer.status_code}")
    return answer


def main() -> None:
    follow = "--follow" in sys.argv
    args = [arg for arg in sys.argv[1:] if arg != "--follow"]
    kind, path = args[0], args[1]
    count = int(args[2]) if len(args) > 2 else 200
    lines = Path(path).read_text().splitlines()
    warm, measured = lines[-count - 20 : -count], lines[-count:]
    client = Client()
    for line in warm:
        send(client, line, follow)
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    before = own_cpu(), backend_cpu(pid)
    for line in measured:
        send(client, line, follow)
    app = (own_cpu() - before[0]) / len(measured) * 1000
    postgres = (backend_cpu(pid) - before[1]) / len(measured) * 1000
    print(f"CPU kind={kind} requests={len(measured)} app_ms={app:.2f} postgres_ms={postgres:.2f}")


if __name__ == "__main__":
    main()
