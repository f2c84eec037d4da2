"""Reports: what the stored verdicts, findings and tickets add up to over time.

What goes here: the monthly tally of explained and unexplained discrepancies (by field,
source pair, cause, rule, agent and finding kind), frozen months (append-only snapshots and
the drift since), the counts of actions a policy blocks or would block, and their CSV and
JSON exports. Reports read; they never change a verdict or a ticket.

The tallies: calendar (months in TALLY_TIME_ZONE), entries (the reporting copy, kept up to
date), tally (counting months and breakdowns), months (closing, reopening, drift), exports
(CSV and JSON), items (the discrepancies behind a number), chart (the SVG's geometry)."""
