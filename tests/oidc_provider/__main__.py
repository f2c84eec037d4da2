"""The test-only provider's command line (run from the repository's root, with
OIDC_PROVIDER_DB naming its SQLite file):

    python -m tests.oidc_provider client CLIENT_ID SECRET REDIRECT_URI   # migrate, a key, a client
    python -m tests.oidc_provider person NAME PASSWORD [GROUP...]        # a person and their groups
    python -m tests.oidc_provider serve                                  # prints its port, serves
"""

import os
import sys

import django

# Its own settings, whatever the caller had (pytest names the app's).
os.environ["DJANGO_SETTINGS_MODULE"] = "tests.oidc_provider.settings"
django.setup()

from django.contrib.auth.models import Group, User  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.core.servers.basehttp import ThreadedWSGIServer, WSGIRequestHandler  # noqa: E402
from django.core.wsgi import get_wsgi_application  # noqa: E402
from oidc_provider.models import Client, ResponseType, RSAKey  # noqa: E402


def client(client_id: str, secret: str, redirect_uri: str) -> None:
    call_command("migrate", verbosity=0)
    if not RSAKey.objects.exists():
        call_command("creatersakey")
    made, _ = Client.objects.update_or_create(
        client_id=client_id,
        defaults={
            "name": "Crosscheck",
            "client_type": "confidential",
            "client_secret": secret,
            "jwt_alg": "RS256",
            "require_consent": False,
            "_redirect_uris": redirect_uri,
            "_scope": "openid email profile groups",
        },
    )
    made.response_types.set([ResponseType.objects.get(value="code")])


def person(name: str, password: str, *groups: str) -> None:
    """Make the person, or change their groups (the password of one made stays: a new hash
    would end their session at the provider)."""
    user = User.objects.filter(username=name).first()
    if user is None:
        user = User(username=name, email=f"{name}@idp.test")
        user.set_password(password)
        user.save()
    user.groups.set([Group.objects.get_or_create(name=group)[0] for group in groups])


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args) -> None:
        pass


def serve() -> None:
    server = ThreadedWSGIServer(("127.0.0.1", 0), QuietHandler)
    server.set_app(get_wsgi_application())
    print(server.server_port, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"client": client, "person": person, "serve": serve}[command](*arguments)
