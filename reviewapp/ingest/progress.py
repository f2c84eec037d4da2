"""What a batch has stored so far while a worker ingests it: the counts its page shows live
(the batch's own counts are written once, when it is done)."""

from __future__ import annotations

from dataclasses import dataclass

from django.db.models import Count

from reviewapp.models import IngestBatch, Ticket


@dataclass(frozen=True)
class SoFar:
    accepted: int
    rejected: int
    tickets: int


def batch_so_far(batch: IngestBatch) -> SoFar:
    stored = dict(batch.trace_lines.order_by().values_list("accepted").annotate(n=Count("id")))
    return SoFar(
        accepted=stored.get(True, 0),
        rejected=stored.get(False, 0),
        tickets=Ticket.objects.filter(batch=batch).count(),
    )
