"""Build any model --model accepts with TensorFlow, and check what only the built model tells.

The registry and the spellings (registry.py, sources.py) are TF-free so settings validate
without TensorFlow; here a spec becomes a ``tf.keras.Model``. ``check_built`` is what the
driver runs once before any rank starts: every strategy needs a functional or Sequential
graph (the profiler and RALP's cut read its layers), a fixed input shape (the data is shaped
from it) and logits out (every strategy uses the same ``from_logits`` loss).

Every build starts Keras's layer-name counters afresh (``fresh_layer_names``): a user's layers
are rarely named by hand, and a cut travels between processes as a layer name, so one spelling
must name its layers alike in the driver, the calibration subprocess and every rank.
"""
import importlib
import importlib.util
import inspect
import os
import sys
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Tuple, Union

from bench.core.errors import UserError
from bench.models.registry import ModelSpec
from bench.models.sources import get_spec, importable_from_cwd


def get_model(model: Union[str, ModelSpec], seed: int = None):
    """Build a fresh model (a --model spelling or a ModelSpec, which carries --input-shape and
    --classes). With ``seed`` the initial weights are reproducible across processes, which is
    what lets every strategy start from the same point."""
    import tensorflow as tf

    spec = model if isinstance(model, ModelSpec) else get_spec(model)
    fresh_layer_names()
    if seed is not None:
        tf.keras.utils.set_random_seed(seed)
    if spec.kind == "zoo":
        module, function = spec.builder.split(":")
        return getattr(importlib.import_module(module), function)(spec.input_shape, spec.num_classes)
    if spec.kind == "keras":
        return _keras_application(spec)
    if spec.kind == "file":
        try:
            return tf.keras.models.load_model(spec.source, compile=False)
        except Exception as exc:  # Keras raises many kinds; each means the file is not a model
            raise UserError(f"--model {spec.name!r}: the file does not load as a Keras model "
                            f"({type(exc).__name__}: {str(exc).splitlines()[0][:160]})") from None
    return _from_function(spec)


def fresh_layer_names():
    """Restart Keras's layer-name counters, so a model built here is named as in any process.

    A layer not named by hand gets a per-process number (``flatten``, then ``flatten_1`` in the
    process's second build). The driver builds a model several times (check, profile), the
    calibration subprocess and every rank once each: without this, the cut the driver picks
    ('flatten_1') names no layer on a rank ('flatten'). Only the name counters are reset:
    ``clear_session`` would also drop the default graph and the eager kernel cache under a rank
    already connected to its TF cluster."""
    import tensorflow as tf

    tf.keras.backend.reset_uids()


def _keras_application(spec: ModelSpec):
    import tensorflow as tf

    build = getattr(tf.keras.applications, spec.source, None)
    if build is None or not callable(build):
        known = sorted(n for n in dir(tf.keras.applications) if n[:1].isupper())
        raise UserError(f"--model {spec.name!r}: tf.keras.applications has no {spec.source!r}; e.g. "
                        f"{', '.join(known[:8])}, ...")
    kwargs = {"weights": None, "include_top": True, "classes": spec.num_classes or 1000}
    if spec.input_shape:
        kwargs["input_shape"] = spec.input_shape
    if "classifier_activation" in inspect.signature(build).parameters:
        kwargs["classifier_activation"] = None
    try:
        return build(**kwargs)
    except ValueError as exc:
        raise UserError(f"--model {spec.name!r}: {str(exc).splitlines()[0][:200]}") from None


def _from_function(spec: ModelSpec):
    target, _, name = spec.source.rpartition(":")
    try:
        if target.endswith(".py"):
            module_name = "ralp_user_model_" + os.path.basename(target)[:-3].replace("-", "_")
            found = importlib.util.spec_from_file_location(module_name, target)
            module = importlib.util.module_from_spec(found)
            sys.modules[module_name] = module
            found.loader.exec_module(module)
        else:
            importable_from_cwd()
            module = importlib.import_module(target)
    except UserError:
        raise
    except Exception as exc:
        raise UserError(f"--model {spec.name!r}: importing {target} failed ({type(exc).__name__}: "
                        f"{str(exc).splitlines()[0][:160] if str(exc) else ''})") from None
    function = getattr(module, name, None)
    if not callable(function):
        raise UserError(f"--model {spec.name!r}: {target} has no function {name!r}")
    params = inspect.signature(function).parameters
    wanted = {"input_shape": spec.input_shape, "num_classes": spec.num_classes, "classes": spec.num_classes}
    kwargs = {k: v for k, v in wanted.items() if k in params and v is not None}
    model = function(**kwargs)
    import tensorflow as tf

    if not isinstance(model, tf.keras.Model):
        raise UserError(f"--model {spec.name!r}: {name}() returned {type(model).__name__}, not a tf.keras.Model")
    return model


@dataclass(frozen=True)
class BuiltFacts:
    input_shape: Tuple[int, int, int]
    num_classes: int


def check_built(model, spec: ModelSpec) -> BuiltFacts:
    """What every strategy needs of a model, refused with the fix when missing."""
    import tensorflow as tf

    if not (isinstance(model, tf.keras.Sequential) or getattr(model, "_is_graph_network", False)):
        raise UserError(f"--model {spec.name!r} is a subclassed Keras model, whose layers the profiler cannot see; "
                        "give a functional or Sequential model (tf.keras.Input(...) -> layers -> tf.keras.Model)")
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        raise UserError(f"--model {spec.name!r} has {len(model.inputs)} inputs and {len(model.outputs)} outputs; "
                        "ralp-bench trains image classifiers: one image input, one logits output")
    shape = tuple(model.inputs[0].shape[1:])
    if len(shape) != 3 or any(d is None for d in shape):
        raise UserError(f"--model {spec.name!r} has input shape {shape}, not a fixed HEIGHT,WIDTH,CHANNELS; "
                        "build it with a fixed shape, or pass --input-shape H,W,C")
    out = tuple(model.outputs[0].shape[1:])
    if len(out) != 1 or out[0] is None or out[0] < 2:
        raise UserError(f"--model {spec.name!r} outputs shape {out}; it must end in one logit per class")
    last = model.layers[-1]
    if getattr(getattr(last, "activation", None), "__name__", "") == "softmax" or type(last).__name__ == "Softmax":
        raise UserError(f"--model {spec.name!r} ends in a softmax; end it in logits (activation=None on the last "
                        "layer): every strategy uses the same from_logits loss")
    if spec.num_classes and out[0] != spec.num_classes:
        raise UserError(f"--model {spec.name!r} has {out[0]} outputs, not --classes {spec.num_classes}")
    if spec.input_shape and tuple(spec.input_shape) != tuple(int(d) for d in shape):
        raise UserError(f"--model {spec.name!r} takes {shape}, not --input-shape "
                        f"{','.join(map(str, spec.input_shape))}; drop --input-shape or rebuild it at that shape")
    return BuiltFacts(tuple(int(d) for d in shape), int(out[0]))


@lru_cache(maxsize=32)
def settled_spec(spec: ModelSpec, check: bool = True) -> ModelSpec:
    """``spec`` with its input shape and classes known: the zoo's own, else the built model's
    (the driver builds it once, here, and checks it before anything starts; a rank told both
    by the driver, ``check=False``, builds nothing here)."""
    if spec.kind == "zoo" or (not check and spec.input_shape and spec.num_classes):
        return spec
    facts = check_built(get_model(spec, seed=0), spec)
    return replace(spec, input_shape=facts.input_shape, num_classes=facts.num_classes)
