"""The side by side's implementations; importing this package registers every plugin (impls.base.REGISTRY), lina
first. fla_impl comes before the peers: it sets FLA's backend switches before any package can import fla."""
from lina.bench.impls import lina_impl  # noqa: F401  (isort: skip)
from lina.bench.impls import fla_impl  # noqa: F401  (isort: skip)
from lina.bench.impls import flashinfer, flashkda, flashqla  # noqa: F401
from lina.bench.impls.base import REGISTRY, Implementation

__all__ = ["REGISTRY", "Implementation"]
