from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView
from knox.models import AuthToken

from annotate import views as annotate_views
from annotate.admin import admin_password_change
from annotate.revision.api import RerateApi, SessionsImportApi, StudyQuestionsImportApi
from annotate.verbalizer.api import ItemsImportApi
from annotate.verbalizer.api import RunApi as VerbalizerRunApi
from config.api_docs import OfflineRedocView, RedocBundleView
from config.error_views import admin_login
from config.health import health
from evaluation.judge_api import JudgeRunApi, JudgeRunProgressApi
from evaluation.report_api import ReportApi, ReportDownloadApi, ReportFigureApi
from evaluation.revision.api import RevisionJudgeRunApi
from evaluation.revision.views import (
    RevisionFigureApi,
    RevisionReportApi,
    RevisionReportDownloadApi,
)
from evaluation.verbalizer.views import (
    VerbalizerFigureApi,
    VerbalizerHumanAnswersApi,
    VerbalizerReportApi,
    VerbalizerReportDownloadApi,
)

# knox registers its tokens in the admin, where a staff user could make a key for anyone and act
# as them through the API: tokens are each user's own (/accounts/tokens/), so not there.
if admin.site.is_registered(AuthToken):
    admin.site.unregister(AuthToken)

urlpatterns = [
    path("", annotate_views.home, name="home"),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("accounts/logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("accounts/tokens/", annotate_views.api_token_list, name="api-tokens"),
    path("health/", health, name="health"),
    path("help/", annotate_views.help_index, name="help"),
    path("help/<slug:slug>/", annotate_views.help_page, name="help-page"),
    # One login page for everyone (django-axes limits every password check, this one too);
    # a logged-in user who is not staff gets the 403 page instead of a second login form.
    path("admin/login/", admin_login),
    # Django's page, which also says when the change revoked the user's API tokens.
    path(
        "admin/password_change/",
        admin.site.admin_view(admin_password_change, cacheable=True),
    ),
    path("favicon.ico", RedirectView.as_view(url="/static/favicon.svg", permanent=True)),
    path("admin/", admin.site.urls),
    path("benchmarks/", include("annotate.urls")),
    path("annotate/", include("annotate.work_urls")),
    path("crowd/", include("annotate.crowd.urls")),
    path("api/crowd/", include("annotate.crowd.api_urls")),
    path("api/annotate/", include("annotate.api_urls")),
    path("engine/", include("annotate.engine.urls")),
    path("api/engine/", include("annotate.engine.api_urls")),
    path("judge/", include("evaluation.judge_urls")),
    path("api/judge/runs/", JudgeRunApi.as_view(), name="api-judge-runs"),
    path(
        "api/judge/runs/<int:run_id>/progress/",
        JudgeRunProgressApi.as_view(),
        name="api-judge-run-progress",
    ),
    path("reports/", include("evaluation.report_urls")),
    path("revision/", include("annotate.revision.urls")),
    path("revision-reports/", include("evaluation.revision.urls")),
    path("annotators/", include("evaluation.annotator_urls")),
    path("api/reports/<int:benchmark_id>/", ReportApi.as_view(), name="api-report"),
    path(
        "api/reports/<int:benchmark_id>/report.<str:fmt>",
        ReportDownloadApi.as_view(),
        name="api-report-download",
    ),
    path(
        "api/reports/<int:benchmark_id>/figures/<str:name>.<str:image_format>",
        ReportFigureApi.as_view(),
        name="api-report-figure",
    ),
    path("verbalizer/", include("annotate.verbalizer.urls")),
    path("reports/verbalizer/", include("evaluation.verbalizer.urls")),
    path(
        "api/verbalizer/sets/<int:set_id>/report/",
        VerbalizerReportApi.as_view(),
        name="api-verbalizer-report",
    ),
    path("api/verbalizer/items/", ItemsImportApi.as_view(), name="api-verbalizer-items"),
    path(
        "api/verbalizer/sets/<int:set_id>/runs/",
        VerbalizerRunApi.as_view(),
        name="api-verbalizer-runs",
    ),
    path(
        "api/verbalizer/sets/<int:set_id>/report.<str:fmt>",
        VerbalizerReportDownloadApi.as_view(),
        name="api-verbalizer-report-download",
    ),
    path(
        "api/verbalizer/sets/<int:set_id>/human-answers.csv",
        VerbalizerHumanAnswersApi.as_view(),
        name="api-verbalizer-human-answers",
    ),
    path(
        "api/verbalizer/sets/<int:set_id>/figures/<str:figure_name>.<str:image_format>",
        VerbalizerFigureApi.as_view(),
        name="api-verbalizer-figure",
    ),
    path(
        "api/revision/studies/<int:study_id>/report/",
        RevisionReportApi.as_view(),
        name="api-revision-report",
    ),
    path(
        "api/revision/studies/<int:study_id>/report.<str:fmt>",
        RevisionReportDownloadApi.as_view(),
        name="api-revision-report-download",
    ),
    path(
        "api/revision/studies/<int:study_id>/figures/<str:figure>.<str:image_format>",
        RevisionFigureApi.as_view(),
        name="api-revision-figure",
    ),
    path(
        "api/revision/question-imports/",
        StudyQuestionsImportApi.as_view(),
        name="api-revision-question-imports",
    ),
    path(
        "api/revision/session-imports/",
        SessionsImportApi.as_view(),
        name="api-revision-session-imports",
    ),
    path(
        "api/revision/studies/<int:study_id>/reratings/",
        RerateApi.as_view(),
        name="api-revision-reratings",
    ),
    path(
        "api/revision/studies/<int:study_id>/judge-runs/",
        RevisionJudgeRunApi.as_view(),
        name="api-revision-judge-runs",
    ),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Split view: the Swagger UI settings come as a script file of our own, no inline script.
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(url_name="api-schema"),
        name="api-docs",
    ),
    path("api/redoc/", OfflineRedocView.as_view(url_name="api-schema"), name="api-redoc"),
    # ReDoc's script with its one CDN address (a logo) pointed at our own file.
    path("api/redoc/redoc.standalone.js", RedocBundleView.as_view(), name="api-redoc-bundle"),
]

handler403 = "config.error_views.permission_denied"
handler500 = "config.error_views.server_error"
