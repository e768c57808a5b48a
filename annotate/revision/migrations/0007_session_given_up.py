"""A session given up is kept, marked given up with who and when (it was deleted, so its
(question, system) was handed out again while the endpoint was still failing)."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("revision", "0006_imports_before_live"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AlterField(
            model_name="revisionsession",
            name="status",
            field=models.CharField(
                choices=[
                    ("active", "In progress"),
                    ("finished", "Finished"),
                    ("given-up", "Given up"),
                ],
                default="active",
                max_length=10,
            ),
        ),
        migrations.AddField(
            model_name="revisionsession",
            name="given_up_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="revisionsession",
            name="given_up_by",
            field=models.ForeignKey(
                blank=True,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="revision_sessions_given_up",
                to=settings.AUTH_USER_MODEL,
            ),
        ),
        migrations.AddConstraint(
            model_name="revisionsession",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("given_up_at__isnull", False), ("status", "given-up")),
                    models.Q(
                        models.Q(("status", "given-up"), _negated=True),
                        ("given_up_at__isnull", True),
                    ),
                    _connector="OR",
                ),
                name="revision_session_given_up_when",
            ),
        ),
    ]
