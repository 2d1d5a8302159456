"""lina: linear-attention kernels for NVIDIA Hopper, as PyTorch operators with FLA's interface."""
