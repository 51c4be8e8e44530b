"""The deletion store, the only writer of this app's tables: requests, approvals, leases,
stages and the decision log. No stage names, no user policy: it locks, checks owner and
generation, and applies what the services and the pure policy decided."""
