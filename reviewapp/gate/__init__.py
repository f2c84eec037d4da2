"""The gate: an agent harness asks, before a side effect, whether the active policy would
block it (POST /api/v1/check). Per action, an approver chooses the gate's mode: shadow
(answer allow, count it as would-block) or enforce (answer block). Every answer is
recorded, and counted beside ingested traces on the shadow page.

Judging is in memory through reviewapp.judging.core (nothing is stored but the answer);
what blocks is judging.blocking's definition, the same the counts use."""
