"""Ahead-of-time builds of the Triton kernels for real GPUs, without a GPU."""
