"""The offline platform's state file: every process sees the others' changes, a read of an
unchanged file does not parse it again, a call that changes nothing does not write it.

Names are looked up in the module when used: a test of a server restart reloads it."""

import json
import os
from decimal import Decimal

import pytest

from annotate.crowd import fake
from annotate.crowd.base import HitTypeSpec
from annotate.errors import CrowdPlatformError

SPEC = HitTypeSpec(
    title="t", description="d", keywords="", reward=Decimal("1"),
    assignment_duration_seconds=60, auto_approval_delay_seconds=60,
)  # fmt: skip


def _one_hit(platform: fake.FakePlatform, *, max_assignments: int = 3) -> str:
    return platform.hit_create(
        hit_type_id=platform.hit_type_create(spec=SPEC), question_url="https://x.org/q",
        max_assignments=max_assignments, lifetime_seconds=3600, unique_request_token="tok",
    ).hit_id  # fmt: skip


def _rewritten_in_place(change) -> None:
    """Another writer (another process of the site, or a person) changes the file where it is:
    same file, and possibly the same size and modification time (one clock tick)."""
    path = fake.state_file()
    status = path.stat()
    data = json.loads(path.read_text(encoding="utf-8"))
    change(data)
    with open(path, "r+", encoding="utf-8") as handle:
        handle.write(json.dumps(data))
        handle.truncate()
    os.utime(path, ns=(status.st_atime_ns, status.st_mtime_ns))  # as if within one tick


@pytest.fixture
def parses(monkeypatch) -> list[int]:
    """Counts the parses of the state file."""
    counted: list[int] = []
    from_json = fake.FakeStore.from_json.__func__

    def counting(cls, data):
        counted.append(1)
        return from_json(cls, data)

    monkeypatch.setattr(fake.FakeStore, "from_json", classmethod(counting))
    return counted


def test_a_change_another_writer_made_to_the_file_is_seen():
    platform = fake.FakePlatform()
    hit_id = _one_hit(platform)
    assert platform.hit_get(hit_id=hit_id).max_assignments == 3  # read, and kept

    def more_workers(data):  # 3 → 5: the same size
        data["hits"][hit_id]["max_assignments"] = 5

    _rewritten_in_place(more_workers)
    assert platform.hit_get(hit_id=hit_id).max_assignments == 5

    other = fake.FakeStore.from_json(json.loads(fake.state_file().read_text(encoding="utf-8")))
    other.blocks["AWORKER1"] = "spam"
    replacement = fake.state_file().with_suffix(".other")  # another process's write: a new file
    replacement.write_text(json.dumps(other.to_json()), encoding="utf-8")
    os.replace(replacement, fake.state_file())
    assert fake.FakePlatform.store.blocks == {"AWORKER1": "spam"}


def test_a_file_long_unchanged_is_parsed_once_and_its_change_still_seen(parses):
    platform = fake.FakePlatform()
    hit_id = _one_hit(platform)
    written = fake.state_file().stat().st_mtime_ns - 20_000_000_000  # 20 s
    os.utime(fake.state_file(), ns=(written, written))  # written a while ago
    parsed = len(parses)
    for _ in range(3):
        assert platform.hit_get(hit_id=hit_id).max_assignments == 3
    assert len(parses) == parsed + 1  # the first read parses; the others keep it

    _rewritten_in_place(lambda data: data["hits"][hit_id].update(max_assignments=5))
    os.utime(fake.state_file(), ns=(written + 1, written + 1))  # a later write: a later time
    assert platform.hit_get(hit_id=hit_id).max_assignments == 5


def test_reads_of_a_file_just_written_compare_its_text_and_do_not_parse_it_again(parses):
    platform = fake.FakePlatform()
    hit_id = _one_hit(platform)
    parsed = len(parses)
    for _ in range(3):
        assert platform.hit_get(hit_id=hit_id).status == "Assignable"
    assert len(parses) == parsed + 1


def test_a_call_that_changes_nothing_leaves_the_file_alone():
    platform = fake.FakePlatform()
    type_id = platform.hit_type_create(spec=SPEC)
    before = fake.state_file().stat()
    assert platform.hit_type_create(spec=SPEC) == type_id  # the same type: nothing new
    platform.worker_unblock(worker_id="NOBODY")
    after = fake.state_file().stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    platform.worker_block(worker_id="AWORKER1", reason="spam")
    assert fake.state_file().stat().st_ino != before.st_ino  # a change replaces the file


def test_a_refused_change_writes_nothing():
    platform = fake.FakePlatform()
    hit_id = _one_hit(platform)
    platform.worker_accept(hit_id=hit_id, worker_id="W1")
    before = fake.state_file().stat()
    with pytest.raises(CrowdPlatformError, match="cannot be accepted by W1"):
        platform.worker_accept(hit_id=hit_id, worker_id="W1")
    after = fake.state_file().stat()
    assert (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert platform.taken_per_hit() == {hit_id: 1}


def test_an_unreadable_state_file_says_which_file_and_what_to_do():
    fake.FakePlatform().worker_block(worker_id="AWORKER1", reason="spam")
    fake.state_file().write_text("{not json", encoding="utf-8")
    with pytest.raises(CrowdPlatformError, match="state file .* is unreadable .*delete it"):
        fake.FakePlatform().account_balance()
