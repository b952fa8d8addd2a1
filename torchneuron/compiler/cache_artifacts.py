"""Executables travel with ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``.

Two artifact types in PyTorch's mega-cache: ``neuron_neff`` (key: executable key,
content: the compiler's serialized executable) and ``neuron_neff_index`` (key: FX graph
key, content: the executable key). Loading writes them into this process's
TORCH_NEURONX_NEFF_CACHE_DIR, so the next torch.compile finds them as cache hits.
Registered when torchneuron is imported (a fresh process that loads artifacts must
know the types before it compiles anything).
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
        cache.index_store(self.key, self.content.decode())

    @staticmethod
    def type() -> str:
        return INDEX


def record(key: str, fx_key: str, payload: bytes) -> None:
    """Records a compiled graph's executable for the next save_cache_artifacts()."""
    CacheArtifactManager.record_artifact(NEFF, key, payload)
    CacheArtifactManager.record_artifact(INDEX, fx_key, key.encode())
