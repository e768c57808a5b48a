"""The claimable-tasks query on PostgreSQL (issue 17): its database time, and the CPU of
"submit + claim the next task" and of the task page, old code against new in one process.

    BENCH_CLAIM_DB=postgres://root@127.0.0.1:5432/perf_claim \
        .venv/bin/python tests/bench/bench_claim.py [--base REV] [--imported N] [--plans]

Fills its own database (recreated, dropped after unless BENCH_KEEP=1): 1,000 instructions of
6 questions x 5 responses; a past project over 500 of them and the measured project over the
other 500 (5 annotators a task); a veteran annotator with 300 submitted assignments in the past
project and 100 in this one, 80 colleagues with 10 each here, an annotator with imported labels
(no assignment) on 50 of the project's instructions, and 480 fresh annotators who hold one claim
each: about 37,500 labels (`--imported N`: and N labels of an imported crowd campaign on the
past project's instructions, 15,000 per crowd annotator). Then:

1. EXPLAIN (ANALYZE, BUFFERS) of the claim's candidate query and of the "task N of M" count for
   a fresh annotator, the veteran, the importer (and crowd0 of the campaign): median PostgreSQL
   execution time of 15 runs, old SQL (`--base`, default main) and new, on the same database
   (this checkout's schema).
2. CPU per request (this process + its PostgreSQL backend, Django's full stack, DEBUG off): a
   fresh annotator's submit with continue-to-next (the submit and the next claim), then the task
   page it lands on; old and new code alternate in blocks of 20 requests.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import types
from datetime import timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_URL = "postgres://root@127.0.0.1:5432/perf_claim"
N_TASKS, SYSTEMS, QUESTIONS = 500, 5, 6
FRESH = 480


def load() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def fill(imported: int) -> dict:
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.utils import timezone

    from annotate import models
    from annotate.roles import ANNOTATOR
    from annotate.services.assignments import display_order_for
    from annotate.services.projects import InstructionSelection, project_create

    systems = [models.System.objects.create(name=f"system-{s}") for s in "abcde"]
    projects = []
    for name in ("past", "perf"):
        benchmark = models.Benchmark.objects.create(name=name)
        instructions = models.Instruction.objects.bulk_create(
            models.Instruction(
                benchmark=benchmark,
                external_id=f"{name}_{n}",
                subset=models.Subset.HARD,
                text=f"Instruction {n}",
                position=n,
            )
            for n in range(N_TASKS)
        )
        models.Question.objects.bulk_create(
            models.Question(instruction=i, position=p, text=f"Q{p}?", constraint_mask=1)
            for i in instructions
            for p in range(1, QUESTIONS + 1)
        )
        models.Response.objects.bulk_create(
            models.Response(instruction=i, system=s, text="A response.")
            for i in instructions
            for s in systems
        )
        projects.append(
            project_create(
                name=name,
                benchmark=benchmark,
                systems=systems,
                selection=InstructionSelection(),
                assignments_per_task=5,
                allotted_minutes=1440,
            )
        )
    past, perf = projects
    group = Group.objects.get(name=ANNOTATOR)
    names = ["veteran", "importer"] + [f"colleague{n}" for n in range(80)]
    names += [f"fresh{n}" for n in range(FRESH)]
    users = User.objects.bulk_create(User(username=name) for name in names)
    User.groups.through.objects.bulk_create(
        User.groups.through(user_id=user.id, group_id=group.id) for user in users
    )
    annotators = models.Annotator.objects.bulk_create(
        models.Annotator(user=user, name=user.username, kind=models.AnnotatorKind.EXPERT)
        for user in users
    )
    by_name = {a.name: a for a in annotators}
    tasks = {
        p.pk: list(models.Task.objects.filter(batch__project=p).order_by("position"))
        for p in projects
    }
    questions = {}
    for q in models.Question.objects.all():
        questions.setdefault(q.instruction_id, []).append(q.pk)
    responses = {}
    for r in models.Response.objects.all():
        responses.setdefault(r.instruction_id, []).append(r.pk)
    now = timezone.now()
    system_ids = [s.pk for s in systems]
    submitted = [(by_name["veteran"], tasks[past.pk][n]) for n in range(300)]
    submitted += [(by_name["veteran"], tasks[perf.pk][n]) for n in range(100)]
    for n in range(80):
        for k in range(10):
            submitted.append((by_name[f"colleague{n}"], tasks[perf.pk][(n * 10 + k) % N_TASKS]))
    rows = [
        models.Assignment(
            task=task,
            annotator=annotator,
            status=models.AssignmentStatus.SUBMITTED,
            claimed_at=now - timedelta(hours=2),
            expires_at=now + timedelta(hours=22),
            submitted_at=now - timedelta(hours=1),
            order_seed=n,
            display_order=display_order_for(system_ids=system_ids, seed=n),
        )
        for n, (annotator, task) in enumerate(submitted)
    ]
    done = models.Assignment.objects.bulk_create(rows, batch_size=2000)
    labels = [
        models.Label(
            question_id=q,
            response_id=r,
            annotator_id=a.annotator_id,
            value=1,
            assignment=a,
        )
        for a in done
        for q in questions[a.task.instruction_id]
        for r in responses[a.task.instruction_id]
    ]
    importer = by_name["importer"]
    for task in tasks[perf.pk][200:250]:
        labels += [
            models.Label(question_id=q, response_id=r, annotator=importer, value=1)
            for q in questions[task.instruction_id]
            for r in responses[task.instruction_id]
        ]
    models.Label.objects.bulk_create(labels, batch_size=5000)
    claims = models.Assignment.objects.bulk_create(
        models.Assignment(
            task=tasks[perf.pk][300 + n % 200],
            annotator=by_name[f"fresh{n}"],
            status=models.AssignmentStatus.CLAIMED,
            claimed_at=now,
            expires_at=now + timedelta(hours=24),
            order_seed=n,
            display_order=display_order_for(system_ids=system_ids, seed=n),
            queue_project=perf,
        )
        for n in range(FRESH)
    )
    crowd = models.Annotator.objects.bulk_create(
        models.Annotator(name=f"crowd{n}", kind=models.AnnotatorKind.CROWD)
        for n in range(-(-imported // (N_TASKS * QUESTIONS * SYSTEMS)))
    )
    by_name.update((a.name, a) for a in crowd)
    with connection.cursor() as cursor:
        if crowd:  # an imported crowd campaign on the past benchmark: labels without assignment
            cursor.execute(_CROWD_LABELS, [[a.pk for a in crowd], past.benchmark_id, imported])
        cursor.execute("ANALYZE")  # as autovacuum would; no VACUUM: recent rows stay unfrozen
    return {"project": perf, "annotators": by_name, "claims": claims}


_CROWD_LABELS = """INSERT INTO annotate_label
    (question_id, response_id, annotator_id, value, created_at)
    SELECT q.id, r.id, a, 1, now() FROM unnest(%s::bigint[]) a, annotate_question q
    JOIN annotate_instruction i ON i.id = q.instruction_id
    JOIN annotate_response r ON r.instruction_id = i.id
    WHERE i.benchmark_id = %s LIMIT %s"""


def old_module(rev: str) -> types.ModuleType:
    """The claim code of `rev`, loaded beside this checkout's (same models, same database)."""
    source = subprocess.run(
        ["git", "show", f"{rev}:annotate/services/assignments.py"],
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    module = types.ModuleType("old_assignments")
    module.__dict__["__name__"] = "old_assignments"
    exec(compile(source, f"{rev}:annotate/services/assignments.py", "exec"), module.__dict__)
    return module


def execution_ms(sql: str, params: list, runs: int = 15) -> tuple[float, str]:
    from django.db import connection

    times, plan = [], ""
    with connection.cursor() as cursor:
        for _ in range(runs):
            cursor.execute("EXPLAIN (ANALYZE, BUFFERS) " + sql, params)
            lines = [row[0] for row in cursor.fetchall()]
            times.append(float(lines[-1].split(":")[1].split()[0]))
            plan = "\n".join(lines)
    return statistics.median(times), plan


def explain_side(code, data: dict, who: str, show: bool) -> dict:
    from django.utils import timezone

    annotator, project, now = data["annotators"][who], data["project"], timezone.now()
    sql, params = code.claimable_tasks_sql(project=project, annotator=annotator, now=now)
    count_ms, count_plan = execution_ms(code._COUNT.format(claimable=sql), params)
    if hasattr(code, "_claimable_ids_sql"):
        ids_sql, ids_params = code._claimable_ids_sql(
            project=project, annotator=annotator, now=now, batch=None, limit=20
        )
    else:
        ids_sql, ids_params = code._FIRST.format(claimable=sql), [*params, 20]
    ids_ms, ids_plan = execution_ms(ids_sql, ids_params)
    if show:
        print(f"--- {who}: count\n{count_plan}\n--- {who}: claim candidates\n{ids_plan}")
    return {"count": count_ms, "ids": ids_ms}


def explain(codes: dict, data: dict, show: bool) -> None:
    print(f"\n[load {load()}] PostgreSQL execution time, median of 15 (ms)")
    print("| annotator | query | " + " | ".join(codes) + " |")
    print("|---|---|" + "---|" * len(codes))
    crowd = ("crowd0",) if "crowd0" in data["annotators"] else ()
    for who in ("fresh0", "veteran", "importer", *crowd):
        figures = {
            label: explain_side(code, data, who, show and label == "new")
            for label, code in codes.items()
        }
        for query, title in (("ids", "claim candidates (20)"), ("count", '"task N of M" count')):
            cells = " | ".join(f"{figures[label][query]:.2f}" for label in codes)
            print(f"| {who} | {title} | {cells} |")


def patch(code) -> None:
    """Make the views use `code`'s claimable-task functions."""
    from annotate.selectors import work
    from annotate.services import assignments

    for name in ("claimable_tasks_sql", "claimable_task_count", "claimable_task_ids"):
        setattr(assignments, name, getattr(code, name))
    for name in ("claimable_tasks_sql", "claimable_task_count"):
        setattr(work, name, getattr(code, name))
    assignments._claim_first_free.__globals__["claimable_task_ids"] = code.claimable_task_ids


def cpu(codes: dict, data: dict) -> None:
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from tests.bench.inprocess_cpu import backend_cpu, own_cpu

    answers = {f"r{r}_q{q}": "yes" for r in range(1, SYSTEMS + 1) for q in range(1, QUESTIONS + 1)}
    answers["active_seconds"] = "30"
    client = Client()
    sessions = []
    for claim in data["claims"]:
        client.cookies.clear()  # else the next login ends this session
        client.force_login(claim.annotator.user)
        sessions.append((claim.pk, client.cookies["sessionid"].value))
    connection.ensure_connection()
    pid = connection.connection.info.backend_pid
    totals = {label: {"submit": [0.0, 0.0], "page": [0.0, 0.0]} for label in codes}
    queries = {}
    block, turn = 20, 0
    pending = list(sessions)
    while pending:
        label = list(codes)[turn % len(codes)]
        patch(codes[label])
        chunk, pending = pending[:block], pending[block:]
        landed = []
        before = own_cpu(), backend_cpu(pid)
        for n, (assignment_id, key) in enumerate(chunk):
            client.cookies["sessionid"] = key
            if n == 0 and label not in queries:
                with CaptureQueriesContext(connection) as ctx:
                    answer = client.post(f"/annotate/assignments/{assignment_id}/", answers)
                queries[label] = len(ctx)
            else:
                answer = client.post(f"/annotate/assignments/{assignment_id}/", answers)
            assert answer.status_code == 302 and answer.url.startswith("/annotate/assign"), answer
            landed.append((answer.url, key))
        middle = own_cpu(), backend_cpu(pid)
        for url, key in landed:
            client.cookies["sessionid"] = key
            assert client.get(url).status_code == 200
        after = own_cpu(), backend_cpu(pid)
        if turn >= len(codes):  # the first block of each is the warm-up
            part = totals[label]
            part["submit"][0] += (middle[0] - before[0]) * 1000
            part["submit"][1] += (middle[1] - before[1]) * 1000
            part["page"][0] += (after[0] - middle[0]) * 1000
            part["page"][1] += (after[1] - middle[1]) * 1000
            part["n"] = part.get("n", 0) + len(chunk)
        turn += 1
    print(f"\n[load {load()}] CPU per request, ms (app + PostgreSQL backend)")
    print("| request | " + " | ".join(codes) + " |")
    print("|---|" + "---|" * len(codes))
    for kind, title in (("submit", "submit + next claim"), ("page", "task page it lands on")):
        cells = []
        for label in codes:
            app, pg = (x / totals[label]["n"] for x in totals[label][kind])
            cells.append(f"{app:.2f} + {pg:.2f} = {app + pg:.2f}")
        print(f"| {title} | " + " | ".join(cells) + " |")
    print(
        "requests measured: "
        + ", ".join(f"{label} {totals[label]['n']}" for label in codes)
        + "; queries of a submit + next claim: "
        + ", ".join(f"{label} {queries[label]}" for label in codes)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="git revision of the old code")
    parser.add_argument(
        "--imported", type=int, default=0, help="labels of an imported crowd campaign too"
    )
    parser.add_argument("--plans", action="store_true", help="print the new code's plans")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from tests.bench.harness import drop_database, recreate_database, setup_django

    url = os.environ.get("BENCH_CLAIM_DB", DEFAULT_URL)
    print(f"machine: {os.cpu_count()} cores; load {load()}; base {args.base}")
    recreate_database(url)
    try:
        setup_django(
            {
                "DJANGO_SETTINGS_MODULE": "config.settings.base",
                "DATABASE_URL": url,
                "DJANGO_DEBUG": "false",
                "DATABASE_CONN_MAX_AGE": "60",
                "LOG_LEVEL": "WARNING",
            }
        )
        from annotate.services import assignments

        data = fill(args.imported)
        from annotate.models import Label

        print(f"[load {load()}] filled: {Label.objects.count()} labels")
        # The new functions kept aside: patch() replaces the module's own names.
        codes = {"old": old_module(args.base), "new": types.SimpleNamespace(**vars(assignments))}
        explain(codes, data, args.plans)
        cpu(codes, data)
    finally:
        if os.environ.get("BENCH_KEEP") != "1":
            from django.db import connections

            connections.close_all()
            drop_database(url)
    print(f"load at the end: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
