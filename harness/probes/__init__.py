"""Storage probes: fio (job building, running, JSON parsing, aggregation), checkpoint write, model load.

Modules, one job each:

* ``fio_parse``   the one parser for fio JSON/json+ (2.x-3.4x) and the per-group/node/cluster sums
* ``steady``      the SNIA-style steady-state check on a window of bandwidth samples
* ``fio_jobs``    job sets, job-file generation, the refusals made before any write, engine choice
* ``fio_run``     fio through an Executor: one node, many nodes (Fleet), client/server mode
* ``node_io``     the stdlib helper run on nodes by ``checkpoint`` and ``modelload``
* ``checkpoint``  checkpoint write (R1): parallel writers, fsync of files and directory, cold read-back
* ``modelload``   model load (R9): parallel cold reads of a weights tree (drop_caches or O_DIRECT)
* ``measured``    results as leaves of the gate engine's measured-results tree
* ``registry``    the one list of probes (``ProbeKind``) and the one-node runner the CLI and the gates share
* ``selection``   which (node, target) pairs a probe runs on
* ``session``     probes over an inventory + profile, results.json (``kvgate probe``)
* ``tables``      the CLI's table rows, and the reading of saved fio output
"""
