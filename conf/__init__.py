# These configs start from structured schemas (base_config, workload_schema/*): importing the registry stores them
# in Hydra's ConfigStore, so every way of composing them (the command line, compose(), an installed wheel) has them.
import echo_experiments.workloads.registry  # noqa: F401
