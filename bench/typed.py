"""Typed vs untyped: McpServer.handle() in-process in a real kernel, per resources/read.

    .venv/bin/python bench/typed.py [--calls 3000]

Compares a custom resource without annotations to the same resource with pydantic-validated
parameters (Literal + Annotated int), one returning a list of models, and a variable read as a
repr next to the same data as a dataclass and as a pydantic model (structured JSON).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sections import BenchKernel

SETUP = """
import dataclasses
from typing import Annotated, Literal
from pydantic import BaseModel, Field
import mcp_notebook

@mcp_notebook.resource("bench://untyped/{region}/{year}")
def untyped(region, year):
    return {"region": region, "year": int(year), "amount": 1.5}

@mcp_notebook.resource("bench://typed/{region}/{year}")
def typed(region: Literal["emea", "apac"], year: Annotated[int, Field(ge=2000)]) -> dict:
    return {"region": region, "year": year, "amount": 1.5}

class Sale(BaseModel):
    region: str
    year: int
    amount: float

@mcp_notebook.resource("bench://models/{region}/{year}")
def models(region: Literal["emea", "apac"], year: Annotated[int, Field(ge=2000)]) -> list[Sale]:
    return [Sale(region=region, year=year, amount=float(i)) for i in range(10)]

@dataclasses.dataclass
class Row:
    region: str
    year: int
    amount: float

as_dict = {"region": "emea", "year": 2024, "amount": 1.5}
as_dataclass = Row("emea", 2024, 1.5)
as_model = Sale(region="emea", year=2024, amount=1.5)
"""

CASES = [
    ("custom, untyped", "bench://untyped/emea/2024"),
    ("custom, typed (validated)", "bench://typed/emea/2024"),
    ("custom, typed, 10 models out", "bench://models/emea/2024"),
    ("var: dict (repr)", "nb://vars/as_dict"),
    ("var: dataclass (JSON)", "nb://vars/as_dataclass"),
    ("var: pydantic model (JSON)", "nb://vars/as_model"),
    ("var: model schema", "nb://vars/as_model/schema"),
]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="mcpnb-typed-") as runtime:
        k = BenchKernel(runtime)
        try:
            k.load_hub()
            k.run(SETUP)
            print(f"{'case':32} {'median µs':>10} {'p99 µs':>10} {'bytes':>7}")
            for label, uri in CASES:
                d = k.json(f"kside.time_handle('resources/read', {uri!r}, {args.calls}, 10)")
                print(f"{label:32} {d.get('median_us', 0):>10.1f} {d.get('p99_us', 0):>10.1f} {d.get('bytes', 0):>7}")
        finally:
            k.shutdown()


if __name__ == "__main__":
    main()
