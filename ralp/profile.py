"""Per-layer profile of a Keras model: parameters, forward FLOPs, activation sizes, cut points.

Why: the placement decision needs, for every place the model could be split, how
many parameters sit on each side, how many floats cross, and how much compute
each side does. All of it is derived analytically from layer configs and the
shapes recorded in the Keras graph (nothing runs forward), so it works for any
Sequential or functional model, nested models included, without code changes.

Conventions: one multiply-add = 2 FLOPs; numbers are per image, forward only.
Parameters count every weight (trainable and non-trainable, e.g. batch-norm
moving statistics), because a parameter server stores and ships all of them.
"""
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ralp.errors import UserError
from ralp.head_chain import head_chain
from ralp.sharding import creation_elements

ZERO_FLOP_TYPES = {
    "InputLayer", "Flatten", "Reshape", "Dropout", "SpatialDropout1D", "SpatialDropout2D",
    "SpatialDropout3D", "GaussianNoise", "GaussianDropout", "AlphaDropout", "ZeroPadding1D",
    "ZeroPadding2D", "ZeroPadding3D", "Cropping1D", "Cropping2D", "Cropping3D", "Permute",
    "RepeatVector", "Concatenate", "ActivityRegularization", "Masking", "Identity",
}
ELEMENTWISE_MERGE_TYPES = {"Add", "Subtract", "Multiply", "Average", "Maximum", "Minimum"}
ACTIVATION_TYPES = {"Activation", "ReLU", "LeakyReLU", "PReLU", "ELU", "ThresholdedReLU", "Softmax"}
NORMALIZATION_TYPES = {"BatchNormalization", "LayerNormalization", "GroupNormalization",
                       "UnitNormalization", "Normalization", "Rescaling"}
DENSE_TYPES = {"Dense", "EinsumDense"}
CONV_TYPES = {"Conv1D", "Conv2D", "Conv3D"}
# Normalization forward (statistics taken as given): subtract, divide, scale, shift.
NORMALIZATION_FLOPS_PER_ELEMENT = 4


@dataclass
class LayerProfile:
    """One top-level layer (a nested model is one row whose numbers include its insides)."""
    name: str
    type: str
    params: int
    trainable_params: int
    flops: int            # forward FLOPs per image
    out_floats: int       # output activation floats per image
    is_dense: bool
    dense_flops: int = 0  # the part of ``flops`` done by Dense layers (matmul throughput)
    weight_sizes: Tuple[int, ...] = ()  # elements of each of its variables


@dataclass
class ModelProfile:
    """Everything the cost model needs about a model, and the valid places to split it."""
    name: str
    input_shape: Tuple
    layers: List[LayerProfile]
    cut_points: List[str]
    notes: List[str] = field(default_factory=list)
    created: List[int] = field(default_factory=list)  # variables' elements in creation order, if known
    _tower_layers: Dict[str, frozenset] = field(default_factory=dict, repr=False)

    @property
    def params(self) -> int:
        return sum(l.params for l in self.layers)

    @property
    def trainable_params(self) -> int:
        return sum(l.trainable_params for l in self.layers)

    @property
    def variable_sizes(self) -> List[int]:
        """Every variable's elements in creation order (what PS tasks are sharded by); layer
        order, which is creation order for a Sequential model, when the build was not watched."""
        return list(self.created) or [size for layer in self.layers
                                      for size in (layer.weight_sizes or ((layer.params,) if layer.params else ()))]

    @property
    def flops(self) -> int:
        return sum(l.flops for l in self.layers)

    @property
    def dense_flops(self) -> int:
        return sum(l.dense_flops for l in self.layers)

    def layer(self, name: str) -> LayerProfile:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise UserError(f"no layer named {name!r} in {self.name}; layers: {', '.join(self.layer_names())}")

    def layer_names(self) -> List[str]:
        return [l.name for l in self.layers]

    def first_dense_cut(self) -> Optional[str]:
        """The last valid cut before the first Dense layer (the FC-on-PS split), or None."""
        names = self.layer_names()
        first_dense = next((i for i, l in enumerate(self.layers) if l.is_dense), None)
        if first_dense is None:
            return None
        before = [c for c in self.cut_points if names.index(c) < first_dense]
        return before[-1] if before else None

    def split_sizes(self, cut: str) -> Tuple[int, int, int, int, int]:
        """(P_tower, P_head, A floats per image at the cut, tower FLOPs, head FLOPs)."""
        tower = self.tower_layers(cut)
        p_tower = sum(l.params for l in self.layers if l.name in tower)
        f_tower = sum(l.flops for l in self.layers if l.name in tower)
        return (p_tower, self.params - p_tower, self.layer(cut).out_floats, f_tower, self.flops - f_tower)

    def tower_layers(self, cut: str) -> frozenset:
        if cut not in self._tower_layers:
            raise UserError(f"{cut!r} is not a valid cut point of {self.name}; "
                            f"valid: {', '.join(self.cut_points) or 'none'}")
        return self._tower_layers[cut]

    def head_chain(self, cut: str) -> Optional[List[int]]:
        """The head's Dense widths if the head after ``cut`` can be sharded (ralp/head_chain.py), else None."""
        return head_chain(self, cut)[0]

    def head_dense_flops(self, cut: str) -> int:
        tower = self.tower_layers(cut)
        return sum(l.dense_flops for l in self.layers if l.name not in tower)

    def to_json(self) -> Dict:
        """Every field as JSON types (bench/driver/profile_cache.py keeps zoo models' profiles on disk)."""
        return {"name": self.name, "input_shape": list(self.input_shape),
                "layers": [{**vars(l), "weight_sizes": list(l.weight_sizes)} for l in self.layers],
                "cut_points": list(self.cut_points), "notes": list(self.notes), "created": list(self.created),
                "tower_layers": {cut: sorted(names) for cut, names in self._tower_layers.items()}}

    @classmethod
    def from_json(cls, data: Dict) -> "ModelProfile":
        """The profile ``to_json`` gave, equal to it field by field."""
        return cls(data["name"], tuple(data["input_shape"]),
                   [LayerProfile(**{**l, "weight_sizes": tuple(l["weight_sizes"])}) for l in data["layers"]],
                   list(data["cut_points"]), list(data["notes"]), list(data["created"]),
                   {cut: frozenset(names) for cut, names in data["tower_layers"].items()})


