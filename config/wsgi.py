import os

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver, reverse

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
application = get_wsgi_application()
# Import the URLconf, and with it every view, while the worker boots: otherwise each worker's
# first request pays about a second of CPU for it, and after a restart every worker at once.
get_resolver().url_patterns  # noqa: B018 - evaluated for its imports
# The first reverse() (every redirect after a form) builds the lookup of all URL names: about
# 20 ms of CPU, paid here rather than by a worker's first submit.
reverse("health")
