"""``benchmarks/gpu/run.py``'s targets of issue 50: the engine against the bare scan, per sampler
and number of chains, and 512 chains timed, read from part 1's records."""

from __future__ import annotations

from tests.test_gpu_script import run


def paired(a: str, b: str, chains: int, median: float) -> dict:
    return {"kind": "paired", "a": a, "b": b, "chains": chains, "median": median}


def test_engine_rows_against_the_bare_scan():
    records = [
        paired("sgrld identity", "sgrld identity, bare scan", 1, 0.98),
        paired("sgrld identity", "sgrld identity, bare scan", 8, 0.90),
        paired("sgrld shampoo", "sgrld shampoo, bare scan", 1, 1.01),
        paired("sgrld identity", "blackjax sgld", 8, 1.02),
        {"kind": "rate", "name": "sgrld identity", "chains": 512, "median": 5e4},
    ]
    for r in records:
        r["low"] = r["high"] = r["median"]
    rows = {r[0]: r[1:] for r in run.targets({"chains": {"records": records}})}
    engine = "through the engine ≥ 0.95× its bare scan at"
    assert rows[f"sgrld identity {engine} 1 chain"][1] == "hit"
    assert rows[f"sgrld identity {engine} 8 chains"][1] == "**miss**"
    assert rows[f"sgrld identity {engine} 64 chains"] == ["not measured", "—"]
    assert rows[f"sgrld shampoo {engine} 1 chain"][1] == "hit"
    assert rows["sgrld ≥ 1.0× BlackJAX SGLD at 8 chains"][1] == "hit"
    assert rows["sgrld identity timed at 512 chains"] == ["50,000 chain-steps/s", "hit"]
