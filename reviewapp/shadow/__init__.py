"""Shadow mode: a candidate policy (the draft, a proposal applied to it, a published
version) judging every newly ingested run beside the active one, stored with the purpose
SHADOW: it never moves a run's current judgement or a ticket.

designations: which candidates are in shadow, put there and taken out by approvers;
judging: a delivery's runs judged under them once it is ingested (and caught up by beat);
backfill: a past window's runs judged the same way, in chunks, by workers;
compare: what a candidate would newly block, unblock or leave unchanged."""
