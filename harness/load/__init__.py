"""The load generator (stdlib only: it runs inside the node agent zipapp).

Public API::

    build_workload(kind, params, seed) -> Workload        # .warmup / .measured: list[RequestSpec]
    LoadConfig(endpoint=..., model=..., ...)               # a run's settings
    run_load(config, out_dir, *, workload=None) -> Summary # writes records.jsonl, summary.json
    run_load_async(config, out_dir, *, workload=None, stop=None, handle_signals=True)
    Summary.from_records(...), Summary.load(path), Summary.from_vllm_result(path)
    read_records(path), records_from_vllm(data)
    StreamClient(endpoint, ClientOptions(...), max_connections=C).request(spec) -> RequestResult
"""

from __future__ import annotations

from harness.load.client import ClientOptions, RequestResult, StreamClient
from harness.load.records import read_records
from harness.load.runner import LoadConfig, run_load, run_load_async
from harness.load.spec import RequestSpec
from harness.load.summary import Summary, records_from_vllm
from harness.load.workloads import Workload, build_workload

__all__ = [
    "ClientOptions", "LoadConfig", "RequestResult", "RequestSpec", "StreamClient", "Summary", "Workload",
    "build_workload", "read_records", "records_from_vllm", "run_load", "run_load_async",
]
