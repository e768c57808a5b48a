from django.urls import path

from annotate.crowd import api

app_name = "crowd-api"

urlpatterns = [
    path("batches/<int:batch_id>/preview/", api.PublishPreviewApi.as_view(), name="preview"),
    path("batches/<int:batch_id>/publish/", api.PublishApi.as_view(), name="publish"),
    path("publications/<int:publication_id>/", api.PublicationApi.as_view(), name="publication"),
    path("publications/<int:publication_id>/sync/", api.PublicationSyncApi.as_view(), name="sync"),
    path("publications/<int:publication_id>/review/", api.ReviewApi.as_view(), name="review"),
    path("publications/<int:publication_id>/link/", api.PublicationLinkApi.as_view(), name="link"),
    path(
        "publications/<int:publication_id>/resume/",
        api.PublicationResumeApi.as_view(),
        name="resume",
    ),
    path(
        "publications/<int:publication_id>/replacements/",
        api.ReplacementsApi.as_view(),
        name="replacements",
    ),
    path(
        "publications/<int:publication_id>/replacements/check/",
        api.ReplacementsCheckApi.as_view(),
        name="replacements-check",
    ),
    path(
        "publications/<int:publication_id>/balance/",
        api.PublicationBalanceApi.as_view(),
        name="balance",
    ),
    path(
        "publications/<int:publication_id>/replacements/additions/",
        api.ReplacementAdditionsApi.as_view(),
        name="additions",
    ),
    path(
        "publications/<int:publication_id>/replacements/settle/",
        api.ReplacementSettleApi.as_view(),
        name="addition-settle",
    ),
    path(
        "assignments/<int:assignment_id>/approve/",
        api.AssignmentDecisionApi.as_view(action="approve"),
        name="approve",
    ),
    path(
        "assignments/<int:assignment_id>/reject/",
        api.AssignmentDecisionApi.as_view(action="reject"),
        name="reject",
    ),
    path(
        "assignments/<int:assignment_id>/bonus/",
        api.AssignmentDecisionApi.as_view(action="bonus"),
        name="bonus",
    ),
    path("workers/<int:annotator_id>/block/", api.WorkerApi.as_view(action="block"), name="block"),
    path(
        "workers/<int:annotator_id>/unblock/",
        api.WorkerApi.as_view(action="unblock"),
        name="unblock",
    ),
    path("workers/<int:annotator_id>/notify/", api.WorkerNotifyApi.as_view(), name="notify"),
    path("calls/", api.CallListApi.as_view(), name="calls"),
]
