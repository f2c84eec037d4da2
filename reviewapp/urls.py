from django.contrib.auth import views as auth_views
from django.urls import path

from reviewapp.views import api, dashboard, ingest

urlpatterns = [
    # Sign-in
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", dashboard.dashboard, name="dashboard"),
    # Ingest
    path("ingest/", ingest.batch_list, name="batch-list"),
    path("ingest/batches/<uuid:public_id>/", ingest.batch_detail, name="batch-detail"),
    path("ingest/batches/<uuid:public_id>/progress/", ingest.batch_progress, name="batch-progress"),
    path("tokens/", ingest.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", ingest.token_revoke, name="token-revoke"),
    # API (bearer tokens)
    path("api/v1/traces", api.post_traces, name="api-traces"),
    path("api/v1/batches/<uuid:public_id>", api.get_batch, name="api-batch"),
]
