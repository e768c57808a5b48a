from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from annotate import views as annotate_views
from annotate.login import RateLimitedLoginView
from config.health import health
from evaluation.judge_api import JudgeRunProgressApi
from evaluation.report_api import ReportApi

urlpatterns = [
    path("", annotate_views.home, name="home"),
    path("accounts/login/", RateLimitedLoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("health/", health, name="health"),
    # One login page for everyone, so its attempt limit covers the admin too.
    path("admin/login/", RedirectView.as_view(pattern_name="login", query_string=True)),
    path("admin/", admin.site.urls),
    path("benchmarks/", include("annotate.urls")),
    path("annotate/", include("annotate.work_urls")),
    path("crowd/", include("annotate.crowd.urls")),
    path("api/crowd/", include("annotate.crowd.api_urls")),
    path("api/annotate/", include("annotate.api_urls")),
    path("judge/runs/", include("evaluation.judge_urls")),
    path(
        "api/judge/runs/<int:run_id>/progress/",
        JudgeRunProgressApi.as_view(),
        name="api-judge-run-progress",
    ),
    path("reports/", include("evaluation.report_urls")),
    path("api/reports/<int:benchmark_id>/", ReportApi.as_view(), name="api-report"),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="api-schema"), name="api-docs"),
]

handler500 = "config.error_views.server_error"
