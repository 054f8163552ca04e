"""bench/nx_side.py's time phase can alternate which tool runs first, round by round, and pairs
each round's vx run with each Nx's: a cold series on a machine whose load rises or falls through
a round otherwise favours whichever tool always runs at the quieter end."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))

import nx_side  # noqa: E402


def test_alternate_reverses_every_other_round():
    order = ("nx", "vx", "nx-daemon")
    rounds = [nx_side.round_order(order, i, alternate=True) for i in range(4)]
    assert rounds == [order, order[::-1], order, order[::-1]]
    assert nx_side.round_order(order, 1, alternate=False) == order


def test_pairs_are_vx_over_each_nx_round_by_round():
    def run(wall, load=1.0):
        return {"wall": wall, "cpu": wall / 2, "load": load}

    st = nx_side.pair_stats(
        {
            "vx": [run(100.0), run(90.0), run(120.0)],
            "nx": [run(50.0), run(100.0), run(100.0)],
            "nx-daemon": [],
        }
    )
    assert st["pairs_nx"] == [2.0, 0.9, 1.2]
    assert st["pair_median_nx"] == 1.2
    assert st["ratio_nx"] == 1.0  # median over median: not the same as the paired median
    assert st["pairs_nx-daemon"] == [] and st["ratio_nx-daemon"] is None
    assert st["vx"]["loads"] == [1.0, 1.0, 1.0]


def test_an_order_without_vx_is_refused(tmp_path, capsys):
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "nx.json").write_text("{}")
    code = nx_side.main(["--ws", str(ws), "--work", str(tmp_path / "w"), "--order", "nx,nx-daemon"])
    assert code == 2
    assert "--order" in capsys.readouterr().err
