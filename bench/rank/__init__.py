"""What each MPI rank runs: role dispatch (``main``, entered through ``python -m bench.run``),
the TensorFlow cluster or Horovod (``tf_cluster``, ``hvd_init``), one GPU per rank (``gpu``),
the timed loop with its watchdog and traffic metering (``trainer``), rank 0's result as
RALP-RESULT lines (``result``), the rank's own temporary directory (``scratch``), and the link probe's
program on each host (``link_probe``).

Why a package of its own: ranks run on every host, possibly far from the driver; they import
the strategies, the launchers' NIC and cgroup helpers and the core, never the driver or the
report."""
