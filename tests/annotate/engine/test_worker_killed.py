"""Kill (SIGKILL) the process generating responses in the middle of a run, then resume it once
its heartbeat is stale: the answers stored before the kill are kept and never asked again; the
resumed run does the rest.

The run lives in a child `manage.py generate` process on its own SQLite file, so the kill is a
real one. The stub server runs here, in the test's process."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from tests.evaluation.openai_stub import StubOpenAI

ROOT = Path(__file__).resolve().parents[3]
COUNT = 12


def _manage(env, *arguments, **kwargs):
    return subprocess.run(
        [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=180, **kwargs,
    )  # fmt: skip


def _stored_outputs(db: Path) -> set[str]:
    with sqlite3.connect(db, timeout=20) as connection:
        rows = connection.execute(
            "SELECT r.text FROM annotate_response r JOIN annotate_system s ON s.id = r.system_id"
            " WHERE s.name = 'killed-gen'"
        ).fetchall()
    return {row[0] for row in rows}


def test_a_killed_worker_loses_nothing_answered_and_resume_does_the_rest(tmp_path):
    db = tmp_path / "db.sqlite3"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.settings.test",
        "DATABASE_URL": f"sqlite:///{db}",
        "VAR_DIR": str(tmp_path),
        "CELERY_BROKER_URL": "",
    }
    data = tmp_path / "instructions.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {"id": f"task_{n}", "input": "", "category": "c", "instruction": f"Do {n}.",
                 "decomposed_questions": ["Q?"], "subset": "Easy_set",
                 "question_label": [["Content"]]}
            ) + "\n"
            for n in range(COUNT)
        )
    )  # fmt: skip
    assert _manage(env, "migrate", "-v", "0").returncode == 0
    assert _manage(env, "import_instructions", str(data), "--benchmark", "kill").returncode == 0
    with StubOpenAI(delay=0.3, responder=lambda m: "reply to " + m[-1]["content"]) as stub:
        created = _manage(
            env, "endpoint_create", "stub", "--base-url", stub.base_url, "--model", "m",
            "--concurrency", "2", "--rpm", "100000", "--tpm", "10000000",
        )  # fmt: skip
        assert created.returncode == 0, created.stderr
        arguments = [
            "generate",
            "--benchmark",
            "kill",
            "--system",
            "killed-gen",
            "--endpoint",
            "stub",
        ]
        child = subprocess.Popen(
            [sys.executable, "manage.py", *arguments], cwd=ROOT, env=env,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while len(_stored_outputs(db)) < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
        kept = _stored_outputs(db)
        assert 4 <= len(kept) < COUNT
        asked_before = len(stub.requests)

        # Its heartbeat is fresh: as far as anyone can tell a process still runs it, and a
        # second one would spend the rest of its cap again.
        refused = _manage(env, "generate", "--run", "1")
        assert refused.returncode == 1 and "Run 1 is running already" in refused.stderr
        assert len(stub.requests) == asked_before
        time.sleep(1.1)
        silent = {**env, "ENGINE_HEARTBEAT_TIMEOUT_SECONDS": "1"}  # silent for the timeout
        resumed = _manage(silent, "generate", "--run", "1")
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        asked_again = [body["messages"][0]["content"] for body in stub.requests[asked_before:]]
    # Nothing stored before the kill was asked again; every instruction has its response.
    assert not {f"reply to {prompt}" for prompt in asked_again} & kept
    assert len(_stored_outputs(db)) == COUNT
    assert kept <= _stored_outputs(db)
    assert "failed 0" in resumed.stdout
