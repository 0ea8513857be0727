"""Where ranks run and over which links. ``base`` is the one place that runs mpirun (a launch
stopped as a whole session: ``processes``); a Launcher per kind of cluster: ``local`` (this
machine), ``emulated_launcher`` on ``emulated_cluster`` (network namespaces, htb links, CPU caps:
``netns``, ``cgroups``, ``cluster_state``), ``hosts`` (ssh hosts; ``ssh_hosts`` emulates them as
separate machines), ``slurm``; ``firewall`` (per-run rules on real hosts), ``nic`` (which
interface reaches a peer, byte counters), ``link_probe`` (each traffic pattern's efficiency),
``cpu_steal`` (the hypervisor's share while measuring).

Why a package of its own: launchers know hosts, addresses and processes, never what trains
(no strategy, no TensorFlow, no Horovod)."""
