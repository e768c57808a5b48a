"""Turkle's side of the claim benchmark (bench_peer_turkle.py runs it in Turkle's virtualenv).

    python turkle_claims.py setup WORKDIR CLAIMS_PER_CONFIG CONFIGS
    python turkle_claims.py count

Run with DJANGO_SETTINGS_MODULE=turkle_bench_settings (../../../shared/peers/turkle on
PYTHONPATH) after turkle_bench.sh has filled its database. `setup` adds a batch "ifb-claim" of
500 open tasks (copies of the page batch's rows) with enough assignments per task that no task
fills during the runs, and one user with a logged-in session per claim (Turkle hands a worker a
new task on every accept, so each claim comes from a different worker, as in this app); it writes
WORKDIR/claims_<k>.txt (one `GET /batch/<id>/accept_next_task/` per line, with its worker's
cookie) and WORKDIR/warm.txt (task page views of the peer's worker). `count` prints the
assignments of the claim batch, the most any task holds, the limit, and (task, worker) pairs
taken twice.
"""

import math
import os
import sys
from datetime import timedelta

import django

django.setup()

from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY  # noqa: E402
from django.contrib.auth.hashers import make_password  # noqa: E402
from django.contrib.auth.models import User  # noqa: E402
from django.contrib.sessions.backends.db import SessionStore  # noqa: E402
from django.contrib.sessions.models import Session  # noqa: E402
from django.db.models import Count, Max  # noqa: E402
from django.utils import timezone  # noqa: E402
from django.utils.crypto import get_random_string  # noqa: E402
from turkle.models import Batch, Task, TaskAssignment  # noqa: E402

BACKEND = "django.contrib.auth.backends.ModelBackend"


def session_for(user, expires):
    store = SessionStore()
    data = {
        SESSION_KEY: str(user.pk),
        BACKEND_SESSION_KEY: BACKEND,
        HASH_SESSION_KEY: user.get_session_auth_hash(),
    }
    key = get_random_string(32, "abcdefghijklmnopqrstuvwxyz0123456789")
    return Session(session_key=key, session_data=store.encode(data), expire_date=expires)


def setup(workdir, per_config, configs):
    page_batch = Batch.objects.get(name="ifb-500")
    batch = Batch.objects.create(
        project=page_batch.project,
        name="ifb-claim",
        filename="copy.csv",
        created_by=page_batch.created_by,
        login_required=True,
        allotted_assignment_time=24 * 365,
        assignments_per_task=math.ceil(per_config * configs / 500) + 1,
    )
    rows = page_batch.task_set.order_by("id").values_list("input_csv_fields", flat=True)
    Task.objects.bulk_create([Task(batch=batch, input_csv_fields=fields) for fields in rows])
    password = make_password(None)
    users = User.objects.bulk_create(
        [User(username=f"claimer{n}", password=password) for n in range(per_config * configs)],
        batch_size=2000,
    )
    expires = timezone.now() + timedelta(days=2)
    sessions = [session_for(user, expires) for user in users]
    Session.objects.bulk_create(sessions, batch_size=2000)
    path = f"/batch/{batch.id}/accept_next_task/"
    for k in range(configs):
        with open(os.path.join(workdir, f"claims_{k}.txt"), "w") as fh:
            for session in sessions[k * per_config : (k + 1) * per_config]:
                fh.write(f"GET\t{path}\tsessionid={session.session_key}\n")
    worker = User.objects.get(username="worker")
    warm = session_for(worker, expires)
    warm.save()
    with (
        open(os.path.join(workdir, "warm.txt"), "w") as out,
        open(os.path.join(workdir, "get_paths.txt")) as paths,
    ):
        for line in paths:
            out.write(f"GET\t{line.strip()}\tsessionid={warm.session_key}\n")
    # In-process CPU per request (inprocess_cpu.py): the iframe and submits of the same worker.
    cookie = f"sessionid={warm.session_key}"
    with (
        open(os.path.join(workdir, "iframes.txt"), "w") as out,
        open(os.path.join(workdir, "iframe_paths.txt")) as paths,
    ):
        for line in paths:
            out.write(f"GET\t{line.strip()}\t{cookie}\n")
    answers = "&".join(f"sys{s}_q{q}=YES" for s in "ABCDE" for q in range(1, 7))
    body = f"csrfmiddlewaretoken=x&{answers}&comments=benchmark"
    with (
        open(os.path.join(workdir, "submits_cpu.txt"), "w") as out,
        open(os.path.join(workdir, "post_paths.txt")) as paths,
    ):
        for line in paths:
            out.write(f"POST\t{line.strip()}\t{cookie}\t{body}\n")
    print(f"claim_batch={batch.id} tasks=500 per_task={batch.assignments_per_task}")


def count():
    batch = Batch.objects.get(name="ifb-claim")
    assignments = TaskAssignment.objects.filter(task__batch=batch)
    most = (
        assignments.values("task_id").annotate(n=Count("id")).aggregate(most=Max("n"))["most"] or 0
    )
    twice = assignments.values("task_id", "assigned_to_id").annotate(n=Count("id")).filter(n__gt=1)
    print(
        f"COUNT assignments={assignments.count()} most_per_task={most} "
        f"limit={batch.assignments_per_task} twice={twice.count()}"
    )


if __name__ == "__main__":
    if sys.argv[1] == "setup":
        setup(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    else:
        count()
