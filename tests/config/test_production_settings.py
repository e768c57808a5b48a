"""Production settings: HTTPS-only cookies and HSTS, no start without a secret key, and no
secret committed to the repository."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRINT_SETTINGS = (
    "import json, config.settings.production as s; print(json.dumps({name: getattr(s, name) "
    "for name in ['SESSION_COOKIE_SECURE', 'CSRF_COOKIE_SECURE', 'SECURE_HSTS_SECONDS', "
    "'SECURE_HSTS_INCLUDE_SUBDOMAINS', 'SECURE_SSL_REDIRECT', 'SECURE_PROXY_SSL_HEADER', "
    "'SECURE_CONTENT_TYPE_NOSNIFF', 'DEBUG', 'SECRET_KEY', 'ALLOWED_HOSTS']}))"
)


def import_production(**env: str) -> subprocess.CompletedProcess:
    """Import config.settings.production in a fresh interpreter with only these variables."""
    clean = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    return subprocess.run(
        [sys.executable, "-c", PRINT_SETTINGS],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_production_cookies_are_https_only_and_hsts_is_on():
    result = import_production(
        DJANGO_SECRET_KEY="a-test-key-only-0123456789-abcdefghij",
        DJANGO_ALLOWED_HOSTS="annotate.example.org",
    )
    assert result.returncode == 0, result.stderr
    values = json.loads(result.stdout)
    assert values["SESSION_COOKIE_SECURE"] is True
    assert values["CSRF_COOKIE_SECURE"] is True
    assert values["SECURE_HSTS_SECONDS"] >= 31536000
    assert values["SECURE_HSTS_INCLUDE_SUBDOMAINS"] is True
    assert values["SECURE_SSL_REDIRECT"] is True
    assert values["SECURE_PROXY_SSL_HEADER"] == ["HTTP_X_FORWARDED_PROTO", "https"]
    assert values["SECURE_CONTENT_TYPE_NOSNIFF"] is True
    assert values["DEBUG"] is False
    assert values["SECRET_KEY"] == "a-test-key-only-0123456789-abcdefghij"
    assert values["ALLOWED_HOSTS"] == ["annotate.example.org"]


def test_production_refuses_to_start_without_a_secret_key():
    result = import_production()
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "DJANGO_SECRET_KEY" in result.stderr


# A browser asking an API address in production, anonymous (no database read is needed).
BROWSER_ASKS_THE_API = (
    "import django; django.setup(); from django.test import Client; "
    "r = Client(raise_request_exception=False).get('/api/annotate/benchmarks/', "
    "HTTP_ACCEPT='text/html,application/xhtml+xml,*/*;q=0.8'); "
    "print(r.status_code, r['Content-Type'])"
)


def test_production_api_answers_json_never_the_browsable_html_api(tmp_path):
    clean = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
    clean.pop("DATABASE_URL", None)
    env = {
        **clean,
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "DJANGO_SECRET_KEY": "a-test-key-only-0123456789-abcdefghij",
        "DJANGO_ALLOWED_HOSTS": "testserver",
        "DJANGO_SECURE_SSL_REDIRECT": "false",
        "VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", BROWSER_ASKS_THE_API],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.split()[-2:] == ["401", "application/json"], result.stdout


ENV_EXAMPLE_KEY = next(
    line.split("=", 1)[1]
    for line in (REPO / ".env.example").read_text().splitlines()
    if line.startswith("DJANGO_SECRET_KEY=")
)


@pytest.mark.parametrize(
    "key",
    [
        "x",
        "change-me",
        ENV_EXAMPLE_KEY,
        "insecure-embedded-default-key-change-me",  # the old built-in default
        "short-but-random-Q7v",
        "a" * 60,
    ],
)
def test_production_refuses_a_placeholder_or_weak_secret_key(key):
    result = import_production(DJANGO_SECRET_KEY=key, DJANGO_ALLOWED_HOSTS="annotate.example.org")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr and "DJANGO_SECRET_KEY" in result.stderr


SECRET_PATTERNS = {
    "AWS access key id": re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    "private key block": re.compile(r"-----BEGIN (?:[A-Z]+ )?PRIVATE KEY-----"),
    "OpenAI-style key": re.compile(r"\bsk-(?:proj-)?[A-Za-z0-9_-]{20,}"),
    "GitHub token": re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b"),
    "Slack token": re.compile(r"\bxox[abpors]-[A-Za-z0-9-]{10,}"),
    "Google API key": re.compile(r"\bAIza[0-9A-Za-z_-]{35}\b"),
    "AWS secret assignment": re.compile(
        r"aws_secret_access_key\s*[=:]\s*['\"]?[A-Za-z0-9/+]{40}\b", re.IGNORECASE
    ),
}


def tracked_files() -> list[Path]:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        pytest.skip(f"not a git checkout: {result.stderr.strip()}")
    return [REPO / name for name in result.stdout.split("\0") if name]


def secrets_in(text: str) -> list[str]:
    return [kind for kind, pattern in SECRET_PATTERNS.items() if pattern.search(text)]


def test_the_scanner_finds_each_kind_of_secret():
    # Built from pieces so that this file itself holds no match.
    samples = [
        "AKIA" + "ABCDEFGHIJKLMNOP",
        "-----BEGIN RSA " + "PRIVATE KEY-----",
        "sk-" + "a1B2c3D4e5F6g7H8i9J0k1L2",
        "ghp_" + "a" * 36,
        "xoxb-" + "123456789012",
        "AIza" + "B" * 35,
        "aws_secret_access_key = " + "x" * 40,
    ]
    assert [secrets_in(sample) for sample in samples] == [[kind] for kind in SECRET_PATTERNS]


def test_no_secret_is_committed():
    found = []
    for path in tracked_files():
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        found += [f"{path.relative_to(REPO)}: {kind}" for kind in secrets_in(text)]
    assert not found, "Secrets in tracked files:\n" + "\n".join(found)
