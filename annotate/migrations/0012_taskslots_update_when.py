"""TaskSlots: the update trigger fires only when an assignment starts or stops holding a slot,
or moves to another task.

Every submit updates the assignment's status (claimed -> submitted): an on-time submission
goes on holding its slot, so the counter does not change, yet the trigger of 0011 ran its
function all the same. On PostgreSQL that is a PL/pgSQL call per submit, compiled anew by every
new database connection (a request's own when CONN_MAX_AGE is 0); on SQLite two upserts that
cancel out. A WHEN condition is checked without calling anything. The counts are the same:
when the condition is false, the old trigger's writes added up to nothing.
"""

from django.db import migrations

from annotate.migrations._vendor_sql import CHANGES, HOLDS, run_per_vendor

_UPSERT = """INSERT INTO annotate_taskslots (task_id, held) SELECT {task}, {delta} WHERE {condition}
        ON CONFLICT (task_id) DO UPDATE SET held = held + excluded.held;"""
_SQLITE_BODY = f"""
    BEGIN
        {_UPSERT.format(task="OLD.task_id", delta=-1, condition=HOLDS.format(row="OLD"))}
        {_UPSERT.format(task="NEW.task_id", delta=1, condition=HOLDS.format(row="NEW"))}
    END"""

POSTGRESQL = [
    "DROP TRIGGER annotate_assignment_slots_update ON annotate_assignment",
    f"""CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    FOR EACH ROW WHEN ({CHANGES}) EXECUTE FUNCTION annotate_taskslots_count()""",
]
POSTGRESQL_REVERSE = [
    "DROP TRIGGER annotate_assignment_slots_update ON annotate_assignment",
    """CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    FOR EACH ROW EXECUTE FUNCTION annotate_taskslots_count()""",
]
SQLITE = [
    "DROP TRIGGER annotate_assignment_slots_update",
    f"""CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment
    FOR EACH ROW WHEN {CHANGES}{_SQLITE_BODY}""",
]
SQLITE_REVERSE = [
    "DROP TRIGGER annotate_assignment_slots_update",
    f"""CREATE TRIGGER annotate_assignment_slots_update
    AFTER UPDATE OF status, is_late, task_id ON annotate_assignment{_SQLITE_BODY}""",
]


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0011_taskslots"),
    ]

    operations = [
        run_per_vendor(
            postgresql=POSTGRESQL,
            sqlite=SQLITE,
            postgresql_reverse=POSTGRESQL_REVERSE,
            sqlite_reverse=SQLITE_REVERSE,
        ),
    ]
