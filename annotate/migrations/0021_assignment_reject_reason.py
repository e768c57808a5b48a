"""Add Assignment.reject_reason: why an admin rejected the work, as typed. Existing rows get "".

On SQLite, Django adds a NOT NULL column by rebuilding the table, which drops its triggers (the
TaskSlots counter's, migration 0011: tried, the three assignment triggers were gone). SQLite's
own ADD COLUMN takes a NOT NULL column with a constant default and keeps them; the column keeps
that default in the schema, harmless (Django always writes the field). PostgreSQL gets what
Django would run: the column added with a default, a change of the catalog only (no rewrite of
the table, PostgreSQL 11 and later), then the default dropped.
"""

from django.db import migrations, models

from annotate.migrations._vendor_sql import run_per_vendor

ADD = """ALTER TABLE "annotate_assignment" ADD COLUMN "reject_reason" text DEFAULT '' NOT NULL"""
DROP = 'ALTER TABLE "annotate_assignment" DROP COLUMN "reject_reason"'


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0020_assignment_ended_by_block_at"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.AddField(
                    model_name="assignment",
                    name="reject_reason",
                    field=models.TextField(
                        blank=True,
                        help_text="Why an admin rejected it, as typed: sent to the platform as "
                        "its feedback, and shown to a worker with an account here on their "
                        "'My tasks' page.",
                    ),
                ),
            ],
            database_operations=[
                run_per_vendor(
                    postgresql=[
                        ADD,
                        'ALTER TABLE "annotate_assignment" ALTER COLUMN "reject_reason" '
                        "DROP DEFAULT",
                    ],
                    sqlite=[ADD],
                    postgresql_reverse=[DROP],
                    sqlite_reverse=[DROP],
                )
            ],
        ),
    ]
