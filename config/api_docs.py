"""The API documentation pages, served offline: Swagger UI and ReDoc from drf-spectacular-sidecar.

ReDoc's bundle draws the "API docs by Redocly" link in its sidebar with a logo it asks for from
its CDN (https://cdn.redoc.ly/redoc/logo-mini.svg, the bundle's one outside address it loads).
The page serves the sidecar's bundle with that address pointed at an image of our own
(`redoc_bundle`), so the page loads everything from the app; its Content-Security-Policy still
keeps the browser from asking for anything outside it.
"""

import functools
import hashlib
from pathlib import Path

from django.contrib.staticfiles import finders
from django.core.exceptions import ImproperlyConfigured
from django.templatetags.static import static
from django.urls import reverse
from drf_spectacular.settings import spectacular_settings
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularRedocView
from rest_framework.renderers import BaseRenderer
from rest_framework.response import Response
from rest_framework.views import APIView

REDOC_POLICY = (
    "default-src 'self'; img-src 'self' data:; font-src 'self' data:; "
    "style-src 'self' 'unsafe-inline'; script-src 'self'; worker-src 'self' blob:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)
REDOC_BUNDLE = "drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
REDOC_LOGO_CDN = "https://cdn.redoc.ly/redoc/logo-mini.svg"
REDOC_LOGO = "annotate/redoc-logo.svg"
SOURCE_MAP = "//# sourceMappingURL=redoc.standalone.js.map"


@functools.cache
def redoc_bundle() -> bytes:
    """Return the sidecar's ReDoc bundle with its CDN logo replaced by our static one.

    Raises ImproperlyConfigured when the bundle does not hold the logo's address exactly once (a
    new ReDoc draws it some other way: look again before serving it).
    """
    text = Path(finders.find(REDOC_BUNDLE)).read_text(encoding="utf-8")
    if text.count(REDOC_LOGO_CDN) != 1:
        raise ImproperlyConfigured(
            f"{REDOC_BUNDLE}: expected the address {REDOC_LOGO_CDN} once, found it "
            f"{text.count(REDOC_LOGO_CDN)} times; check what the new ReDoc loads from outside"
        )
    text = text.replace(REDOC_LOGO_CDN, static(REDOC_LOGO))
    # Served from another folder than the sidecar's: its source map stays beside the original.
    text = text.replace(SOURCE_MAP, f"//# sourceMappingURL={static(REDOC_BUNDLE)}.map")
    return text.encode("utf-8")


@functools.cache
def redoc_bundle_etag() -> str:
    return f'"{hashlib.sha256(redoc_bundle()).hexdigest()[:32]}"'


class JavaScriptRenderer(BaseRenderer):
    media_type = "text/javascript"
    format = "js"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        return b"" if data is None else data


class OfflineRedocView(SpectacularRedocView):
    @extend_schema(exclude=True)  # a page about the API, not part of it
    def get(self, request, *args, **kwargs):
        response = super().get(request, *args, **kwargs)
        response["Content-Security-Policy"] = REDOC_POLICY
        return response

    def _redoc_standalone(self) -> str:
        return reverse("api-redoc-bundle")


class RedocBundleView(APIView):
    """The ReDoc page's script (`redoc_bundle`), for whoever may open the page."""

    permission_classes = spectacular_settings.SERVE_PERMISSIONS
    renderer_classes = [JavaScriptRenderer]

    @extend_schema(exclude=True)
    def get(self, request, *args, **kwargs):
        etag = redoc_bundle_etag()
        unchanged = request.headers.get("If-None-Match") == etag
        response = Response(None if unchanged else redoc_bundle(), status=304 if unchanged else 200)
        response["Cache-Control"] = "public, max-age=86400"
        response["ETag"] = etag
        return response
