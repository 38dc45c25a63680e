"""PyTorch's deterministic mode, cuBLAS's workspace and the CPU's instruction set."""
