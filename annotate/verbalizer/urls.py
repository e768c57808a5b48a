from django.urls import path

from annotate.verbalizer import crowd_views, views

app_name = "verbalizer"

urlpatterns = [
    path("", views.overview, name="overview"),
    path("sets/<int:set_id>/", views.set_detail, name="set-detail"),
    path("sets/<int:set_id>/prompts/", views.set_prompts_page, name="set-prompts"),
    path("studies/<int:human_study_id>/", views.study_detail, name="study-detail"),
    path("work/", views.work_list, name="work-list"),
    path("work/<int:human_study_id>/", views.work_next, name="work-next"),
    path("work/<int:human_study_id>/answer/", views.work_answer, name="work-answer"),
    path(
        "work/<int:human_study_id>/answer/change/",
        views.work_answer_change,
        name="work-answer-change",
    ),
    # Admins: a human study on the crowd platforms
    path("studies/<int:human_study_id>/publish/", crowd_views.study_publish, name="study-publish"),
    path(
        "publications/<int:study_publication_id>/review/",
        crowd_views.study_review,
        name="crowd-review",
    ),
    path(
        "publications/<int:study_publication_id>/review/approve/",
        crowd_views.study_review_approve,
        name="crowd-review-approve",
    ),
    path("answers/<int:answer_id>/action/", crowd_views.answer_action, name="answer-action"),
    # Crowd workers (no login, no session: signed tokens)
    path("crowd/mturk/<str:hit_token>/", crowd_views.mturk_prompt, name="crowd-mturk"),
    path("crowd/answer/<str:token>/", crowd_views.mturk_answer, name="crowd-mturk-answer"),
    path("crowd/join/<str:link_token>/", crowd_views.link_join, name="crowd-link-join"),
    path("crowd/work/<str:token>/", crowd_views.link_work, name="crowd-link-work"),
]
