"""The official MCP Python SDK client against a hub in a real kernel, in both protocol eras."""

from __future__ import annotations

import json
import warnings

import anyio
import pytest
from sdk import connect


def run(fn, *args):
    return anyio.run(fn, *args)


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_list_and_read(kernel, hub, mode):
    kernel.run("sdk_x = [1, 2, 3]\nsdk_name = 'hello'")

    async def go():
        async with connect(hub, mode) as (client, _):
            expected = "2026-07-28" if mode == "auto" else "2025-11-25"
            assert client.protocol_version == expected
            listed = await client.list_resources()
            uris = {str(r.uri) for r in listed.resources}
            assert {"nb://kernel", "nb://vars", "nb://vars/sdk_x", "nb://vars/sdk_name"} <= uris
            templates = await client.list_resource_templates()
            assert "nb://vars/{name}" in {t.uri_template for t in templates.resource_templates}
            read = await client.read_resource("nb://vars/sdk_x")
            doc = json.loads(read.contents[0].text)
            assert doc["type"] == "list" and doc["len"] == 3 and doc["repr"] == "[1, 2, 3]"

    run(go)


def test_handshake_subscription_gets_update_after_cell(kernel, hub):
    kernel.run("watched = [1]\nother = 0")

    async def go():
        async with connect(hub, "legacy") as (client, inbox):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource("nb://vars/watched")
            await anyio.to_thread.run_sync(kernel.run, "other = 1")  # unrelated cell
            await anyio.to_thread.run_sync(kernel.run, "watched.append(2)")  # in-place mutation
            await inbox.wait_for(lambda i: "nb://vars/watched" in i.updated)
            assert inbox.updated.count("nb://vars/watched") == 1
            read = await client.read_resource("nb://vars/watched")
            assert json.loads(read.contents[0].text)["repr"] == "[1, 2]"

    run(go)


def test_stateless_listen_gets_update_after_cell(kernel, hub):
    kernel.run("df_like = {'a': 1}")

    async def go():
        async with connect(hub, "auto") as (client, _):
            assert client.protocol_version == "2026-07-28"
            async with client.listen(resource_subscriptions=["nb://vars/df_like"], resources_list_changed=True) as sub:
                assert list(sub.honored.resource_subscriptions) == ["nb://vars/df_like"]
                await anyio.to_thread.run_sync(kernel.run, "df_like['b'] = 2")  # item assignment
                with anyio.fail_after(10):
                    async for event in sub:
                        if getattr(event, "uri", None) == "nb://vars/df_like":
                            break
                await anyio.to_thread.run_sync(kernel.run, "brand_new_var = 5")
                with anyio.fail_after(10):
                    async for event in sub:
                        if type(event).__name__ == "ResourcesListChanged":
                            break

    run(go)
