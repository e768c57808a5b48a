"""Every page refuses to be framed unless it says otherwise.

Django's XFrameOptionsMiddleware sends X-Frame-Options: DENY; this adds the modern equivalent,
CSP `frame-ancestors 'none'`, to every response whose own policy does not name its ancestors.
The crowd worker pages name MTurk's origins (annotate.crowd.worker_views.worker_csp).
"""

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

HEADER = "Content-Security-Policy"


class FrameAncestorsMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        policy = response.get(HEADER, "")
        if "frame-ancestors" not in policy:
            response[HEADER] = (
                f"{policy}; frame-ancestors 'none'" if policy else "frame-ancestors 'none'"
            )
        return response
