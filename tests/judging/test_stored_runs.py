"""Reading stored runs back for judging: the array lookup and the keyset pages agree with
what is stored, at page edges too."""

from __future__ import annotations

import pytest

from reviewapp.judging.core import stored_runs
from reviewapp.models import Run, TraceRecord, stored_documents
from reviewapp.models import ingest as ingest_models
from tests.seeding import conflict_run, ingest_lines

pytestmark = pytest.mark.django_db(transaction=True)


def test_field_any_selects_what_field_in_selects(tmp_path):
    ingest_lines(tmp_path, [*conflict_run("a"), *conflict_run("b"), *conflict_run("c")])
    pks = sorted(Run.objects.values_list("pk", flat=True))
    assert len(pks) == 3
    for wanted in ([], pks[:1], pks[1:], [*pks, 10**12]):
        assert set(Run.objects.filter(pk__any=wanted).values_list("pk", flat=True)) == set(
            Run.objects.filter(pk__in=wanted).values_list("pk", flat=True)
        )
        assert TraceRecord.objects.filter(run__any=wanted).count() == (
            TraceRecord.objects.filter(run__in=wanted).count()
        )


def test_stored_documents_in_pages_smaller_than_a_run_give_every_record_once_in_order(
    tmp_path, monkeypatch
):
    ingest_lines(tmp_path, [*conflict_run("a", observations=5), *conflict_run("b")])
    pks = list(Run.objects.values_list("pk", flat=True))
    expected = list(
        TraceRecord.objects.filter(run__in=pks).order_by("run_id", "id").values_list("run_id", "id")
    )
    monkeypatch.setattr(ingest_models, "STORED_DOCUMENTS_CHUNK", 3)
    read = [(run_pk, record_id) for run_pk, record_id, _ in stored_documents(pks)]
    assert read == expected
    assert len(read) > 3 * 2  # more than two pages

    runs = stored_runs(pks)
    assert [run.run_id for run in runs] == ["a", "b"]
    assert all(document for run in runs for _, document in run.records)
