"""Seeds, per-sample and per-step keys, and the process's host RNG states."""
