// ProcessGroupNeuron's collectives: the arguments checked at the call (a
// failure there is posted to the peers by guarded()), CPU aliases, and the
// Gloo call the poster makes once the stream and the cross-rank check allow.
#include "distributed/process_group_neuron.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "aten/alias.h"
#include "distributed/arguments.h"

namespace torchneuron::distributed {

namespace {

// The list forms (all_gather and its coalesced form, gather, scatter,
// reduce_scatter): Gloo's call of the same name on CPU aliases of both
// lists, posted once the stream allows.
template <typename Out, typename In, typename Opts>
CommOp::Post gloo_on_lists(c10::intrusive_ptr<c10d::Backend> g,
                           c10::intrusive_ptr<c10d::Work> (c10d::Backend::*call)(Out&, In&,
                                                                                 const Opts&),
                           const Out& outputs, const In& inputs, const Opts& opts) {
  return [g, call, ao = aliases(outputs), ai = aliases(inputs), opts]() mutable {
    return waits_of(((*g).*call)(ao, ai, opts));
  };
}

// 1-D views of contiguous tensors: the *_tensor forms accept any shape of
// the right numel (as NCCL); Gloo's chunks of a flat tensor are the ranks'.
std::vector<at::Tensor> flat_views(std::vector<at::Tensor> ts) {
  for (auto& t : ts) t = t.view({-1});
  return ts;
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  return guarded("broadcast", c10d::OpType::BROADCAST, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("broadcast", tensors, true, true)) return gloo_in_order().broadcast(tensors, opts);
    check_root("broadcast", opts.rootRank, size_);
    TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::broadcast: expects one tensor, got ",
                tensors.size());
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue(collective("broadcast", c10d::OpType::BROADCAST, tensors, tensors, tensors,
                            [g, a, opts]() mutable { return waits_of(g->broadcast(a, opts)); }));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  return guarded("allreduce", c10d::OpType::ALLREDUCE, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("allreduce", tensors, true, true)) return gloo_in_order().allreduce(tensors, opts);
    check_reduce_op("allreduce", opts.reduceOp, tensors);
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue(collective("allreduce", c10d::OpType::ALLREDUCE, tensors, tensors, tensors,
                            [g, a, opts]() mutable { return waits_of(g->allreduce(a, opts)); }));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  return guarded("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
                   if (on_cpu("allreduce_coalesced", tensors, true, true))
                     return gloo_in_order().allreduce_coalesced(tensors, opts);
                   check_reduce_op("allreduce_coalesced", opts.reduceOp, tensors);
                   auto a = aliases(tensors);
                   auto g = gloo_;
                   return issue(collective("allreduce_coalesced", c10d::OpType::ALLREDUCE_COALESCED,
                                           tensors, tensors, tensors, [g, a, opts]() mutable {
                                             return waits_of(g->allreduce_coalesced(a, opts));
                                           }));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  return guarded("reduce", c10d::OpType::REDUCE, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("reduce", tensors, true, true)) return gloo_in_order().reduce(tensors, opts);
    check_root("reduce", opts.rootRank, size_);
    TORCH_CHECK(tensors.size() == 1, "ProcessGroupNeuron::reduce: expects one tensor, got ",
                tensors.size());
    check_reduce_op("reduce", opts.reduceOp, tensors);
    auto a = aliases(tensors);
    auto g = gloo_;
    return issue(collective("reduce", c10d::OpType::REDUCE, tensors, tensors, tensors,
                            [g, a, opts]() mutable { return waits_of(g->reduce(a, opts)); }));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded("allgather", c10d::OpType::ALLGATHER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto outs = flat(outputs);
    if (on_cpu("allgather", cat(outs, inputs)))
      return gloo_in_order().allgather(outputs, inputs, opts);
    TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(),
                "ProcessGroupNeuron::all_gather: ", outputs.size(), " output lists for ",
                inputs.size(), " inputs");
    for (size_t i = 0; i < inputs.size(); ++i) {
      check_list("all_gather", "the output list", outputs[i].size(), size_);
      for (size_t j = 0; j < outputs[i].size(); ++j)
        check_like("all_gather", "output", j, outputs[i][j], inputs[i]);
    }
    return issue(
        collective("allgather", c10d::OpType::ALLGATHER, cat(outs, inputs), outs, inputs,
                   gloo_on_lists(gloo_, &c10d::Backend::allgather, outputs, inputs, opts)));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  return guarded(
      "_allgather_base", c10d::OpType::_ALLGATHER_BASE, [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<at::Tensor> ts{output, input};
        if (on_cpu("_allgather_base", ts))
          return gloo_in_order()._allgather_base(output, input, opts);
        // NCCL's checks and errors: any output of world size x input's
        // elements (concatenated, stacked (world, *shape) or flat) is accepted.
        TORCH_CHECK_TYPE(output.scalar_type() == input.scalar_type(),
                         "ProcessGroupNeuron::all_gather_into_tensor: output dtype ",
                         output.scalar_type(), " differs from input dtype ", input.scalar_type());
        TORCH_CHECK_VALUE(output.numel() == input.numel() * size_,
                          "ProcessGroupNeuron::all_gather_into_tensor: output has ", output.numel(),
                          " elements (", describe(output), "), expected world size ", size_,
                          " x input's ", input.numel(), " (", describe(input), ")");
        // Gloo wants the output as the inputs concatenated along dim 0: both
        // flat (contiguous, checked by on_cpu), rank r's elements are chunk r.
        at::Tensor ao = cpu_alias(output).view({-1}), ai = cpu_alias(input).view({-1});
        auto g = gloo_;
        return issue(collective(
            "_allgather_base", c10d::OpType::_ALLGATHER_BASE, ts, {output}, {input},
            [g, ao, ai, opts]() mutable { return waits_of(g->_allgather_base(ao, ai, opts)); }));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_coalesced(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED,
                 [&]() -> c10::intrusive_ptr<c10d::Work> {
                   auto outs = flat(outputs);
                   if (on_cpu("allgather_coalesced", cat(outs, inputs)))
                     return gloo_in_order().allgather_coalesced(outputs, inputs, opts);
                   check_list("all_gather_coalesced", "output_tensor_lists", outputs.size(), size_);
                   for (const auto& l : outputs) {
                     TORCH_CHECK(l.size() == inputs.size(),
                                 "ProcessGroupNeuron::all_gather_coalesced: an output list has ",
                                 l.size(), " tensors for ", inputs.size(), " inputs");
                     for (size_t j = 0; j < l.size(); ++j)
                       check_like("all_gather_coalesced", "output", j, l[j], inputs[j]);
                   }
                   return issue(collective("allgather_coalesced", c10d::OpType::ALLGATHER_COALESCED,
                                           cat(outs, inputs), outs, inputs,
                                           gloo_on_lists(gloo_, &c10d::Backend::allgather_coalesced,
                                                         outputs, inputs, opts)));
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  return guarded(
      "allgather_into_tensor_coalesced", c10d::OpType::COALESCED,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        if (on_cpu("allgather_into_tensor_coalesced", cat(outputs, inputs)))
          return gloo_in_order().allgather_into_tensor_coalesced(outputs, inputs, opts);
        TORCH_CHECK(outputs.size() == inputs.size(),
                    "ProcessGroupNeuron::allgather_into_tensor_coalesced: ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
        for (size_t i = 0; i < inputs.size(); ++i)
          TORCH_CHECK(outputs[i].numel() == inputs[i].numel() * size_ &&
                          outputs[i].scalar_type() == inputs[i].scalar_type(),
                      "ProcessGroupNeuron::allgather_into_tensor_coalesced: output ", i, " (",
                      describe(outputs[i]), ") must hold world size ", size_, " x input ", i, " (",
                      describe(inputs[i]), ")");
        auto ao = flat_views(aliases(outputs));
        auto ai = flat_views(aliases(inputs));
        auto g = gloo_;
        return issue(collective("allgather_into_tensor_coalesced", c10d::OpType::COALESCED,
                                cat(outputs, inputs), outputs, inputs, [g, ao, ai, opts]() mutable {
                                  // One Gloo all_gather per pair (Gloo's own coalesced form wants
                                  // CPU tensors of one dtype; this keeps dtypes free), posted
                                  // together, waited together.
                                  std::vector<CommOp::Wait> waits;
                                  for (size_t i = 0; i < ai.size(); ++i) {
                                    auto w = waits_of(g->_allgather_base(ao[i], ai[i], opts));
                                    waits.insert(waits.end(), w.begin(), w.end());
                                  }
                                  return waits;
                                }));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::gather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::GatherOptions& opts) {
  return guarded("gather", c10d::OpType::GATHER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto outs = flat(outputs);
    if (on_cpu("gather", cat(outs, inputs))) return gloo_in_order().gather(outputs, inputs, opts);
    check_root("gather", opts.rootRank, size_);
    TORCH_CHECK(inputs.size() == 1, "ProcessGroupNeuron::gather: expects one input, got ",
                inputs.size());
    if (opts.rootRank == rank_) {
      TORCH_CHECK(outputs.size() == 1,
                  "ProcessGroupNeuron::gather: the root expects one gather_list");
      check_list("gather", "gather_list", outputs[0].size(), size_);
      for (size_t j = 0; j < outputs[0].size(); ++j)
        check_like("gather", "gather_list tensor", j, outputs[0][j], inputs[0]);
    } else {
      TORCH_CHECK(outputs.empty(),
                  "ProcessGroupNeuron::gather: gather_list is for the root rank only");
    }
    return issue(collective("gather", c10d::OpType::GATHER, cat(outs, inputs), outs, inputs,
                            gloo_on_lists(gloo_, &c10d::Backend::gather, outputs, inputs, opts)));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ScatterOptions& opts) {
  return guarded("scatter", c10d::OpType::SCATTER, [&]() -> c10::intrusive_ptr<c10d::Work> {
    auto ins = flat(inputs);
    if (on_cpu("scatter", cat(outputs, ins))) return gloo_in_order().scatter(outputs, inputs, opts);
    check_root("scatter", opts.rootRank, size_);
    TORCH_CHECK(outputs.size() == 1, "ProcessGroupNeuron::scatter: expects one output, got ",
                outputs.size());
    if (opts.rootRank == rank_) {
      TORCH_CHECK(inputs.size() == 1,
                  "ProcessGroupNeuron::scatter: the root expects one scatter_list");
      check_list("scatter", "scatter_list", inputs[0].size(), size_);
      for (size_t j = 0; j < inputs[0].size(); ++j)
        check_like("scatter", "scatter_list tensor", j, inputs[0][j], outputs[0]);
    } else {
      TORCH_CHECK(inputs.empty(),
                  "ProcessGroupNeuron::scatter: scatter_list is for the root rank only");
    }
    return issue(collective("scatter", c10d::OpType::SCATTER, cat(outputs, ins), outputs, outputs,
                            gloo_on_lists(gloo_, &c10d::Backend::scatter, outputs, inputs, opts)));
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return guarded(
      "reduce_scatter", c10d::OpType::REDUCE_SCATTER, [&]() -> c10::intrusive_ptr<c10d::Work> {
        auto ins = flat(inputs);
        if (on_cpu("reduce_scatter", cat(outputs, ins)))
          return gloo_in_order().reduce_scatter(outputs, inputs, opts);
        check_reduce_op("reduce_scatter", opts.reduceOp, outputs);
        TORCH_CHECK(!outputs.empty() && outputs.size() == inputs.size(),
                    "ProcessGroupNeuron::reduce_scatter: ", inputs.size(), " input lists for ",
                    outputs.size(), " outputs");
        for (size_t i = 0; i < outputs.size(); ++i) {
          check_list("reduce_scatter", "input_list", inputs[i].size(), size_);
          for (size_t j = 0; j < inputs[i].size(); ++j)
            check_like("reduce_scatter", "input", j, inputs[i][j], outputs[i]);
        }
        return issue(collective(
            "reduce_scatter", c10d::OpType::REDUCE_SCATTER, cat(outputs, ins), outputs, outputs,
            gloo_on_lists(gloo_, &c10d::Backend::reduce_scatter, outputs, inputs, opts)));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  return guarded(
      "_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<at::Tensor> ts{output, input};
        if (on_cpu("_reduce_scatter_base", ts))
          return gloo_in_order()._reduce_scatter_base(output, input, opts);
        check_reduce_op("reduce_scatter_tensor", opts.reduceOp, ts);
        TORCH_CHECK_TYPE(input.scalar_type() == output.scalar_type(),
                         "ProcessGroupNeuron::reduce_scatter_tensor: input dtype ",
                         input.scalar_type(), " differs from output dtype ", output.scalar_type());
        TORCH_CHECK_VALUE(input.numel() == output.numel() * size_,
                          "ProcessGroupNeuron::reduce_scatter_tensor: input (", describe(input),
                          ") must hold world size ", size_, " x output (", describe(output), ")");
        // Any input of world size x output's elements, as NCCL (flat views).
        at::Tensor ao = cpu_alias(output).view({-1}), ai = cpu_alias(input).view({-1});
        auto g = gloo_;
        return issue(collective("_reduce_scatter_base", c10d::OpType::_REDUCE_SCATTER_BASE, ts,
                                {output}, {output}, [g, ao, ai, opts]() mutable {
                                  return waits_of(g->_reduce_scatter_base(ao, ai, opts));
                                }));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  return guarded(
      "reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED,
      [&]() -> c10::intrusive_ptr<c10d::Work> {
        if (on_cpu("reduce_scatter_tensor_coalesced", cat(outputs, inputs)))
          return gloo_in_order().reduce_scatter_tensor_coalesced(outputs, inputs, opts);
        check_reduce_op("reduce_scatter_tensor_coalesced", opts.reduceOp, outputs);
        TORCH_CHECK(outputs.size() == inputs.size(),
                    "ProcessGroupNeuron::reduce_scatter_tensor_coalesced: ", outputs.size(),
                    " outputs for ", inputs.size(), " inputs");
        for (size_t i = 0; i < inputs.size(); ++i)
          TORCH_CHECK(inputs[i].numel() == outputs[i].numel() * size_ &&
                          inputs[i].scalar_type() == outputs[i].scalar_type(),
                      "ProcessGroupNeuron::reduce_scatter_tensor_coalesced: input ", i, " (",
                      describe(inputs[i]), ") must hold world size ", size_, " x output ", i, " (",
                      describe(outputs[i]), ")");
        auto ao = flat_views(aliases(outputs));
        auto ai = flat_views(aliases(inputs));
        auto g = gloo_;
        return issue(collective("reduce_scatter_tensor_coalesced", c10d::OpType::COALESCED,
                                cat(outputs, inputs), outputs, outputs,
                                [g, ao, ai, opts]() mutable {
                                  std::vector<CommOp::Wait> waits;
                                  for (size_t i = 0; i < ai.size(); ++i) {
                                    auto w = waits_of(g->_reduce_scatter_base(ao[i], ai[i], opts));
                                    waits.insert(waits.end(), w.begin(), w.end());
                                  }
                                  return waits;
                                }));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& opts) {
  return guarded(
      "alltoall_base", c10d::OpType::ALLTOALL_BASE, [&]() -> c10::intrusive_ptr<c10d::Work> {
        std::vector<at::Tensor> ts{output, input};
        if (on_cpu("alltoall_base", ts))
          return gloo_in_order().alltoall_base(output, input, output_split_sizes, input_split_sizes,
                                               opts);
        TORCH_CHECK(output.scalar_type() == input.scalar_type(),
                    "ProcessGroupNeuron::all_to_all_single: output is ", output.scalar_type(),
                    ", input is ", input.scalar_type());
        // Checked at the call, as Gloo does on CPU tensors; the counts per peer are
        // then checked across ranks before any data moves.
        auto counts = [&](const at::Tensor& t, const std::vector<int64_t>& split,
                          const char* what) {
          const int64_t rows = t.dim() ? t.size(0) : 1;
          if (split.empty()) {
            TORCH_CHECK(rows % size_ == 0, "ProcessGroupNeuron::all_to_all_single: the ", what,
                        "'s dim 0 (", rows, ") does not divide equally across the group's ", size_,
                        " ranks");
          } else {
            TORCH_CHECK(int64_t(split.size()) == size_,
                        "ProcessGroupNeuron::all_to_all_single: ", what, " split sizes has ",
                        split.size(), " entries for a group of ", size_);
            int64_t sum = 0;
            for (auto s : split) {
              TORCH_CHECK(s >= 0, "ProcessGroupNeuron::all_to_all_single: negative ", what,
                          " split size ", s);
              sum += s;
            }
            TORCH_CHECK(sum == rows, "ProcessGroupNeuron::all_to_all_single: ", what,
                        " split sizes sum to ", sum, ", the ", what, "'s dim 0 is ", rows);
          }
          const int64_t row = rows ? t.numel() / rows : 0;
          std::vector<int64_t> c(size_);
          for (int r = 0; r < size_; ++r) c[r] = (split.empty() ? rows / size_ : split[r]) * row;
          return c;
        };
        PeerCounts peers{counts(input, input_split_sizes, "input"),
                         counts(output, output_split_sizes, "output")};
        TORCH_CHECK(peers.send[rank_] == peers.recv[rank_],
                    "ProcessGroupNeuron::all_to_all_single: rank ", rank_, " sends itself ",
                    peers.send[rank_], " elements but expects ", peers.recv[rank_]);
        at::Tensor ao = cpu_alias(output), ai = cpu_alias(input);
        auto g = gloo_;
        auto os = output_split_sizes, is = input_split_sizes;
        Call call{"alltoall_base",
                  c10d::OpType::ALLTOALL_BASE,
                  Ordering::kStream,
                  ts,
                  {output},
                  [g, ao, ai, os, is, opts]() mutable {
                    // In place (the output is the input): staged first, as the list
                    // form's aliased inputs are (CPU Gloo gives wrong parts there).
                    if (bytes_overlap(ai, ao)) ai = ai.clone();
                    return waits_of(g->alltoall_base(ao, ai, os, is, opts));
                  }};
        call.check = std::vector<at::Tensor>{input};
        call.dtype_only = true;
        call.peers = std::move(peers);
        return issue(std::move(call));
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNeuron::alltoall(std::vector<at::Tensor>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllToAllOptions& opts) {
  return guarded("alltoall", c10d::OpType::ALLTOALL, [&]() -> c10::intrusive_ptr<c10d::Work> {
    if (on_cpu("alltoall", cat(outputs, inputs)))
      return gloo_in_order().alltoall(outputs, inputs, opts);
    TORCH_CHECK(int(outputs.size()) == size_ && int(inputs.size()) == size_,
                "ProcessGroupNeuron::all_to_all: needs world size ", size_,
                " inputs and outputs, got ", inputs.size(), " and ", outputs.size());
    for (int j = 0; j < size_; ++j)
      TORCH_CHECK(outputs[j].scalar_type() == inputs[j].scalar_type(),
                  "ProcessGroupNeuron::all_to_all: output ", j, " is ", outputs[j].scalar_type(),
                  ", input ", j, " is ", inputs[j].scalar_type());
    TORCH_CHECK(outputs[rank_].numel() == inputs[rank_].numel(),
                "ProcessGroupNeuron::all_to_all: output ", rank_, " has ", outputs[rank_].numel(),
                " elements, input ", rank_, " has ", inputs[rank_].numel());
    PeerCounts peers;
    for (int j = 0; j < size_; ++j) {
      peers.send.push_back(inputs[j].numel());
      peers.recv.push_back(outputs[j].numel());
    }
    // Gloo's list all_to_all wants equal sizes; pairs of send/recv take any
    // (each rank's own part is copied on the device memory directly).
    auto ao = aliases(outputs);
    auto ai = aliases(inputs);
    auto g = gloo_;
    const int rank = rank_, size = size_;
    Call call{"alltoall",
              c10d::OpType::ALLTOALL,
              Ordering::kStream,
              cat(outputs, inputs),
              outputs,
              [g, ao, ai, rank, size]() mutable {
                // An input sharing memory with an output is copied first, as CPU
                // Gloo stages its inputs: a receive could overwrite it before it
                // is sent (all_to_all(l, l) gave a rank its own part back).
                for (auto& in : ai)
                  for (const auto& out : ao)
                    if (bytes_overlap(in, out)) {
                      in = in.clone();
                      break;
                    }
                std::vector<CommOp::Wait> waits;
                for (int k = 1; k < size; ++k) {
                  const int to = (rank + k) % size, from = (rank - k + size) % size;
                  std::vector<at::Tensor> s{ai[to]}, r{ao[from]};
                  auto ws = waits_of(g->send(s, to, kAllToAllTag));
                  auto wr = waits_of(g->recv(r, from, kAllToAllTag));
                  waits.insert(waits.end(), ws.begin(), ws.end());
                  waits.insert(waits.end(), wr.begin(), wr.end());
                }
                ao[rank].copy_(ai[rank]);
                return waits;
              }};
    call.check = inputs;
    call.dtype_only = true;
    call.peers = std::move(peers);
    return issue(std::move(call));
  });
}

}  // namespace torchneuron::distributed
