"""The embedded default has a random secret key of its own, kept in var/ (never the old built-in
one, which anyone could read in the repository)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from django.conf import settings

REPO = Path(__file__).resolve().parents[2]
OLD_BUILT_IN_KEY = "insecure-embedded-default-key-change-me"


def embedded_key(var_dir: Path) -> str:
    """Start the embedded settings in a fresh interpreter with VAR_DIR and no secret key set."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SECRET_KEY"}
    result = subprocess.run(
        [sys.executable, "-c", "import config.settings.base as s; print(s.SECRET_KEY)"],
        cwd=REPO,
        env={**env, "VAR_DIR": str(var_dir)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_the_embedded_key_is_random_per_checkout_kept_in_var_and_private(tmp_path):
    first = embedded_key(tmp_path / "one")
    assert embedded_key(tmp_path / "one") == first  # kept across restarts: sessions survive
    assert embedded_key(tmp_path / "two") != first  # another checkout, another key
    assert len(first) >= 50 and first != OLD_BUILT_IN_KEY
    kept = tmp_path / "one" / "secret_key"
    assert kept.read_text().strip() == first
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600


def test_the_running_settings_do_not_use_the_old_built_in_key():
    assert settings.SECRET_KEY != OLD_BUILT_IN_KEY
