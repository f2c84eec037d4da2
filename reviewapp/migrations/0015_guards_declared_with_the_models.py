"""The database's refusals are declared with the models (reviewapp/models/guards.py) and
installed here by django-pgtrigger; the triggers 0002, 0003 and 0004 wrote by hand go.
Truncating what is append-only is refused too, and only an active judgement can be a
run's current one or open a ticket. (SQLite's guard is put in place after every migrate.)"""

import pgtrigger.compiler
import pgtrigger.migrations
from django.db import migrations

HAND_MADE = {
    "reviewapp_auditevent_append_only": "reviewapp_auditevent",
    "reviewapp_judgement_append_only": "reviewapp_judgement",
    "reviewapp_verdict_append_only": "reviewapp_verdict",
    "reviewapp_finding_append_only": "reviewapp_finding",
    "reviewapp_traceline_append_only": "reviewapp_traceline",
    "reviewapp_tracerecord_append_only": "reviewapp_tracerecord",
    "reviewapp_policyversion_append_only": "reviewapp_policyversion",
    "reviewapp_ticketcomment_append_only": "reviewapp_ticketcomment",
    "reviewapp_prospectivesettlement_append_only": "reviewapp_prospectivesettlement",
    "reviewapp_ruleproposal_guard": "reviewapp_ruleproposal",
}


