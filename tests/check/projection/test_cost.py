"""torchneuron check, cost: the shipped price table, cost per million samples, budget alert."""

import json

import pytest
from check_support import FAST, FAST_KW, cli, result

from torchneuron.check.projection import cost


def test_price_table_rows_have_source_and_date():
    prices = cost.load_prices()
    for name in (
        "trn1.2xlarge",
        "trn1.32xlarge",
        "trn2.48xlarge",
        "inf2.xlarge",
        "inf2.48xlarge",
        "g5.xlarge",
        "p4d.24xlarge",
        "p5.48xlarge",
        "c7i.8xlarge",
    ):
        assert name in prices
    for name, row in prices.items():
        assert row["source"].startswith("https://aws.amazon.com/"), name
        assert row["region"] == "us-east-1" and row["pricing"] == "on-demand"
        if row["usd_per_hour"] is None:
            assert row["note"], f"{name}: a row without a price must say why"
        else:
            assert row["usd_per_hour"] > 0 and row["as_of"], name


def test_cost_formula():
    # 1.0 USD/h at 1000 samples/s: 1e6 samples take 1000 s = 1/3.6 USD
    assert cost.cost_per_million(1.0, 1000.0) == pytest.approx(1 / 3.6)
    # plus 36 s of one-time overhead spread over 1e6 samples: +0.01 USD
    assert cost.cost_per_million(1.0, 1000.0, 36.0, 1_000_000) == pytest.approx(1 / 3.6 + 0.01)
    assert cost.cost_per_million(1.0, 1000.0, -5.0) == pytest.approx(
        1 / 3.6
    )  # no negative overhead
    assert cost.cost_per_million(1.0, 0.0) == float("inf")


def test_cost_in_result():
    r = result("mlp", **FAST_KW)
    c = r.cost
    d, ref = c.device, c.reference
    assert d["instance"] == "trn1.2xlarge" and ref["instance"] == "c7i.8xlarge"
    assert d["usd_per_million"] == pytest.approx(
        cost.cost_per_million(
            d["usd_per_hour"],
            r.phase3.device["throughput_samples_per_s"],
            d["overhead_s"],
            1_000_000,
        )
    )
    assert ref["usd_per_million"] > 0
    # --mode both: eager's row has no compile step; the compiled row amortizes the cold compile
    assert d["overhead_label"].startswith("cold-start")
    k = c.compiled
    assert k["overhead_s"] == pytest.approx(r.phase1.compile.compile_s)
    assert k["usd_per_million"] == pytest.approx(
        cost.cost_per_million(
            d["usd_per_hour"],
            r.phase3.compiled["throughput_samples_per_s"],
            k["overhead_s"],
            1_000_000,
        )
    )
    assert any("not Trainium throughput" in n for n in c.notes)


def test_instance_and_price_override(tmp_path):
    out = tmp_path / "r.json"
    code, _, err = cli(
        "check",
        "mlp",
        *FAST,
        "--instance",
        "inf2.xlarge",
        "--reference-price-per-hour",
        "2",
        "--json",
        out,
    )
    assert code == 0, err
    c = json.loads(out.read_text())["cost"]
    assert c["device"]["instance"] == "inf2.xlarge" and c["device"]["usd_per_hour"] == 0.7582
    assert (
        c["reference"]["usd_per_hour"] == 2.0
        and c["reference"]["source"] == "given on the command line"
    )


def test_unknown_instance_is_bad_usage():
    code, _, err = cli("check", "mlp", *FAST, "--instance", "x9.huge")
    assert code == 2 and "unknown instance" in err


def test_instance_without_verified_price_needs_an_override():
    code, _, err = cli("check", "mlp", *FAST, "--instance", "trn2.48xlarge")
    assert code == 2 and "no verified price" in err and "--price-per-hour" in err
    code, _, err = cli(
        "check", "mlp", *FAST, "--instance", "trn2.48xlarge", "--price-per-hour", "40", "--quiet"
    )
    assert code == 0, err


def test_budget_alert():
    code, out, _ = cli("check", "mlp", *FAST, "--max-cost-per-million", "1e-9")
    assert code == 1 and "exceeds the budget" in out
    code, out, err = cli("check", "mlp", *FAST, "--max-cost-per-million", "1e6")
    assert code == 0, out + err
