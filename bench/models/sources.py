"""Where a model comes from, read from its --model spelling without TensorFlow.

Beside the zoo's names, a user brings their own network four ways (README, "Bring your
own model"):
- ``keras:NAME``: any ``tf.keras.applications`` model, built with ``weights=None``
  (nothing is downloaded) and logits out (``classifier_activation=None``);
- ``path/to/model.keras`` or ``.h5``: a saved model (architecture; its weights if saved);
- ``package.module:function`` or ``path/to/file.py:function``: a function returning a
  built ``tf.keras.Model`` (called with ``input_shape=``/``num_classes=`` when it takes them).

This module only checks the spelling (so settings validate with no TensorFlow); building and
the checks that need the built model are bench/models/build.py's. Every rank rebuilds the
model from the same spelling and seed, so a file must exist at the same path on every host:
its SHA-256 (``model_digest``) is taken by the driver, recorded in the row, and checked by
every rank before it builds anything.
"""
import hashlib
import importlib.util
import os
import re
import sys
from dataclasses import replace
from typing import Optional, Tuple

from bench.core.errors import UserError
from bench.models.registry import MODELS, ModelSpec

KERAS_PREFIX = "keras:"
SAVED_SUFFIXES = (".keras", ".h5", ".hdf5")
_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def parse_shape(text) -> Optional[Tuple[int, int, int]]:
    """--input-shape: "H,W,C" (or "HxWxC", or a list) -> (H, W, C); None when not given."""
    if text is None or text == "" or text == []:
        return None
    parts = list(text) if isinstance(text, (list, tuple)) else re.split(r"[,x]", str(text).strip())
    try:
        dims = tuple(int(p) for p in parts)
    except (TypeError, ValueError):
        dims = ()
    if len(dims) != 3 or min(dims) < 1:
        raise UserError(f"--input-shape must be HEIGHT,WIDTH,CHANNELS with positive sizes, e.g. 224,224,3; "
                        f"got {text!r}")
    return dims


def format_shape(shape, sep: str = ",") -> Optional[str]:
    """(H, W, C) -> "H,W,C", the form --input-shape and rows take ("HxWxC" with sep="x")."""
    return sep.join(str(int(d)) for d in shape) if shape else None


def get_spec(spelling: str, input_shape=None, classes=None) -> ModelSpec:
    """The spec of any --model spelling (a zoo name, keras:NAME, a saved model file, or
    module:function / file.py:function), with --input-shape/--classes applied; a bad spelling is
    one line naming the fix. TF-free."""

    shape = parse_shape(input_shape)
    if classes is not None and (isinstance(classes, bool) or int(classes) < 2):
        raise UserError(f"--classes must be an integer of at least 2, got {classes!r}")
    classes = int(classes) if classes is not None else None
    spelling = str(spelling).strip()
    if spelling in MODELS:
        zoo = MODELS[spelling]
        return replace(zoo, input_shape=shape or zoo.input_shape, num_classes=classes or zoo.num_classes)
    if spelling.startswith(KERAS_PREFIX):
        name = spelling[len(KERAS_PREFIX):]
        if not name.isidentifier():
            raise UserError(f"--model {spelling!r}: after 'keras:' give a tf.keras.applications name, "
                            "e.g. keras:MobileNetV2")
        return ModelSpec(spelling, "", shape, classes, False, f"tf.keras.applications.{name} (weights=None)",
                         kind="keras", source=name)
    if spelling.lower().endswith(SAVED_SUFFIXES):
        _existing_file(spelling, spelling)
        return ModelSpec(spelling, "", shape, classes, False, f"saved model {os.path.basename(spelling)}",
                         kind="file", source=spelling)
    target, sep, function = spelling.rpartition(":")
    if sep and target and function.isidentifier():
        if target.endswith(".py"):
            _existing_file(spelling, target)
        elif not _DOTTED.match(target):
            raise UserError(f"--model {spelling!r}: before ':' give a module (package.module) or a .py file")
        return ModelSpec(spelling, "", shape, classes, False, f"{function}() from {target}",
                         kind="function", source=spelling)
    raise UserError(f"unknown model {spelling!r}; give a zoo name ({', '.join(MODELS)}), keras:NAME, a .keras/.h5 "
                    "file, or module:function / file.py:function returning a tf.keras.Model")


def _existing_file(spelling: str, path: str):
    if not os.path.isfile(path):
        raise UserError(f"--model {spelling!r}: no file {path!r} (from {os.getcwd()}); every host needs it at "
                        "the same path")


def model_file(spec) -> Optional[str]:
    """The file a model is built from (None for the zoo and Keras applications)."""
    if spec.kind == "file":
        return spec.source
    if spec.kind == "function":
        target = spec.source.rpartition(":")[0]
        if target.endswith(".py"):
            return target

        importable_from_cwd()
        try:
            found = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            raise UserError(f"--model {spec.name!r}: cannot find module {target!r} ({exc}); is it on PYTHONPATH?")
        if found is None:
            raise UserError(f"--model {spec.name!r}: no module {target!r} on this host's Python path; install it "
                            "or give path/to/file.py:function")
        return found.origin
    return None


def model_digest(spec) -> Optional[str]:
    """SHA-256 of the file the model comes from, so every rank can check it builds the same one."""
    path = model_file(spec)
    if path is None:
        return None
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def check_digest(spec, expected: Optional[str], host: str = ""):
    """On a rank: the model's file must be the one the driver hashed."""
    if not expected:
        return
    path = model_file(spec)
    if path is None or not os.path.isfile(path):
        raise UserError(f"--model {spec.name!r}: {path or 'its file'} is missing on host {host or '?'}; copy the "
                        "same file to every host at the same path")
    got = model_digest(spec)
    if got != expected:
        raise UserError(f"--model {spec.name!r}: {path} on host {host or '?'} differs from the driver's (sha256 "
                        f"{got[:12]} != {expected[:12]}); copy the same file to every host")


def importable_from_cwd():
    """Put the working directory on the module path, as ``python -m`` does: ``--model
    mypackage.nets:build`` then finds a package beside the user, whether ``ralp-bench`` runs
    as a console script (whose path starts at its bin directory) or as ``python -m``."""
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:
        sys.path.insert(0, cwd)
