"""Replay: judging frozen runs again under another policy (a draft, a proposal-applied
candidate, a published version), prospectively, on background workers.

What goes here: fixture sets (runs pinned at the record they had when frozen), replay jobs
and their items (state in the database, processed in chunks by Celery workers), the
comparison of each group's recorded verdict with its prospective one, and the impact a
proposal or the draft would have. Stored runs are judged through reviewapp.judging.core
and stored through reviewapp.judging.store with the purpose REPLAY: it never moves a run's
current judgement or a ticket (trace files and golden exports are judged by the engine's
judge_runs, and stored nowhere). Shadow mode, judging newly ingested runs beside the active
version, is reviewapp.shadow."""
