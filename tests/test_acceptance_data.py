"""Issue-level check: the official SDK client (default mode) sees a notebook's data, code and plots."""

from __future__ import annotations

import base64
import io
import json

import anyio
import pytest
from sdk import connect

SETUP = """\
import numpy as np, pandas as pd, polars as pl
import matplotlib
matplotlib.use("module://matplotlib_inline.backend_inline")
import matplotlib.pyplot as plt
sales = pd.DataFrame({"region": ["north", "south", "east"] * 4, "units": np.arange(12), "price": np.linspace(1, 2, 12)})
fast = pl.DataFrame({"a": [1, 2, 3]})
"""


@pytest.fixture(scope="module")
def hub(kernel):
    info = kernel.load_hub()
    kernel.run(SETUP)
    return info


def text_of(result) -> str:
    return result.contents[0].text


def test_client_reads_frames_cells_errors_and_plots(kernel, hub):
    kernel.run("print('total units', sales.units.sum())")
    kernel.run("1 / 0", check=False)
    kernel.run("plt.plot([1, 3, 2]); plt.title('trend'); plt.show()")

    async def go():
        async with connect(hub) as (client, _):
            assert client.protocol_version == "2026-07-28"
            page = await client.read_resource("nb://frames/sales?limit=5&columns=region,units")
            csv = text_of(page).splitlines()
            assert csv[0] == "region,units" and csv[1] == "north,0" and len(csv) == 6
            schema = json.loads(text_of(await client.read_resource("nb://frames/sales/schema")))
            assert schema["shape"] == [12, 3] and {c["name"] for c in schema["columns"]} == {"region", "units", "price"}
            assert json.loads(text_of(await client.read_resource("nb://frames/fast/schema")))["shape"] == [3, 1]

            cells = json.loads(text_of(await client.read_resource("nb://cells")))["cells"]
            by_line = {c["first_line"]: c for c in cells}
            printed = by_line["print('total units', sales.units.sum())"]
            cell = json.loads(text_of(await client.read_resource(printed["uri"])))
            assert cell["source"] == "print('total units', sales.units.sum())" and cell["status"] == "ok"
            out = await client.read_resource(cell["outputs"][0]["uri"])
            assert text_of(out) == "total units 66\n"

            failed = json.loads(text_of(await client.read_resource(by_line["1 / 0"]["uri"])))
            assert failed["status"] == "error"
            traceback = text_of(await client.read_resource(failed["outputs"][-1]["uri"]))
            assert "ZeroDivisionError" in traceback and "\x1b[" not in traceback

            plot = json.loads(
                text_of(
                    await client.read_resource(by_line["plt.plot([1, 3, 2]); plt.title('trend'); plt.show()"]["uri"])
                )
            )
            image = next(o for o in plot["outputs"] if "image/png" in o["mime_types"])
            png = (await client.read_resource(image["uri"])).contents[0]
            assert png.mime_type == "image/png"
            raw = base64.b64decode(png.blob)
            from PIL import Image

            with Image.open(io.BytesIO(raw)) as img:
                assert img.format == "PNG" and img.size[0] > 100 and img.size[1] > 100

    anyio.run(go)


def test_listened_frame_notifies_on_in_place_change_only(kernel, hub):
    async def go():
        async with connect(hub) as (client, _):
            async with client.listen(resource_subscriptions=["nb://frames/sales"]) as sub:
                events: list[str] = []

                async def collect():
                    async for event in sub:
                        events.append(getattr(event, "uri", type(event).__name__))

                async with anyio.create_task_group() as tg:
                    tg.start_soon(collect)
                    await anyio.to_thread.run_sync(kernel.run, "unrelated = 42")
                    await anyio.sleep(1.0)  # give a wrong notification time to arrive
                    assert events == []
                    await anyio.to_thread.run_sync(kernel.run, "sales.loc[0, 'units'] = 1000")
                    with anyio.fail_after(10):
                        while "nb://frames/sales" not in events:
                            await anyio.sleep(0.05)
                    tg.cancel_scope.cancel()

    anyio.run(go)
