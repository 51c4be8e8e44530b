"""The common deletion store: no stage names, no user policy."""
