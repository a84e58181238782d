"""The controller loads no actor class from the cluster: only kvgate's own ``NodeAgent``, from its own code.

A handle to a named actor (``ray.get_actor``) is built on the driver from the actor's class, and
Ray fetches that class from the cluster's GCS, where the actor's creator exported it, and unpickles
it (``FunctionActorManager._load_actor_class_from_gcs``): whoever created an actor under a name the
controller looks up runs code in the controller by that lookup alone (a class attribute whose
``__reduce__`` calls ``os.system`` is enough). kvgate's driver only ever needs handles to its own
node actors, whose class it has, so :func:`guard` replaces that loader, once per process, by one
that returns ``NodeAgent`` from kvgate's own code when the actor claims that class and refuses any
other class (:class:`ForeignActorClass`), before anything of it is read.
"""

from __future__ import annotations

from typing import Any

from harness.remote.base import RemoteError

OWN_CLASS = ("harness.remote.ray.actor", "NodeAgent")


class ForeignActorClass(RemoteError):
    """An actor the controller looked up is of a class kvgate did not write (it was not loaded)."""


def guard(ray: Any) -> None:
    """Install the loader on this process's Ray driver (after ``ray.init``; idempotent)."""
    manager = ray._private.worker.global_worker.function_actor_manager
    if getattr(manager, "_kvgate_guarded", False):
        return

    def load_own_class_only(job_id: Any, descriptor: Any) -> Any:
        claimed = (str(descriptor.module_name), str(descriptor.class_name))
        if claimed != OWN_CLASS:
            raise ForeignActorClass(f"an actor of class {claimed[0]}.{claimed[1]} (not kvgate's node actor) was "
                                    "looked up; its class was not loaded", host="ray")
        from harness.remote.ray.actor import NodeAgent

        return ray.actor._modify_class(NodeAgent)

    manager._load_actor_class_from_gcs = load_own_class_only
    manager._kvgate_guarded = True