def drop_hand_made_triggers(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for trigger, table in HAND_MADE.items():
        schema_editor.execute(f"DROP TRIGGER IF EXISTS {trigger} ON {table}")
    schema_editor.execute("DROP FUNCTION IF EXISTS crosscheck_guard_proposal()")
    schema_editor.execute("DROP FUNCTION IF EXISTS crosscheck_refuse_change()")


class Migration(migrations.Migration):

    dependencies = [
        ('reviewapp', '0014_batch_attempts_and_pulse'),
    ]

    operations = [
        # Backwards, the hand-made triggers are not put back: migrating back past here
        # leaves the tables unguarded until migrating forwards again.
        migrations.RunPython(drop_hand_made_triggers, migrations.RunPython.noop),
        pgtrigger.migrations.AddTrigger(
            model_name='auditevent',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='f658fbd98f203163ea22960bd9a8afbbec3e53a1', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_47e34', table='reviewapp_auditevent', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='auditevent',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='9b8f8573605bf6e925914b2b6a32a7232eb631fc', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_2c75b', table='reviewapp_auditevent', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='finding',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='dd441e82030d833d092c649fe8c7d84cb7d0a739', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_6a6b1', table='reviewapp_finding', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='finding',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='202d8181c3aac1a5667e4a5e137d717297f221f4', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_c6a08', table='reviewapp_finding', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='judgement',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='ec51a28e0a711ad891d362f3aa910e239d7f5943', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_b814a', table='reviewapp_judgement', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='judgement',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='8a58882992209e33c5117d23e57b7b18151bfd97', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_e2d32', table='reviewapp_judgement', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='policyversion',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='e10add8ad0ed0bac94d4f40e2a7916a40b68db6f', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_d975e', table='reviewapp_policyversion', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='policyversion',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='b496651585c5fb7723971a6e5fa5bf4d2088df22', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_8978d', table='reviewapp_policyversion', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='prospectivesettlement',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='8327bff41dcee089a1ac0eca2c5ee56625d875ac', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_cfef8', table='reviewapp_prospectivesettlement', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='prospectivesettlement',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='367edc7e9d664c3cd8b233898b055b6aaf777336', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_bf3a5', table='reviewapp_prospectivesettlement', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ruleproposal',
            trigger=pgtrigger.compiler.Trigger(name='decided_proposal', sql=pgtrigger.compiler.UpsertTriggerSql(condition="WHEN (NEW.kind IS DISTINCT FROM OLD.kind OR NEW.change IS DISTINCT FROM OLD.change OR NEW.rationale IS DISTINCT FROM OLD.rationale\nOR NEW.proposed_by_id IS DISTINCT FROM OLD.proposed_by_id OR NEW.created_at IS DISTINCT FROM OLD.created_at\nOR NEW.base_number IS DISTINCT FROM OLD.base_number\nOR (OLD.state <> 'pending' AND (\n    NEW.state IS DISTINCT FROM OLD.state OR NEW.decided_by_id IS DISTINCT FROM OLD.decided_by_id\n    OR NEW.decided_at IS DISTINCT FROM OLD.decided_at OR NEW.decision_reason IS DISTINCT FROM OLD.decision_reason))\nOR (OLD.published_in_id IS DISTINCT FROM NULL AND NEW.published_in_id IS DISTINCT FROM OLD.published_in_id))", func="RAISE EXCEPTION 'a decided proposal cannot be changed (proposal %)', OLD.id USING ERRCODE = 'insufficient_privilege';", hash='ecbf87fa124e770136fd0f4a045d29ef004edc6e', operation='UPDATE', pgid='pgtrigger_decided_proposal_061bb', table='reviewapp_ruleproposal', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ruleproposal',
            trigger=pgtrigger.compiler.Trigger(name='proposal_kept', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: DELETE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='d8808b5418bdabf760787c9b22328909310c2072', operation='DELETE', pgid='pgtrigger_proposal_kept_7d1bb', table='reviewapp_ruleproposal', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ruleproposal',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='ce16f6baac377f0685ed688a1299be2c800a2487', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_f218a', table='reviewapp_ruleproposal', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='only_active_current_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM new_values n JOIN reviewapp_judgement j ON j.id = n.current_judgement_id WHERE j.purpose <> 'active' OR j.run_id <> n.id) THEN RAISE EXCEPTION 'only an active judgement of the run itself can be its current one' USING ERRCODE = 'insufficient_privilege'; END IF; RETURN NULL;", hash='de7aa584cc2b067dced554a8465c35febe715d7d', level='STATEMENT', operation='INSERT', pgid='pgtrigger_only_active_current_insert_5cab6', referencing='REFERENCING NEW TABLE AS new_values ', table='reviewapp_run', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='run',
            trigger=pgtrigger.compiler.Trigger(name='only_active_current_update', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM new_values n JOIN reviewapp_judgement j ON j.id = n.current_judgement_id WHERE j.purpose <> 'active' OR j.run_id <> n.id) THEN RAISE EXCEPTION 'only an active judgement of the run itself can be its current one' USING ERRCODE = 'insufficient_privilege'; END IF; RETURN NULL;", hash='1477ec7fb346982aab77f46052facb8e93651f34', level='STATEMENT', operation='UPDATE', pgid='pgtrigger_only_active_current_update_0da53', referencing='REFERENCING NEW TABLE AS new_values ', table='reviewapp_run', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ticket',
            trigger=pgtrigger.compiler.Trigger(name='only_active_tickets_insert', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM new_values n LEFT JOIN reviewapp_judgement j ON j.id = n.judgement_id LEFT JOIN reviewapp_verdict v ON v.id = n.verdict_id LEFT JOIN reviewapp_judgement vj ON vj.id = v.judgement_id LEFT JOIN reviewapp_finding f ON f.id = n.finding_id LEFT JOIN reviewapp_judgement fj ON fj.id = f.judgement_id WHERE j.purpose <> 'active' OR vj.purpose <> 'active' OR fj.purpose <> 'active') THEN RAISE EXCEPTION 'only an active judgement opens tickets' USING ERRCODE = 'insufficient_privilege'; END IF; RETURN NULL;", hash='a1f3a63c1f51f92a85a493502c51a37e0ee1cca9', level='STATEMENT', operation='INSERT', pgid='pgtrigger_only_active_tickets_insert_3474b', referencing='REFERENCING NEW TABLE AS new_values ', table='reviewapp_ticket', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ticket',
            trigger=pgtrigger.compiler.Trigger(name='only_active_tickets_update', sql=pgtrigger.compiler.UpsertTriggerSql(func="IF EXISTS (SELECT 1 FROM new_values n LEFT JOIN reviewapp_judgement j ON j.id = n.judgement_id LEFT JOIN reviewapp_verdict v ON v.id = n.verdict_id LEFT JOIN reviewapp_judgement vj ON vj.id = v.judgement_id LEFT JOIN reviewapp_finding f ON f.id = n.finding_id LEFT JOIN reviewapp_judgement fj ON fj.id = f.judgement_id WHERE j.purpose <> 'active' OR vj.purpose <> 'active' OR fj.purpose <> 'active') THEN RAISE EXCEPTION 'only an active judgement opens tickets' USING ERRCODE = 'insufficient_privilege'; END IF; RETURN NULL;", hash='2157c15cefacc6ed8c83b46550bfb33d9e913e98', level='STATEMENT', operation='UPDATE', pgid='pgtrigger_only_active_tickets_update_ecb3b', referencing='REFERENCING NEW TABLE AS new_values ', table='reviewapp_ticket', when='AFTER')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ticketcomment',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='b6967244392c9a4c007cd5402e079e507fb0457a', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_c7b2e', table='reviewapp_ticketcomment', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='ticketcomment',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='7538d08d485ac7c68c45aba972c97757d1760033', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_ae98d', table='reviewapp_ticketcomment', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='traceline',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='08f13c410957cb4c3f46b9cf580456f612572c3c', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_47027', table='reviewapp_traceline', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='traceline',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='0c46bf5db24d4d0c540daf7f62e17dfd5e93e810', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_56cc6', table='reviewapp_traceline', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='tracerecord',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='4122d17015d06e979c79692ace19611da4008aa8', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_421d7', table='reviewapp_tracerecord', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='tracerecord',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='c76b2525b341d3c80d743e72fbc661d591fce7c4', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_c56fd', table='reviewapp_tracerecord', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='verdict',
            trigger=pgtrigger.compiler.Trigger(name='append_only', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: % on % is refused', TG_OP, TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='b796afd6f2443d820c83ee945d95ef124fbf3e78', operation='UPDATE OR DELETE', pgid='pgtrigger_append_only_f0658', table='reviewapp_verdict', when='BEFORE')),
        ),
        pgtrigger.migrations.AddTrigger(
            model_name='verdict',
            trigger=pgtrigger.compiler.Trigger(name='append_only_truncate', sql=pgtrigger.compiler.UpsertTriggerSql(func="RAISE EXCEPTION 'append-only: TRUNCATE on % is refused', TG_TABLE_NAME USING ERRCODE = 'insufficient_privilege';", hash='db1fdf34533001f4875a423de7fffa47b020a0a4', level='STATEMENT', operation='TRUNCATE', pgid='pgtrigger_append_only_truncate_4f1a5', table='reviewapp_verdict', when='BEFORE')),
        ),
    ]
