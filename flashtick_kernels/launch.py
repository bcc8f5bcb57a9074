"""Checks shared by the Triton launchers: supported dtypes, and that the tensors can be launched on."""

from __future__ import annotations

import os

import torch

from flashtick_kernels.metadata import RaggedBatch

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")
DTYPES = (torch.float32, torch.float16, torch.bfloat16)


def check_launchable(tensor: torch.Tensor, name: str, meta: RaggedBatch) -> None:
    """``tensor`` must be on CUDA (or the interpreter must be on) and ``meta`` built for its device."""
    if tensor.device.type != "cuda" and not INTERPRETED:
        raise ValueError(f"the Triton kernel needs CUDA tensors, got {tensor.device}; "
                         "set TRITON_INTERPRET=1 before import, or use the torch backend")
    meta_device = torch.device(meta.device)  # "cuda" (no index) means the current device, as in .to()
    if meta_device.type != tensor.device.type or meta_device.index not in (None, tensor.device.index):
        raise ValueError(f"meta was built for {meta.device} but {name} is on {tensor.device}: "
                         f"build RaggedBatch(device={name}.device)")
