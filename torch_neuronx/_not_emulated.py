"""The names TorchNeuron has that this emulation does not provide: they exist (hasattr,
getattr with a default and imports find them) and raise NotImplementedError when used."""

from __future__ import annotations

from typing import Any, NoReturn

NKI = "NKI kernels (neuronxcc.nki) are not emulated"


def not_emulated(name: str, why: str) -> NoReturn:
    """Raise NotImplementedError naming ``name`` (e.g. "torch_neuronx.nki_op") and why."""
    raise NotImplementedError(
        f"{name} is not emulated by torchneuron: {why} (docs/torch_neuronx.md lists the surface)"
    )


def function(name: str, why: str):
    """A function that raises when called (``name``: its full dotted name)."""

    def stub(*args: Any, **kwargs: Any) -> NoReturn:
        not_emulated(name, why)

    stub.__name__ = stub.__qualname__ = name.rsplit(".", 1)[-1]
    stub.__module__ = name.rsplit(".", 1)[0]
    stub.__doc__ = f"Not emulated: {why}. Raises NotImplementedError."
    return stub


def cls(name: str, why: str, base: type = object) -> type:
    """A class (subclassable) whose instantiation raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        not_emulated(name, why)

    short = name.rsplit(".", 1)[-1]
    return type(
        short,
        (base,),
        {
            "__init__": __init__,
            "__module__": name.rsplit(".", 1)[0],
            "__qualname__": short,
            "__doc__": f"Not emulated: {why}. Instantiating raises NotImplementedError.",
        },
    )
