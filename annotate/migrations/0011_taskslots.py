"""TaskSlots: a per-task counter of the assignments that hold or may hold a slot, kept by
triggers on annotate_assignment (see annotate.models.TaskSlots).

An assignment counts while it is claimed (live or past its time) or submitted/approved and not
late. The triggers are written here, not imported from app code, so this migration keeps doing
what it did when it was written.
"""

from django.db import migrations, models

HOLDS = "({row}.status = 'claimed' OR ({row}.status IN ('submitted', 'approved') AND NOT {row}.is_late))"

BACKFILL = f"""INSERT INTO annotate_taskslots (task_id, held)
    SELECT a.task_id, count(*) FROM annotate_assignment a WHERE {HOLDS.format(row='a')}
    GROUP BY a.task_id"""

POSTGRESQL = [
    f"""CREATE FUNCTION annotate_taskslots_count() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    old_holds integer := 0;
    new_holds integer := 0;
BEGIN
    IF TG_OP <> 'INSERT' AND {HOLDS.format(row='OLD')} THEN
        old_holds := 1;
    END IF;
    IF TG_OP <> 'DELETE' AND {HOLDS.format(row='NEW')} THEN
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
    """CREATE TRIGGER annotate_assignment_slots_row AFTER INSERT OR DELETE ON annotate_assignment
    FOR EACH ROW EXECUTE FUNCTION annotate_taskslots_count()""",
    """CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    FOR EACH ROW EXECUTE FUNCTION annotate_taskslots_count()""",
    """CREATE FUNCTION annotate_taskslots_forget() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM annotate_taskslots WHERE task_id = OLD.id;
    RETURN NULL;
END
$$""",
    """CREATE TRIGGER annotate_task_slots_forget AFTER DELETE ON annotate_task
    FOR EACH ROW EXECUTE FUNCTION annotate_taskslots_forget()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER annotate_task_slots_forget ON annotate_task",
    "DROP FUNCTION annotate_taskslots_forget()",
    "DROP TRIGGER annotate_assignment_slots_update ON annotate_assignment",
    "DROP TRIGGER annotate_assignment_slots_row ON annotate_assignment",
    "DROP FUNCTION annotate_taskslots_count()",
]

_UPSERT = """INSERT INTO annotate_taskslots (task_id, held) SELECT {task}, {delta} WHERE {condition}
        ON CONFLICT (task_id) DO UPDATE SET held = held + excluded.held;"""
SQLITE = [
    f"""CREATE TRIGGER annotate_assignment_slots_insert AFTER INSERT ON annotate_assignment
    BEGIN
        {_UPSERT.format(task='NEW.task_id', delta=1, condition=HOLDS.format(row='NEW'))}
    END""",
    f"""CREATE TRIGGER annotate_assignment_slots_delete AFTER DELETE ON annotate_assignment
    BEGIN
        {_UPSERT.format(task='OLD.task_id', delta=-1, condition=HOLDS.format(row='OLD'))}
    END""",
    f"""CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    BEGIN
        {_UPSERT.format(task='OLD.task_id', delta=-1, condition=HOLDS.format(row='OLD'))}
        {_UPSERT.format(task='NEW.task_id', delta=1, condition=HOLDS.format(row='NEW'))}
    END""",
    """CREATE TRIGGER annotate_task_slots_forget AFTER DELETE ON annotate_task
    BEGIN
        DELETE FROM annotate_taskslots WHERE task_id = OLD.id;
    END""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER annotate_task_slots_forget",
    "DROP TRIGGER annotate_assignment_slots_update",
    "DROP TRIGGER annotate_assignment_slots_delete",
    "DROP TRIGGER annotate_assignment_slots_insert",
]


def _run(schema_editor, statements) -> None:
    for statement in statements:
        schema_editor.execute(statement, params=None)


def install(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    if vendor not in ("postgresql", "sqlite"):
        raise RuntimeError(f"TaskSlots triggers are written for PostgreSQL and SQLite, not {vendor}")
    schema_editor.execute(BACKFILL, params=None)
    _run(schema_editor, POSTGRESQL if vendor == "postgresql" else SQLITE)


def uninstall(apps, schema_editor) -> None:
    vendor = schema_editor.connection.vendor
    _run(schema_editor, POSTGRESQL_REVERSE if vendor == "postgresql" else SQLITE_REVERSE)


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0010_label_unassigned_index"),
    ]

    operations = [
        migrations.CreateModel(
            name="TaskSlots",
            fields=[
                (
                    "task",
                    models.OneToOneField(
                        db_constraint=False,
                        on_delete=models.deletion.DO_NOTHING,
                        primary_key=True,
                        related_name="+",
                        serialize=False,
                        to="annotate.task",
                    ),
                ),
                ("held", models.IntegerField(default=0)),
            ],
            options={"verbose_name_plural": "task slots"},
        ),
        migrations.RunPython(install, uninstall),
    ]
