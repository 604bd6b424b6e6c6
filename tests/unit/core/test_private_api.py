"""The three private APIs (private_api.py): fails when an upgrade of Hydra, JAX or joblib moves them."""

def test_hydras_parser_reads_a_command_line_as_hydra_main_does():
    from echo_experiments.core.private_api import hydra_args_parser

    args = hydra_args_parser().parse_args(["-m", "echo.factor=1,2", "--cfg", "job"])
    assert args.multirun and args.overrides == ["echo.factor=1,2"] and args.cfg == "job"
    assert not (args.help or args.hydra_help or args.info or args.shell_completion or args.experimental_rerun)
    assert args.config_path is None and args.config_dir is None and args.config_name is None


def test_jaxs_distributed_client_still_has_the_barrier_with_a_timeout():
    from jax._src import distributed
    from jax._src.lib import _jax

    assert hasattr(distributed.global_state, "client")  # None until jax.distributed.initialize()
    # A nanobind method: its signature is in its docstring.
    signature = _jax.DistributedRuntimeClient.wait_at_barrier.__doc__
    assert "wait_at_barrier(self, barrier_id: str, timeout_in_ms: int" in signature


def test_joblibs_loky_backend_still_passes_an_initializer_to_its_pool():
    from joblib.parallel import BACKENDS

    from echo_experiments.core.private_api import loky_backend

    def initializer():
        pass

    assert BACKENDS["loky"] is loky_backend()  # the class Parallel(backend="loky") makes, as Hydra's launcher asks
    # Its keywords go to its pool of workers (tests/test_sweeps.py sees the initializer run in them).
    assert loky_backend()(initializer=initializer).backend_kwargs == {"initializer": initializer}
