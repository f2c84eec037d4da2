"""What the benchmarks share about the server they run on."""


def admin_url(url: str, database: str) -> str:
    """The URL of another database on the same server, as the same role (a throwaway one to
    create, or the `postgres` one to create it from)."""
    return url.rsplit("/", 1)[0] + "/" + database
