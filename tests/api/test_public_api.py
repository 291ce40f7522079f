"""The library's public surface: every exported name resolves, to the object its module defines."""

from __future__ import annotations

import importlib

import tokenpace


def test_every_public_name_resolves_to_its_defining_module():
    for name in tokenpace.__all__:
        value = getattr(tokenpace, name)
        if name == "__version__":
            assert isinstance(value, str)
            continue
        module = importlib.import_module(tokenpace._EXPORTS[name])
        assert value is getattr(module, name)


def test_unknown_names_raise_attribute_error():
    try:
        tokenpace.no_such_thing  # noqa: B018
    except AttributeError as exc:
        assert "no_such_thing" in str(exc)
    else:
        raise AssertionError("expected AttributeError")
