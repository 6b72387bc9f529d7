"""The error an op raises when its arguments do not fit it."""


class ArgumentError(ValueError, RuntimeError):
    """An op's shapes, axes or values do not fit it. It is a ValueError, as Python code expects, and a
    RuntimeError, as PyTorch and tinygrad raise for the same mistakes, so code written against either
    catches it."""
