from django.contrib.auth import views as auth_views
from django.urls import path

from reviewapp.accounts.sign_in import ThrottledAuthenticationForm
from reviewapp.views import dashboard, ingest, ingest_api, policy, replay, replay_fixtures, review

urlpatterns = [
    # Sign-in
    path(
        "login/",
        auth_views.LoginView.as_view(authentication_form=ThrottledAuthenticationForm),
        name="login",
    ),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", dashboard.dashboard, name="dashboard"),
    # Ingest
    path("ingest/", ingest.batch_list, name="batch-list"),
    path("ingest/batches/<uuid:public_id>/", ingest.batch_detail, name="batch-detail"),
    path("ingest/batches/<uuid:public_id>/progress/", ingest.batch_progress, name="batch-progress"),
    path("ingest/batches/<uuid:public_id>/retry/", ingest.batch_retry, name="batch-retry"),
    path("tokens/", ingest.token_list, name="token-list"),
    path("tokens/<int:pk>/revoke/", ingest.token_revoke, name="token-revoke"),
    # Policy: proposals, approval, versions
    path("policy/", policy.policy_home, name="policy-home"),
    path("policy/v/<int:number>/", policy.version_detail, name="policy-version"),
    path("policy/v/<int:number>/export.json", policy.version_export, name="policy-export"),
    path("policy/v/<int:number>/settled/", policy.settled_tickets, name="policy-settled"),
    path(
        "policy/v/<int:number>/settled/close/",
        policy.close_settled_view,
        name="policy-close-settled",
    ),
    path("policy/diff/", policy.version_diff, name="policy-diff"),
    path("policy/draft/", policy.draft_view, name="policy-draft"),
    path("policy/publish/", policy.publish_view, name="policy-publish"),
    path("policy/import/", policy.import_view, name="policy-import"),
    path("policy/propose/", policy.propose_view, name="policy-propose"),
    path("policy/propose/preview/", policy.propose_preview, name="policy-propose-preview"),
    path("policy/proposals/", policy.proposal_list, name="proposal-list"),
    path("policy/proposals/<int:pk>/", policy.proposal_detail, name="proposal-detail"),
    path("policy/proposals/<int:pk>/decide/", policy.proposal_decide, name="proposal-decide"),
    # Tickets
    path("tickets/", review.ticket_queue, name="ticket-queue"),
    path("tickets/bulk/", review.ticket_bulk, name="ticket-bulk"),
    path("tickets/<int:ticket_id>/", review.ticket_detail, name="ticket-detail"),
    path("tickets/<int:ticket_id>/handoff.json", review.ticket_handoff, name="ticket-handoff"),
    path("tickets/<int:ticket_id>/claim/", review.ticket_claim, name="ticket-claim"),
    path("tickets/<int:ticket_id>/assign/", review.ticket_assign, name="ticket-assign"),
    path("tickets/<int:ticket_id>/comment/", review.ticket_comment, name="ticket-comment"),
    path("tickets/<int:ticket_id>/close/", review.ticket_close, name="ticket-close"),
    path("tickets/<int:ticket_id>/reopen/", review.ticket_reopen, name="ticket-reopen"),
    # Replay: fixture sets, jobs, what they found, and the impact of a proposal or the draft
    path("replay/", replay.job_list, name="replay-jobs"),
    path("replay/open-tickets/", replay.open_tickets_replay, name="replay-open-tickets"),
    path("replay/jobs/<int:pk>/", replay.job_detail, name="replay-job"),
    path("replay/jobs/<int:pk>/progress/", replay.job_progress_view, name="replay-progress"),
    path("replay/jobs/<int:pk>/cancel/", replay.job_cancel_view, name="replay-cancel"),
    path("replay/jobs/<int:pk>/retry/", replay.job_retry_view, name="replay-retry"),
    path("replay/jobs/<int:pk>/changes/", replay.job_changes, name="replay-changes"),
    path("replay/jobs/<int:pk>/groups/<int:result_id>/", replay.job_group, name="replay-group"),
    path("replay/jobs/<int:pk>/job.json", replay.job_json, name="replay-json"),
    path("replay/jobs/<int:pk>/results.jsonl", replay.job_results_export, name="replay-export"),
    path("replay/impact/draft/", replay.impact_view, {"kind": "draft"}, name="replay-impact-draft"),
    path(
        "replay/impact/proposal/<int:pk>/",
        replay.impact_view,
        {"kind": "proposal"},
        name="replay-impact-proposal",
    ),
    path("replay/fixtures/", replay_fixtures.fixture_list, name="replay-fixtures"),
    path("replay/fixtures/freeze/", replay_fixtures.fixture_freeze, name="replay-freeze"),
    path("replay/fixtures/upload/", replay_fixtures.fixture_upload, name="replay-upload"),
    path("replay/fixtures/shared/", replay_fixtures.fixture_shared, name="replay-shared"),
    path("replay/fixtures/<int:pk>/", replay_fixtures.fixture_detail, name="replay-fixture"),
    path("replay/fixtures/<int:pk>/suite/", replay_fixtures.fixture_suite, name="replay-suite"),
    path("replay/fixtures/<int:pk>/replay/", replay_fixtures.fixture_replay, name="replay-start"),
    path(
        "replay/fixtures/<int:pk>/export/",
        replay_fixtures.fixture_export,
        name="replay-fixture-export",
    ),
    # API (bearer tokens)
    path("api/v1/traces", ingest_api.post_traces, name="api-traces"),
    path("api/v1/batches/<uuid:public_id>", ingest_api.get_batch, name="api-batch"),
]
