"""What the back-office and a receiver agree on: the keys' text forms (`keys`), the grant's format and
check (`grants`), the components a call's signature covers (`calls`), the evidence document
(`evidence`), named SQL (`sql`) and the test-only crash points
(`crashpoints`).

Both sides import this package and nothing of each other: a receiver installs with it alone. So it
imports no Django and nothing else of ours (an import-linter contract and
`tests/architecture/test_layers.py` hold it); each side passes in what its own settings say.
"""
