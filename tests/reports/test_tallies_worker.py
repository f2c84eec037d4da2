"""A real Celery worker brings the tallies up to date when the page is too far behind to do
it while somebody waits (after a large ingest), and the page then shows its count."""

import pytest
from django.urls import reverse

from reviewapp.models import TallyRun
from tests.reports.traces import month_runs
from tests.workers import celery_worker, wait_for

pytestmark = [pytest.mark.worker, pytest.mark.django_db(transaction=True)]


def test_the_page_has_a_worker_count_what_it_cannot(
    client, tmp_path, viewer, settings, django_db_blocker
):
    month_runs(tmp_path, {"2026-09": 3})
    # The page and its poll never count three runs themselves: only the worker can.
    settings.TALLY_PAGE_REFRESH_RUNS = 1
    client.force_login(viewer)
    with celery_worker(django_db_blocker, tmp_path / "worker.log", concurrency=1):
        page = client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"})
        assert 'id="tallies-catching-up"' in page.content.decode()
        wait_for(
            lambda: (
                "HX-Refresh"
                in client.get(reverse("tallies-status"), headers={"HX-Request": "true"})
            ),
            60,
            "the worker to count the tallies",
        )
    assert TallyRun.objects.count() == 3
    page = client.get(reverse("tallies"), {"until": "2026-11", "month": "2026-09"})
    assert "tallies-catching-up" not in page.content.decode()
