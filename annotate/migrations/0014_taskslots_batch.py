"""TaskSlots: a row for every task, with its batch, indexed by (batch, held).

The claim's candidates and "task N of M" want the tasks of a project with a free slot. Read
from the task table, that is every task of the project (each joined to its counter); read from
an index on (batch_id, held), it is the range held < limit: nothing at all once a project is
full, the usual state of a project near its end and of every page view of the benchmark's
(docs/benchmarks.md). For that, every task needs its row from the start: a trigger on
annotate_task inserts it (held 0) and keeps batch_id if a task ever moves, and the assignment
triggers, which may still meet a task without one (a race with this migration), write the batch
when they insert. As in 0011 the triggers are written here, not imported from app code.
"""

from importlib import import_module

from django.db import migrations, models

from annotate.migrations._vendor_sql import CHANGES, HOLDS, run_per_vendor

# 0011's counter function, whose two inserts write no batch.
_COUNT_0011 = import_module("annotate.migrations.0011_taskslots").POSTGRESQL[0]

BACKFILL = [
    """INSERT INTO annotate_taskslots (task_id, held, batch_id)
        SELECT t.id, 0, t.batch_id FROM annotate_task t
        WHERE NOT EXISTS (SELECT 1 FROM annotate_taskslots s WHERE s.task_id = t.id)""",
    """UPDATE annotate_taskslots SET batch_id = (
        SELECT t.batch_id FROM annotate_task t WHERE t.id = annotate_taskslots.task_id)""",
    "DELETE FROM annotate_taskslots WHERE batch_id IS NULL",
]

# The assignment triggers' insert: the row's batch comes from the task (0011's function
# inserted no batch; its ON CONFLICT clause follows unchanged).
_INSERT_PG = """INSERT INTO annotate_taskslots (task_id, held, batch_id)
            SELECT t.id, {delta}, t.batch_id FROM annotate_task t WHERE t.id = {task}"""


def _count_function(*, with_batch: bool) -> str:
    """0011's counter function (as it is, or with its inserts writing the task's batch), made
    to replace the one in place."""
    text = _COUNT_0011.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1)
    if with_batch:
        for row, delta in (("OLD", "-old_holds"), ("NEW", "new_holds")):
            plain = (
                f"INSERT INTO annotate_taskslots (task_id, held) VALUES ({row}.task_id, {delta})"
            )
            if plain not in text:
                raise RuntimeError(f"0011's counter function no longer has: {plain}")
            text = text.replace(plain, _INSERT_PG.format(delta=delta, task=f"{row}.task_id"))
    return text


POSTGRESQL = [
    "ALTER TABLE annotate_taskslots ADD COLUMN batch_id bigint",
    *BACKFILL,
    "ALTER TABLE annotate_taskslots ALTER COLUMN batch_id SET NOT NULL",
    "CREATE INDEX taskslots_batch_held ON annotate_taskslots (batch_id, held)",
    _count_function(with_batch=True),
    """CREATE FUNCTION annotate_taskslots_task() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO annotate_taskslots (task_id, held, batch_id) VALUES (NEW.id, 0, NEW.batch_id)
    ON CONFLICT (task_id) DO UPDATE SET batch_id = EXCLUDED.batch_id;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER annotate_task_slots_row AFTER INSERT OR UPDATE OF batch_id ON annotate_task
    FOR EACH ROW EXECUTE FUNCTION annotate_taskslots_task()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER annotate_task_slots_row ON annotate_task",
    "DROP FUNCTION annotate_taskslots_task()",
    _count_function(with_batch=False),
    "DROP INDEX taskslots_batch_held",
    "ALTER TABLE annotate_taskslots DROP COLUMN batch_id",
]

_UPSERT_SQLITE = """INSERT INTO annotate_taskslots (task_id, held, batch_id)
            SELECT t.id, {delta}, t.batch_id FROM annotate_task t
            WHERE t.id = {task} AND {condition}
        ON CONFLICT (task_id) DO UPDATE SET held = held + excluded.held;"""


def _sqlite_assignment_triggers(upsert: str) -> list[str]:
    """The three assignment triggers of 0011 (update as in 0012), with this upsert."""
    return [
        "DROP TRIGGER annotate_assignment_slots_insert",
        "DROP TRIGGER annotate_assignment_slots_delete",
        "DROP TRIGGER annotate_assignment_slots_update",
        f"""CREATE TRIGGER annotate_assignment_slots_insert AFTER INSERT ON annotate_assignment
    BEGIN
        {upsert.format(task="NEW.task_id", delta=1, condition=HOLDS.format(row="NEW"))}
    END""",
        f"""CREATE TRIGGER annotate_assignment_slots_delete AFTER DELETE ON annotate_assignment
    BEGIN
        {upsert.format(task="OLD.task_id", delta=-1, condition=HOLDS.format(row="OLD"))}
    END""",
        f"""CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    FOR EACH ROW WHEN {CHANGES}
    BEGIN
        {upsert.format(task="OLD.task_id", delta=-1, condition=HOLDS.format(row="OLD"))}
        {upsert.format(task="NEW.task_id", delta=1, condition=HOLDS.format(row="NEW"))}
    END""",
    ]


SQLITE = [
    # SQLite cannot make a column NOT NULL once added (without a default): the backfill and
    # the triggers give every row its batch.
    "ALTER TABLE annotate_taskslots ADD COLUMN batch_id bigint NULL",
    *BACKFILL,
    "CREATE INDEX taskslots_batch_held ON annotate_taskslots (batch_id, held)",
    *_sqlite_assignment_triggers(_UPSERT_SQLITE),
    """CREATE TRIGGER annotate_task_slots_insert AFTER INSERT ON annotate_task
    BEGIN
        INSERT INTO annotate_taskslots (task_id, held, batch_id) VALUES (NEW.id, 0, NEW.batch_id)
        ON CONFLICT (task_id) DO UPDATE SET batch_id = excluded.batch_id;
    END""",
    """CREATE TRIGGER annotate_task_slots_move AFTER UPDATE OF batch_id ON annotate_task
    BEGIN
        UPDATE annotate_taskslots SET batch_id = NEW.batch_id WHERE task_id = NEW.id;
    END""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER annotate_task_slots_move",
    "DROP TRIGGER annotate_task_slots_insert",
    *_sqlite_assignment_triggers(
        """INSERT INTO annotate_taskslots (task_id, held) SELECT {task}, {delta} WHERE {condition}
        ON CONFLICT (task_id) DO UPDATE SET held = held + excluded.held;"""
    ),
    "DROP INDEX taskslots_batch_held",
    "ALTER TABLE annotate_taskslots DROP COLUMN batch_id",
]


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0013_covered_foreign_key_indexes"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="taskslots",
                    name="batch",
                    field=models.ForeignKey(
                        db_constraint=False,
                        db_index=False,
                        on_delete=models.deletion.DO_NOTHING,
                        related_name="+",
                        to="annotate.batch",
                    ),
                ),
                migrations.AddIndex(
                    model_name="taskslots",
                    index=models.Index(fields=["batch", "held"], name="taskslots_batch_held"),
                ),
            ],
            database_operations=[
                run_per_vendor(
                    postgresql=POSTGRESQL,
                    sqlite=SQLITE,
                    postgresql_reverse=POSTGRESQL_REVERSE,
                    sqlite_reverse=SQLITE_REVERSE,
                )
            ],
        ),
    ]
