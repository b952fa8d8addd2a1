// torch.profiler's device activity for neuron (see kineto_plugin.cpp).
#pragma once

namespace torchneuron::profiler {

// Registers the Kineto child profiler of NeuronCore activity; idempotent.
// Called when torchneuron._C loads.
void register_kineto_plugin();
// True while a Kineto session has the neuron activity configured.
bool session_active();

}  // namespace torchneuron::profiler
