#include "python/distributed_bindings.h"

#include "aten/device.h"
#include "distributed/process_group_neuron.h"

namespace torchneuron::distributed {

void init_bindings(pybind11::module& m) {
  auto d = m.def_submodule("_distributed", "the c10d backend `neuron`");
  d.def("_create_backend", &create_process_group_neuron, pybind11::arg("gloo"),
        pybind11::arg("rank"), pybind11::arg("size"),
        "ProcessGroupNeuron over `gloo`, a ProcessGroupGloo of the same store, rank and size");
  d.def("_runtime_started", &runtime_started,
        "True once the runtime started (NEURON_RT_VISIBLE_CORES was read)");
}

}  // namespace torchneuron::distributed
