"""python -m receiver serve [--bind HOST:PORT]   the receiver's HTTP service (`/receiver/v1/`) for RECEIVER_DATASET
python -m receiver key                          its key id and public key, to register it in the back-office
python -m receiver check DATASET [--rehearse N]  check a dataset file against the application's database,
                                                 and run its deletion for N real people, rolled back
python -m receiver install DATASET [--rehearse N]  install the receiver for it in that database (schema
                                                 `receiver`, its own tables too), after rehearsing 3 people (or N)
"""

from __future__ import annotations

import os
import re
import sys

BIND = re.compile(r"(?P<host>[^\s:]*|\[[0-9A-Fa-f:.]+\]):(?P<port>[0-9]{1,5})")


def bind_address(text: str) -> tuple[str, int] | None:
    """HOST:PORT (the host may be empty: 127.0.0.1) with a port 0-65535 (0: any free one); else None."""
    found = BIND.fullmatch(text)
    if found is None or int(found["port"]) > 65535:
        return None
    return found["host"].strip("[]") or "127.0.0.1", int(found["port"])


def _first_line(exc: BaseException) -> str:
    said = str(exc).strip()
    return f"{type(exc).__name__}: {said.splitlines()[0]}" if said else type(exc).__name__


def main(argv: list[str]) -> int:
    """Run one command; every refusal is one line on stderr and a non-zero exit: 2 for arguments this
    program does not take, 3 for a database whose schema or installed dataset does not match, 1 for
    the rest (settings, keys, the database, the address)."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "receiver.settings"  # its own, whatever the shell says
    import django
    from django.core.exceptions import ImproperlyConfigured

    try:
        django.setup()
    except ImproperlyConfigured as exc:  # (a malformed RECEIVER_DATABASE_URL, a number that is not, ...)
        print(f"refused: {str(exc).strip().splitlines()[0]}", file=sys.stderr)
        return 1
    except ValueError as exc:
        print(f"refused: the receiver's settings do not read ({_first_line(exc)})", file=sys.stderr)
        return 1
    from django.db import Error as DatabaseError

    from receiver import signing
    from receiver.dataset.compile import Refused as DatasetRefused

    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        return 0 if argv else 2
    command, rest = argv[0], argv[1:]
    rehearse: int | None = None
    if command in ("check", "install"):
        if len(rest) == 3 and rest[1] == "--rehearse" and rest[2].isdigit() and 0 <= int(rest[2]) <= 1000:
            rehearse, rest = int(rest[2]), rest[:1]
        if len(rest) != 1 or rest[0].startswith("-"):
            print(
                f"refused: {command} takes one dataset file: python -m receiver {command} DATASET [--rehearse N] "
                "(N people, 0-1000)",
                file=sys.stderr,
            )
            return 2
    given = rest[1] if len(rest) == 2 and rest[0] == "--bind" else "" if rest else "127.0.0.1:8100"
    bind = bind_address(given)
    if command == "serve" and bind is None:
        print("refused: serve takes --bind HOST:PORT only, a port 0-65535 (default 127.0.0.1:8100)", file=sys.stderr)
        return 2
    if command not in ("serve", "check", "install", "key"):
        print(f"refused: unknown command {command!r} (python -m receiver --help lists them)", file=sys.stderr)
        return 2
    try:
        if command in ("serve", "key"):
            signing.check_keys()
        if command == "serve":
            from receiver import serve
            from receiver.dataset import backend

            untrusted = serve.tls_refused()
            if untrusted:
                print(f"refused: {untrusted}", file=sys.stderr)
                return 1
            try:
                backend.check_installed()
            except DatasetRefused as refused:
                print(refused, file=sys.stderr)
                return 3
            assert bind is not None
            try:
                serve.serve(*bind)
            except (OSError, OverflowError) as exc:
                said = getattr(exc, "strerror", None) or exc
                print(f"refused: cannot listen on {given} ({said})", file=sys.stderr)
                return 1
            except KeyboardInterrupt:
                print("Receiver stopped", file=sys.stderr)
                return 0
        elif command in ("check", "install"):
            from receiver.dataset import install

            print(install.run(rest[0], write=command == "install", rehearse=rehearse))
        else:
            print(f"{signing.key_id()}={signing.public_key()}")
    except (DatasetRefused, signing.BadKey) as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 1
    except DatabaseError as exc:
        print(
            f"refused: the receiver's database cannot be used ({_first_line(exc)}); check RECEIVER_DATABASE_URL "
            "and that the database is up",
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
