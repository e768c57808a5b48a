"""What a locked-out login gets back, on a page and in the API; django-axes counts (AXES_*)."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from drf_spectacular.contrib.knox_auth_token import KnoxTokenScheme
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from knox.auth import TokenAuthentication
from knox.settings import knox_settings
from rest_framework import authentication, exceptions, throttling

LOCKED_OUT = "Too many failed attempts. Please wait a few minutes and try again."


def lockout_response(
    request: HttpRequest, original_response: HttpResponse | None = None, credentials=None
) -> HttpResponse:
    """Answer 429: the login page again for a browser, a JSON detail for the API."""
    if request.path.startswith("/api/"):
        response = JsonResponse({"detail": LOCKED_OUT}, status=429)
        response["Retry-After"] = str(settings.LOGIN_FAILURE_WINDOW)
        return response
    context = {"form": AuthenticationForm(request), "locked_out": True, "next": ""}
    return render(request, "registration/login.html", context, status=429)


def client_address(request: HttpRequest) -> str:
    """The client's address as every rate limit counts it (DRF's, with NUM_PROXIES =
    TRUSTED_PROXY_COUNT): REMOTE_ADDR, or behind N trusted proxies the address the last one
    appended to X-Forwarded-For. django-axes uses it too (AXES_CLIENT_IP_CALLABLE), so the login
    limit and the page and API limits agree on who a client is."""
    return throttling.BaseThrottle().get_ident(request)


class LoginLockedOut(exceptions.Throttled):
    default_detail = LOCKED_OUT


class LimitedBasicAuthentication(authentication.BasicAuthentication):
    """DRF's HTTP Basic, answering 429 (not "invalid password") while django-axes locks out.

    The password check itself goes through authenticate() like the login form's, so axes counts
    each failure and refuses the right password during a lockout; this only names the refusal.
    """

    def authenticate_credentials(self, userid, password, request=None):
        try:
            return super().authenticate_credentials(userid, password, request)
        except exceptions.AuthenticationFailed:
            if getattr(request, "axes_locked_out", False):
                raise LoginLockedOut(wait=settings.LOGIN_FAILURE_WINDOW) from None
            raise


class LimitedTokenAuthentication(TokenAuthentication):
    """knox's token authentication, with wrong tokens counted per address.

    DRF authenticates before it throttles, so a wrong token got 401 however often it was tried:
    failures are counted here (annotate.throttling.BadTokenThrottle, API_RATE_BAD_TOKENS), and an
    address over the limit gets 429 with Retry-After, its token not looked at, until the window
    has room again. A right token from an address under the limit works as before.
    """

    def authenticate(self, request):
        from annotate.throttling import BadTokenThrottle

        header = authentication.get_authorization_header(request).split()
        prefix = knox_settings.AUTH_HEADER_PREFIX.encode().lower()
        if not header or header[0].lower() != prefix:
            return None  # no token (a session, HTTP Basic or nothing): knox's answer too
        throttle = BadTokenThrottle()
        if throttle.over(request):
            raise exceptions.Throttled(wait=max(1, round(throttle.wait() or 1)))
        try:
            return super().authenticate(request)
        except exceptions.AuthenticationFailed:
            throttle.failed(request)
            raise


class LimitedBasicAuthenticationScheme(OpenApiAuthenticationExtension):
    """Describe LimitedBasicAuthentication in the API schema as the HTTP Basic it is."""

    target_class = LimitedBasicAuthentication
    name = "basicAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "basic"}


class LimitedTokenAuthenticationScheme(KnoxTokenScheme):
    """Describe LimitedTokenAuthentication in the API schema as the knox token it is."""

    target_class = LimitedTokenAuthentication
