"""Is the head after a cut a plain chain of Dense layers? (what a sharded hybrid head needs)

Why a module of its own: the hybrid can shard its head over S PS tasks (strategies/sharded_head.py)
only when the head is Flatten/Reshape followed by Dense layers, each consuming the previous
one's output; the cost model must know the same thing, and why not, from the profile alone
(no TensorFlow: the cost model and the analyzer run without it). A profile records no graph
edges, so chaining is checked through the sizes: Dense layer i must hold in_i x H_i kernel
elements (+ H_i bias) where in_0 is the floats per image at the cut and in_i = H_{i-1}; a
Dense layer applied to anything else (an unflattened tensor, a side branch) fails that check.
"""
from typing import List, Optional, Tuple

RESHAPING = ("Flatten", "Reshape")  # parameterless, keep the floats per image


def head_chain(profile, cut: str) -> Tuple[Optional[List[int]], str]:
    """(output widths H_0..H_{n-1} of the head's Dense layers, "") when the head after ``cut``
    is such a chain; (None, why not) otherwise."""
    tower = profile.tower_layers(cut)
    width = profile.layer(cut).out_floats
    widths: List[int] = []
    for layer in (l for l in profile.layers if l.name not in tower):
        if layer.type in RESHAPING and not widths and layer.params == 0:
            continue
        if layer.type != "Dense":
            return None, (f"the head after {cut!r} has a {layer.type} layer ({layer.name!r}); a sharded head "
                          "needs Flatten/Reshape then a plain chain of Dense layers")
        out = layer.out_floats
        shapes = {(width * out,), (width * out, out)}
        if layer.params not in (width * out, width * out + out) or (layer.weight_sizes and
                                                                    tuple(layer.weight_sizes) not in shapes):
            return None, (f"Dense layer {layer.name!r} does not take the {width:,} floats before it as its input "
                          "features; a sharded head needs a plain chain of Dense layers")
        widths.append(out)
        width = out
    if not widths:
        return None, f"the head after {cut!r} has no Dense layer"
    return widths, ""
