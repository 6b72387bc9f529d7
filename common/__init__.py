"""Shared code outside the stages: data, models written once against the Tensor API, training, CLI."""
