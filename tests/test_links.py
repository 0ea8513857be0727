"""One link description (ralp/links.py) read by every layer: tc shaping, the row, the cost model.

The defect this guards: --ps-bandwidth and --latency shaped the emulated links but never
reached the cost model, so predictions for asymmetric or delayed links were wrong.
"""
import pytest

from bench.core.config import RunConfig
from bench.core.errors import UserError
from bench.driver.clusters import apply_cluster
from bench.driver.planning import hardware_for, predict
from bench.launch.emulated_launcher import EmulatedLauncher
from ralp.links import LinkSpec


def test_the_flags_a_link_gives_the_ranks_parse_back_to_the_same_link():
    for link in (LinkSpec.parse("100mbit", "400mbit", "0.2ms"), LinkSpec.parse("1gbit"),
                 LinkSpec.parse("63.5mbit", None, "0", scaled_to="v100-10gbe")):
        assert LinkSpec.parse(**link.flags(), scaled_to=link.scaled_to) == link
    assert LinkSpec.parse("1gbit", "1gbit").ps_bps is None  # the same rate is not an asymmetric link


def test_asymmetric_delayed_links_shape_the_nics_the_row_and_the_cost_model_alike():
    link = LinkSpec.parse("100mbit", "400mbit", "0.2ms")
    launcher = EmulatedLauncher(2, 1, link, cpus_per_host=0)  # described, not brought up
    assert [h.bandwidth_bps for h in launcher.cluster.hosts] == [400e6, 100e6, 100e6]  # PS host, 2 workers
    assert launcher.cluster.latency_s == pytest.approx(2e-4)
    fields = launcher.cluster_fields()
    assert (fields["link_bps"], fields["ps_link_bps"], fields["latency_s"]) == (100e6, 400e6, 2e-4)
    cfg = RunConfig(model="alexnet_cifar", strategy="ps", hardware="v100-10gbe").validate()
    cfg = apply_cluster(cfg, launcher)
    hw = hardware_for(cfg)
    assert (hw.worker_bandwidth, hw.ps_bandwidth, hw.latency_s) == (100e6, 400e6, pytest.approx(2e-4))
    # and the prediction moves with them: a 4x faster PS link shortens the PS step, latency lengthens it
    slow_ps = RunConfig(model="alexnet_cifar", strategy="ps", hardware="v100-10gbe").validate()
    slow_ps = apply_cluster(slow_ps, EmulatedLauncher(2, 1, LinkSpec.parse("100mbit"), cpus_per_host=0))
    assert predict(cfg, "ps", None).step_time_s < predict(slow_ps, "ps", None).step_time_s


@pytest.mark.parametrize("args, message", [
    (("fast",), "bandwidth 'fast' not understood"),
    (("1gbit", "-5mbit"), "bandwidth must be positive"),
    (("1gbit", None, "soon"), "latency 'soon' not understood"),
])
def test_bad_link_flags_are_one_line(args, message):
    with pytest.raises(UserError, match=message):
        LinkSpec.parse(*args)


def test_a_scaled_link_is_built_with_the_packets_of_the_nic_it_stands_for():
    """--scale-to v100-10gbe: the emulated cluster sizes its packets for the preset's 10 Gbit/s NIC
    (bench/launch/netns.py shape_link); a link that stands for itself sizes them for its own rate."""
    scaled = LinkSpec.parse("29.7mbit", scaled_to="v100-10gbe")
    assert scaled.nic_bps == 10e9 and LinkSpec.parse("29.7mbit").nic_bps is None
    launcher = EmulatedLauncher(2, 1, scaled, cpus_per_host=0)  # described, not brought up
    assert launcher.cluster.nic_bps == 10e9 and launcher.cluster_fields()["link_packets_bps"] == 10e9
    plain = EmulatedLauncher(2, 1, LinkSpec.parse("1gbit"), cpus_per_host=0)
    assert plain.cluster.nic_bps is None and plain.cluster_fields()["link_packets_bps"] == 1e9
