"""The base both workflows stand on: clock, errors, logs, queue, authority, decision log,
store plumbing, backoff, command and admin bases. Imports no app of ours."""
