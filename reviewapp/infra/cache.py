"""A Redis cache that the web survives losing: while Redis cannot be reached, every call
goes to this process's own memory instead (counts and fragments per process, as without
CACHE_URL), and pages keep answering. Redis is tried again on the next call."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from django.core.cache.backends.locmem import LocMemCache
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger(__name__)
# At most one warning this often: an outage must not flood the log.
WARN_EVERY_SECONDS = 60.0


class FallbackRedisCache(RedisCache):
    def __init__(self, server: str, params: dict[str, Any]):
        options = params.setdefault("OPTIONS", {})
        # A down Redis must cost a request milliseconds, not the client's default wait.
        options.setdefault("socket_connect_timeout", 0.25)
        options.setdefault("socket_timeout", 0.5)
        super().__init__(server, params)
        self._fallback = LocMemCache("crosscheck-fallback", {"OPTIONS": {"MAX_ENTRIES": 5000}})
        self._warned_at = 0.0

    def _either(self, name: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return getattr(super(), name)(*args, **kwargs)
        except RedisError as exc:
            now = time.monotonic()
            if now - self._warned_at > WARN_EVERY_SECONDS:
                self._warned_at = now
                log.warning("cache: Redis unreachable (%s); using process memory", exc)
            method: Callable[..., Any] = getattr(self._fallback, name)
            return method(*args, **kwargs)

    def add(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("add", *args, **kwargs)

    def get(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("get", *args, **kwargs)

    def set(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("set", *args, **kwargs)

    def touch(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("touch", *args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("delete", *args, **kwargs)

    def get_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("get_many", *args, **kwargs)

    def has_key(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("has_key", *args, **kwargs)

    def incr(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("incr", *args, **kwargs)

    def set_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("set_many", *args, **kwargs)

    def delete_many(self, *args: Any, **kwargs: Any) -> Any:
        return self._either("delete_many", *args, **kwargs)

    def clear(self) -> Any:
        return self._either("clear")
