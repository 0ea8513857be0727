"""Split a Keras model at a cut point into a tower (workers) and a head (PS).

Why: FC-on-PS runs the layers before the cut data-parallel on the workers and the
layers after it once on the PS. Both halves must share the original layer objects
(hence the same variables), so a run that trains the halves trains the model, and
``head(tower(x)) == model(x)`` exactly. The tower is the functional sub-graph from
the model inputs to the cut tensor; the head is rebuilt by re-calling, on a new
Input, every layer after the cut in topological order, following the graph.
"""
from typing import Dict, List, Optional, Tuple

from ralp.errors import UserError
from ralp.profile import _ensure_graph, graph_nodes, profile_model


def layer_chain(model) -> Optional[List]:
    """``model``'s layers in call order if each takes exactly the previous one's single output (a
    chain from its one input to its one output, as every head after a cut in this suite), else None.
    Why: a chain's backward can be taken one layer at a time (strategies/ralp_placement.py orders the
    head's input gradient before its weight gradients); a branching head is differentiated whole."""
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return None
    nodes = [n for n in graph_nodes(model) if not n.is_input]
    previous = str(id(model.inputs[0]))
    for node in nodes:
        if list(node.flat_input_ids) != [previous] or len(node.flat_output_ids) != 1:
            return None
        previous = node.flat_output_ids[0]
    return [n.layer for n in nodes] if previous == str(id(model.outputs[0])) else None


def _head_nodes(model, cut_node):
    """Nodes that are not ancestors of the cut node (nor the cut node itself), in topological order."""
    nodes = graph_nodes(model)
    producer = {t: n for n in nodes for t in n.flat_output_ids}
    tower, stack = set(), [cut_node]
    while stack:
        node = stack.pop()
        if id(node) in tower:
            continue
        tower.add(id(node))
        stack.extend(producer[t] for t in node.flat_input_ids if t in producer)
    return [n for n in nodes if id(n) not in tower and not n.is_input]


def split_model(model, cut: str, profile=None) -> Tuple["tf.keras.Model", "tf.keras.Model"]:
    """(tower, head) sharing ``model``'s layers; ``cut`` is a name from ``profile.cut_points``."""
    import tensorflow as tf

    _ensure_graph(model)
    profile = profile or profile_model(model)
    if cut not in profile.cut_points:
        raise UserError(f"cannot cut {profile.name} after {cut!r}; valid cut points: "
                        f"{', '.join(profile.cut_points) or 'none'}")
    cut_node = next(n for n in graph_nodes(model) if n.layer.name == cut and not n.is_input)
    cut_tensor = tf.nest.flatten(cut_node.outputs)[0]

    inputs = model.inputs if len(model.inputs) > 1 else model.inputs[0]
    tower = tf.keras.Model(inputs, cut_tensor, name=f"{model.name}_tower")

    head_input = tf.keras.Input(shape=tuple(cut_tensor.shape[1:]), dtype=cut_tensor.dtype, name=f"{cut}_activations")
    computed: Dict[str, object] = {cut_node.flat_output_ids[0]: head_input}
    for node in _head_nodes(model, cut_node):
        missing = [t for t in node.flat_input_ids if t not in computed]
        if missing:  # cannot happen for a valid cut point; guards against a stale profile
            raise UserError(f"layer {node.layer.name!r} needs a tensor from before the cut {cut!r}")
        args, kwargs = _mapped_arguments(node, computed)
        outputs = node.layer(*args, **kwargs)
        for tensor_id, value in zip(node.flat_output_ids, tf.nest.flatten(outputs)):
            computed[tensor_id] = value
    outputs = [computed[str(id(t))] for t in model.outputs]
    head = tf.keras.Model(head_input, outputs if len(outputs) > 1 else outputs[0], name=f"{model.name}_head")
    return tower, head


def _mapped_arguments(node, computed):
    """The node's call arguments with each recorded KerasTensor replaced by its new tensor."""
    import tensorflow as tf

    flat = list(node._flat_arguments)
    for tensor_id, position in node._keras_inputs_ids_and_indices:
        flat[position] = computed[tensor_id]
    return tf.nest.pack_sequence_as((node.call_args, node.call_kwargs), flat)
