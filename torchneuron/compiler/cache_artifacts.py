"""Executables travel with ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``.

Two artifact types in PyTorch's mega-cache: ``neuron_neff`` (key: executable key,
content: the compiler's serialized executable) and ``neuron_neff_index`` (key: FX graph
key, content: the index record's payload, cache.index_payload). Loading writes them into this process's
TORCH_NEURONX_NEFF_CACHE_DIR, so the next torch.compile finds them as cache hits.
Registered when torchneuron is imported (a fresh process that loads artifacts must
know the types before it compiles anything). With TORCHNEURON_AOT_CACHE=1 PyTorch's own
``aot_autograd`` artifacts travel too; PyTorch writes them into its cache folder, which
is pointed at ours (aot_cache.py) from the import on, so they land where we look.
"""

from __future__ import annotations

from torch.compiler._cache import CacheArtifact, CacheArtifactFactory, CacheArtifactManager

from . import cache

NEFF, INDEX = "neuron_neff", "neuron_neff_index"


@CacheArtifactFactory.register
class NeuronNeffArtifact(CacheArtifact):
    def populate_cache(self) -> None:
        cache.store_entry(self.key, self.content)

    @staticmethod
    def type() -> str:
        return NEFF


@CacheArtifactFactory.register
class NeuronNeffIndexArtifact(CacheArtifact):
    def populate_cache(self) -> None:
        rec = cache.index_decode(self.content)
        if rec is not None:
            cache.index_store(self.key, rec)

    @staticmethod
    def type() -> str:
        return INDEX


def record(key: str, payload: bytes, fx_key: str | None = None, rec: dict | None = None) -> None:
    """Records a compiled graph's executable (and its index record, when it has one)
    for the next save_cache_artifacts()."""
    CacheArtifactManager.record_artifact(NEFF, key, payload)
    if fx_key is not None and rec is not None:
        CacheArtifactManager.record_artifact(INDEX, fx_key, cache.index_payload(rec))
