"""The Ray executor: kvgate's node work as actors on a Ray cluster the operator already runs.

* ``actor``: ``NodeAgent``, the code that runs on a node, in one actor pinned to it (stdlib,
  ``harness.remote.local`` and ``harness.remote.batch`` only, so Ray ships it with the job: nodes
  need nothing installed).
* ``cluster``: connecting to the cluster, naming Ray nodes from the inventory's mapping, starting
  or finding the node actors, and the mapping report of ``kvgate ping``.
* ``executor``: ``RayExecutor``, the Executor protocol over a node actor.

Nothing here is imported unless an inventory says ``connection: ray`` (Ray is a big import).
"""
