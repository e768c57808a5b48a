from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def from_publication(apps, schema_editor):
    """HITs published before asked for their publication's assignments per task."""
    Hit = apps.get_model("crowd", "Hit")
    Publication = apps.get_model("crowd", "Publication")
    per_task = Publication.objects.filter(pk=OuterRef("publication_id")).values(
        "assignments_per_task"
    )
    Hit.objects.update(max_assignments=Subquery(per_task))


class Migration(migrations.Migration):
    dependencies = [
        ("crowd", "0005_selfhosted_completion"),
    ]

    operations = [
        migrations.AddField(
            model_name="hit",
            name="max_assignments",
            field=models.PositiveSmallIntegerField(
                default=1,
                help_text="The HIT's MaxAssignments: what its task still needed when it was published (the assignments per task less those submitted or claimed here before).",
            ),
            preserve_default=False,
        ),
        migrations.RunPython(from_publication, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="hit",
            constraint=models.CheckConstraint(
                condition=models.Q(("max_assignments__gte", 1)),
                name="crowd_hit_max_assignments_at_least_1",
            ),
        ),
    ]
