from django.contrib.auth import views as auth_views
from django.urls import path

from reviewapp.accounts.sign_in import ThrottledAuthenticationForm
from reviewapp.views import (
    dashboard,
    gate_api,
    ingest,
    ingest_api,
    openapi,
    otlp,
    policy,
    reports,
    review,
    shadow,
)

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
    # Shadow mode and the gate
    path("shadow/", shadow.shadow_page, name="shadow"),
    path("shadow/runs/", shadow.shadow_runs, name="shadow-runs"),
    path("shadow/start/", shadow.shadow_start_view, name="shadow-start"),
    path("shadow/<int:pk>/end/", shadow.shadow_end_view, name="shadow-end"),
    path("shadow/<int:pk>/backfill/", shadow.shadow_backfill_view, name="shadow-backfill"),
    path("shadow/<int:pk>/backfills/", shadow.backfill_progress, name="shadow-backfills"),
    path("shadow/export.csv", shadow.shadow_export_csv, name="shadow-export-csv"),
    path("shadow/export.json", shadow.shadow_export_json, name="shadow-export-json"),
    path("gate/", shadow.gate_page, name="gate"),
    path("gate/mode/", shadow.gate_mode_view, name="gate-mode"),
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
    # Tallies: monthly explained and unexplained discrepancies, closed months, exports
    path("tallies/", reports.tallies, name="tallies"),
    path("tallies/export.csv", reports.tallies_csv, name="tallies-csv"),
    path("tallies/export.json", reports.tallies_json, name="tallies-json"),
    path(
        "tallies/<str:month>/discrepancies/",
        reports.tally_discrepancies,
        name="tally-discrepancies",
    ),
    path("tallies/<str:month>/close/", reports.tally_close, name="tally-close"),
    path("tallies/<str:month>/reopen/", reports.tally_reopen, name="tally-reopen"),
    # API (bearer tokens)
    path("api/v1/traces", ingest_api.post_traces, name="api-traces"),
    path("api/v1/batches/<uuid:public_id>", ingest_api.get_batch, name="api-batch"),
    path("api/v1/openapi.json", openapi.openapi_document, name="api-openapi"),
    path("api/v1/check", gate_api.post_check, name="api-check"),
    # OTLP/HTTP traces receiver (the same bearer tokens)
    path("v1/traces", otlp.traces, name="otlp-traces"),
]
