// Training kernels that ATen leaves to out-of-tree backends.
//
// convolution_backward_overrideable: on PrivateUse1, ATen's convolution picks
// the "Overrideable" backend, whose backward is this operator (its default
// kernel raises NotImplementedError). It runs ATen's CPU convolution_backward
// over device memory, on the current stream, like the generic native kernel.
//
// _thnn_fused_{lstm,gru}_cell and their backwards: ATen's RNN code uses the
// fused cells on privateuse1 devices, and the CPU has no kernel for them (so
// the CPU fallback cannot help). They are composed of natively computed
// operators (sigmoid, tanh, mul, add, cat, sum), each queued on the stream.
// The workspaces are ours: LSTM stores the activated gates [i, f, g, o]
// (N x 4H, as CUDA does); GRU stores [r, z, n, hx, hn] (N x 5H), hn being the
// hidden part of the new gate with its bias, before the reset gate scales it.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <optional>
#include <tuple>
#include <vector>

#include "aten/alias.h"
#include "aten/device.h"
#include "aten/empty_tensor.h"
#include "aten/launch.h"
#include "aten/stats.h"

namespace torchneuron {
namespace {

using at::Tensor;

// ---- convolution backward -------------------------------------------------

std::vector<int64_t> to_ints(c10::SymIntArrayRef a) {
  std::vector<int64_t> out;
  out.reserve(a.size());
  for (const auto& s : a) out.push_back(s.guard_int(__FILE__, __LINE__));
  return out;
}

// A fresh neuron tensor shaped like `like`, dense in its suggested layout.
Tensor empty_like_dense(const Tensor& like, c10::DeviceIndex device) {
  auto meta = at::empty(
      like.sizes(), like.options().device(c10::kMeta).memory_format(like.suggest_memory_format()));
  return empty_strided_neuron(meta.sizes(), meta.strides(), like.scalar_type(), device);
}

void check_conv_devices(const Tensor& grad_output, const Tensor& input, const Tensor& weight) {
  const std::pair<const char*, const Tensor*> args[] = {
      {"grad_output", &grad_output}, {"input", &input}, {"weight", &weight}};
  for (const auto& [name, t] : args)
    TORCH_CHECK(t->device().type() == kNeuron && t->device() == input.device(),
                "Expected all tensors to be on the same device, but found at least two devices, ",
                input.device(), " and ", t->device(), "! (when checking argument ", name,
                " in aten::convolution_backward_overrideable)");
}

bool narrows(const Tensor& t) { return narrow_64bit_enabled() && t.scalar_type() == c10::kDouble; }

std::tuple<Tensor, Tensor, Tensor> convolution_backward_overrideable(
    const Tensor& grad_output, const Tensor& input, const Tensor& weight,
    c10::SymIntArrayRef stride, c10::SymIntArrayRef padding, c10::SymIntArrayRef dilation,
    bool transposed, c10::SymIntArrayRef output_padding, c10::SymInt groups,
    std::array<bool, 3> output_mask) {
  check_conv_devices(grad_output, input, weight);
  const c10::DeviceIndex device = input.device().index();
  const int64_t g = groups.guard_int(__FILE__, __LINE__);
  // The bias the forward had (or would have had): one value per output channel.
  std::vector<int64_t> bias_sizes{transposed ? weight.size(1) * g : weight.size(0)};

  // Shapes are checked by the forward; the results have the inputs' shapes.
  Tensor grad_input, grad_weight, grad_bias;
  if (output_mask[0]) grad_input = empty_like_dense(input, device);
  if (output_mask[1]) grad_weight = empty_like_dense(weight, device);
  if (output_mask[2])
    grad_bias = empty_strided_neuron(bias_sizes, {1}, grad_output.scalar_type(), device);

  // TorchNeuron's 64-bit policy, as for the forward (convolution_overrideable).
  const bool narrow = narrows(grad_output) || narrows(input) || narrows(weight);
  if (narrow) {
    static std::atomic<bool> warned{false};
    record_narrowing("aten::convolution_backward_overrideable");
    if (!warned.exchange(true))
      TORCH_WARN(
          "neuron: aten::convolution_backward_overrideable computes float64 inputs as "
          "float32 and restores the result dtype (TorchNeuron's 64-bit policy; "
          "TORCHNEURON_NARROW_64BIT=0 computes in full width). Warned once per operator.");
  }

  launch(device, "aten::convolution_backward_overrideable",
         [go = launch_view(grad_output), in = launch_view(input), w = launch_view(weight),
          gi = launch_view(grad_input), gw = launch_view(grad_weight), gb = launch_view(grad_bias),
          bias_sizes, stride = to_ints(stride), padding = to_ints(padding),
          dilation = to_ints(dilation), transposed, output_padding = to_ints(output_padding), g,
          output_mask, narrow] {
           auto host = [narrow](const Tensor& t) {
             Tensor a = cpu_alias(t);
             return narrow && a.scalar_type() == c10::kDouble ? a.to(c10::kFloat) : a;
           };
           auto [ri, rw, rb] =
               at::convolution_backward(host(go), host(in), host(w), bias_sizes, stride, padding,
                                        dilation, transposed, output_padding, g, output_mask);
           if (gi.defined()) cpu_alias(gi).copy_(ri);
           if (gw.defined()) cpu_alias(gw).copy_(rw);
           if (gb.defined()) cpu_alias(gb).copy_(rb);
         });
  return {grad_input, grad_weight, grad_bias};
}

// ---- fused RNN cells --------------------------------------------------------

// x * (1 - x): the derivative of sigmoid at its output x.
Tensor sigmoid_slope(const Tensor& x) { return at::sub(x, at::mul(x, x)); }
// 1 - x * x: the derivative of tanh at its output x.
Tensor tanh_slope(const Tensor& x) { return at::add(at::neg(at::mul(x, x)), 1); }

Tensor with_biases(Tensor gates, const std::optional<Tensor>& b1, const std::optional<Tensor>& b2) {
  if (b1 && b1->defined()) gates = at::add(gates, *b1);
  if (b2 && b2->defined()) gates = at::add(gates, *b2);
  return gates;
}

void check_cell(const char* op, const Tensor& input_gates, const Tensor& hidden_gates,
                const Tensor& state, int64_t chunks, const std::optional<Tensor>& input_bias,
                const std::optional<Tensor>& hidden_bias) {
  TORCH_CHECK(input_gates.dim() == 2 && input_gates.sizes() == hidden_gates.sizes(), op,
              ": expected input_gates and hidden_gates of one 2-D shape, got ", input_gates.sizes(),
              " and ", hidden_gates.sizes());
  TORCH_CHECK(state.dim() == 2 && state.size(0) == input_gates.size(0) &&
                  state.size(1) * chunks == input_gates.size(1),
              op, ": expected a state of shape [", input_gates.size(0), ", ",
              input_gates.size(1) / chunks, "], got ", state.sizes());
  const bool b1 = input_bias && input_bias->defined(), b2 = hidden_bias && hidden_bias->defined();
  TORCH_CHECK(b1 == b2, op, ": expected both biases or neither");
}

// -> (hy, cy, workspace = [i, f, g, o] activated)
std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell(const Tensor& input_gates,
                                                   const Tensor& hidden_gates, const Tensor& cx,
                                                   const std::optional<Tensor>& input_bias,
                                                   const std::optional<Tensor>& hidden_bias) {
  check_cell("_thnn_fused_lstm_cell", input_gates, hidden_gates, cx, 4, input_bias, hidden_bias);
  Tensor gates = with_biases(at::add(input_gates, hidden_gates), input_bias, hidden_bias);
  auto c = gates.chunk(4, 1);
  Tensor i = at::sigmoid(c[0]), f = at::sigmoid(c[1]), g = at::tanh(c[2]), o = at::sigmoid(c[3]);
  Tensor cy = at::add(at::mul(f, cx), at::mul(i, g));
  Tensor hy = at::mul(o, at::tanh(cy));
  return {hy, cy, at::cat({i, f, g, o}, 1)};
}

// -> (grad_gates, grad_cx, grad_bias)
std::tuple<Tensor, Tensor, Tensor> fused_lstm_cell_backward_impl(
    const std::optional<Tensor>& grad_hy_opt, const std::optional<Tensor>& grad_cy_opt,
    const Tensor& cx, const Tensor& cy, const Tensor& workspace, bool has_bias) {
  const bool has_hy = grad_hy_opt && grad_hy_opt->defined();
  const bool has_cy = grad_cy_opt && grad_cy_opt->defined();
  if (!has_hy && !has_cy) return {};
  TORCH_CHECK(workspace.dim() == 2 && cx.sizes() == cy.sizes() && workspace.size(0) == cx.size(0) &&
                  workspace.size(1) == 4 * cx.size(1),
              "_thnn_fused_lstm_cell_backward_impl: workspace ", workspace.sizes(),
              " does not match cx ", cx.sizes(), " and cy ", cy.sizes());
  auto w = workspace.chunk(4, 1);
  const Tensor &i = w[0], &f = w[1], &g = w[2], &o = w[3];
  Tensor grad_o, grad_c;  // grad_c: of cy, from both outputs
  if (has_hy) {
    const Tensor& ghy = *grad_hy_opt;
    Tensor tanh_cy = at::tanh(cy);
    grad_o = at::mul(at::mul(ghy, tanh_cy), sigmoid_slope(o));
    grad_c = at::mul(at::mul(ghy, o), tanh_slope(tanh_cy));
    if (has_cy) grad_c = at::add(grad_c, *grad_cy_opt);
  } else {
    grad_o = at::zeros_like(o, at::MemoryFormat::Contiguous);
    grad_c = *grad_cy_opt;
  }
  Tensor grad_i = at::mul(at::mul(grad_c, g), sigmoid_slope(i));
  Tensor grad_f = at::mul(at::mul(grad_c, cx), sigmoid_slope(f));
  Tensor grad_g = at::mul(at::mul(grad_c, i), tanh_slope(g));
  Tensor grad_gates = at::cat({grad_i, grad_f, grad_g, grad_o}, 1);
  Tensor grad_cx = at::mul(grad_c, f);
  Tensor grad_bias = has_bias ? at::sum(grad_gates, {0}) : Tensor();
  return {grad_gates, grad_cx, grad_bias};
}

// -> (hy, workspace = [r, z, n, hx, hn])
std::tuple<Tensor, Tensor> fused_gru_cell(const Tensor& input_gates, const Tensor& hidden_gates,
                                          const Tensor& hx, const std::optional<Tensor>& input_bias,
                                          const std::optional<Tensor>& hidden_bias) {
  check_cell("_thnn_fused_gru_cell", input_gates, hidden_gates, hx, 3, input_bias, hidden_bias);
  Tensor ig = with_biases(input_gates, input_bias, std::nullopt);
  Tensor hg = with_biases(hidden_gates, hidden_bias, std::nullopt);
  auto ic = ig.chunk(3, 1), hc = hg.chunk(3, 1);
  Tensor r = at::sigmoid(at::add(hc[0], ic[0]));
  Tensor z = at::sigmoid(at::add(hc[1], ic[1]));
  Tensor n = at::tanh(at::add(ic[2], at::mul(hc[2], r)));
  Tensor hy = at::add(at::mul(at::sub(hx, n), z), n);  // (1 - z) * n + z * hx
  return {hy, at::cat({r, z, n, hx, hc[2]}, 1)};
}

// -> (grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)
std::tuple<Tensor, Tensor, Tensor, Tensor, Tensor> fused_gru_cell_backward(const Tensor& grad_hy,
                                                                           const Tensor& workspace,
                                                                           bool has_bias) {
  TORCH_CHECK(workspace.dim() == 2 && grad_hy.dim() == 2 && workspace.size(0) == grad_hy.size(0) &&
                  workspace.size(1) == 5 * grad_hy.size(1),
              "_thnn_fused_gru_cell_backward: workspace ", workspace.sizes(),
              " does not match grad_hy ", grad_hy.sizes());
  auto w = workspace.chunk(5, 1);
  const Tensor &r = w[0], &z = w[1], &n = w[2], &hx = w[3], &hn = w[4];
  Tensor grad_z = at::mul(at::mul(grad_hy, at::sub(hx, n)), sigmoid_slope(z));
  Tensor grad_n = at::mul(at::sub(grad_hy, at::mul(grad_hy, z)), tanh_slope(n));
  Tensor grad_r = at::mul(at::mul(grad_n, hn), sigmoid_slope(r));
  Tensor grad_input_gates = at::cat({grad_r, grad_z, grad_n}, 1);
  Tensor grad_hidden_gates = at::cat({grad_r, grad_z, at::mul(grad_n, r)}, 1);
  Tensor grad_hx = at::mul(grad_hy, z);
  Tensor grad_input_bias, grad_hidden_bias;
  if (has_bias) {
    grad_input_bias = at::sum(grad_input_gates, {0});
    grad_hidden_bias = at::sum(grad_hidden_gates, {0});
  }
  return {grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias};
}

}  // namespace

TORCH_LIBRARY_IMPL(aten, PrivateUse1, m) {
  m.impl("convolution_backward_overrideable", TORCH_FN(convolution_backward_overrideable));
  m.impl("_thnn_fused_lstm_cell", TORCH_FN(fused_lstm_cell));
  m.impl("_thnn_fused_lstm_cell_backward_impl", TORCH_FN(fused_lstm_cell_backward_impl));
  m.impl("_thnn_fused_gru_cell", TORCH_FN(fused_gru_cell));
  m.impl("_thnn_fused_gru_cell_backward", TORCH_FN(fused_gru_cell_backward));
}

}  // namespace torchneuron
