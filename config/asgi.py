import os

from django.core.asgi import get_asgi_application

from config.embedded_beat import embedded_beat_start

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
application = get_asgi_application()
# Without a broker nothing else runs CELERY_BEAT_SCHEDULE: this serving process does.
embedded_beat_start()
