"""Debug artifacts (TORCH_NEURONX_DEBUG_DIR + TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1):
a model_name is made safe for a path (it was joined as is: "../../x" wrote outside the
debug dir, "sub/dir" nested folders), and each process writes into its own run folder
(a second process with the same model name overwrote the first's files)."""

import pytest
import torch
from compile_support import fresh_compile_state  # noqa: F401
from conftest import run_python

import torchneuron  # noqa: F401


@pytest.mark.parametrize(
    "name, folder_start",
    [
        ("../../evil", "____evil_"),
        ("sub/dir", "sub_dir_"),
        ("/abs", "_abs_"),
        (".hidden", "_hidden_"),
        ("my model:v1", "my_model_v1_"),
        ("bert-base.v2", "bert-base.v2_"),
    ],
)
def test_model_name_stays_inside_debug_dir(name, folder_start, tmp_path, monkeypatch):
    base = tmp_path / "a" / "dbg"
    monkeypatch.setenv("TORCH_NEURONX_DEBUG_DIR", str(base))
    monkeypatch.setenv("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "1")
    x = torch.randn(4, 4)
    out = torch.compile(lambda t: t * 2, backend="neuron", options={"model_name": name})(
        x.to("neuron")
    )
    torch.testing.assert_close(out.cpu(), x * 2)
    (run,) = base.iterdir()
    (d,) = run.iterdir()
    assert d.name.startswith(folder_start) and "_inference_" in d.name, d.name
    assert (d / "stablehlo.mlir").is_file()
    # nothing written beside the debug dir or above it
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "neff_cache"]
    assert [p.name for p in (tmp_path / "a").iterdir()] == ["dbg"]
    # metrics keep the name as given
    assert torch.neuron.get_dynamo_metrics()[0]["graph_name"].startswith(name + "_")


def test_two_processes_same_model_name_keep_their_artifacts(tmp_path):
    env = {
        "TORCH_NEURONX_DEBUG_DIR": str(tmp_path / "dbg"),
        "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS": "1",
        "TORCH_NEURONX_NEFF_CACHE_DIR": str(tmp_path / "cache"),
    }
    code = """
        import sys, torch
        k = float(sys.argv[1]) if len(sys.argv) > 1 else {k}
        torch.compile(lambda t: t * {k}, backend="neuron", options={{"model_name": "m"}})(
            torch.ones(3, device="neuron"))
    """
    run_python(code.format(k=2.0), env=env)
    run_python(code.format(k=3.0), env=env)
    runs = sorted((tmp_path / "dbg").iterdir())
    assert len(runs) == 2
    texts = []
    for r in runs:
        (d,) = r.iterdir()
        assert d.name.startswith("m_")
        texts.append((d / "stablehlo.mlir").read_text())
    assert texts[0] != texts[1]  # each process's own graph (constants 2.0 and 3.0)
