"""Passes that keep ATen's values where the lowering silently computed others (NaN order,
result types, negative indices, exact fmod, float32 accumulation, constant folding)."""
