"""The side by side's implementations; importing this package registers every plugin (impls.base.REGISTRY)."""
from lina.bench.impls import fla_impl, flashinfer, flashkda, flashqla, lina_impl  # noqa: F401
from lina.bench.impls.base import REGISTRY, Implementation

__all__ = ["REGISTRY", "Implementation"]
