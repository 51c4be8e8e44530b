"""The user-deletion rules v1: inventory, workflow rules and reconstruction, transition, handlers."""
