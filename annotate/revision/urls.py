from django.urls import path

from annotate.revision import views

app_name = "revision"

urlpatterns = [
    path("", views.home, name="home"),
    path("upload/", views.upload, name="upload"),
    path("studies/<int:study_id>/start/", views.start, name="start"),
    path("sessions/<int:session_id>/", views.session_page, name="session"),
    path("sessions/<int:session_id>/read/", views.session_read, name="session-read"),
    path("sessions/<int:session_id>/state/", views.session_state, name="session-state"),
    path("sessions/<int:session_id>/turns/", views.turn_new, name="turn-new"),
    path("sessions/<int:session_id>/rate/", views.turn_rate, name="turn-rate"),
    path("sessions/<int:session_id>/retry/", views.retry, name="retry"),
    path("sessions/<int:session_id>/withdraw/", views.withdraw, name="withdraw"),
    path("sessions/<int:session_id>/give-up/", views.give_up, name="give-up"),
    path("sessions/<int:session_id>/finish/", views.finish, name="finish"),
    path("sessions/<int:session_id>/reopen/", views.reopen, name="session-reopen"),
    path("reratings/<int:rerating_id>/", views.rerating_page, name="rerating"),
    path("studies/<int:study_id>/rerate/", views.rerate, name="rerate"),
]
