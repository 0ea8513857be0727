"""The CNN model zoo, registered by name (see registry.py)."""
from bench.models.build import get_model
from bench.models.registry import MODELS, ModelSpec, model_names

__all__ = ["MODELS", "ModelSpec", "get_model", "model_names"]
