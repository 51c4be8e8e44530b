"""The reference receiver: the service that applies deletion effects where the data lives.

It runs as its own process (`python -m receiver serve`), with its own settings (`receiver.settings`)
and database, and the back-office reaches it only over HTTP (`/receiver/v1/`, `protocol.py`): every
call is signed by the back-office (RFC 9421, Ed25519) and refused when stale, replayed or signed by
another key; every answer that carries evidence is signed by the receiver's own key (a JWS), which the
back-office checks before it believes it. It serves one application's database, described by a dataset
file (`receiver.dataset`): the demo application (`samples/demo/`) like any other.
"""

ALIAS = "target"  # the connection to the application's database, where the receiver's own tables are too
