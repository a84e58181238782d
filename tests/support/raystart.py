"""``ray start`` for the test cluster (``tests/support/raycluster.py``), with one thing added: the
raylet is told the dashboard agent's listen port, as it is already told the agent's other ports.

Ray 2.60's ``ray start --dashboard-agent-listen-port=N`` passes N to the agent but not to the raylet,
which then waits for the agent to write the port it took to a file, for a fixed 15 s, and exits when
the file is late (ray-project/ray#65983, open). Beside a CPU hog the agent's imports took longer than
that and the head's raylet died at start ("Timed out waiting for file .../dashboard_agent_listen_port_
<node id>"). Given the port, the raylet waits for no file. The raylet has the flag; only the Python
side that builds its command line leaves it out.

Usage: ``python raystart.py start ...`` (the arguments of ``ray start``).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Optional

from ray._private import ray_constants, services
from ray.scripts.scripts import main

LISTEN_FLAG = "--dashboard-agent-listen-port="


def listen_port(argv: list[str]) -> Optional[int]:
    """The agent's listen port given to ``ray start``, if one was."""
    given = [a[len(LISTEN_FLAG):] for a in argv if a.startswith(LISTEN_FLAG)]
    return int(given[-1]) if given else None


def with_listen_port(start: Callable[..., Any], port: int) -> Callable[..., Any]:
    """``services.start_ray_process`` that adds the listen port to the raylet's command line."""
    def start_ray_process(command: list[str], process_type: str, *args: Any, **kwargs: Any) -> Any:
        if process_type == ray_constants.PROCESS_TYPE_RAYLET:
            command = [*command, f"--dashboard_agent_listen_port={port}"]
        return start(command, process_type, *args, **kwargs)
    return start_ray_process


if __name__ == "__main__":
    port = listen_port(sys.argv[1:])
    if port is not None:
        services.start_ray_process = with_listen_port(services.start_ray_process, port)
    sys.exit(main())
