"""User-deletion policy: submission, inventory, workflow rules v1, transition, handlers."""
