"""What the review desk refuses to do, and why: shown to the reviewer as it is."""


class TicketActionError(ValueError):
    """A change that makes no sense for the ticket as it is (closing a closed ticket), or
    a page too old or damaged to apply a change from."""
