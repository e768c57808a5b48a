"""manage.py as a shell pipeline runs it."""

import subprocess
import sys
from pathlib import Path

MANAGE = Path(__file__).resolve().parents[2] / "manage.py"


def test_a_reader_that_leaves_early_stops_the_command_without_a_traceback():
    """`manage.py report ... | head`: the pipe closes before the output is written."""
    command = subprocess.Popen(
        [sys.executable, str(MANAGE), "help", "--commands"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    command.stdout.close()  # the reader is gone before the first write
    errors = command.stderr.read().decode()
    command.wait(timeout=60)
    assert command.returncode == 1
    assert errors == ""
