from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('crowd', '0015_publication_sandbox'),
    ]

    operations = [
        migrations.AddField(
            model_name='publication',
            name='expiry_outcome',
            field=models.TextField(blank=True, help_text='What the last Expire came to, once its platform calls ran in the background (annotate.crowd.services.review.publication_expire_run); empty while they run.'),
        ),
        migrations.AlterField(
            model_name='hit',
            name='expiry_pending_since',
            field=models.DateTimeField(blank=True, help_text="When an admin's expiry of the HIT was asked for (stored before the platform is asked), while the platform has not confirmed it (not asked yet, an error, a timeout): the HIT may still take workers, and be paid for. The next Expire and the sync beat ask again; cleared once the platform confirms.", null=True),
        ),
    ]
