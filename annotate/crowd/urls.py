from django.urls import path

from annotate.crowd import views, worker_views

app_name = "crowd"

urlpatterns = [
    # Workers (no login, no session: a signed token per assignment)
    path("mturk/<str:hit_token>/", worker_views.mturk_task, name="mturk-task"),
    path("join/<str:link_token>/", worker_views.selfhosted_join, name="selfhosted-join"),
    path("work/<str:token>/", worker_views.work_task, name="work-task"),
    path("work/<str:token>/return/", worker_views.work_return, name="work-return"),
    # The offline demo platform's externalSubmit (a demo worker's finished HIT)
    path(
        "demo-platform/mturk/externalSubmit",
        worker_views.demo_external_submit,
        name="demo-external-submit",
    ),
    # Admins
    path("batches/<int:batch_id>/publish/", views.publish, name="publish"),
    path("publications/", views.publication_list, name="publication-list"),
    path("publications/<int:publication_id>/", views.publication_detail, name="publication"),
    path(
        "publications/<int:publication_id>/action/",
        views.publication_action,
        name="publication-action",
    ),
    path("publications/<int:publication_id>/review/", views.review, name="review"),
    path(
        "publications/<int:publication_id>/replacements/",
        views.replacements,
        name="replacements",
    ),
    path(
        "publications/<int:publication_id>/replacements/settle/",
        views.replacement_settle,
        name="replacement-settle",
    ),
    path("publications/<int:publication_id>/review/sync/", views.review_sync, name="review-sync"),
    path("hits/<int:hit_pk>/demo-worker/", views.demo_worker_start, name="demo-worker"),
    path(
        "assignments/<int:assignment_id>/action/",
        views.assignment_action,
        name="assignment-action",
    ),
    path("workers/<int:annotator_id>/action/", views.worker_action, name="worker-action"),
    path("calls/", views.call_list, name="calls"),
]
