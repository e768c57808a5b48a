import os

from django.core.wsgi import get_wsgi_application
from django.urls import reverse

from config.embedded_beat import embedded_beat_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
application = get_wsgi_application()
# While the worker boots: the first reverse() imports the URLconf, and with it every view (else
# each worker's first request pays about a second of CPU for it, and after a restart every
# worker at once), and builds the lookup of all URL names (about 20 ms more, else paid by the
# first redirect after a form).
reverse("health")
# Without a broker nothing else runs CELERY_BEAT_SCHEDULE: this serving process does.
embedded_beat_start()
