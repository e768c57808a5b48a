"""Login with a limit on failed attempts, per client address and per username."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth import views as auth_views
from django.core.cache import cache
from django.http import HttpRequest, HttpResponse


def _keys(request: HttpRequest) -> list[str]:
    address = request.META.get("REMOTE_ADDR", "unknown")
    username = (request.POST.get("username") or "").strip().lower()[:150]
    return [f"login-fail:ip:{address}", f"login-fail:user:{username}"]


class RateLimitedLoginView(auth_views.LoginView):
    """Refuse further attempts (429) after LOGIN_FAILURE_LIMIT failures in LOGIN_FAILURE_WINDOW s."""

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        keys = _keys(request)
        if any(cache.get(key, 0) >= settings.LOGIN_FAILURE_LIMIT for key in keys):
            response = self.render_to_response(self.get_context_data(locked_out=True))
            response.status_code = 429
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form):
        for key in _keys(self.request):
            cache.add(key, 0, timeout=settings.LOGIN_FAILURE_WINDOW)
            try:
                cache.incr(key)
            except ValueError:  # expired between add and incr
                cache.set(key, 1, timeout=settings.LOGIN_FAILURE_WINDOW)
        return super().form_invalid(form)
