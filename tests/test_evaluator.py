"""The one evaluator of a step's stages (ralp/evaluator.py), against schedules worked by hand and
closed forms from outside the code: a linear pipeline's makespan, a single link draining
gradients as a backward produces them, contention for one resource (turns, and fair shares
between flows), several hosts' resources, the bound, and its errors."""
import itertools

import pytest

from ralp.evaluator import (PS_CPU, PS_RX, WORKER_CPU, WORKER_RX, WORKER_TX, Stage, bound, evaluate, on_host)


def test_a_chain_is_the_sum_and_independent_resources_overlap():
    chain = [Stage("a", {WORKER_CPU: 1.0}), Stage("b", {WORKER_TX: 2.0}, ("a",)), Stage("c", {PS_CPU: 3.0}, ("b",))]
    assert evaluate(chain).step_s == pytest.approx(6.0)
    apart = [Stage("a", {WORKER_CPU: 1.0}), Stage("b", {WORKER_TX: 2.0}), Stage("c", {PS_CPU: 3.0})]
    assert evaluate(apart).step_s == pytest.approx(3.0)
    # one resource: they take turns, in the list's order when they could start together
    shared = [Stage("a", {WORKER_CPU: 1.0}), Stage("b", {WORKER_CPU: 2.0})]
    schedule = evaluate(shared)
    assert schedule.step_s == pytest.approx(3.0) and schedule.start == {"a": 0.0, "b": 1.0}


@pytest.mark.parametrize("m,times", list(itertools.product((1, 2, 5, 16), [(1.0, 3.0, 2.0), (4.0, 1.0, 1.0)])))
def test_a_linear_pipeline_takes_its_stages_once_and_the_slowest_m_minus_1_more_times(m, times):
    """The textbook makespan of m items through stages on their own resources: sum + (m-1) x max."""
    resources = (WORKER_CPU, WORKER_TX, PS_CPU)
    stages = []
    for j in range(m):
        for i, (t, r) in enumerate(zip(times, resources)):
            after = ((f"s{i - 1} {j}",) if i else ()) + ((f"s{i} {j - 1}",) if j else ())
            stages.append(Stage(f"s{i} {j}", {r: t / m}, after))
    expected = sum(times) / m + (m - 1) * max(times) / m
    assert evaluate(stages).step_s == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize("push", [0.1, 1.0, 10.0])
def test_a_link_drains_each_layers_gradients_as_the_backward_produces_them(push):
    """Layers finish their backward at ready_k and hand the link p_k of ``push`` seconds: the last
    byte leaves at max over k of (ready_k + what is handed over from k on), a work-conserving
    queue's closed form."""
    flops, params = (0.5, 0.3, 0.2), (0.7, 0.1, 0.2)  # in backward order
    backward = 2.0
    stages, prev = [], ()
    for k, (f, p) in enumerate(zip(flops, params)):
        stages.append(Stage(f"b{k}", {WORKER_CPU: backward * f}, prev))
        stages.append(Stage(f"push{k}", {WORKER_TX: push * p}, (f"b{k}",)))
        prev = (f"b{k}",)
    ready = list(itertools.accumulate(backward * f for f in flops))
    expected = max(ready[k] + push * sum(params[k:]) for k in range(3))
    assert evaluate(stages).step_s == pytest.approx(expected, rel=1e-12)


def test_a_transfer_holds_its_link_for_its_latency_and_both_ends():
    up = Stage("up", {WORKER_TX: 1.0, PS_RX: 2.0}, latency=0.5)
    assert up.seconds == 2.5
    schedule = evaluate([up, Stage("again", {PS_RX: 1.0}), Stage("other way", {WORKER_RX: 1.0})])
    assert schedule.start["again"] == 2.5 and schedule.start["other way"] == 0.0
    held = Stage("held", {WORKER_TX: 1.0}, hold=3.0)
    assert evaluate([held]).step_s == 3.0


@pytest.mark.parametrize("late,alone", [(0.0, 1.0), (1.0, 1.0), (2.5, 1.0), (1.0, 5.0)])
def test_flows_share_a_link_fairly_and_a_flows_own_stages_take_turns(late, alone):
    """Processor sharing worked by hand: flow A needs 3 s of the link alone from 0; flow B, ``alone``
    seconds of it, starts at ``late``. While both move, each gets half the rate; the one with
    less left ends first, the other has the link to itself after."""
    stages = [Stage("wait", {WORKER_CPU: late}), Stage("a", {WORKER_TX: 3.0}, flow="serving"),
              Stage("b", {WORKER_TX: alone}, ("wait",), flow="pushing")]
    schedule = evaluate(stages)
    left = max(0.0, 3.0 - late)
    both = 2 * min(left, alone)  # seconds both move, at half rate each
    first, rest = late + both, abs(left - alone)
    assert schedule.end["a"] == pytest.approx(3.0 if late >= 3 else (first + rest if left > alone else first))
    assert schedule.end["b"] == pytest.approx(late + alone if late >= 3 else (first if left > alone else first + rest))
    # a flow's own stages take turns (one connection), and a stage of no flow waits for every flow
    turns = evaluate([Stage("a1", {WORKER_TX: 1.0}, flow="f"), Stage("a2", {WORKER_TX: 1.0}, flow="f"),
                      Stage("x", {WORKER_TX: 1.0})])
    assert (turns.start["a2"], turns.start["x"], turns.step_s) == (1.0, 2.0, 3.0)
    # a flow on two links moves at its slower share: B shares the rx with C, not the tx
    slow = evaluate([Stage("b", {WORKER_TX: 2.0, WORKER_RX: 2.0}, flow="b"), Stage("c", {WORKER_RX: 2.0}, flow="c")])
    assert slow.end["b"] == pytest.approx(4.0) and slow.end["c"] == pytest.approx(4.0)


