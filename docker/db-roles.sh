#!/bin/sh
# The database's two roles (docs/security.md): the owner of the tables, whom migrations run
# as, and the app's role, which owns nothing and gets its privileges from `manage.py
# migrate`. Neither is a superuser. Run by the postgres image once, when its volume is new
# (mounted in /docker-entrypoint-initdb.d); on a database made before, run it by hand:
#   docker compose exec db sh /docker-entrypoint-initdb.d/10-roles.sh
# Safe to run again: it creates what is missing, sets the passwords, and hands the
# database and everything in its public schema to the owner.
set -eu
: "${CROSSCHECK_OWNER_PASSWORD:?set CROSSCHECK_OWNER_PASSWORD}"
: "${CROSSCHECK_APP_PASSWORD:?set CROSSCHECK_APP_PASSWORD}"
db="${POSTGRES_DB:-crosscheck}"
psql -v ON_ERROR_STOP=1 --username "${POSTGRES_USER:-postgres}" --dbname "$db" \
    -v owner_password="$CROSSCHECK_OWNER_PASSWORD" -v app_password="$CROSSCHECK_APP_PASSWORD" \
    -v db="$db" <<'SQL'
SELECT 'CREATE ROLE crosscheck_owner LOGIN NOSUPERUSER NOCREATEROLE'
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'crosscheck_owner') \gexec
SELECT 'CREATE ROLE crosscheck_app LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE'
WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'crosscheck_app') \gexec
ALTER ROLE crosscheck_owner PASSWORD :'owner_password';
ALTER ROLE crosscheck_app PASSWORD :'app_password';
ALTER DATABASE :"db" OWNER TO crosscheck_owner;
ALTER SCHEMA public OWNER TO crosscheck_owner;
REVOKE CREATE ON SCHEMA public FROM PUBLIC;
REVOKE TEMPORARY ON DATABASE :"db" FROM PUBLIC;
-- What an earlier setup made as another role (the app ran as the superuser) goes to the owner.
SELECT format('ALTER TABLE public.%I OWNER TO crosscheck_owner', tablename)
FROM pg_tables WHERE schemaname = 'public' AND tableowner <> 'crosscheck_owner' \gexec
SELECT format('ALTER SEQUENCE public.%I OWNER TO crosscheck_owner', sequencename)
FROM pg_sequences WHERE schemaname = 'public' AND sequenceowner <> 'crosscheck_owner' \gexec
SELECT format('ALTER FUNCTION %s OWNER TO crosscheck_owner', p.oid::regprocedure)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public' AND p.proowner <> 'crosscheck_owner'::regrole \gexec
SQL
