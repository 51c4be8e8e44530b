"""What a receiver's public URL may be (`protocol.public_url_problem`): pure, no database."""

from __future__ import annotations

import pytest

from receiver import protocol


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        # The URL the back-office registers: absolute http(s), ending with the protocol's prefix.
        ("https://receiver.example.org/receiver/v1/", ""),
        ("http://127.0.0.1:8100/receiver/v1/", ""),
        ("http://[::1]:8100/receiver/v1/", ""),
        ("https://example.org/deletions/receiver/v1/", ""),  # behind a proxy that mounts it under a path
        # Not a URL a call can be signed for.
        ("receiver.example.org", "is not an absolute http(s) URL"),
        ("ftp://receiver.example.org/receiver/v1/", "is not an absolute http(s) URL"),
        ("https:///receiver/v1/", "is not an absolute http(s) URL"),
        ("http://host:port/receiver/v1/", "is not an absolute http(s) URL"),
        ("https://receiver.example.org/receiver/v1/\n", "is not an absolute http(s) URL"),
        # A URL, but not the receiver's base: the calls' paths are added to it as they are.
        ("https://receiver.example.org/", "must end with /receiver/v1/"),
        ("https://receiver.example.org/receiver/v1", "must end with /receiver/v1/"),
        ("https://receiver.example.org/receiver/v1/?x=1", "must end with /receiver/v1/"),
        ("https://receiver.example.org/receiver/v1/#top", "must end with /receiver/v1/"),
    ],
)
def test_a_public_url_is_an_absolute_http_url_ending_with_the_protocols_prefix(url: str, problem: str) -> None:
    said = protocol.public_url_problem(url)
    assert (problem in said) if problem else said == "", said
