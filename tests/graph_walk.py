"""What a traced TensorFlow op waits for: the order tests of the hybrid and the sharded head
(tests/test_hybrid.py, tests/test_sharded_head.py) walk the graph with it."""


def ancestors(ops):
    """Every op some op in ``ops`` waits for, through data and control edges."""
    seen, todo = set(), list(ops)
    while todo:
        op = todo.pop()
        for parent in [t.op for t in op.inputs] + list(op.control_inputs):
            if parent not in seen:
                seen.add(parent)
                todo.append(parent)
    return seen