# ----------------------------------------------------------------------------- graph access

def _elements(shape) -> int:
    dims = list(shape)[1:]
    if any(d is None for d in dims):
        raise UserError(f"shape {tuple(shape)} has unknown dimensions; build the model with a fixed input shape")
    return int(np.prod(dims)) if dims else 1


def _ensure_graph(model, input_shape=None):
    if not getattr(model, "_is_graph_network", False):
        if input_shape is not None and not model.built:
            model.build((None,) + tuple(input_shape))
        if not getattr(model, "_is_graph_network", False):
            raise UserError(f"model {model.name!r} is not a Sequential/functional graph with a known input; "
                            "build it with an Input(shape=...) or pass input_shape=")


def graph_nodes(model):
    """The model's own nodes in topological order (inputs first)."""
    nodes = []
    for depth in sorted(model._nodes_by_depth, reverse=True):
        nodes.extend(model._nodes_by_depth[depth])
    return nodes


def _node_shapes(node):
    ins = [tuple(t.shape) for t in node.keras_inputs]
    import tensorflow as tf
    outs = [tuple(t.shape) for t in tf.nest.flatten(node.outputs)]
    return ins, outs


def _propagated_shapes(model, input_shapes: Sequence[Tuple]) -> Dict[int, Tuple[list, list]]:
    """Node shapes of a nested model re-derived for concrete input shapes (its own graph may say None)."""
    import tensorflow as tf
    known = {str(id(t)): tuple(s) for t, s in zip(model.inputs, input_shapes)}
    result = {}
    for node in graph_nodes(model):
        stored_in, stored_out = _node_shapes(node)
        if node.is_input:
            ins = outs = [known.get(i, s) for i, s in zip(node.flat_output_ids, stored_out)]
        else:
            ins = [known.get(i, s) for i, s in zip(node.flat_input_ids, stored_in)]
            arg = tf.TensorShape(ins[0]) if len(ins) == 1 else [tf.TensorShape(s) for s in ins]
            try:
                outs = _flatten_shapes(node.layer.compute_output_shape(arg))
            except Exception:  # a layer without compute_output_shape: keep the recorded shapes
                outs = stored_out
        for i, s in zip(node.flat_output_ids, outs):
            known[i] = s
        result[id(node)] = (ins, outs)
    return result


def _flatten_shapes(shape_struct) -> List[tuple]:
    import tensorflow as tf
    if isinstance(shape_struct, tf.TensorShape):
        return [tuple(shape_struct.as_list())]
    if isinstance(shape_struct, (list, tuple)) and shape_struct and all(
            isinstance(d, (int, type(None))) for d in shape_struct):
        return [tuple(shape_struct)]
    out = []
    for s in (shape_struct.values() if isinstance(shape_struct, dict) else shape_struct):
        out.extend(_flatten_shapes(s))
    return out


