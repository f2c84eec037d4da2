# Crosscheck: one image for the web server, the Celery worker and Celery beat
# (docker-compose.yml picks the command). Settings come from the environment.
FROM python:3.13-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DJANGO_SETTINGS_MODULE=reviewapp.settings \
    CROSSCHECK_VAR_DIR=/app/var

WORKDIR /app

# Dependencies first, so that a code change does not reinstall them.
COPY requirements.txt ./
RUN pip install -r requirements.txt

COPY . .

# Static files are baked into the image (served by WhiteNoise). The key only lets the
# settings load during the build; the containers get the real one from .env.
RUN SECRET_KEY=build-only-not-secret python manage.py collectstatic --noinput -v 0

# An unprivileged user; /app/var/beat holds beat's schedule and /app/var/uploads what
# web keeps for the worker (volumes in compose).
RUN useradd --system --uid 10001 --user-group --home-dir /app --no-create-home \
        --shell /usr/sbin/nologin crosscheck \
    && mkdir -p /app/var/beat /app/var/uploads \
    && chown -R crosscheck:crosscheck /app/var
USER crosscheck

EXPOSE 8000
CMD ["gunicorn", "reviewapp.wsgi", "-b", "0.0.0.0:8000", "-w", "3", "--access-logfile", "-", "--no-control-socket"]
