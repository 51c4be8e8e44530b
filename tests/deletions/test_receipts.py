"""What a stage is believed to have done is what its verified receipt says (`deletions.receipts`):
the saved fields against the JWS beside them, as a table. Pure: no database."""

from __future__ import annotations

import json
from typing import Any

import pytest
from joserfc import jws
from joserfc.jwk import OKPKey

from deletions import receipts
from deletions.receipts import ABSENT, BY_HAND, MISMATCH, NONE, SIGNED, Differs

OLD, NEW = OKPKey.generate_key("Ed25519"), OKPKey.generate_key("Ed25519")
KEYS: dict[str, str] = {
    "receiver-1": str(OLD.as_dict(private=False)["x"]),
    "receiver-2": str(NEW.as_dict(private=False)["x"]),
}
SIGNED_EVIDENCE = {"rows_before": 25, "rows_deleted": 25, "rows_remaining": 0, "has_agents": True, "applied_at": "t"}


def receipt(payload: dict[str, Any], key: OKPKey = OLD, kid: str = "receiver-1") -> str:
    body = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return jws.serialize_compact({"alg": "Ed25519", "kid": kid}, body, key, algorithms=["Ed25519"])


TOKEN = receipt(SIGNED_EVIDENCE)
SAVED = {**SIGNED_EVIDENCE, "receipt": TOKEN}


@pytest.mark.parametrize(
    ("result", "keys", "how", "differs", "why"),
    [
        # As saved by the adapter: the fields the receiver signed, its JWS beside them.
        (SAVED, KEYS, SIGNED, (), ""),
        # The edit: 25 -> 18 deleted, 0 -> 7 remaining; the receipt still says 25 / 0.
        (
            {**SAVED, "rows_deleted": 18, "rows_remaining": 7},
            KEYS,
            MISMATCH,
            (Differs("rows_deleted", 18, 25), Differs("rows_remaining", 7, 0)),
            "",
        ),
        # A field the receiver never signed, added; one it signed, removed.
        ({**SAVED, "rows_kept": 3}, KEYS, MISMATCH, (Differs("rows_kept", 3, ABSENT),), ""),
        (
            {k: v for k, v in SAVED.items() if k != "has_agents"},
            KEYS,
            MISMATCH,
            (Differs("has_agents", ABSENT, True),),
            "",
        ),
        # JSON's true is not 1, though Python's True == 1.
        ({**SAVED, "has_agents": 1}, KEYS, MISMATCH, (Differs("has_agents", 1, True),), ""),
        # No receipt, a receipt under a key id not registered, a receipt signed by another key.
        (SIGNED_EVIDENCE, KEYS, MISMATCH, (), "it has no receipt: nothing the receiver signed says it"),
        (
            {**SAVED, "receipt": receipt(SIGNED_EVIDENCE, kid="receiver-9")},
            KEYS,
            MISMATCH,
            (),
            "its receipt does not verify: evidence signed under key 'receiver-9', which is not registered",
        ),
        (
            {**SAVED, "receipt": receipt(SIGNED_EVIDENCE, key=NEW, kid="receiver-1")},
            KEYS,
            MISMATCH,
            (),
            "its receipt does not verify: the receiver's evidence does not verify (BadSignatureError)",
        ),
        ({**SAVED, "receipt": "not.a.jws"}, KEYS, MISMATCH, (), "its receipt does not verify"),
        # After a rotation the old key id stays registered: evidence it signed is still believed.
        ({**SIGNED_EVIDENCE, "receipt": receipt(SIGNED_EVIDENCE, key=NEW, kid="receiver-2")}, KEYS, SIGNED, (), ""),
        # A target no receiver is registered for any more: nothing verifies.
        (SAVED, {}, MISMATCH, (), "its receipt does not verify: evidence signed under key 'receiver-1'"),
        # A manual (supervised) target: no receipt, the operator's record is the evidence.
        ({"applied_at": "t", "recorded_by": "operator-1", "evidence": "deleted in the console"}, None, BY_HAND, (), ""),
        # Nothing saved (not completed, or retention dropped it).
        (None, KEYS, NONE, (), ""),
        ("a string", KEYS, MISMATCH, (), "the saved result is not a record"),
    ],
)
def test_a_stage_is_believed_as_its_receipt_says(result, keys, how, differs, why) -> None:
    belief = receipts.believe(result, keys)
    assert belief.how == how
    assert belief.differs == differs
    assert belief.why.startswith(why)
    assert belief.fault == (how == MISMATCH)
    if how == SIGNED:
        assert belief.evidence == {
            **json.loads(jws.extract_compact(result["receipt"].encode()).payload),
            "receipt": result["receipt"],
        }
    if differs:  # what is believed is what was signed, never the saved copy
        assert belief.evidence == SAVED and belief.key_id == "receiver-1"


def test_a_mismatch_says_which_fields_differ_with_or_without_their_values() -> None:
    belief = receipts.believe({**SAVED, "rows_deleted": 18, "rows_remaining": 7}, KEYS)
    assert belief.said(values=True) == "rows_deleted saved 18, signed 25; rows_remaining saved 7, signed 0"
    assert belief.said(values=False) == "rows_deleted, rows_remaining differ from what the receiver signed"
    words = receipts.fault_words("purge_db", "c-1", "op-1", belief, values=False)
    where = "purge_db in community c-1 (operation op-1)"
    assert words == f"{where}: rows_deleted, rows_remaining differ from what the receiver signed"


def test_a_result_remembered_as_matching_is_checked_afresh_once_any_byte_or_key_changes() -> None:
    """A result found to match is remembered (a live case page does not verify each refresh), by the
    exact result and keys: an edit, or a key taken away, is checked again."""
    assert receipts.believe(dict(SAVED), KEYS).how == SIGNED
    assert receipts.believe(dict(SAVED), KEYS).how == SIGNED  # remembered
    assert receipts.believe({**SAVED, "rows_remaining": 7}, KEYS).how == MISMATCH
    assert receipts.believe({**SAVED, "rows_before": 25.0}, KEYS).how == MISMATCH  # 25.0 is not 25 in JSON
    assert receipts.believe(dict(SAVED), {"receiver-2": KEYS["receiver-2"]}).how == MISMATCH
    remembered = receipts.believe(dict(SAVED), KEYS)
    remembered.evidence["rows_deleted"] = 0  # what a reader does with its copy changes nothing remembered
    assert receipts.believe(dict(SAVED), KEYS).evidence == SAVED
