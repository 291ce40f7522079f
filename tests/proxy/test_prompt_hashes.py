"""Prompt hash chains (`tokenpace proxy --prompt-hashes`, `instrument(prompt_hashes=...)`): the
records of real calls feed `workload reuse` to the same ceiling as the request bodies themselves,
and hold no word of any prompt."""

from __future__ import annotations

import json
import random

import pytest

import tokenpace
from tests.workload.conftest import bpe_json  # noqa: F401 - a small tokenizer trained in the test session
from tokenpace.cli.main import main
from tokenpace.errors import UsageError
from tokenpace.proxy import ProxyConfig

openai = pytest.importorskip("openai")

MODEL = "tokenpace-sim"
VOCAB = ("zanzibar", "quixotic", "marmalade", "fjord", "bramble", "cobalt", "lantern", "pelican", "saffron",
         "tundra", "walrus", "yonder", "gossamer", "kestrel", "obsidian")


def words(n: int, seed: int) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(VOCAB) for _ in range(n))


def bodies() -> list[dict]:
    """Two groups sharing system prompts (so there is reuse to find), one completions prompt, and
    a multi-turn chat whose second turn extends its first."""
    sys_a, sys_b = words(300, 1), words(170, 2)
    rows = [{"model": MODEL, "messages": [{"role": "system", "content": sys_a},
                                          {"role": "user", "content": words(25, 10 + i)}]} for i in range(4)]
    rows += [{"model": MODEL, "messages": [{"role": "system", "content": sys_b},
                                           {"role": "user", "content": words(40, 20 + i)}]} for i in range(2)]
    rows.append({"model": MODEL, "prompt": sys_a + " " + words(9, 30)})
    turn1 = [{"role": "user", "content": words(60, 40)}]
    rows.append({"model": MODEL, "messages": turn1})
    rows.append({"model": MODEL, "messages": [*turn1, {"role": "assistant", "content": words(30, 41)},
                                              {"role": "user", "content": words(20, 42)}]})
    return rows


def send(client, body: dict, stream: bool) -> None:
    kwargs = {k: v for k, v in body.items()}
    create = client.completions.create if "prompt" in body else client.chat.completions.create
    result = create(**kwargs, max_tokens=3, stream=stream)
    if stream:
        for _ in result:
            pass


def reuse(capsys, path, *flags: str) -> dict:
    code = main(["workload", "reuse", str(path), "--json", *flags])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_proxy_and_instrumented_records_reuse_like_the_bodies_and_hold_no_prompt(server_url, make_proxy,
                                                                                   tmp_path, capsys):
    rows = bodies()
    plain = tmp_path / "requests.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proxied, instrumented = tmp_path / "proxy.jsonl", tmp_path / "calls.jsonl"
    config = ProxyConfig(upstream=server_url, port=0, records_path=str(proxied), hash_salt=b"pepper")
    with make_proxy(config) as (url, _state):
        via_proxy = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        for i, body in enumerate(rows):
            send(via_proxy, body, stream=i % 2 == 0)
    client = tokenpace.instrument(openai.OpenAI(base_url=server_url, api_key="k", max_retries=0),
                                  records=str(instrumented), prometheus=False, prompt_hashes="pepper")
    for i, body in enumerate(rows):
        send(client, body, stream=i % 2 == 1)

    truth = reuse(capsys, plain)
    assert truth["ceiling"]["hit_units"] > 0  # the workload has reuse to find
    for path in (proxied, instrumented):
        lines = [json.loads(line) for line in path.read_text().splitlines()]
        assert len(lines) == len(rows) and all(r["status"] == "ok" for r in lines)
        assert {r["prompt_hash_chain"]["salt_id"] for r in lines} == {lines[0]["prompt_hash_chain"]["salt_id"]}
        got = reuse(capsys, path)
        assert got["ceiling"] == truth["ceiling"], path.name
        assert got["requests"] == truth["requests"] == len(rows)
        text = path.read_text().lower()
        assert not [w for w in VOCAB if w in text], f"prompt words in {path.name}"


