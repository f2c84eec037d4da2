from django.utils.translation import gettext_lazy as _
from oidc_provider.lib.claims import ScopeClaims


def userinfo(claims, user):
    claims["preferred_username"] = user.username
    claims["email"] = user.email
    return claims


class GroupsClaims(ScopeClaims):
    info_groups = (_("Groups"), _("The groups you are in."))

    def scope_groups(self):
        return {"groups": sorted(self.user.groups.values_list("name", flat=True))}
