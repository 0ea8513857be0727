"""The result store: the row schema (``schema``), write-once run files with an index and a
manifest (``results``), the environment every row records (``environment``: versions, CPU,
GPU, NCCL), and the directory lock that serialises writers (``dirlock``).

Why a package of its own: rows outlive the code that wrote them; everything that reads or writes
them goes through here, and the store imports nothing above the core."""
