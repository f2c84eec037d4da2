"""Test settings: the real settings (PostgreSQL and Redis come from DATABASE_URL and
REDIS_URL, set by scripts/test), with a fast password hasher."""

from reviewapp.settings import *  # noqa: F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
