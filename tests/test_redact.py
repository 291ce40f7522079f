"""Secrets out of the text we print or store."""

from __future__ import annotations

from tokenpace.redact import redact


def test_the_given_secret_is_masked_wherever_it_appears():
    assert redact("key=abc123xyz; again abc123xyz", ["abc123xyz"]) == "key=***; again ***"


def test_credential_looking_tokens_are_masked_without_being_named():
    text = 'header was "Authorization: Bearer tok.en-42", then basic dTpwYXNz and sk-proj-AbC123_xyz-9 end'
    assert redact(text) == 'header was "Authorization: Bearer ***", then basic *** and sk-*** end'


def test_ordinary_text_is_unchanged():
    text = "Rate limit reached for requests: task-force risk-free, bearer of news, basic tier"
    assert redact(text) == text


def test_url_credentials_are_found_and_masked():
    from tokenpace.redact import strip_url_credentials, url_has_credentials

    assert url_has_credentials("http://u:p@host:8000/v1") and url_has_credentials("https://token@host/v1")
    assert not url_has_credentials("http://host:8000/v1?user=a@b")
    assert strip_url_credentials("http://u:p@ss@host:8000/v1") == "http://***@host:8000/v1"
    assert strip_url_credentials("http://host/v1") == "http://host/v1"
