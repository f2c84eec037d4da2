"""Policy steps the tests take again and again."""

from reviewapp.models import PolicyVersion
from reviewapp.policy.versions import policy_version_publish, proposal_create, proposal_decide


def publish_review_rule(reviewer, approver, field: str = "status") -> PolicyVersion:
    """A "a person decides `field`" rule, proposed, approved by someone else and published."""
    proposal = proposal_create(
        user=reviewer, kind="require-review", change={"field": field}, rationale="x"
    )
    proposal_decide(proposal=proposal, user=approver, approve=True, reason="")
    return policy_version_publish(user=approver, reason=f"{field} needs a person")