def test_token_blocks_through_the_proxy_reuse_like_the_bodies_with_the_same_tokenizer(
        server_url, make_proxy, tmp_path, capsys, bpe_json):  # noqa: F811 - the fixture imported above
    from tokenpace.workload.tokenizer import load_tokenizer

    rows = bodies()
    plain = tmp_path / "requests.jsonl"
    plain.write_text("".join(json.dumps(r) + "\n" for r in rows))
    proxied = tmp_path / "proxy.jsonl"
    config = ProxyConfig(upstream=server_url, port=0, records_path=str(proxied), hash_salt=b"pepper",
                         hash_block=8, tokenizer=load_tokenizer(bpe_json))
    with make_proxy(config) as (url, _state):
        client = openai.OpenAI(base_url=url, api_key="k", max_retries=0)
        for body in rows:
            send(client, body, stream=True)
    truth = reuse(capsys, plain, "--tokenizer", str(bpe_json), "--block-size", "8")
    got = reuse(capsys, proxied)
    assert got["unit"] == truth["unit"] == "tokens"
    assert got["ceiling"] == truth["ceiling"] and truth["ceiling"]["hit_units"] > 0
    chains = [json.loads(line)["prompt_hash_chain"] for line in proxied.read_text().splitlines()]
    assert {(c["unit"], c["block"]) for c in chains} == {("tokens", 8)}


def test_without_prompt_hashes_records_carry_no_chain(server_url, make_proxy, tmp_path):
    path = tmp_path / "proxy.jsonl"
    with make_proxy(ProxyConfig(upstream=server_url, port=0, records_path=str(path))) as (url, _state):
        send(openai.OpenAI(base_url=url, api_key="k", max_retries=0), bodies()[0], stream=True)
    assert json.loads(path.read_text())["prompt_hash_chain"] is None


@pytest.mark.parametrize("argv, env, expect", [
    (["--prompt-hashes"], {}, "--prompt-hashes needs a salt"),
    (["--prompt-hashes", "--hash-salt-file", "EMPTY"], {"TOKENPACE_HASH_SALT": "x"}, "is empty"),
    (["--prompt-hashes", "--hash-salt-file", "MISSING"], {}, "--hash-salt-file"),
    (["--prompt-hashes", "--hash-block", "0"], {"TOKENPACE_HASH_SALT": "x"}, "--hash-block 0"),
    (["--hash-salt-file", "EMPTY"], {}, "go with --prompt-hashes"),
])
def test_prompt_hashes_without_a_usable_salt_is_refused(argv, env, expect, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TOKENPACE_HASH_SALT", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    (tmp_path / "EMPTY").write_text("\n")
    argv = [str(tmp_path / a) if a in ("EMPTY", "MISSING") else a for a in argv]
    code = main(["proxy", "--upstream", "http://127.0.0.1:9/v1", "--listen", "127.0.0.1:0", *argv])
    _, err = capsys.readouterr()
    assert code == 2
    assert expect in err and len(err.strip().splitlines()) == 1, err


def test_instrument_refuses_an_empty_salt():
    with pytest.raises(UsageError, match="salt"):
        tokenpace.instrument(openai.OpenAI(base_url="http://127.0.0.1:9/v1", api_key="k"), prometheus=False,
                             prompt_hashes=b"")


def test_the_salt_comes_from_the_file_without_its_newline_else_from_the_environment(tmp_path, monkeypatch):
    import argparse

    from tokenpace.cli import proxy_cmd

    parser = argparse.ArgumentParser()
    proxy_cmd.register(parser.add_subparsers())
    monkeypatch.setenv("TOKENPACE_HASH_SALT", "from-env")
    salt_file = tmp_path / "salt.txt"
    salt_file.write_bytes(b"from-file\r\n")
    base = ["proxy", "--upstream", "http://127.0.0.1:9/v1", "--prompt-hashes"]
    config = proxy_cmd.config_from_args(parser.parse_args([*base, "--hash-salt-file", str(salt_file)]))
    assert (config.hash_salt, config.hash_block, config.tokenizer) == (b"from-file", 16, None)
    config = proxy_cmd.config_from_args(parser.parse_args([*base, "--hash-block", "32"]))
    assert (config.hash_salt, config.hash_block) == (b"from-env", 32)
    assert proxy_cmd.config_from_args(parser.parse_args(base[:3])).hash_salt is None  # no --prompt-hashes
