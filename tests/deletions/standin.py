"""A receiver that answers as the reference one does, except where a test says otherwise: mounted in
this process (`RECEIVER_IN_PROCESS=tests.deletions.standin.application`), it hands every signed call
to the reference receiver's WSGI application (as the suite mounts it: `samples.demo.inprocess`) unless
a rule of the test answers it first, or changes the reference's answer on its way back.

It stands in for answers the demo application does not give on demand: "nothing changed, retry" (409),
a constraint of the application's database or data that remains (422 `constraint`, `incomplete`), rules
changed since the approval (422 `rules_changed`). Every `apply` is kept with its grant's payload
(`APPLIED`), so a test reads what each grant carried."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from core import grants
from samples.demo import inprocess as reference

MOUNT = "tests.deletions.standin.application"
PREFIX = "/receiver/v1/"

Answer = tuple[int, dict[str, Any]]


@dataclass
class Rule:
    """For `call` when `when(body)` holds (for `apply`, the body is the grant's payload): answer
    `answer` instead of the reference, or pass the reference's answer through `change`; at most
    `times` times (None: every time)."""

    call: str
    when: Callable[[dict[str, Any]], bool] = lambda body: True
    answer: Answer | None = None
    change: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    times: int | None = None


RULES: list[Rule] = []
APPLIED: list[dict[str, Any]] = []  # each apply's grant payload, in order


def _reference(environ: dict[str, Any], raw: bytes) -> Answer:
    environ = {**environ, "wsgi.input": io.BytesIO(raw), "CONTENT_LENGTH": str(len(raw))}
    said: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> None:
        said["status"] = int(status.split()[0])

    body = b"".join(reference.application(environ, start_response))
    return said["status"], json.loads(body)


def _answer(start_response: Callable[..., Any], status: int, body: dict[str, Any]) -> Iterable[bytes]:
    data = json.dumps(body, separators=(",", ":")).encode()
    start_response(f"{status} Stand-in", [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def application(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
    if method != "POST" or not path.startswith(PREFIX):
        return reference.application(environ, start_response)
    name = path.removeprefix(PREFIX)
    raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    body = json.loads(raw)
    if name == "apply":
        body = grants.verify(body["grant"], grants.receiver_key())
        APPLIED.append(body)
    for rule in RULES:
        if rule.call != name or rule.times == 0 or not rule.when(body):
            continue
        if rule.times is not None:
            rule.times -= 1
        if rule.answer is not None:
            return _answer(start_response, *rule.answer)
        status, said = _reference(environ, raw)
        return _answer(start_response, status, rule.change(said) if rule.change and status == 200 else said)
    return _answer(start_response, *_reference(environ, raw))


def mounted(settings: Any) -> Iterator[list[Rule]]:
    """The stand-in mounted for the demo receiver's URL (a test's fixture); the rules the test adds,
    cleared after."""
    settings.RECEIVER_IN_PROCESS = MOUNT
    RULES.clear()
    APPLIED.clear()
    yield RULES
    RULES.clear()
    APPLIED.clear()
