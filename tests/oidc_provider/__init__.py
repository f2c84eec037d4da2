"""A real OpenID Connect provider for the sign-in tests: django-oidc-provider in a small
Django project of its own (SQLite, its own cookies), run as a separate process on a free
loopback port by tests/accounts/test_oidc_sign_in.py. Test-only: the app never imports it."""
