"""What a process imports before it does anything: every start (each management command, each
gunicorn and Celery worker) pays for it in CPU. The `openai` client (about 0.8 s) and matplotlib
(about 0.7 s) load on first use only: a model call (annotate.engine.client.OpenAITransport), a
figure drawn (evaluation.figures.new_figure)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LOADED_ON_FIRST_USE = ("openai", "httpx2", "matplotlib")

# Each stage of a start, in order, and which of the modules named on its command line it imported.
STARTUP = """
import json, sys
import django

seen = set()

def loaded():
    new = [name for name in sys.argv[1:] if name in sys.modules and name not in seen]
    seen.update(new)
    return new

stages = {}
django.setup()
stages["django.setup()"] = loaded()
from django.urls import get_resolver
get_resolver().url_patterns  # the first request, `manage.py check`
stages["the URLconf"] = loaded()
from django.core.management import get_commands, load_command_class
for name, app in get_commands().items():
    load_command_class(app, name)
stages["every management command"] = loaded()
from config.celery import app
app.loader.import_default_modules()  # a Celery worker's start: every app's tasks
stages["the Celery tasks"] = loaded()
print(json.dumps(stages))
"""

SETTINGS = {
    "config.settings.base": {},
    "config.settings.production": {
        "DJANGO_SECRET_KEY": "startup-imports-test-" + "k" * 40,
        "DJANGO_ALLOWED_HOSTS": "annotate.example.org",
    },
}


@pytest.mark.parametrize("settings_module", sorted(SETTINGS))
def test_a_start_imports_neither_the_openai_client_nor_matplotlib(settings_module, tmp_path):
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "DJANGO_SETTINGS_MODULE": settings_module,
        "VAR_DIR": str(tmp_path),
        **SETTINGS[settings_module],
    }
    started = subprocess.run(
        [sys.executable, "-c", STARTUP, *LOADED_ON_FIRST_USE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert started.returncode == 0, started.stderr
    stages = json.loads(started.stdout.splitlines()[-1])
    assert list(stages) == [
        "django.setup()",
        "the URLconf",
        "every management command",
        "the Celery tasks",
    ]
    # `python -X importtime manage.py check` shows who imports one that appears here.
    assert {stage: names for stage, names in stages.items() if names} == {}
