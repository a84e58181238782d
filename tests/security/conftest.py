"""The red-team suite reuses the gate pipelines' small inventory and profile fixtures."""

from tests.pipelines.conftest import local_inventory, write_yaml  # noqa: F401 - fixtures

