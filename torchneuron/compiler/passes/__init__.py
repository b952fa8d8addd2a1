"""FX passes run on AOTAutograd's graphs before lowering, in PIPELINE's order (one pass a
file), grouped by purpose: semantics/ (ATen's values where the lowering computed others),
policy/ (TorchNeuron's static shapes, 64-bit narrowing, random numbers), legalize/ (forms
torch-mlir/XLA accept), performance/ (faster forms, same values).

Each takes (gm, plan, example_inputs) and edits gm and plan in place: see ../plan.py.
"""

from .legalize.bitwise_before_truncation import bitwise_before_truncation
from .legalize.clamp_slice_bounds import clamp_slice_bounds
from .legalize.decompose_cumprod import decompose_cumprod
from .legalize.drop_device_arguments import drop_device_arguments
from .legalize.empty_results import empty_results
from .legalize.functionalize_input_mutations import functionalize_input_mutations
from .legalize.remove_none_outputs import remove_none_outputs
from .legalize.uint8_constants import uint8_constants
from .legalize.zero_dim_reductions import zero_dim_reductions
from .performance.channels_last_max_pool import channels_last_max_pool
from .performance.host_prologue import host_prologue
from .performance.pad_small_conv_inputs import pad_small_conv_inputs
from .performance.return_inputs_as_is import return_inputs_as_is
from .policy.narrow_64bit import narrow_64bit
from .policy.random_ops_to_inputs import random_ops_to_inputs
from .policy.specialize_scalar_inputs import specialize_scalar_inputs
from .semantics.compare_in_result_type import compare_in_result_type
from .semantics.exact_fmod import exact_fmod
from .semantics.float_scalar_operands import float_scalar_operands
from .semantics.nan_aware_arg_reductions import nan_aware_arg_reductions
from .semantics.nan_aware_sort import nan_aware_sort
from .semantics.self_equality import self_equality
from .semantics.upcast_low_precision_reductions import upcast_low_precision_reductions
from .semantics.wrap_negative_indices import wrap_negative_indices

# zero_dim_reductions before the passes that look at reductions' shapes;
# return_inputs_as_is after None outputs are gone, before passes that add placeholders;
# host_prologue after the mutations are outputs, before the passes that rewrite nodes
# for the device (narrow_64bit: host nodes run at full width, as eager's CPU ops);
# empty_results after the mutations are outputs and before the passes that add nodes;
# narrow_64bit re-runs ops on fake tensors: before device arguments are dropped;
# cumprod is decomposed after it (narrowed as one op: its int64 accumulation kept);
# random ops are generated after it (the generator's int64 words are not values);
# negative indices are wrapped after narrow_64bit (index arithmetic stays int64);
# the NaN fix-ups of arg reductions and sorts add device arguments dropped after them;
# exact_fmod after the others: it gives fmod nodes the target that means fmod only to the lowering;
# float_scalar_operands, compare_in_result_type and bitwise_before_truncation last: the
# passes before them add int operands, compares and truncations (narrow_64bit) too;
# uint8_constants after all: the passes before it add uint8 constants and conversions.
PIPELINE = (
    specialize_scalar_inputs,
    functionalize_input_mutations,
    remove_none_outputs,
    return_inputs_as_is,
    host_prologue,
    empty_results,
    zero_dim_reductions,
    narrow_64bit,
    decompose_cumprod,
    nan_aware_arg_reductions,
    nan_aware_sort,
    random_ops_to_inputs,
    drop_device_arguments,
    clamp_slice_bounds,
    wrap_negative_indices,
    self_equality,
    upcast_low_precision_reductions,
    exact_fmod,
    pad_small_conv_inputs,
    channels_last_max_pool,
    float_scalar_operands,
    compare_in_result_type,
    bitwise_before_truncation,
    uint8_constants,
)


def run_passes(gm, plan, example_inputs):
    """Runs PIPELINE on ``gm``; returns ``gm`` (recompiled)."""
    for p in PIPELINE:
        p(gm, plan, example_inputs)
    gm.graph.lint()
    gm.recompile()
    return gm
