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

from django.db import migrations, models

HOLDS = "({row}.status = 'claimed' OR ({row}.status IN ('submitted', 'approved') AND NOT {row}.is_late))"
CHANGES = (
    f"(OLD.task_id <> NEW.task_id) OR ({HOLDS.format(row='OLD')} <> {HOLDS.format(row='NEW')})"
)

BACKFILL = [
    """INSERT INTO annotate_taskslots (task_id, held, batch_id)
        SELECT t.id, 0, t.batch_id FROM annotate_task t
        WHERE NOT EXISTS (SELECT 1 FROM annotate_taskslots s WHERE s.task_id = t.id)""",
    """UPDATE annotate_taskslots SET batch_id = (
        SELECT t.batch_id FROM annotate_task t WHERE t.id = annotate_taskslots.task_id)""",
    "DELETE FROM annotate_taskslots WHERE batch_id IS NULL",
]

# The assignment triggers' upsert: the row's batch comes from the task when it is inserted.
_UPSERT_PG = """INSERT INTO annotate_taskslots (task_id, held, batch_id)
            SELECT t.id, {delta}, t.batch_id FROM annotate_task t WHERE t.id = {task}
        ON CONFLICT (task_id) DO UPDATE SET held = annotate_taskslots.held + EXCLUDED.held;"""

POSTGRESQL = [
    "ALTER TABLE annotate_taskslots ADD COLUMN batch_id bigint",
    *BACKFILL,
    "ALTER TABLE annotate_taskslots ALTER COLUMN batch_id SET NOT NULL",
    "CREATE INDEX taskslots_batch_held ON annotate_taskslots (batch_id, held)",
    f"""CREATE OR REPLACE FUNCTION annotate_taskslots_count() RETURNS trigger LANGUAGE plpgsql
AS $$
DECLARE
    old_holds integer := 0;
    new_holds integer := 0;
BEGIN
    IF TG_OP <> 'INSERT' AND {HOLDS.format(row="OLD")} THEN
        old_holds := 1;
    END IF;
    IF TG_OP <> 'DELETE' AND {HOLDS.format(row="NEW")} THEN
        new_holds := 1;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.task_id = NEW.task_id THEN
        new_holds := new_holds - old_holds;
        old_holds := 0;
    END IF;
    IF old_holds <> 0 THEN
        {_UPSERT_PG.format(delta="-old_holds", task="OLD.task_id")}
    END IF;
    IF new_holds <> 0 THEN
        {_UPSERT_PG.format(delta="new_holds", task="NEW.task_id")}
    END IF;
    RETURN NULL;
END
$$""",
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
    # The 0011 function, which inserted no batch.
    f"""CREATE OR REPLACE FUNCTION annotate_taskslots_count() RETURNS trigger LANGUAGE plpgsql
AS $$
DECLARE
    old_holds integer := 0;
    new_holds integer := 0;
BEGIN
    IF TG_OP <> 'INSERT' AND {HOLDS.format(row="OLD")} THEN
        old_holds := 1;
    END IF;
    IF TG_OP <> 'DELETE' AND {HOLDS.format(row="NEW")} THEN
        new_holds := 1;
    END IF;
    IF TG_OP = 'UPDATE' AND OLD.task_id = NEW.task_id THEN
        new_holds := new_holds - old_holds;
        old_holds := 0;
    END IF;
    IF old_holds <> 0 THEN
        INSERT INTO annotate_taskslots (task_id, held) VALUES (OLD.task_id, -old_holds)
        ON CONFLICT (task_id) DO UPDATE SET held = annotate_taskslots.held + EXCLUDED.held;
    END IF;
    IF new_holds <> 0 THEN
        INSERT INTO annotate_taskslots (task_id, held) VALUES (NEW.task_id, new_holds)
        ON CONFLICT (task_id) DO UPDATE SET held = annotate_taskslots.held + EXCLUDED.held;
    END IF;
    RETURN NULL;
END
$$""",
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


def _run(schema_editor, statements) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install(apps, schema_editor) -> None:
    postgresql = schema_editor.connection.vendor == "postgresql"
    _run(schema_editor, POSTGRESQL if postgresql else SQLITE)


def uninstall(apps, schema_editor) -> None:
    postgresql = schema_editor.connection.vendor == "postgresql"
    _run(schema_editor, POSTGRESQL_REVERSE if postgresql else SQLITE_REVERSE)


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
            database_operations=[migrations.RunPython(install, uninstall)],
        ),
    ]
