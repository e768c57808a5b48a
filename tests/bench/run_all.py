"""Run every benchmark script in this folder (bench_*.py), one after the other.

`make bench` calls this. Each script prints its own results; copy them to docs/benchmarks.md.
Pass names to run only some: `python tests/bench/run_all.py import report`; `--skip-10m` leaves
out the report over ten million labels (minutes, most of them writing its data the first time):
`make bench BENCH_ARGS=--skip-10m`.
"""

import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(names: list[str]) -> int:
    if "--skip-10m" in names:
        names = [n for n in names if n != "--skip-10m"]
        os.environ["BENCH_REPORT_SKIP_10M"] = "1"
    scripts = sorted(HERE.glob("bench_*.py"))
    if names:
        scripts = [s for s in scripts if any(n in s.stem for n in names)]
    failed = []
    for script in scripts:
        print(f"\n=== {script.name} ===", flush=True)
        started = time.monotonic()
        code = subprocess.call([sys.executable, str(script)], cwd=HERE.parent.parent)
        print(f"--- {script.name}: exit {code}, {time.monotonic() - started:.1f} s", flush=True)
        if code:
            failed.append(script.name)
    if failed:
        print(f"\nFailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