def _model_nodes_of(model, layer):
    from keras.src.engine.functional import _make_node_key
    return [n for i, n in enumerate(layer._inbound_nodes)
            if _make_node_key(layer.name, i) in model._network_nodes]


# ----------------------------------------------------------------------------- FLOPs

def _activation_flops(layer, out_elems: int) -> int:
    act = getattr(layer, "activation", None)
    name = getattr(act, "__name__", str(act)) if act is not None else "linear"
    if name == "linear":
        return 0
    return 3 * out_elems if name == "softmax" else out_elems


def _plain_layer_flops(layer, ins, outs, notes) -> Tuple[int, int]:
    """(flops, dense_flops) of one call of a non-model layer."""
    kind = type(layer).__name__
    out_elems = sum(_elements(s) for s in outs)
    bias = out_elems if getattr(layer, "use_bias", False) else 0
    if kind in ZERO_FLOP_TYPES:
        return 0, 0
    if kind in DENSE_TYPES:
        in_features = ins[0][-1]
        rows = _elements(ins[0]) // in_features
        flops = 2 * rows * in_features * int(np.prod(outs[0][len(ins[0]) - 1:])) + bias
        flops += _activation_flops(layer, out_elems)
        return flops, flops
    if kind in CONV_TYPES:
        groups = getattr(layer, "groups", 1)
        c_in = ins[0][-1] if layer.data_format == "channels_last" else ins[0][1]
        macs = int(np.prod(layer.kernel_size)) * (c_in // groups) * out_elems
        return 2 * macs + bias + _activation_flops(layer, out_elems), 0
    if kind in ("DepthwiseConv2D", "DepthwiseConv1D"):
        return 2 * int(np.prod(layer.kernel_size)) * out_elems + bias + _activation_flops(layer, out_elems), 0
    if kind in ("SeparableConv1D", "SeparableConv2D"):
        c_in = ins[0][-1]
        spatial = out_elems // outs[0][-1]
        depthwise = 2 * int(np.prod(layer.kernel_size)) * c_in * layer.depth_multiplier * spatial
        pointwise = 2 * c_in * layer.depth_multiplier * out_elems
        return depthwise + pointwise + bias + _activation_flops(layer, out_elems), 0
    if kind in ("Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose"):
        c_out = outs[0][-1]
        macs = int(np.prod(layer.kernel_size)) * c_out * _elements(ins[0])
        return 2 * macs + bias + _activation_flops(layer, out_elems), 0
    if "GlobalAveragePooling" in kind or "GlobalMaxPooling" in kind:
        return _elements(ins[0]), 0
    if "Pooling" in kind:
        return int(np.prod(layer.pool_size)) * out_elems, 0
    if kind in NORMALIZATION_TYPES:
        return NORMALIZATION_FLOPS_PER_ELEMENT * out_elems, 0
    if kind in ACTIVATION_TYPES:
        if kind == "Softmax":
            return 3 * out_elems, 0
        return (_activation_flops(layer, out_elems) if kind == "Activation" else out_elems), 0
    if kind in ELEMENTWISE_MERGE_TYPES:
        return max(len(ins) - 1, 1) * out_elems, 0
    note = f"layer type {kind} not modelled: counted as 1 FLOP per output element"
    if note not in notes:
        notes.append(note)
    return out_elems, 0


def _is_model(layer) -> bool:
    import tensorflow as tf
    return isinstance(layer, tf.keras.Model)


def _model_flops(model, input_shapes, notes) -> Tuple[int, int]:
    """(flops, dense_flops) of a whole (nested) graph model, recursing into nested models."""
    _ensure_graph(model)
    needs_propagation = any(d is None for s in (tuple(t.shape) for t in model.inputs) for d in s[1:])
    shapes = _propagated_shapes(model, input_shapes) if needs_propagation else None
    flops = dense = 0
    for node in graph_nodes(model):
        if node.is_input:
            continue
        ins, outs = shapes[id(node)] if shapes else _node_shapes(node)
        f, d = _call_flops(node.layer, ins, outs, notes)
        flops, dense = flops + f, dense + d
    return flops, dense


def _call_flops(layer, ins, outs, notes) -> Tuple[int, int]:
    if _is_model(layer):
        return _model_flops(layer, ins, notes)
    return _plain_layer_flops(layer, ins, outs, notes)


# ----------------------------------------------------------------------------- cut points

def _cut_towers(model, nodes) -> Dict[str, frozenset]:
    """Map each valid cut layer -> names of the layers on the tower side.

    A cut after node n is valid when n has one output tensor T, the tower (n and all
    its ancestors) contains every model input, and T is the only tensor produced in
    the tower that is consumed outside it (or is a model output). Layers called more
    than once (shared weights) must fall wholly on one side.
    """
    producer, consumers = {}, {}
    for i, n in enumerate(nodes):
        for t in n.flat_output_ids:
            producer[t] = i
        for t in n.flat_input_ids:
            consumers.setdefault(t, []).append(i)
    parents = [[producer[t] for t in n.flat_input_ids if t in producer] for n in nodes]
    ancestors: List[set] = []
    for i in range(len(nodes)):  # topological order: parents are already done
        acc = {i}
        for p in parents[i]:
            acc |= ancestors[p]
        ancestors.append(acc)
    input_nodes = {i for i, n in enumerate(nodes) if n.is_input}
    output_ids = {str(id(t)) for t in model.outputs}
    layer_nodes: Dict[str, set] = {}
    for i, n in enumerate(nodes):
        layer_nodes.setdefault(n.layer.name, set()).add(i)

    towers = {}
    for i, n in enumerate(nodes):
        if n.is_input or len(n.flat_output_ids) != 1 or len(layer_nodes[n.layer.name]) != 1:
            continue
        tower = ancestors[i]
        if not input_nodes <= tower or n.flat_output_ids[0] in output_ids:
            continue
        crossing = {t for j in tower for t in nodes[j].flat_output_ids
                    if t in output_ids or any(c not in tower for c in consumers.get(t, []))}
        if crossing != {n.flat_output_ids[0]}:
            continue
        split_layers = [name for name, idx in layer_nodes.items() if idx & tower and idx - tower]
        if split_layers:
            continue
        towers[n.layer.name] = frozenset(nodes[j].layer.name for j in tower if not nodes[j].is_input)
    return towers


# ----------------------------------------------------------------------------- entry point

def _count(weights) -> int:
    return int(sum(int(np.prod(w.shape)) for w in weights))


def build_recording(build):
    """(model, elements of each variable in creation order) for ``build()``. A functional
    model lists its layers in graph order but creates their variables in call order, and
    greedy sharding (ralp/sharding.py) depends on the order."""
    import tensorflow as tf

    sizes: List[int] = []

    def record(next_creator, **kwargs):
        size = creation_elements(kwargs)
        if size:
            sizes.append(size)
        return next_creator(**kwargs)

    with tf.variable_creator_scope(record):
        model = build()
    return model, sizes


def profile_built(build) -> ModelProfile:
    """Build a model with ``build()`` and profile it, keeping its variables' creation order."""
    model, sizes = build_recording(build)
    profile = profile_model(model)
    profile.created = sizes
    return profile


def profile_model(model, input_shape: Optional[Tuple] = None) -> ModelProfile:
    """Profile a built Sequential or functional Keras model (see module docstring)."""
    _ensure_graph(model, input_shape)
    notes: List[str] = []
    nodes = graph_nodes(model)
    rows = []
    for layer in model.layers:
        kind = type(layer).__name__
        if kind == "InputLayer":
            continue
        calls = _model_nodes_of(model, layer)
        flops = dense = out_floats = 0
        for k, node in enumerate(calls):
            ins, outs = _node_shapes(node)
            if _is_model(layer) and any(d is None for s in ins for d in s[1:]):
                raise UserError(f"nested model {layer.name!r} has unknown input dimensions")
            f, d = _call_flops(layer, ins, outs, notes)
            flops, dense = flops + f, dense + d
            if k == 0:
                out_floats = sum(_elements(s) for s in outs)
        rows.append(LayerProfile(
            name=layer.name, type=kind, params=_count(layer.weights),
            trainable_params=_count(layer.trainable_weights), flops=int(flops), out_floats=int(out_floats),
            is_dense=kind in DENSE_TYPES, dense_flops=int(dense),
            weight_sizes=tuple(int(np.prod(w.shape)) for w in layer.weights)))
    towers = _cut_towers(model, nodes)
    order = [r.name for r in rows]
    cut_points = [name for name in order if name in towers]
    input_shape = tuple(model.inputs[0].shape[1:]) if model.inputs else tuple(input_shape or ())
    return ModelProfile(name=model.name, input_shape=input_shape, layers=rows, cut_points=cut_points,
                        notes=notes, _tower_layers=towers)
