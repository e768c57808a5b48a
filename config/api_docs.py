"""The API documentation pages, served offline: Swagger UI and ReDoc from drf-spectacular-sidecar.

ReDoc's bundle always shows a "by Redocly" logo from its CDN; the page's Content-Security-Policy
keeps the browser from asking for it (and anything else outside the app).
"""

from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView

REDOC_POLICY = (
    "default-src 'self'; img-src 'self' data:; font-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; script-src 'self'; worker-src 'self' blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


class OfflineRedocView(SpectacularRedocView):
    @extend_schema(exclude=True)  # a page about the API, not part of it
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = REDOC_POLICY
        return response
