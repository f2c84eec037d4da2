"""A Celery worker with one fault injected, for the poison-batch test: the pool process that
starts storing a file named poison-* dies on the spot (as the kernel's OOM killer would end
it), every time. Run as `python -m tests.reliability.poison_worker -A reviewapp.celery worker`."""

import os
import sys

from celery.__main__ import main

if __name__ == "__main__":
    import django

    django.setup()
    from reviewapp.ingest import pipeline

    real = pipeline._store_chunk

    def store_or_die(batch, lines, in_flight):
        if batch.file_name.startswith("poison-"):
            os._exit(137)
        return real(batch, lines, in_flight)

    pipeline._store_chunk = store_or_die
    sys.argv[0] = "celery"
    sys.exit(main())