def test_each_host_has_its_own_resources():
    """The same resource on another host (``on_host``) runs beside the priced host's, is checked as
    that resource, and counts in the bound as that host's: the busiest host sets it."""
    other = on_host(WORKER_CPU, "other")
    assert other == "worker cpu@other"
    stages = [Stage("mine", {WORKER_CPU: 2.0}), Stage("theirs", {other: 3.0}), Stage("more", {other: 1.0})]
    schedule = evaluate(stages)
    assert schedule.start == {"mine": 0.0, "theirs": 0.0, "more": 3.0} and schedule.step_s == 4.0
    assert schedule.bottleneck() == "worker compute"
    assert bound(stages, 0.0)[1][WORKER_CPU] == 4.0
    with pytest.raises(ValueError, match="unknown resources \\['gpu@other'\\]"):
        evaluate([Stage("a", {"gpu@other": 1.0})])
    with pytest.raises(ValueError, match="'a' is part of a flow"):
        evaluate([Stage("a", {WORKER_CPU: 1.0}, flow="f")])


def test_the_bottleneck_is_what_holds_the_critical_path():
    # the link's 3 s are off the path (beside the compute); the CPU's 4 s are on it
    stages = [Stage("fwd", {WORKER_CPU: 2.0}), Stage("send", {WORKER_TX: 3.0}), Stage("bwd", {WORKER_CPU: 2.0}, ("fwd",))]
    schedule = evaluate(stages)
    assert schedule.critical == ["bwd", "fwd"] and schedule.bottleneck() == "worker compute"
    stages.append(Stage("after", {PS_CPU: 0.5}, ("send",)))
    stages.append(Stage("last", {WORKER_TX: 2.0}, ("bwd", "after")))
    schedule = evaluate(stages)
    assert schedule.step_s == pytest.approx(6.0) and schedule.bottleneck() == "worker compute"


def test_the_bound_is_the_busiest_resource_without_order_or_overhead():
    stages = [Stage("a", {WORKER_CPU: 1.0}), Stage("b", {WORKER_TX: 2.0}, ("a",)),
              Stage("c", {WORKER_CPU: 1.5}, ("b",)), Stage("t", {WORKER_CPU: 9.0}, ("c",), overhead=True)]
    step, timed = bound(stages, latency_s=0.25)
    assert step == pytest.approx(2.5) and timed[WORKER_CPU] == pytest.approx(2.5)
    assert timed[WORKER_TX] == pytest.approx(2.25)
    assert evaluate(stages).step_s == pytest.approx(13.5)


def test_a_malformed_step_is_refused_naming_the_stage():
    with pytest.raises(ValueError, match="'b' waits for \\['c'\\]"):
        evaluate([Stage("a", {}), Stage("b", {}, ("c",)), Stage("c", {})])
    with pytest.raises(ValueError, match="two stages are called 'a'"):
        evaluate([Stage("a", {}), Stage("a", {})])
    with pytest.raises(ValueError, match="unknown resources \\['gpu'\\]"):
        evaluate([Stage("a", {"gpu": 1.0})])


def test_only_sync_ps_has_a_ps_layout():
    """A run's --ps-placement colocated (the headline sweep's auto rows ask it) lays out sync PS
    only: the split strategies keep their head on the PS host's CPU, Horovod has no PS."""
    from bench.driver.planning import model_profile
    from ralp.cost_model import predict
    from ralp.hardware import load_hardware

    profile, hw = model_profile("alexnet_cifar"), load_hardware("v100-10gbe", bandwidth="1gbit")
    for strategy in ("horovod", "ralp", "ralp-hybrid"):
        dedicated, colocated = (predict(profile, strategy, workers=2, batch_size=32, hardware=hw, ps_placement=pl)
                                for pl in ("dedicated", "colocated"))
        assert colocated.step_time_s == dedicated.step_time_s and colocated.breakdown == dedicated.breakdown, strategy
    dedicated, colocated = (predict(profile, "ps", workers=2, batch_size=32, hardware=hw, ps_placement=pl)
                            for pl in ("dedicated", "colocated"))
    assert colocated.step_time_s != dedicated.step_time_s
