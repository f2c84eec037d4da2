"""Traces as production data: stable tokens in place of personal values, who may see raw
data, how long raw payloads are kept, and erasure (docs/security.md)."""
