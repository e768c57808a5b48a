"""CPU (user + system) of whole `manage.py` processes on the demo data, old code against this
checkout's, alternated on the same database: what each process start costs.

        .venv/bin/python tests/bench/bench_startup_cpu.py [--base REV] [--rounds 5] [--var-dir DIR]

The old code is `git archive REV` in a temporary folder, run by the same Python; one unmeasured
run of each command on each side first writes their compiled modules. The database is
`make run`'s demo (`migrate` and `load_demo` into `--var-dir`, default a temporary one, when it
holds no database yet); the commands only read it. Prints each run and the medians.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = {
    "check": ["check"],
    "revision_report": [
        "revision_report",
        "--study",
        "Demo revision study (KIWI)",
        "--format",
        "json",
    ],
    "verbalizer_report": ["verbalizer_report", "--set", "Demo verbalizer set", "--format", "json"],
    "report": ["report", "--benchmark", "InFoBench demo", "--format", "json"],
}


def load() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def cpu_of(code: Path, arguments: list[str], env: dict) -> float:
    """Run `manage.py` of `code` to the end; return its CPU seconds (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(
        [sys.executable, "manage.py", *arguments],
        cwd=code,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def demo_database(env: dict) -> None:
    if (Path(env["VAR_DIR"]) / "db.sqlite3").exists():
        return
    print(f"loading the demo into {env['VAR_DIR']} (migrate, load_demo)", flush=True)
    for arguments in (["migrate", "--no-input"], ["load_demo"]):
        subprocess.run(
            [sys.executable, "manage.py", *arguments],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="git revision of the old code")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--var-dir", help="VAR_DIR holding the demo database (made if missing)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as scratch:
        old = Path(scratch) / "old"
        old.mkdir()
        archive = subprocess.run(
            ["git", "archive", args.base], cwd=ROOT, check=True, capture_output=True
        )
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        env = {key: value for key, value in os.environ.items() if not key.startswith("DJANGO_")}
        env.update(DJANGO_SETTINGS_MODULE="config.settings.base", DATABASE_URL="")
        env["VAR_DIR"] = str(Path(args.var_dir).resolve()) if args.var_dir else f"{scratch}/var"
        env.pop("CELERY_BROKER_URL", None)
        # Both sides read compiled modules: a side compiling its modules on every run (with
        # PYTHONDONTWRITEBYTECODE, or a stale __pycache__) costs about 0.2 s more a start.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        demo_database(env)
        for arguments in COMMANDS.values():  # unmeasured: writes __pycache__, warms the disk
            for code in (old, ROOT):
                cpu_of(code, arguments, env)
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, text=True,
                              capture_output=True).stdout.strip()  # fmt: skip
        print(f"machine: {os.cpu_count()} cores; load {load()}; old {args.base}, new {head}")
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(1, args.rounds + 1):
            for name, arguments in COMMANDS.items():
                # Alternated, and which goes first alternates too.
                order = [("old", old), ("new", ROOT)]
                for label, code in order if round_ % 2 else order[::-1]:
                    seconds = cpu_of(code, arguments, env)
                    times.setdefault((name, label), []).append(seconds)
                    print(f"round {round_} {name:18} {label}: {seconds:.2f} s", flush=True)
        print(f"load at the end {load()}")
        print(f"{'command':18} {'old median (min-max)':>24} {'new median (min-max)':>24}")
        for name in COMMANDS:
            cells = []
            for label in ("old", "new"):
                runs = times[(name, label)]
                cells.append(f"{statistics.median(runs):.2f} ({min(runs):.2f}-{max(runs):.2f})")
            print(f"{name:18} {cells[0]:>24} {cells[1]:>24}")


if __name__ == "__main__":
    main()
