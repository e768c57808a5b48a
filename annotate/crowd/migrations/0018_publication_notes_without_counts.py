"""The notes of publications that ended with HITs missing held how many were missing, counted
when written; HITs found and stored later (an Expire's run adopting what a stopped publish made)
left them stale. The page and the API now add that figure when shown (publication_note), so
the notes stored keep why only."""

import re

from django.db import migrations

# (the note as written before, what it says now); `\g<n>` keeps a part of it.
OLD_NOTES = [
    (
        r"The publish stopped after \d+ of \d+ HITs: (?P<why>its worker gave no sign of life "
        r"since .+? \(more than \S+ s\)\. The HITs made are live); Resume makes the \d+ missing, "
        r"none twice\.",
        r"The publish stopped: \g<why>.",
    ),
    (
        r"Expired by an admin with \d+ HITs? not made; Resume makes (it|them)\.",
        "Expired by an admin.",
    ),
    (
        r"\d+ of \d+ HITs were not created; see each HIT\.",
        "The platform did not create every HIT; see each HIT.",
    ),
    (
        r"(?P<error>.*) \(\d+ HITs were refused: Resume makes the \d+ missing\)\.",
        r"\g<error> (the platform refused HITs).",
    ),
    (
        r"(?P<error>.*) \(no retry follows: Resume makes the \d+ missing\)\.",
        r"\g<error> (no retry follows).",
    ),
    (
        r"(?P<why>The publish stopped on an unexpected error \(.*\)\. The HITs made are kept); "
        r"Resume makes the missing ones, none twice\.",
        r"\g<why>.",
    ),
]


def note_without_counts(note: str) -> str:
    """The note as written now: the same cause, with no count of the HITs missing."""
    for old, new in OLD_NOTES:
        if written := re.fullmatch(old, note, flags=re.DOTALL):
            return written.expand(new)
    return note


def notes_without_counts(apps, schema_editor):
    Publication = apps.get_model("crowd", "Publication")
    ended = Publication.objects.filter(status__in=["partial", "stalled"]).exclude(error="")
    for publication in ended.only("pk", "error"):
        note = note_without_counts(publication.error)
        if note != publication.error:
            Publication.objects.filter(pk=publication.pk).update(error=note)


class Migration(migrations.Migration):
    dependencies = [("crowd", "0017_publication_expiry_run_account_balance")]

    operations = [migrations.RunPython(notes_without_counts, migrations.RunPython.noop)]
