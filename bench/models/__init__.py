"""The CNN model zoo, registered by name (see registry.py)."""
from bench.models.registry import MODELS, ModelSpec, get_model, model_names

__all__ = ["MODELS", "ModelSpec", "get_model", "model_names"]
