"""Test settings: the real settings (PostgreSQL and Redis come from DATABASE_URL and
REDIS_URL, set by scripts/test), with a fast password hasher."""

from reviewapp.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

# Tests serve static files through the finders, as runserver does.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # noqa: F405
