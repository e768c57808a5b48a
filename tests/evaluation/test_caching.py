"""A report (or figure) missing from the cache is built once however many requests ask at once.

The builds here are counted, not timed (CountedBuild).
"""

import contextlib
import os
import shutil
import threading
import uuid
from pathlib import Path
from types import SimpleNamespace

import pytest
from django.core.cache import cache

from annotate.selectors.identities import OPERATOR
from evaluation import caching

REQUESTS = 4
NO_HANG = 10  # seconds a fake build waits for the others at most: only keeps a bug from hanging


@pytest.fixture(params=["locmem", "redis"])
def shared_cache(request, settings):
    """The in-process cache (the default), and Redis as CACHE_URL configures it."""
    if request.param == "locmem":
        backend = {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    else:
        if not os.environ.get("CACHE_URL", "").startswith("redis://"):
            pytest.skip("CACHE_URL (redis://...) is not set")
        backend = {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": os.environ["CACHE_URL"],
        }
    # A prefix of its own: in Redis the keys of another test (or run) are never seen; they expire.
    settings.CACHES = {"default": {**backend, "KEY_PREFIX": f"test-{uuid.uuid4().hex}"}}
    yield cache
    if request.param == "locmem":
        cache.clear()


@pytest.fixture(autouse=True)
def no_snapshot(monkeypatch):
    """The builds here read no database (their data's fingerprints are patched), so they need no
    snapshot of one (tested with a database in test_report_cache_snapshot.py)."""
    monkeypatch.setattr(caching, "read_snapshot", contextlib.nullcontext)


def cache_get_or_build(*, key, build, timeout):
    """The cache's lock and storage, for data that does not move (its key read again is `key`)."""
    return caching.cache_get_or_build(key=key, read_key=lambda: key, build=build, timeout=timeout)


class CountedBuild:
    """A build that counts its calls and waits until all REQUESTS callers are in it or waiting
    for the lock (`_wait`): without the lock every caller would be building at the same time."""

    def __init__(self, value, monkeypatch):
        self.value, self.calls, self.arrived = value, 0, set()
        self.all_here = threading.Event()
        self.lock = threading.Lock()
        waited = caching._wait

        def wait(seconds):
            self.arrive()
            waited(seconds)

        monkeypatch.setattr(caching, "_wait", wait)

    def arrive(self) -> None:
        with self.lock:
            self.arrived.add(threading.get_ident())
            if len(self.arrived) == REQUESTS:
                self.all_here.set()

    def __call__(self, *args, **kwargs):
        with self.lock:
            self.calls += 1
        self.arrive()
        self.all_here.wait(NO_HANG)
        return self.value


def _at_once(calls) -> list:
    """Run each of `calls` in its own thread (as requests in a threaded server), return results."""
    results, errors = [None] * len(calls), []

    def run(index, call):
        try:
            results[index] = call()
        except Exception as error:  # noqa: BLE001 - reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, call)) for i, call in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(NO_HANG * 3)
    assert not errors and not any(thread.is_alive() for thread in threads)
    return results


def test_requests_asking_at_once_build_once_and_all_get_the_value(shared_cache, monkeypatch):
    build = CountedBuild({"rows": [1, 2, 3]}, monkeypatch)

    def ask():
        return cache_get_or_build(key="report:test", build=build, timeout=60)

    assert _at_once([ask] * REQUESTS) == [{"rows": [1, 2, 3]}] * REQUESTS
    assert build.calls == 1
    assert shared_cache.get("report:test") == {"rows": [1, 2, 3]}
    assert shared_cache.get("report:test:building") is None  # the lock went with the build


def test_a_lock_whose_holder_died_is_taken_over_once_it_expires(shared_cache, monkeypatch):
    """A killed worker never lets its lock go: the waiter builds once the lock has expired."""
    shared_cache.add("report:test:building", "killed-worker", 60)
    waits = []

    def lock_expires(seconds):  # instead of sleeping: the dead holder's lock runs out
        waits.append(seconds)
        shared_cache.delete("report:test:building")

    monkeypatch.setattr(caching, "_wait", lock_expires)
    assert cache_get_or_build(key="report:test", build=lambda: "built", timeout=60) == "built"
    assert len(waits) == 1 and shared_cache.get("report:test") == "built"


def test_a_build_that_fails_lets_the_next_request_build_at_once(shared_cache, monkeypatch):
    def fails():
        raise RuntimeError("the database went away")

    def no_wait(seconds):
        raise AssertionError("waited for a lock that should have gone with the failed build")

    monkeypatch.setattr(caching, "_wait", no_wait)
    with pytest.raises(RuntimeError, match="the database went away"):
        cache_get_or_build(key="report:test", build=fails, timeout=60)
    assert cache_get_or_build(key="report:test", build=lambda: 7, timeout=60) == 7


def test_after_a_failed_build_requests_do_not_queue_behind_the_next_one(shared_cache, monkeypatch):
    """Each waiter taking the lock in turn and failing in turn held its web worker for the
    length of every failing build before its own."""

    def fails():
        raise RuntimeError("the database went away")

    with pytest.raises(RuntimeError):
        cache_get_or_build(key="report:test", build=fails, timeout=60)
    shared_cache.add("report:test:building", "another-request", 60)  # building again

    def no_wait(seconds):
        raise AssertionError("queued behind a build while builds fail")

    monkeypatch.setattr(caching, "_wait", no_wait)
    assert cache_get_or_build(key="report:test", build=lambda: 8, timeout=60) == 8


def test_nothing_to_cache_is_answered_and_not_stored(shared_cache):
    assert cache_get_or_build(key="figure:test", build=lambda: None, timeout=60) is None
    assert shared_cache.get("figure:test") is None
    assert shared_cache.get("figure:test:building") is None


def test_a_verbalizer_report_pages_four_figures_loaded_cold_compute_the_report_once(
    shared_cache, monkeypatch
):
    from evaluation.verbalizer import figures, report

    build = CountedBuild({"set": "paper"}, monkeypatch)
    monkeypatch.setattr(report, "verbalizer_report", build)
    monkeypatch.setattr(report, "_version", lambda evaluation_set: "v-test")
    monkeypatch.setattr(figures, "figure_available", lambda report, name: True)
    monkeypatch.setattr(figures, "render_figure", lambda report, name, fmt: name.encode())
    assert len(figures.FIGURES) == REQUESTS

    def request_figure(name):
        return figures.figure_cached(evaluation_set=None, name=name, fmt="svg")

    names = list(figures.FIGURES)
    drawn = _at_once([lambda name=name: request_figure(name) for name in names])
    assert drawn == [name.encode() for name in names]
    assert build.calls == 1


def test_an_infobench_reports_figures_loaded_cold_compute_the_report_once(
    shared_cache, monkeypatch
):
    from evaluation.services import reports

    build = CountedBuild({"leaderboard": []}, monkeypatch)
    monkeypatch.setattr(reports, "report_compute", build)
    monkeypatch.setattr(reports, "_fingerprint", lambda benchmark: "labels as they stand")
    benchmark = SimpleNamespace(pk=1)

    def request_figure():
        return reports.report_cached(benchmark=benchmark, scope=OPERATOR)

    assert _at_once([request_figure] * REQUESTS) == [{"leaderboard": []}] * REQUESTS
    assert build.calls == 1


def test_the_code_digest_moves_with_a_source_file_and_only_with_one(tmp_path):
    package = tmp_path / "package"
    (package / "stats").mkdir(parents=True)
    (package / "stats" / "drfr.py").write_text("def drfr(yes, asked):\n    return yes / asked\n")
    before = caching.source_digest([package])
    (package / "notes.txt").write_text("not code")
    (package / "__pycache__").mkdir()
    (package / "__pycache__" / "drfr.cpython-312.pyc").write_bytes(b"\0")
    assert caching.source_digest([package]) == before
    (package / "stats" / "drfr.py").write_text("def drfr(yes, asked):\n    return yes / 2\n")
    assert caching.source_digest([package]) != before
    assert caching.source_digest([package], extra=["numpy==2.0"]) != caching.source_digest(
        [package], extra=["numpy==2.1"]
    )


def test_an_editors_lock_file_or_an_unreadable_one_leaves_the_digest_as_it_was(tmp_path):
    """Emacs keeps `.#name.py` beside a file being edited: a symlink to nowhere. Reading it
    raised FileNotFoundError, and every report request with it."""
    package = tmp_path / "package"
    package.mkdir()
    (package / "drfr.py").write_text("def drfr(yes, asked):\n    return yes / asked\n")
    before = caching.source_digest([package])
    (package / ".#drfr.py").symlink_to("someone@host.12345:1700000000")
    (package / "folder.py").mkdir()
    (package / "folder.py" / "inside.txt").write_text("not code")
    (package / "linked.py").symlink_to(package / "folder.py")
    assert caching.source_digest([package]) == before


def test_a_file_or_folder_deleted_while_the_digest_is_read_is_left_out(tmp_path, monkeypatch):
    """A deploy replacing the files while a process reads them: what is gone is not hashed, and
    the page is served."""
    package = tmp_path / "package"
    for folder in ("stats", "judges"):
        (package / folder).mkdir(parents=True)
        (package / folder / "module.py").write_text(f"name = {folder!r}\n")
    (package / "drfr.py").write_text("x = 1\n")
    read_bytes, scandir = Path.read_bytes, os.scandir

    def deleted_before_reading(path):
        if path.parent.name == "stats":
            path.unlink()
        return read_bytes(path)

    def deleted_before_listing(path):
        if isinstance(path, str | os.PathLike) and Path(path).name == "judges":
            shutil.rmtree(path)
        return scandir(path)

    monkeypatch.setattr(Path, "read_bytes", deleted_before_reading)
    monkeypatch.setattr(os, "scandir", deleted_before_listing)
    served = caching.source_digest([package])
    monkeypatch.undo()
    assert not (package / "judges").exists() and not (package / "stats" / "module.py").exists()
    assert served == caching.source_digest([package])
    assert served != caching.source_digest([])  # drfr.py is in it


@pytest.fixture
def code_read_again():
    """code_version as if this process had not read it yet; read again after the test."""
    caching.code_version.cache_clear()
    yield
    caching.code_version.cache_clear()


def test_the_code_version_is_read_once_per_process(code_read_again):
    assert caching.code_version() is caching.code_version()
    assert caching.code_version() == caching.source_digest(
        [caching.Path(caching.__file__).resolve().parent.parent / p for p in caching.CODE_PACKAGES],
        extra=[f"{name}=={caching._library_version(name)}" for name in caching.CODE_LIBRARIES],
    )


def test_the_code_version_is_that_of_the_files_the_process_started_with(
    tmp_path, monkeypatch, code_read_again
):
    """A deploy puts the new files in place, then restarts the processes: one still running
    the old code that read the version on its first report hashed the new files, and cached
    the old code's report under the new code's key."""
    from django.apps import apps

    package = tmp_path / "evaluation"
    package.mkdir()
    (package / "drfr.py").write_text("def drfr(yes, asked):\n    return yes / asked\n")
    monkeypatch.setattr(caching, "CODE_ROOTS", (package,))
    libraries = [f"{name}=={caching._library_version(name)}" for name in caching.CODE_LIBRARIES]
    old_code = caching.source_digest([package], extra=libraries)

    apps.get_app_config("evaluation").ready()  # what the process's start runs
    (package / "drfr.py").write_text("def drfr(yes, asked):\n    return yes / 2\n")

    assert caching.source_digest([package], extra=libraries) != old_code
    assert caching.code_version() == old_code


def _counted(monkeypatch, module, name: str, value) -> list:
    calls = []

    def build(*args, **kwargs):
        calls.append(1)
        return value

    monkeypatch.setattr(module, name, build)
    return calls


def test_an_infobench_report_cached_by_other_code_is_computed_again(shared_cache, monkeypatch):
    """The key named the data and the conventions, not the code: a deploy changing how a table
    is computed served the old code's report until the data changed or the entry expired."""
    from evaluation.services import reports

    calls = _counted(monkeypatch, reports, "report_compute", {"leaderboard": []})
    monkeypatch.setattr(reports, "_fingerprint", lambda benchmark: "labels as they stand")
    benchmark = SimpleNamespace(pk=1)
    # A figure's table alone, then the whole report (which serves that table from then on).
    for tables in (["leaderboard"], None, ["leaderboard"], None):
        reports.report_cached(benchmark=benchmark, scope=OPERATOR, tables=tables)
    assert len(calls) == 2
    monkeypatch.setattr(caching, "code_version", lambda: "next-deploy")
    for tables in (["leaderboard"], None, ["leaderboard"], None):
        reports.report_cached(benchmark=benchmark, scope=OPERATOR, tables=tables)
    assert len(calls) == 4


def test_a_verbalizer_report_and_figure_cached_by_other_code_are_made_again(
    shared_cache, monkeypatch
):
    from evaluation.verbalizer import figures, report

    reports = _counted(monkeypatch, report, "verbalizer_report", {"rows": []})
    drawn = _counted(monkeypatch, figures, "render_figure", b"<svg/>")
    monkeypatch.setattr(report, "_version", lambda evaluation_set: "answers-as-they-stand")
    monkeypatch.setattr(figures, "figure_available", lambda report, name: True)
    for _ in range(2):
        figures.figure_cached(evaluation_set=None, name="groups", fmt="svg")
        report.verbalizer_report_cached(evaluation_set=None)
    assert (len(reports), len(drawn)) == (1, 1)
    monkeypatch.setattr(caching, "code_version", lambda: "next-deploy")
    figures.figure_cached(evaluation_set=None, name="groups", fmt="svg")
    report.verbalizer_report_cached(evaluation_set=None)
    assert (len(reports), len(drawn)) == (2, 2)


def test_a_kiwi_figure_drawn_by_other_code_is_drawn_again(shared_cache, monkeypatch):
    from evaluation.revision import figures

    drawn = _counted(monkeypatch, figures, "render_revision_figure", b"<svg/>")
    monkeypatch.setattr(figures, "figure_fingerprint", lambda study: "turns-as-they-stand")
    monkeypatch.setattr(figures, "revision_report_build", lambda study: {})
    monkeypatch.setattr(figures, "figure_available", lambda report, name: True)
    for _ in range(2):
        figures.revision_figure_cached(study=None, name="ratings", fmt="svg")
    assert len(drawn) == 1
    monkeypatch.setattr(caching, "code_version", lambda: "next-deploy")
    figures.revision_figure_cached(study=None, name="ratings", fmt="svg")
    assert len(drawn) == 2


SETTING_CHANGES = {
    "EXPERT_HOURLY_RATE_USD": (59.0, 75.0),
    "REPORT_BOOTSTRAP_RESAMPLES": (1000, 2000),
    "REPORT_BOOTSTRAP_SEED": (0, 1),
    "CROWD_FEE_RATE": ("", "0.25"),
}


@pytest.mark.parametrize("name", sorted(SETTING_CHANGES))
def test_an_infobench_report_cached_under_other_settings_is_computed_again(
    name, shared_cache, monkeypatch, settings
):
    """Table 4's expert cost at $59/h was served after a restart at another rate, until the
    labels changed or the entry expired; so were the intervals of another bootstrap."""
    from evaluation.services import reports

    calls = _counted(monkeypatch, reports, "report_compute", {"leaderboard": []})
    monkeypatch.setattr(reports, "_fingerprint", lambda benchmark: "labels as they stand")
    benchmark = SimpleNamespace(pk=1)
    first, second = SETTING_CHANGES[name]
    setattr(settings, name, first)
    for _ in range(2):
        reports.report_cached(benchmark=benchmark, scope=OPERATOR)
    assert len(calls) == 1
    setattr(settings, name, second)
    for _ in range(2):
        reports.report_cached(benchmark=benchmark, scope=OPERATOR)
    assert len(calls) == 2
    setattr(settings, name, first)
    reports.report_cached(benchmark=benchmark, scope=OPERATOR)
    assert len(calls) == 2


def test_a_kiwi_figure_drawn_under_another_bootstrap_is_drawn_again(
    shared_cache, monkeypatch, settings
):
    from evaluation.revision import figures

    drawn = _counted(monkeypatch, figures, "render_revision_figure", b"<svg/>")
    monkeypatch.setattr(figures, "figure_fingerprint", lambda study: "turns-as-they-stand")
    monkeypatch.setattr(figures, "revision_report_build", lambda study: {})
    monkeypatch.setattr(figures, "figure_available", lambda report, name: True)
    settings.REPORT_BOOTSTRAP_SEED = 0
    for _ in range(2):
        figures.revision_figure_cached(study=None, name="ratings", fmt="svg")
    settings.REPORT_BOOTSTRAP_SEED = 7
    figures.revision_figure_cached(study=None, name="ratings", fmt="svg")
    assert len(drawn) == 2
