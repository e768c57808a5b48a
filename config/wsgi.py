import os
import sys

from django.core.wsgi import get_wsgi_application
from django.urls import get_resolver

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")
application = get_wsgi_application()
# Import the URLconf, and with it every view, while the worker boots: otherwise each worker's
# first request pays about a second of CPU for it, and after a restart every worker at once.
get_resolver().url_patterns  # noqa: B018 - evaluated for its imports
# Without a broker, revision sessions generate in threads of this process
# (annotate.revision.dispatch). A request waiting on the database then gets the GIL back only
# when such a thread lets go of it, after up to the switch interval (5 ms by default) for every
# query: a 9-query page took 118 ms instead of 10 ms beside a busy thread, 42 ms at 1 ms.
sys.setswitchinterval(0.001)
