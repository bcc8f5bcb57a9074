"""Llama-family models on the paged KV cache."""

from engine.models.config import ModelConfig
from engine.models.llama import LlamaModel
from engine.models.loader import BUILTIN_MODEL_DIR, CheckpointError, from_hf_model, load_model

__all__ = ["ModelConfig", "LlamaModel", "load_model", "from_hf_model", "BUILTIN_MODEL_DIR", "CheckpointError"]
