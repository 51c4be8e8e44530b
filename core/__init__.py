"""Pieces shared by both workflows: refusal types and the thin command base."""
