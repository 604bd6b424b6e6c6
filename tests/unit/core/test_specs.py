"""Where process 0's coordinator listens: loopback for a coordinator on this machine, unless told."""

import pytest

from echo_experiments.core.specs import ParallelSpec


@pytest.mark.parametrize("address,bind,listens", [
    ("localhost:12345", None, "127.0.0.1:12345"),
    ("127.0.0.1:999", None, "127.0.0.1:999"),
    ("node7:12345", None, None),  # other machines must reach it: JAX's own choice, every interface
    (None, None, None),  # found from SLURM, Open MPI or the TPU slice
    ("localhost:12345", "0.0.0.0:12345", "0.0.0.0:12345"),  # asked for
])
def test_the_coordinator_binds_loopback_where_it_is_local(address, bind, listens):
    spec = ParallelSpec(distributed=True, coordinator_address=address, coordinator_bind_address=bind)
    assert spec.bind_address == listens
