"""Helpers of the migrations that write SQL per database (triggers): not a migration itself.

Django's loader passes over modules of this folder whose name starts with "_". What a
migration runs stays in the migration; only the plumbing is shared here.
"""

from importlib import import_module

from django.db import migrations

# An assignment holds (or may hold) a slot of its task: the rule of migration 0011's triggers.
HOLDS = import_module("annotate.migrations.0011_taskslots").HOLDS
# An update changes what the counter counts: the assignment moves, or starts or stops holding.
# Status and is_late are never NULL, so neither side is: a plain <> (which any SQLite knows,
# where IS DISTINCT FROM needs 3.39).
CHANGES = (
    f"(OLD.task_id <> NEW.task_id) OR ({HOLDS.format(row='OLD')} <> {HOLDS.format(row='NEW')})"
)


def run_per_vendor(
    *,
    postgresql: list[str],
    sqlite: list[str],
    postgresql_reverse: list[str],
    sqlite_reverse: list[str],
) -> migrations.RunPython:
    """Return an operation running the statements of the database migrated, and back."""

    def statements_for(schema_editor, on_postgresql: list[str], on_sqlite: list[str]) -> None:
        vendor = schema_editor.connection.vendor
        for statement in on_postgresql if vendor == "postgresql" else on_sqlite:
            schema_editor.execute(statement, params=None)

    return migrations.RunPython(
        lambda apps, schema_editor: statements_for(schema_editor, postgresql, sqlite),
        lambda apps, schema_editor: statements_for(
            schema_editor, postgresql_reverse, sqlite_reverse
        ),
    )
