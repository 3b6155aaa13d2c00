"""The benchmark scripts of benchmarks/ that compare convjit with TensorFlow: the ratio against
TensorFlow taken from convjit's rate in TensorFlow's own process where the records carry it,
run_suite.py's fastest round per implementation, and tf_peer.py timing convjit's kernel beside
TensorFlow's through the C ABI (tiny shapes; the rates are not checked, this machine may be
busy)."""

import json
import os
import subprocess
import sys

import pytest

import convjit
from conftest import REPO, optional_module

BENCHMARKS = REPO / "benchmarks"
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
LIBCONVJIT = os.path.join(convjit.get_library_dir(), "libconvjit.so")

TINY_SHAPES = """\
# name kind N H W IC M KH KW stride pad dilation
tiny_conv  conv 1 6 7 3 4 3 3 2 SAME 1
tiny_dw    dw   1 5 5 3 2 3 3 1 SAME 1
"""


def _script(name, *args, check=True):
    result = subprocess.run([sys.executable, str(BENCHMARKS / name), *map(str, args)],
                            cwd=str(REPO), env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, timeout=600)
    if check:
        assert result.returncode == 0, result.stderr[-4000:]
    return result


def _record(impl, gflops, layouts="tf", **extra):
    return dict(shape="layer", op="bwd_data", dtype="f32", threads=2, impl=impl,
                layouts=layouts, gflops=gflops, note="", **extra)


def _table_row(markdown, shape):
    rows = [line for line in markdown.splitlines() if line.startswith(f"| {shape} |")]
    assert len(rows) == 1, markdown
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_ratio_against_tensorflow_comes_from_its_own_process(tmp_path):
    # convjit ran 100 GFLOP/s in the benchmark and 60 beside TensorFlow's 50 in TensorFlow's
    # process: against TensorFlow it is 1.2x (not 100 / 50), against oneDNN 100 / 80.
    records = [_record("convjit", 100.0), _record("onednn-3.13.2", 80.0),
               _record("onednn-3.13.2", 125.0, layouts="best"),
               _record("tensorflow-2.21.0", 50.0, convjit_gflops=60.0)]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"results": records}))
    table = _script("markdown_tables.py", path).stdout
    cells = _table_row(table, "layer")
    assert cells[-1] == "**0.80x**" and cells[-2] == "1.20x", table
    assert "convjit beside tensorflow-2.21.0" in table and "60.0" in cells, table

    # Records without it (an older run, or no libconvjit.so): the benchmark's rate.
    records[-1].pop("convjit_gflops")
    path.write_text(json.dumps({"results": records}))
    table = _script("markdown_tables.py", path).stdout
    assert _table_row(table, "layer")[-2] == "1.25x", table
    assert "convjit beside" not in table, table


def test_markdown_tables_of_several_dtypes_in_one_file(tmp_path):
    # One table per dtype, each against its own peers (run_suite.py --dtype f32,bf16).
    records = [_record("convjit", 100.0), _record("onednn-3.13.2", 80.0),
               dict(_record("convjit", 300.0), dtype="bf16"),
               dict(_record("onednn-3.13.2", 200.0), dtype="bf16")]
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"results": records}))
    table = _script("markdown_tables.py", path).stdout
    f32, bf16 = table.split("### bf16")
    assert _table_row(f32, "layer")[-2] == "1.25x", table
    assert _table_row(bf16, "layer")[-2] == "1.50x", table


def test_run_suite_keeps_each_implementations_fastest_round(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import run_suite

    rounds = [[_record("convjit", 90.0), _record("tensorflow-2.21.0", 70.0)],
              [_record("convjit", 120.0), _record("tensorflow-2.21.0", 50.0)]]
    merged = {r["impl"]: r for r in run_suite.fastest_rounds(rounds)}
    assert merged["convjit"]["gflops"] == 120.0
    assert merged["convjit"]["gflops_rounds"] == [90.0, 120.0]
    assert merged["tensorflow-2.21.0"]["gflops"] == 70.0
    # One round: the records as they came, without a list of rounds.
    assert "gflops_rounds" not in run_suite.fastest_rounds(rounds[:1])[0]


def test_run_suite_refuses_bad_arguments(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(TINY_SHAPES)
    for bad in (["--rounds", "0"], ["--rounds", "two"],
                ["--convjit-lib", tmp_path / "no-such-lib.so"]):
        result = _script("run_suite.py", "--convjit", "convjit", "--shapes", shapes,
                         "-o", tmp_path / "out.json", *bad, check=False)
        assert result.returncode == 2, (bad, result.stderr)


@pytest.mark.skipif(optional_module("tensorflow") is None, reason="needs tensorflow")
def test_tf_peer_times_convjit_beside_tensorflow(tmp_path):
    shapes = tmp_path / "shapes.txt"
    shapes.write_text(TINY_SHAPES)
    out = _script("tf_peer.py", "--shapes", shapes, "--dtype", "f32,bf16", "--threads", "1",
                  "--min-time-ms", "1", "--convjit-lib", LIBCONVJIT).stdout
    records = json.loads(out)["results"]
    assert len(records) == 8, records
    for r in records:
        assert r["impl"].startswith("tensorflow") and not r["note"], r
        assert r["gflops"] > 0 and r["convjit_gflops"] > 0, r
        assert r["convjit_kernel"] and r["check"] == "ok (convjit vs tensorflow)", r
        # The same small-integer operands (multiples of 1/128) on both sides: sums of exact
        # products, equal up to the output dtype's rounding.
        assert r["max_rel_error"] <= (1e-6 if r["dtype"] == "f32" else 1e-2), r

    result = _script("tf_peer.py", "--shapes", shapes, "--convjit-lib", tmp_path / "none.so",
                     check=False)
    assert result.returncode == 2 and "--convjit-lib" in result.stderr, result.stderr
