"""Forms: what pages post, checked before any service sees it (domain rules stay in the services)."""
